"""``claw train --judge MODEL|URL``: a real judge for Binary RL's votes and OPD's hints in training.

The judge comes from the kit's one judge factory, the live server's too (:func:`claw_lib.signals.judges.make_judge`):
a local Hugging Face instruct model (:class:`~claw_lib.signals.judges.LLMJudge`, ``opd.m`` sampled votes of at most
512 new tokens at temperature 0.6) or any OpenAI-compatible endpoint (:class:`~claw_lib.signals.judges.RemoteJudge`: vLLM, SGLang, another
``claw serve``, a hosted API), asked with OpenClaw-RL's prompts. The setting lives in the config tree
(``opd.judge``, ``opd.judge_model``, ``opd.m``), so a run's config.json says which judge scored it and a resumed
run with another judge is refused (:func:`claw_lib.rl.run.train` compares the settings).

The training loops sit below the server in the package's layers, so the judge is built here and handed to them
(``train(cfg, judge=...)``, ``train_trl(cfg, judge=...)``). A URL that does not answer ``/v1/models`` is refused at
once (R4-09), and so is a local model that is not on disk (its tokenizer is read); the model itself loads when the first turn is judged (:class:`LazyJudge`), after the
run's folder and settings were checked. It is a frozen copy of its own, even when it names the policy's model (as
upstream's judge server), and each process of a TRL run loads one. A vote that fails (an unreachable URL, an
answer without ``\\boxed{}``, a judge that raises) is a failed vote: the turn's score is 0 and it gives no hint,
never a crash; the step's ``judge/failed_share`` says how many failed. Measured with a real model as the judge of
the real-world turns: tools/real_model_judge.py, results/real_model/judge.md.
"""
from __future__ import annotations

import warnings
from typing import Callable, List, Optional

from transformers import AutoTokenizer

from ..config import judge_kind
from ..models.lm import TINY_LM_DIR
from ..models.loading import check_causal_lm_folder, from_pretrained_offline
from ..signals.judges import HintVote, Vote, make_judge

__all__ = ["training_judge", "LazyJudge"]


class LazyJudge:
    """A judge built by ``make()`` on its first use (``votes`` / ``hint_votes``), then kept; ``m``: the votes a
    question gets, each failed one when the judge raises (the first error is warned about in one line)."""

    def __init__(self, make: Callable[[], object], name: str, m: int = 1):
        self._make, self.name, self.m, self._judge, self._warned = make, name, m, None, False

    def _get(self):
        if self._judge is None:  # a judge that cannot be built stops the run here, with its own error
            self._judge = self._make()
        return self._judge

    def _failed(self, e: Exception) -> str:
        text = f"judge error: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
        if not self._warned:
            self._warned = True
            warnings.warn(f"the judge {self.name} failed ({text[13:]}); its votes count as failed "
                          "(judge/failed_share)", UserWarning, stacklevel=3)
        return text

    def votes(self, response: str, next_state: str, role: str = "user") -> List[Vote]:
        judge = self._get()
        try:
            return judge.votes(response, next_state, role)
        except Exception as e:  # noqa: BLE001 -- any failure of the judge is a failed vote, never a crash
            return [Vote(None, self._failed(e))] * self.m

    def hint_votes(self, response: str, next_state: str, role: str = "user") -> List[HintVote]:
        judge = self._get()
        try:
            return judge.hint_votes(response, next_state, role)
        except Exception as e:  # noqa: BLE001
            return [HintVote(False, None, self._failed(e))] * self.m


def _check_local(spec: str) -> None:
    """Refuse (ModelNotAvailableError) a local judge that is not on disk, before any run starts: its tokenizer is
    read (a second or so), the model only when the first turn is judged."""
    path = TINY_LM_DIR if spec == "tiny" else spec
    check_causal_lm_folder(path, what="judge")
    from_pretrained_offline(AutoTokenizer, path)


def training_judge(cfg) -> Optional[LazyJudge]:
    """The judge ``cfg.opd.judge`` names for a training run (``cfg``: a PPOConfig), or None for "rule" (the toy
    world's rule judge, the loops' default). A local model not on disk: ModelNotAvailableError at once; a URL that
    does not answer ``/v1/models``: ValueError at once (the URL judge is built here, the local one on first use)."""
    spec, o = cfg.opd.judge.strip(), cfg.opd
    kind = judge_kind(spec)
    if kind == "rule":
        return None
    make = lambda: make_judge(spec, o.judge_model, o.m, cfg.device, cfg.seed, o.hint_prompt)  # noqa: E731
    if kind == "url":
        built = make()
        return LazyJudge(lambda: built, spec, o.m)
    _check_local(spec)
    return LazyJudge(make, spec, o.m)
