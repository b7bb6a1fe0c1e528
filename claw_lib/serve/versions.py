"""Published versions of the live server's LoRA adapters (``claw serve --lora-rank R --lora-impl peft``; API.md).

When the policy trains PEFT adapters, each version the server publishes is a PEFT adapter folder,
``OUT/adapters/v{N}/`` (``adapter_config.json``, ``adapter_model.safetensors``, and :data:`RECORD_FILE`: the base
model, rank, alpha, library versions, the update and its samples), written whole then renamed
(:func:`~claw_lib.models.peft_lora.save_adapter`); ``PeftModel.from_pretrained(base, OUT/adapters/v3)`` or a vLLM
server's ``POST /v1/load_lora_adapter`` loads one. Version 0 is the initial adapter (B = 0: the base model).

* the last ``keep_versions`` versions are kept (on disk and in memory) and served by name in a request's ``model``
  field, ``claw-v3`` (:func:`version_name`), as vLLM serves its runtime LoRA adapters; ``GET /v1/models`` lists them.
  A request for the live version (or the base id) joins the live batch; one for an older version is decoded from
  :class:`Archive`, a second copy of the model that holds one older version at a time;
* an update whose adapter tensors did not move (L2 norm of the change 0) is not published (:func:`delta_norms`);
* an optional gate (:mod:`claw_lib.serve.gate`) keeps the previous version when the candidate scores worse.

Full fine-tuning (no adapters) publishes no adapter: ``checkpoint.pt`` holds the weights, as before.
"""
from __future__ import annotations

import contextlib
import json
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

from safetensors.torch import load_file

from .. import __version__
from ..models.peft_lora import peft_model_of, save_adapter
from .batcher import Batcher
from .engine import _frozen
from .gate import gate_score, load_gate, probe_ids
from .serving_copy import serving_copy

__all__ = ["Versions", "Archive", "version_name", "version_of", "delta_norms", "param_delta_norm", "adapter_state", "UnknownVersionError",
           "ADAPTERS_DIR", "RECORD_FILE", "VERSION_PREFIX", "NO_ADAPTER"]

#: the folder under ``--out`` that holds one adapter folder per published version (``v0``, ``v1``, ...)
ADAPTERS_DIR = "adapters"
#: the record written beside the adapter's own files in each version's folder
RECORD_FILE = "claw_version.json"
#: a published version's name in a request's ``model`` field and in ``GET /v1/models``
VERSION_PREFIX = "claw-v"
#: what the status says when the run trains without PEFT adapters
NO_ADAPTER = "no adapter is written: the run trains without PEFT adapters (checkpoint.pt holds the weights)"
_NAME = re.compile(rf"^{re.escape(VERSION_PREFIX)}(\d+)$")


def version_name(version: int) -> str:
    """``claw-v3`` for version 3."""
    return f"{VERSION_PREFIX}{int(version)}"


def version_of(name) -> Optional[int]:
    """The version a name such as ``claw-v3`` names (3), or None for any other string."""
    m = _NAME.match(name) if isinstance(name, str) else None
    return int(m.group(1)) if m else None


class UnknownVersionError(LookupError):
    """A request named a version that is not (or no longer) kept (HTTP 404)."""


def adapter_state(model) -> Dict[str, torch.Tensor]:
    """The PEFT adapter tensors of ``model`` as PEFT saves them (keys of ``adapter_model.safetensors``), cloned
    to the CPU."""
    from peft import get_peft_model_state_dict  # lazy: peft is optional (a run without PEFT adapters)

    return {k: v.detach().to("cpu", copy=True) for k, v in get_peft_model_state_dict(peft_model_of(model)).items()}


def load_state(model, state: Dict[str, torch.Tensor]) -> None:
    """Load PEFT adapter tensors (:func:`adapter_state`'s keys) into ``model``'s adapters, in place."""
    from peft import set_peft_model_state_dict  # lazy: peft is optional

    with torch.no_grad():
        set_peft_model_state_dict(peft_model_of(model), state)


@torch.no_grad()
def delta_norms(new, old) -> Dict[str, float]:
    """How far an update moved, between two copies of one PEFT-adapted model (``new``: after, ``old``: the
    published version). ``publish/adapter_delta_norm``: sqrt(sum over adapter tensors of ||theta' - theta||^2);
    ``publish/weight_delta_norm``: the change of the weights the adapters add, sqrt(sum over layers of
    ||s (B' A' - B A)||_F^2) with s = alpha / r (A: (r, in), B: (out, r)). Both 0.0 when nothing moved."""
    sq_p, sq_w = 0.0, 0.0
    mods = dict(old.named_modules())
    for name, m in new.named_modules():
        if not (hasattr(m, "lora_A") and "default" in getattr(m, "lora_A", {})):
            continue
        o = mods[name]
        a1, b1 = m.lora_A["default"].weight.float(), m.lora_B["default"].weight.float()
        a0, b0 = o.lora_A["default"].weight.float().to(a1.device), o.lora_B["default"].weight.float().to(a1.device)
        sq_p += float((a1 - a0).pow(2).sum() + (b1 - b0).pow(2).sum())
        sq_w += float((m.scaling["default"] * (b1 @ a1 - b0 @ a0)).pow(2).sum())
    return {"publish/adapter_delta_norm": sq_p ** 0.5, "publish/weight_delta_norm": sq_w ** 0.5}


@torch.no_grad()
def param_delta_norm(new, old) -> float:
    """sqrt(sum over the trained tensors of ||theta' - theta||^2) between two copies of one model (full fine-tuning:
    ``publish/weight_delta_norm``)."""
    own = dict(old.named_parameters())
    return sum(float((p.float() - own[n].float().to(p.device)).pow(2).sum())
               for n, p in new.named_parameters() if p.requires_grad) ** 0.5


def _libraries() -> Dict[str, str]:
    import peft  # lazy: peft is optional
    import transformers  # lazy: read only for a record, and loaded by then

    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
            "claw_lib": __version__}


class Versions:
    """The published versions of a run with PEFT adapters (``enabled``), kept by number.

    engine: the :class:`~claw_lib.serve.engine.Engine`; folder: the run folder (None: in memory only);
    keep: how many of the newest versions are kept; cfg: the resolved PPOConfig (the record's settings)."""

    def __init__(self, engine, folder: Optional[Path], keep: int, cfg, gate: str = ""):
        self.engine, self.folder, self.keep, self.cfg = engine, folder, int(keep), cfg
        self.enabled = peft_model_of(engine.trainer) is not None
        self.kept: Dict[int, dict] = {}  # version -> {"state": adapter tensors, "record": the record}
        self.lock = threading.Lock()
        self._archive: Optional[Archive] = None
        self.gate_file, self.gate = gate, (load_gate(gate) if gate else None)
        if self.gate:  # a probe too long for the model is refused at the start, not at the first update
            probe_ids(engine, self.gate, cfg.max_new_tokens, "publish_gate")
        self.gate_scores: Dict[int, float] = {}  # version -> its probe score
        self.gate_last: Optional[dict] = None

    # ------------------------------------------------------------------ publish or not
    def decide(self, version: int) -> Tuple[Optional[str], dict]:
        """After an update of the trainer, whose published version is ``version`` (the serving copy): why the
        candidate is not published (None: it is) and the update's ``publish/*`` and ``gate/*`` metrics. An adapter
        that did not move is not published; a candidate the gate scores below ``version`` is not either, and the
        trainer's tensors are set back to ``version``'s."""
        m: Dict[str, float] = {}
        if not self.enabled:  # full fine-tuning: logged, published as before
            m["publish/weight_delta_norm"] = param_delta_norm(self.engine.trainer, self.engine.serving)
        else:
            m.update(delta_norms(self.engine.trainer, self.engine.serving))
            if m["publish/adapter_delta_norm"] == 0.0:
                return "adapter unchanged (delta norm 0.0)", m
        if self.gate is None:
            return None, m
        tokens = self.cfg.max_new_tokens
        if version not in self.gate_scores:
            self.gate_scores[version] = gate_score(self.engine, self.engine.serving, self.gate, tokens)
        before, after = self.gate_scores[version], gate_score(self.engine, self.engine.trainer, self.gate, tokens)
        m.update({"gate/score_before": before, "gate/score_after": after, "gate/passed": float(after >= before)})
        self.gate_last = {"version": version, "score_before": before, "score_after": after, "passed": after >= before}
        if after >= before:
            self.gate_scores[version + 1] = after
            return None, m
        self.revert()
        return f"publish gate: the probe score fell from {before:.3f} to {after:.3f} (kept {version_name(version)})", m

    @torch.no_grad()
    def revert(self) -> None:
        """The trainer's trained tensors set back to the published version's (the serving copy's)."""
        own = dict(self.engine.serving.named_parameters())
        for n, p in self.engine.trainer.named_parameters():
            if p.requires_grad:
                p.copy_(own[n])

    def status(self, updates: List[dict]) -> dict:
        """The status fields of the published versions (API.md): the adapter, the kept names, the last skip, the
        gate."""
        skips = [u for u in updates if u.get("skipped")]
        gate = None if self.gate is None else {
            "file": str(self.gate_file), "probes": len(self.gate), "last": self.gate_last,
            "score_live": self.gate_scores.get(self.engine.version)}
        return {"adapter": None if not self.enabled else {"impl": "peft", "folder": str(self.folder / ADAPTERS_DIR)
                                                          if self.folder is not None else None},
                "adapter_note": None if self.enabled else NO_ADAPTER,
                "published_versions": self.names(), "live_version_name": version_name(self.engine.version)
                if self.enabled else None, "updates_skipped": len(skips),
                "last_skipped": skips[-1]["skipped"] if skips else None, "publish_gate": gate}

    def path(self, version: int) -> Optional[Path]:
        return self.folder / ADAPTERS_DIR / f"v{int(version)}" if self.folder is not None else None

    def start(self, version: int) -> None:
        """At start: a fresh run publishes version 0 (the initial adapter); a resumed one drops the folders of
        versions its checkpoint never reached (a kill between the adapter and the checkpoint) and reads the kept
        ones back, writing the checkpoint's version again when its folder is missing (a killed writer's staging
        folder is removed)."""
        if not self.enabled:
            return
        if self.folder is not None and (self.folder / ADAPTERS_DIR).is_dir():
            for p in sorted((self.folder / ADAPTERS_DIR).iterdir()):
                v = int(p.name[1:]) if re.fullmatch(r"v\d+", p.name) else None
                if re.fullmatch(r"\.v\d+\..*\.tmp", p.name):  # a killed writer's staging folder
                    shutil.rmtree(p, ignore_errors=True)
                elif v is not None and v > version:
                    shutil.rmtree(p)  # claw's own folder of an update the checkpoint does not hold
                elif v is not None and v > version - self.keep and (p / RECORD_FILE).exists():
                    self._read(v, p)
        if version not in self.kept:
            self.write(version, {"update": None, "samples": 0, "samples_total": 0})
        self.prune()

    def _read(self, version: int, p: Path) -> None:
        self.kept[version] = {"state": load_file(str(p / "adapter_model.safetensors")),
                              "record": json.loads((p / RECORD_FILE).read_text(encoding="utf-8"))}

    def write(self, version: int, info: dict) -> dict:
        """Publish the trainer's adapter as ``version``: its folder (when the run has one) and the kept copy.
        info: the update's fields for the record (update index, samples, metrics). Returns the record."""
        pc = peft_model_of(self.engine.trainer).peft_config["default"]
        rec = {"name": version_name(version), "version": int(version), "base_model": self.cfg.model,
               "base_model_name_or_path": pc.base_model_name_or_path, "rank": pc.r, "alpha": pc.lora_alpha,
               "targets": sorted(pc.target_modules),
               "strategy": self.cfg.strategy, "lr": self.cfg.lr, "libraries": _libraries(), "time": time.time(),
               "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **info}
        state = adapter_state(self.engine.trainer)
        if self.folder is not None:
            save_adapter(self.engine.trainer, self.path(version),
                         files={RECORD_FILE: json.dumps(rec, indent=1, default=str) + "\n"})
        with self.lock:
            self.kept[int(version)] = {"state": state, "record": rec}
        return rec

    def prune(self) -> None:
        """Forget (and delete the folders of) all but the newest ``keep`` versions."""
        with self.lock:
            old = sorted(self.kept)[:-self.keep]
            for v in old:
                del self.kept[v]
        for v in old:
            if self.folder is not None:
                shutil.rmtree(self.path(v), ignore_errors=True)

    # ------------------------------------------------------------------ names
    def names(self) -> List[str]:
        with self.lock:
            return [version_name(v) for v in sorted(self.kept)]

    def resolve(self, name: str) -> Optional[int]:
        """The kept version ``name`` names, or None when it names none (an unknown name, an expired version)."""
        v = version_of(name)
        with self.lock:
            return v if v is not None and v in self.kept else None

    def model_objects(self, parent: str) -> List[dict]:
        """OpenAI's model objects of the kept versions, as vLLM lists its LoRA adapters (``parent``: the base id,
        ``root``: the adapter folder, or null in memory)."""
        with self.lock:
            items = sorted(self.kept.items())
        return [{"id": version_name(v), "object": "model", "created": int(k["record"]["time"]), "owned_by": "claw-kit",
                 "parent": parent, "root": str(self.path(v)) if self.folder is not None else None}
                for v, k in items]

    def state(self, version: int) -> Dict[str, torch.Tensor]:
        with self.lock:
            if version not in self.kept:
                raise UnknownVersionError(f"model {version_name(version)!r} is no longer kept (the server keeps "
                                          f"{', '.join(version_name(v) for v in sorted(self.kept))})")
            return self.kept[version]["state"]

    # ------------------------------------------------------------------ older versions
    def archive(self) -> "Archive":
        with self.lock:
            if self._archive is None:
                self._archive = Archive(self.engine)
            return self._archive


class Archive:
    """Decodes the requests that name an older kept version: a copy of the serving model (made at the first such
    request) and its own :class:`~claw_lib.serve.batcher.Batcher`, holding one version at a time. Requests for the
    version it holds decode together; one for another version waits until they are done, then loads its tensors."""

    def __init__(self, engine):
        self.fmt, self.shared = engine.serving_format, engine.shared  # the base weights stay shared (engine.shared_base)
        self.full = _frozen(engine.serving, self.shared)
        self.batcher = Batcher(serving_copy(self.full, self.fmt, self.shared), max_batch=engine.batcher.max_batch,
                               lp_temperature=engine.batcher.lp_temperature,
                               prefix_tokens=engine.batcher.prefix.budget)
        self.batcher.version = -1
        self.cond = threading.Condition()
        self.users = 0

    @contextlib.contextmanager
    def holding(self, version: int, state: Dict[str, torch.Tensor]):
        """The batcher with ``version``'s adapter loaded, for the duration of the block."""
        with self.cond:
            self.cond.wait_for(lambda: self.users == 0 or self.batcher.version == version)
            if self.batcher.version != version:  # nobody decodes: the batcher is idle
                load_state(self.full, state)
                self.batcher.model = serving_copy(self.full, self.fmt, self.shared)
                self.batcher.version = version
            self.users += 1
        try:
            yield self.batcher
        finally:
            with self.cond:
                self.users -= 1
                self.cond.notify_all()
