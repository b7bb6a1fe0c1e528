"""The policy behind the live server: three copies of one model, so that no loop waits for another.

* **serving** answers requests, under a lock that is also what a weight swap takes: a request is
  answered wholly by one version, and the swap (a copy of the trainer's tensors, milliseconds for the tiny
  GPT) happens between requests;
* **trainer** is updated by the trainer loop; it is never read by the other loops;
* **teacher** is the frozen initial model (OpenClaw-RL's default teacher) that the judge loop asks for
  log pi_T(y | x + hint); it is never trained.

For a model with LoRA adapters the trainer holds the adapters, the serving copy receives only their values, and
the three share one set of base weights (:func:`shared_base`).
Prompts: :meth:`Engine.prompt` turns OpenAI chat messages into the text the policy reads (the whole
conversation through a chat template, or the last message in the kit's prompt form for the tiny GPT, which
was pre-trained on single turns: :data:`~claw_lib.serve.config.CONTEXTS`).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from ..models.lm import encode, load_causal_lm, max_positions, stop_token_ids
from ..prompts import build_prompt, has_chat_template, message_text, teacher_prompt, template_messages
from ..rl.ppo import decode_response, prepare_policy
from ..rl.strategies import plan
from ..text.corrections import guess_lang
from ..utils import resolve_device
from .batcher import Batcher
from .config import ServeConfig
from .sampling import SamplingParams
from .serving_copy import serving_copy
from .sequence import Sequence, TokenTexts, token_strings  # noqa: F401  (token_strings: its old path)

__all__ = ["Engine", "Served", "ServedTask"]


@dataclass
class Served:
    """One answer: the version that wrote it, the prompt's and the response's ids, the text, the log-probs of
    the response tokens under the serving weights (rollout log-probs, nats), one display string per token,
    why it ended ("stop": a stop token or string, "length": max_tokens), per token the top alternatives as
    (id, log-prob) pairs when asked, and the request's other choices (``n`` > 1; never recorded)."""

    version: int
    prompt_text: str
    prompt_ids: List[int]
    response_ids: List[int]
    text: str
    rollout_log_probs: List[float]
    tokens: List[str]
    finished: bool
    finish_reason: Optional[str] = None  # None: "stop" when finished, else "length"
    top_logprobs: List[List[Tuple[int, float]]] = field(default_factory=list)
    alternatives: List["Served"] = field(default_factory=list)

    def __post_init__(self):
        if self.finish_reason is None:
            self.finish_reason = "stop" if self.finished else "length"


@dataclass
class ServedTask:
    """A served turn as the kit's stages see a task: its prompt and how its hinted teacher prompt is built
    (``teacher_prompt(hint, tokenizer)``: the original messages with the hint appended to the last user message,
    OpenClaw-RL's rule)."""

    prompt: str
    question: str
    lang: str
    messages: Optional[List[dict]] = None
    form: str = "kit"

    def teacher_prompt(self, hint: str, tokenizer) -> str:
        if self.messages is not None:
            return teacher_prompt("", hint, tokenizer=tokenizer, messages=self.messages)
        return teacher_prompt(self.question, hint, self.lang, form=self.form)


def _frozen(model, shared: Optional[Dict[int, torch.nn.Parameter]] = None):
    """A frozen, eval-mode copy of ``model`` that shares the parameters in ``shared`` (id -> parameter) instead of
    copying them (:func:`shared_base`)."""
    m = copy.deepcopy(model, dict(shared or {})).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def shared_base(trainer) -> Dict[int, torch.nn.Parameter]:
    """The trainer's parameters that do not train (id -> parameter): the base weights under LoRA adapters, which
    nothing trains or writes (a checkpoint and a weight swap carry the adapters only), so the teacher, the serving
    copy and the archive share them instead of holding copies: a 0.5B fp32 model's 2 GB once instead of three
    times. Empty when every parameter trains (full fine-tuning: each copy has its own)."""
    return {id(p): p for p in trainer.parameters() if not p.requires_grad}


def served_task(tokenizer, messages: List[dict], chat: bool) -> ServedTask:
    """The prompt the server builds for ``messages`` (OpenAI chat messages): the whole conversation through the
    tokenizer's chat template when ``chat``, else the last message in the kit's prompt form."""
    last = message_text(messages[-1].get("content")).strip()
    lang = guess_lang(last) if last else "en"
    if chat:
        text = tokenizer.apply_chat_template(template_messages(messages), tokenize=False, add_generation_prompt=True)
        return ServedTask(text, last, lang, messages=[dict(m) for m in messages])
    return ServedTask(build_prompt(last, lang), last, lang)


class Engine:
    """Serving, trainer and teacher copies of ``cfg.ppo.model`` and the version counter.

    cfg: the resolved training settings after loading (:attr:`ppo`: per-model defaults filled in);
    version: the policy version the serving copy holds (0: the initial weights)."""

    def __init__(self, cfg: ServeConfig):
        dev = resolve_device(cfg.ppo.device)
        trainer, tok = load_causal_lm(cfg.ppo.model, device=dev, dtype=cfg.ppo.dtype)
        torch.manual_seed(cfg.ppo.seed)  # adapters (if any) start from the run's seed
        self.ppo, _ = prepare_policy(trainer, cfg.ppo, reference=False)
        self.shared = shared_base(trainer)
        # the hinted teacher (opd, combined): the initial model; with adapters, fresh ones (B = 0, an exact zero)
        self.teacher = _frozen(trainer, self.shared) if plan(cfg.ppo).strategy.hint else None
        self.trainer, self.tokenizer = trainer, tok
        # the initial model the anchor's answers and KL are read from (claw_lib.serve.anchoring); the teacher if any
        self.reference = None if not cfg.anchor else \
            self.teacher if self.teacher is not None else _frozen(trainer, self.shared)
        self.serving = _frozen(trainer, self.shared)
        self.serving_format = cfg.serving_format
        self.batcher = Batcher(serving_copy(self.serving, cfg.serving_format, self.shared), max_batch=cfg.max_batch,
                               lp_temperature=self.ppo.temperature, prefix_tokens=cfg.prefix_cache_tokens)
        self.stops = tuple(stop_token_ids(trainer, tok))
        self.chat = has_chat_template(tok) and cfg.context != "last"
        if cfg.context == "all" and not has_chat_template(tok):
            raise ValueError("context 'all' needs a tokenizer with a chat template; this model has none (use 'last')")
        self.device = dev
        self.positions = max_positions(trainer)

    # ------------------------------------------------------------------ prompts
    def task(self, messages: List[dict]) -> ServedTask:
        """The prompt of a conversation (:data:`~claw_lib.serve.config.CONTEXTS`) as a :class:`ServedTask`."""
        return served_task(self.tokenizer, messages, self.chat)

    # ------------------------------------------------------------------ serving
    @property
    def version(self) -> int:
        """The policy version the serving copy holds (0: the initial weights)."""
        return self.batcher.version

    def answer(self, task: ServedTask, temperature: float, max_tokens: int, seed: int,
               params: Optional[SamplingParams] = None, version: Optional[int] = None) -> Served:
        """``params.n`` responses from the serving copy (temperature 0: greedy), decoded together with the other
        requests under way (:class:`~claw_lib.serve.batcher.Batcher`), with their rollout log-probs (under the
        trainer's temperature). ``params`` None: ``temperature`` and ``max_tokens`` alone; ``seed``: the sampling
        seed when ``params.seed`` is None; ``version``: a kept published version to answer with (None: the live
        one; :mod:`claw_lib.serve.versions`). Every choice is written by one version. Returns choice 0 with the
        others in :attr:`Served.alternatives`."""
        tok = self.tokenizer
        params = params or SamplingParams(temperature=temperature, max_tokens=max_tokens)
        prompt_ids = encode(tok, task.prompt)
        if self.positions is not None and len(prompt_ids) + params.max_tokens > self.positions:
            raise PromptTooLongError(f"the conversation is {len(prompt_ids)} tokens and max_tokens "
                                     f"{params.max_tokens}; the model reads at most {self.positions} positions")
        base = seed if params.seed is None else params.seed
        seqs = self._submit(prompt_ids, params, base, version)
        served = [Served(s.version, task.prompt, prompt_ids, s.ids, s.text, s.logprobs, s.tokens,
                         s.finish_reason == "stop", s.finish_reason, s.top) for s in seqs]
        served[0].alternatives = served[1:]
        return served[0]

    def _submit(self, prompt_ids: List[int], params: SamplingParams, seed: int, version: Optional[int]):
        """Decode the request's ``params.n`` sequences with the live batch, or (``version`` older than the live one)
        from the archive of published versions; returns them once done."""

        def sequences():
            return [Sequence(prompt_ids, params, self.stops, self._decode, TokenTexts(self.tokenizer),
                             _generator(seed, i, params), index=i, sink=params.sink) for i in range(params.n)]

        if version is None or version == self.version:
            seqs = sequences()
            self.batcher.submit(seqs)
            if version is None or seqs[0].version == version:
                return seqs  # else: a swap slipped in before admission; the named version decodes below
        with self.versions.archive().holding(version, self.versions.state(version)) as batcher:
            seqs = sequences()
            batcher.submit(seqs)
        return seqs

    versions = None  # the run's published versions (serve.versions.Versions), set by the live system

    def _decode(self, ids: List[int]) -> str:
        return decode_response(self.tokenizer, ids)

    def publish(self, version: int) -> float:
        """Copy the trainer's weights into the serving copy as ``version`` and rebuild the copy that decodes
        (:func:`~claw_lib.serve.serving_copy.serving_copy`), between decode steps once the running batch has drained
        (:meth:`Batcher.exclusive`); returns the seconds the model was held."""
        state = {n: p.detach() for n, p in self.trainer.named_parameters() if p.requires_grad}
        with self.batcher.exclusive(), torch.no_grad():
            t0 = time.perf_counter()
            own = dict(self.serving.named_parameters())
            for n, p in state.items():
                own[n].copy_(p)
            self.batcher.model = serving_copy(self.serving, self.serving_format, self.shared)
            self.batcher.version = version
        return time.perf_counter() - t0


def _generator(seed: int, index: int, params: SamplingParams) -> Optional[torch.Generator]:
    """Choice ``index``'s own random generator (None when greedy): seeded from ``seed`` and the index, so a
    sampled answer is the same alone or in any batch."""
    if params.greedy:
        return None
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + index) % 2 ** 63)


class PromptTooLongError(ValueError):
    """A conversation that does not fit the model's positions (HTTP 413)."""


def load_trainer_state(engine: Engine, state: dict, version: int) -> None:
    """Resume: the trained tensors of a checkpoint into the trainer and the serving copy, as ``version``."""
    with torch.no_grad():
        own = dict(engine.trainer.named_parameters())
        for n, p in state.items():
            if n not in own or own[n].shape != p.shape:
                raise ValueError(f"the checkpoint's tensor {n} does not fit this model; delete the run folder or pass "
                                 "--force")
            own[n].copy_(p)
    engine.publish(version)


def trainable_tensors(engine: Engine) -> dict:
    """The trainer's tensors that train, by name (what a checkpoint keeps)."""
    return {n: p.detach().clone() for n, p in engine.trainer.named_parameters() if p.requires_grad}

