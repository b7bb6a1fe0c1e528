"""A BERT encoder in plain torch, and a tokenizer from ``tokenizer.json`` alone: the fast way to load the kit's
converted e5 folder (``claw align`` spent 3 of its 4.5 s of start-up importing transformers' BERT module,
which pulls in ``torch._dynamo``, and 2 s in ``AutoTokenizer``).

:func:`load_plain_bert` returns ``(model, tokenizer)`` with the parts of the Hugging Face interfaces that
:class:`claw_lib.alignment.encoders.Encoder` uses: the model takes ``input_ids`` / ``attention_mask`` and returns
``last_hidden_state`` and, on request, ``hidden_states`` (embeddings + one per block, (B, T, d) each); its blocks are
``model.encoder.layer``; the tokenizer is called like a fast HF tokenizer (ids, offsets, special-token mask) and has
``convert_ids_to_tokens``, ``pad_token_id``, ``unk_token_id``, ``model_max_length``. Both equal ``BertModel`` /
``AutoTokenizer`` on the same folder (tests/models/test_bert.py: hidden states within 1e-5, identical ids and offsets).
Any other encoder loads through transformers (:func:`claw_lib.alignment.encoders.load_encoder`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import nn
from torch.nn import functional as F

from .loading import ModelNotAvailableError

__all__ = ["PlainBert", "PlainTokenizer", "load_plain_bert", "is_plain_bert_folder"]


# Layers without their random initialisation: every weight comes from the checkpoint (load_state_dict with
# assign=True), and initialising a 250k x 384 table on the meta device routes through torch._refs, which imports
# torch._dynamo (1.4 s, the very import this module avoids).
class _Linear(nn.Linear):
    def reset_parameters(self):
        pass


class _Embedding(nn.Embedding):
    def reset_parameters(self):
        pass


class _LayerNorm(nn.LayerNorm):
    def reset_parameters(self):
        pass


class _Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = _Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = _Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = _Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = _LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids):  # (B, T) -> (B, T, d); absolute positions 0..T-1, token type 0
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos)[None] + self.token_type_embeddings.weight[0]
        return self.LayerNorm(x)


class _Block(nn.Module):
    """One BERT layer, with the parameter names of transformers' ``BertLayer`` (post-LayerNorm, GELU)."""

    def __init__(self, c):
        super().__init__()
        d, self.heads = c.hidden_size, c.num_attention_heads
        self.attention = nn.Module()
        self.attention.self = nn.Module()
        for name in ("query", "key", "value"):
            setattr(self.attention.self, name, _Linear(d, d))
        self.attention.output = nn.Module()
        self.attention.output.dense = _Linear(d, d)
        self.attention.output.LayerNorm = _LayerNorm(d, eps=c.layer_norm_eps)
        self.intermediate = nn.Module()
        self.intermediate.dense = _Linear(d, c.intermediate_size)
        self.output = nn.Module()
        self.output.dense = _Linear(c.intermediate_size, d)
        self.output.LayerNorm = _LayerNorm(d, eps=c.layer_norm_eps)

    def forward(self, x, mask):  # x: (B, T, d); mask: (B, 1, 1, T) bool, True = attend
        B, T, d = x.shape
        a = self.attention.self
        q, k, v = (lin(x).view(B, T, self.heads, d // self.heads).transpose(1, 2) for lin in (a.query, a.key, a.value))
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1 / math.sqrt(d // self.heads))
        h = h.transpose(1, 2).reshape(B, T, d)
        x = self.attention.output.LayerNorm(self.attention.output.dense(h) + x)
        return self.output.LayerNorm(self.output.dense(F.gelu(self.intermediate.dense(x))) + x)


class PlainBert(nn.Module):
    """BERT's encoder stack (no pooler). config: the folder's ``config.json`` as attributes."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = _Embeddings(config)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList(_Block(config) for _ in range(config.num_hidden_layers))

    def forward(self, input_ids, attention_mask=None, output_hidden_states: bool = False):
        """input_ids: (B, T) long; attention_mask: (B, T), 1 = a real token. Returns ``last_hidden_state`` (B, T, d)
        and ``hidden_states`` (a tuple of L + 1 tensors (B, T, d), embeddings first) when asked."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        mask = attention_mask.bool()[:, None, None, :]
        x = self.embeddings(input_ids)
        states = [x]
        for block in self.encoder.layer:
            x = block(x, mask)
            states.append(x)
        return SimpleNamespace(last_hidden_state=x, hidden_states=tuple(states) if output_hidden_states else None)


class PlainTokenizer:
    """A fast tokenizer from ``tokenizer.json`` and ``tokenizer_config.json`` (the ``tokenizers`` library only)."""

    is_fast = True

    def __init__(self, folder: Path):
        self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tok.no_padding()  # a tokenizer.json may carry padding / truncation settings; HF resets them too
        self._tok.no_truncation()
        conf = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        self.model_max_length = int(conf.get("model_max_length", 512))
        name = lambda v: v.get("content") if isinstance(v, dict) else v  # noqa: E731 (older files: AddedToken dicts)
        self.pad_token_id = self._tok.token_to_id(name(conf.get("pad_token", "<pad>")))
        self.unk_token_id = self._tok.token_to_id(name(conf.get("unk_token", "<unk>")))

    def __call__(self, text: str, add_special_tokens: bool = True, return_offsets_mapping: bool = False,
                 return_special_tokens_mask: bool = False) -> Dict[str, List]:
        enc = self._tok.encode(text, add_special_tokens=add_special_tokens)
        out: Dict[str, List] = {"input_ids": list(enc.ids), "attention_mask": list(enc.attention_mask)}
        if return_offsets_mapping:
            out["offset_mapping"] = [tuple(o) for o in enc.offsets]
        if return_special_tokens_mask:
            out["special_tokens_mask"] = list(enc.special_tokens_mask)
        return out

    def convert_ids_to_tokens(self, ids) -> List[str]:
        return [self._tok.id_to_token(int(i)) for i in ids]


def is_plain_bert_folder(folder) -> bool:
    """A local folder this module can load: a BERT ``config.json``, ``model.safetensors`` and ``tokenizer.json``."""
    f = Path(str(folder))
    if not all((f / n).is_file() for n in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")):
        return False
    try:
        c = json.loads((f / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(c, dict) and c.get("model_type") == "bert" and c.get("hidden_act") == "gelu" and \
        c.get("position_embedding_type", "absolute") == "absolute"


def load_plain_bert(folder, device: str = "cpu", dtype: Optional[torch.dtype] = None):
    """``(PlainBert, PlainTokenizer)`` from a BERT folder (see :func:`is_plain_bert_folder`), in eval mode.
    A damaged folder (a truncated safetensors file, a broken tokenizer.json or config.json, a missing weight)
    raises one :class:`~claw_lib.models.loading.ModelNotAvailableError` naming the folder."""
    folder = Path(str(folder))
    try:
        config = SimpleNamespace(**json.loads((folder / "config.json").read_text(encoding="utf-8")))
        with torch.device("meta"):
            model = PlainBert(config)
        wanted = set(model.state_dict())  # the pooler and saved buffers (position_ids) are not used
        state = {k: v for k, v in load_file(str(folder / "model.safetensors")).items() if k in wanted}
        model.load_state_dict(state, strict=True, assign=True)  # a missing weight is an error
        tok = PlainTokenizer(folder)
    except Exception as e:  # noqa: BLE001 -- SafetensorError, the tokenizers' Exception, TypeError, KeyError ...
        detail = (str(e).splitlines() or [""])[0][:160]
        raise ModelNotAvailableError(
            f"the encoder folder {folder} cannot be loaded ({type(e).__name__}: {detail}); if it is the kit's converted "
            "e5, run `claw setup --force` to convert it again, else copy the folder again") from None
    if dtype is not None:
        model = model.to(dtype)
    return model.to(device).eval(), tok
