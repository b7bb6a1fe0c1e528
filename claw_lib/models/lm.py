"""Causal language models: the kit's tiny GPT or any Hugging Face causal LM, per-token log-probs,
entropy and sampling (notebook 05a; used by the reward, OPD and PPO notebooks).

Log-probs are always computed on **concatenated token ids** ``prompt_ids + response_ids``,
never by re-tokenising joined text: tokenising "答：" + "巴黎" as one string can merge across the
boundary and silently shift every response token by one.
"""
from __future__ import annotations

import contextlib

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..config import DTYPES  # the dtype names the kit accepts ("auto": resolve_dtype)
from ..ops import entropy_from_logits, gather_positions, selective_log_softmax
from ..text.tokens import Token
from ..utils import resolve_device
from .loading import ModelNotAvailableError, check_causal_lm_folder, from_pretrained_offline, verify_manifest

__all__ = [
    "TINY_LM_DIR", "load_causal_lm", "Batch", "pack", "logprobs_from_batch", "logprobs_in_parts", "response_logits",
    "encode", "encode_pair", "response_logprobs", "ResponseScores", "generate", "Generation", "max_positions", "ids_logprobs", "pad_token_id",
    "DTYPES", "resolve_dtype", "bf16_supported", "stop_token_ids", "peak_memory_gib", "scaled_logits",
]

#: The shipped checkpoint (``claw pretrain`` writes it); ``$CLAW_TINY_LM`` overrides.
TINY_LM_DIR = Path(os.environ.get("CLAW_TINY_LM", Path(__file__).resolve().parents[2] / "data" / "tiny-gpt"))


def bf16_supported(device: str) -> bool:
    """Whether ``device`` computes in bfloat16 natively: a CUDA GPU that supports it, or a CPU with
    AVX512-BF16 / AMX (oneDNN's check). Elsewhere bfloat16 is emulated and slower than float32."""
    if str(device).startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_dtype(dtype, device: str = "cpu", name_or_path: str = "tiny") -> torch.dtype:
    """The torch dtype for ``dtype``: a torch dtype or one of :data:`DTYPES`. "auto" (or None): float32 for the
    tiny GPT (its results are recorded in float32), otherwise bfloat16 where ``device`` supports it natively
    (:func:`bf16_supported`) and float32 elsewhere."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if name_or_path != "tiny" and bf16_supported(device) else torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return getattr(torch, dtype)


def load_causal_lm(name_or_path: str = "tiny", device: str = "cpu", dtype=None, verify: bool = True):
    """Return ``(model, tokenizer)`` for "tiny" (the kit's checkpoint), a local folder or a
    Hugging Face name available offline. The model is in eval mode on ``device``
    ("cpu", "cuda" or "auto"), in ``dtype`` (a torch dtype or a name of :data:`DTYPES`; None: the
    checkpoint's own); the tokenizer has a pad token (eos if it had none).
    Raises :class:`~claw_lib.models.loading.ModelNotAvailableError` when the model is not on disk, a folder
    does not match its manifest.json (``verify=False`` skips that check, for ``claw pretrain --eval-only
    --force``), has no tokenizer, holds an encoder rather than a causal LM, or holds a tokenizer with ids
    beyond the model's embedding rows (one copied from another model: MF06).
    """
    # lazy: transformers (seconds to import) loads only when a model is loaded
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging  # lazy: transformers loads only when a model is loaded

    hf_logging.disable_progress_bar()
    dev = resolve_device(device)
    path = TINY_LM_DIR if name_or_path == "tiny" else name_or_path
    if name_or_path == "tiny":
        if not (Path(path) / "model.safetensors").exists():
            raise ModelNotAvailableError(
                f"the tiny GPT checkpoint is missing from {path}; restore it (`git checkout data/tiny-gpt`) or "
                "re-create it with `claw pretrain --out data/tiny-gpt --force`")
        if verify:
            verify_manifest(path)  # the shipped checkpoint is what its manifest says (a few ms)
    check_causal_lm_folder(path, verify=verify and name_or_path != "tiny")  # any folder with a manifest is checked
    tok = from_pretrained_offline(AutoTokenizer, path)
    kw = {"dtype": resolve_dtype(dtype, dev, str(name_or_path))} if dtype is not None else {}
    model = from_pretrained_offline(AutoModelForCausalLM, path, **kw).to(dev).eval()
    _check_vocabulary(model, tok, name_or_path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


def _check_vocabulary(model, tok, name) -> None:
    """Refuse a tokenizer whose ids do not all have a row in the model's input embedding (an IndexError deep in
    the first forward otherwise)."""
    rows = model.get_input_embeddings().num_embeddings
    if len(tok) > rows:
        raise ModelNotAvailableError(f"the tokenizer of {name} does not fit its model: it has {len(tok)} ids and the "
                                     f"model's embedding only {rows} rows (a tokenizer copied from another model?)")


def stop_token_ids(model, tokenizer) -> List[int]:
    """Every id that ends a response: the tokenizer's eos and each eos id the model's generation config
    lists (Qwen2.5's official config stops on both ``<|im_end|>`` and ``<|endoftext|>``); tokenizer's first."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for i in ([gen] if isinstance(gen, int) else list(gen or [])):
        if i is not None and int(i) not in ids:
            ids.append(int(i))
    return ids


def peak_memory_gib(device: str = "cpu") -> float:
    """The process's peak memory so far, in GiB: ``torch.cuda.max_memory_allocated`` on a CUDA device, else the
    peak resident set size (``ru_maxrss``, the whole process: model loading, Python, every tensor)."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.max_memory_allocated(torch.device(device)) / 2 ** 30
    import resource  # lazy: resource is POSIX-only

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2 ** 30 if sys.platform == "darwin" else rss / 2 ** 20  # bytes on macOS, KiB on Linux


# --------------------------------------------------------------------------- batches of token ids
@dataclass
class Batch:
    """Prompt+response sequences, right-padded.

    input_ids:      (B, L) long
    attention_mask: (B, L) long, 1 = real token
    response_ids:   (B, T) long, padded with the pad id
    response_mask:  (B, T) bool, True = a real response token
    logit_index:    (B, T) long, position in the sequence whose logits predict response token t
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    logit_index: torch.Tensor

    def _fields(self):
        return (self.input_ids, self.attention_mask, self.response_ids, self.response_mask, self.logit_index)

    def to(self, device) -> "Batch":
        return Batch(*(t.to(device) for t in self._fields()))

    def select(self, idx) -> "Batch":
        """The rows ``idx`` (a 1-D index tensor) of every field: a minibatch."""
        return Batch(*(t[idx] for t in self._fields()))


def pack(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int) -> Batch:
    """Concatenate ``prompt_ids[b] + response_ids[b]`` and right-pad into a :class:`Batch`.

    Every prompt must have at least one token (the first response token needs a context).
    """
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    B = len(prompt_ids)
    for b, p in enumerate(prompt_ids):
        if len(p) == 0:
            raise ValueError(f"prompt {b} is empty: the first response token needs at least one context token")
    L = max((len(p) + len(r) for p, r in zip(prompt_ids, response_ids)), default=1)
    T = max((len(r) for r in response_ids), default=0)
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    att = torch.zeros((B, L), dtype=torch.long)
    rid = torch.full((B, T), pad_id, dtype=torch.long)
    rmask = torch.zeros((B, T), dtype=torch.bool)
    lidx = torch.zeros((B, T), dtype=torch.long)
    for b, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        n, k = len(p), len(r)
        ids[b, :n + k] = torch.tensor(list(p) + list(r), dtype=torch.long)
        att[b, :n + k] = 1
        if k:
            rid[b, :k] = torch.tensor(list(r), dtype=torch.long)
            rmask[b, :k] = True
            lidx[b, :k] = torch.arange(n - 1, n - 1 + k)
    return Batch(ids, att, rid, rmask, lidx)


def max_positions(model) -> Optional[int]:
    """The longest sequence the model's position embeddings allow (None if unbounded/unknown)."""
    cfg = model.config
    for name in ("n_positions", "max_position_embeddings"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _check_length(model, n_tokens: int, what: str) -> None:
    m = max_positions(model)
    if m is not None and n_tokens > m:
        raise ValueError(f"{what} needs {n_tokens} token positions but the model has only {m}; "
                         "shorten the prompt or use a model with a longer context")


def scaled_logits(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``logits / temperature``, without the (B, T, V) copy at temperature 1 (x / 1.0 is x exactly)."""
    return logits if temperature == 1.0 else logits / temperature


#: model types whose causal-LM logits are exactly ``lm_head(last hidden state)`` (no soft-capping, no scaling):
#: :func:`response_logits` computes theirs at the response positions only
PLAIN_HEADS = frozenset({"gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3"})


def plain_head(model):
    """(decoder, output layer) of a causal LM whose logits are ``output_layer(decoder(...).last_hidden_state)``
    (a Hugging Face model of :data:`PLAIN_HEADS`, inside a PEFT wrapper or not), else None."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not isinstance(base, torch.nn.Module) or getattr(getattr(base, "config", None), "model_type", None) \
            not in PLAIN_HEADS or not (hasattr(base, "get_decoder") and hasattr(base, "get_output_embeddings")):
        return None
    decoder, head = base.get_decoder(), base.get_output_embeddings()
    return None if decoder is None or head is None or decoder is base else (decoder, head)


def response_logits(model, batch: Batch, hidden: bool = False):
    """The logits that predict each response token, (B, T, V), and with ``hidden`` the last hidden state at those
    positions (B, T, H) (else None). For a model of :data:`PLAIN_HEADS` the output layer runs on the response
    positions only: the (B, L, V) logits over the prompt, most of a real model's update memory (V = 151,936 for
    Qwen2.5), are never made; the same numbers as the full forward's (tested). Other models: the full forward."""
    parts = plain_head(model)
    if parts is None:
        out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=hidden)
        h = gather_positions(out.hidden_states[-1], batch.logit_index) if hidden else None
        return gather_positions(out.logits, batch.logit_index), h
    decoder, head = parts
    h = gather_positions(decoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state,
                         batch.logit_index)                                                     # (B, T, H)
    return head(h), (h if hidden else None)


def logprobs_from_batch(model, batch: Batch, temperature: float = 1.0, with_entropy: bool = False, topk: int = 0):
    """Per-token log-probs of the response tokens under ``model`` (gradients flow if enabled).

    Returns logprobs (B, T) float32 (0 where ``response_mask`` is False); with ``with_entropy`` also the
    entropy (B, T) of the predictive distribution at those positions; with ``topk`` > 0 also the model's
    ``topk`` most likely ids at each response position and their full-vocabulary log-probs, as a pair
    ((B, T, k) long, (B, T, k) float32), most likely first, from the same forward pass. Extras follow
    logprobs in that order.
    """
    _check_length(model, batch.input_ids.shape[1], "scoring this prompt + response")
    dev = next(model.parameters()).device
    batch = batch.to(dev)
    resp_logits = scaled_logits(response_logits(model, batch)[0], temperature)  # (B, T, V)
    lp = selective_log_softmax(resp_logits.float(), batch.response_ids).masked_fill(~batch.response_mask, 0.0)
    out = [lp]
    if with_entropy:
        out.append(entropy_from_logits(resp_logits).masked_fill(~batch.response_mask, 0.0))
    if topk:
        top_lp, top_ids = torch.log_softmax(resp_logits.float(), -1).topk(min(topk, resp_logits.shape[-1]), dim=-1)
        out.append((top_ids, top_lp))
    return out[0] if len(out) == 1 else tuple(out)


def logprobs_in_parts(model, batch: Batch, rows: Optional[int], temperature: float = 1.0) -> torch.Tensor:
    """:func:`logprobs_from_batch` of ``batch`` scored ``rows`` rows at a time (None: all at once), (B, T): the
    same numbers to float rounding with a part's memory."""
    B = len(batch.input_ids)
    rows = rows or B
    return torch.cat([logprobs_from_batch(model, batch.select(torch.arange(i, min(i + rows, B))), temperature)
                      for i in range(0, B, rows)])


def encode(tokenizer, text: str) -> List[int]:
    """Token ids of ``text`` without special tokens (how every prompt and response is tokenised)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_pair(tokenizer, prompt: str, response: str) -> Tuple[List[int], List[int], List[Token]]:
    """Token ids of prompt and response, tokenised **separately** (no special tokens), and the
    character span of each response token in ``response``."""
    p = encode(tokenizer, prompt)
    enc = tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)
    offs = [Token(response[s:e], int(s), int(e)) for s, e in enc["offset_mapping"]]
    return list(p), list(enc["input_ids"]), offs


@dataclass
class ResponseScores:
    """Per response: ``tokens`` (character spans in the response text), ``ids`` and ``logprobs``
    (float arrays of the same length), optionally ``entropy``."""

    tokens: List[List[Token]]
    ids: List[List[int]]
    logprobs: List[np.ndarray]
    entropy: Optional[List[np.ndarray]] = None


def pad_token_id(tokenizer) -> int:
    """The tokenizer's pad id (0 if it has none; padded positions are masked anyway)."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


#: the most response logits one scoring pass holds (rows x response tokens x vocabulary; 2^28 float32 = 1 GiB):
#: :func:`ids_logprobs` scores fewer rows at a time where a real model's vocabulary would exceed it
LOGITS_PER_PASS = 2 ** 28


def vocab_size(model) -> int:
    """The width of ``model``'s logits (its config's ``vocab_size``; 1 where unknown)."""
    return int(getattr(getattr(model, "config", None), "vocab_size", 1) or 1)


@torch.no_grad()
def ids_logprobs(model, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int,
                 batch_size: int = 32, with_entropy: bool = False, temperature: float = 1.0):
    """log p(y_t | prompt, y_<t) for token ids, batched (logits divided by ``temperature``; at most ``batch_size``
    rows a pass, fewer where their logits would pass :data:`LOGITS_PER_PASS`): one float array per response (and,
    with ``with_entropy``, one entropy array per response). Returns (logprobs, entropies or None)."""
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    lps, ents = [], []
    longest = max((len(r) for r in response_ids), default=1)
    batch_size = max(1, min(batch_size, LOGITS_PER_PASS // max(1, longest * vocab_size(model))))
    for s in range(0, len(prompt_ids), batch_size):
        resp = response_ids[s:s + batch_size]
        out = logprobs_from_batch(model, pack(prompt_ids[s:s + batch_size], resp, pad_id), temperature=temperature,
                                  with_entropy=with_entropy)
        lp, ent = out if with_entropy else (out, None)
        for b, r in enumerate(resp):
            lps.append(lp[b, :len(r)].float().cpu().numpy())
            if with_entropy:
                ents.append(ent[b, :len(r)].float().cpu().numpy())
    return lps, (ents if with_entropy else None)


def response_logprobs(model, tokenizer, prompts: Sequence[str], responses: Sequence[str],
                      batch_size: int = 32, with_entropy: bool = False) -> ResponseScores:
    """log p(response token t | prompt, earlier response tokens) for texts, batched."""
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    enc = [encode_pair(tokenizer, p, r) for p, r in zip(prompts, responses)]
    lps, ents = ids_logprobs(model, [c[0] for c in enc], [c[1] for c in enc], pad_token_id(tokenizer), batch_size,
                             with_entropy)
    return ResponseScores([c[2] for c in enc], [c[1] for c in enc], lps, ents)


@dataclass
class Generation:
    """text: decoded response (no special tokens); ids: response token ids (eos included when
    generated; these are the policy's actions); finished: ended with eos."""

    text: str
    ids: List[int]
    finished: bool


@torch.no_grad()
@contextlib.contextmanager
def _quiet_transformers():
    """transformers' warnings off for the block (restored after). GPT-2's forward warns "we strongly recommend
    passing in an attention_mask" during cached decoding once a finished row emits the pad id (pad = eos = 0 for the
    tiny GPT), although :func:`generate` passes the mask; the note reached notebook outputs only sometimes (stderr
    is flushed asynchronously), which made them flaky under nbval."""
    from transformers.utils import logging as hf_logging  # lazy: transformers loads only when a model is loaded

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


def generate(model, tokenizer, prompts: Sequence[str], max_new_tokens: int = 32, temperature: float = 1.0,
             greedy: bool = False, seed: Optional[int] = None, batch_size: int = 64) -> List[Generation]:
    """Sample (or greedy-decode) a response for each prompt with the KV cache.

    Prompts are left-padded for batching; sampling is reproducible with ``seed``. A response ends at the
    first of :func:`stop_token_ids` (kept in ``ids`` as the last action).
    """
    if seed is not None:
        torch.manual_seed(seed)
    dev = next(model.parameters()).device
    stops = stop_token_ids(model, tokenizer)
    eos = stops[0] if stops else None
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos  # left padding: any id works
    out: List[Generation] = []
    for s in range(0, len(prompts), batch_size):
        ids = [encode(tokenizer, p) for p in prompts[s:s + batch_size]]
        L = max(len(x) for x in ids)
        _check_length(model, L + max_new_tokens, f"generating {max_new_tokens} tokens after this prompt")
        inp = torch.tensor([[pad] * (L - len(x)) + x for x in ids], device=dev)
        att = torch.tensor([[0] * (L - len(x)) + [1] * len(x) for x in ids], device=dev)
        kw = dict(do_sample=False) if greedy else dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
        with _quiet_transformers():  # the mask is passed; its "pass an attention_mask" note would be noise
            seq = model.generate(input_ids=inp, attention_mask=att, max_new_tokens=max_new_tokens,
                                 pad_token_id=pad, eos_token_id=stops if len(stops) > 1 else eos, **kw)[:, L:].tolist()
        for row in seq:
            end = next((k for k, t in enumerate(row) if t in stops), None)
            finished = end is not None
            if finished:
                row = row[:end + 1]
            text = tokenizer.decode([t for t in row if t not in stops], skip_special_tokens=True)
            out.append(Generation(text, row, finished))
    return out
