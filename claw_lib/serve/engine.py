"""The policy behind the live server: three copies of one model, so that no loop waits for another.

* **serving** answers requests, under a lock that is also what a weight swap takes: a request is
  answered wholly by one version, and the swap (a copy of the trainer's tensors, milliseconds for the tiny
  GPT) happens between requests;
* **trainer** is updated by the trainer loop; it is never read by the other loops;
* **teacher** is the frozen initial model (OpenClaw-RL's default teacher) that the judge loop asks for
  log pi_T(y | x + hint); it is never trained.

For a model with LoRA adapters the trainer holds the adapters, the serving copy receives only their values.
Prompts: :meth:`Engine.prompt` turns OpenAI chat messages into the text the policy reads (the whole
conversation through a chat template, or the last message in the kit's prompt form for the tiny GPT, which
was pre-trained on single turns: :data:`~claw_lib.serve.config.CONTEXTS`).
"""
from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import List, Optional

import torch

from ..models.lm import encode, generate, ids_logprobs, load_causal_lm, max_positions, pad_token_id
from ..prompts import build_prompt, has_chat_template, message_text, teacher_prompt, template_messages
from ..text.corrections import guess_lang
from .config import ServeConfig

__all__ = ["Engine", "Served", "ServedTask"]


@dataclass
class Served:
    """One answer: the version that wrote it, the prompt's and the response's ids, the text, the log-probs of
    the response tokens under the serving weights (rollout log-probs, nats) and one display string per token."""

    version: int
    prompt_text: str
    prompt_ids: List[int]
    response_ids: List[int]
    text: str
    rollout_log_probs: List[float]
    tokens: List[str]
    finished: bool


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


def _frozen(model):
    m = copy.deepcopy(model).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


class Engine:
    """Serving, trainer and teacher copies of ``cfg.ppo.model`` and the version counter.

    cfg: the resolved training settings after loading (:attr:`ppo`: per-model defaults filled in);
    version: the policy version the serving copy holds (0: the initial weights)."""

    def __init__(self, cfg: ServeConfig):
        from ..rl.ppo import prepare_policy
        from ..rl.strategies import plan
        from ..utils import resolve_device

        dev = resolve_device(cfg.ppo.device)
        trainer, tok = load_causal_lm(cfg.ppo.model, device=dev, dtype=cfg.ppo.dtype)
        self.teacher = _frozen(trainer) if plan(cfg.ppo).strategy.hint else None  # the hinted teacher: opd, combined
        torch.manual_seed(cfg.ppo.seed)  # adapters (if any) start from the run's seed
        self.ppo, _ = prepare_policy(trainer, cfg.ppo, reference=False)
        self.trainer, self.tokenizer = trainer, tok
        self.serving = _frozen(trainer)
        self.lock = threading.Lock()
        self.version = 0
        self.chat = has_chat_template(tok) and cfg.context != "last"
        if cfg.context == "all" and not has_chat_template(tok):
            raise ValueError("context 'all' needs a tokenizer with a chat template; this model has none (use 'last')")
        self.device = dev
        self.positions = max_positions(trainer)

    # ------------------------------------------------------------------ prompts
    def task(self, messages: List[dict]) -> ServedTask:
        """The prompt of a conversation (:data:`~claw_lib.serve.config.CONTEXTS`) as a :class:`ServedTask`."""
        last = message_text(messages[-1].get("content")).strip()
        lang = guess_lang(last) if last else "en"
        if self.chat:
            text = self.tokenizer.apply_chat_template(template_messages(messages), tokenize=False,
                                                      add_generation_prompt=True)
            return ServedTask(text, last, lang, messages=[dict(m) for m in messages])
        return ServedTask(build_prompt(last, lang), last, lang)

    # ------------------------------------------------------------------ serving
    def answer(self, task: ServedTask, temperature: float, max_tokens: int, seed: int) -> Served:
        """One response from the serving copy (temperature 0: greedy), with its rollout log-probs, taken under
        the serving lock: the version, the sampling and the log-probs belong to one set of weights."""
        tok = self.tokenizer
        prompt_ids = encode(tok, task.prompt)
        if self.positions is not None and len(prompt_ids) + max_tokens > self.positions:
            raise PromptTooLongError(f"the conversation is {len(prompt_ids)} tokens and max_tokens {max_tokens}; the "
                                     f"model reads at most {self.positions} positions")
        with self.lock:
            version = self.version
            g = generate(self.serving, tok, [task.prompt], max_new_tokens=max_tokens,
                         temperature=temperature or 1.0, greedy=temperature == 0, seed=seed)[0]
            ids = g.ids or [tok.eos_token_id]
            lps = ids_logprobs(self.serving, [prompt_ids], [ids], pad_token_id(tok),
                               temperature=self.ppo.temperature)[0][0]
        from ..rl.ppo import decode_response

        return Served(version, task.prompt, prompt_ids, ids, decode_response(tok, ids),
                      [float(x) for x in lps], token_strings(tok, ids), g.finished)

    def publish(self, version: int) -> float:
        """Copy the trainer's weights into the serving copy as ``version``, between requests (under the serving
        lock); returns the seconds the lock was held."""
        import time

        state = {n: p.detach() for n, p in self.trainer.named_parameters() if p.requires_grad}
        t0 = time.perf_counter()
        with self.lock, torch.no_grad():
            own = dict(self.serving.named_parameters())
            for n, p in state.items():
                own[n].copy_(p)
            self.version = version
        return time.perf_counter() - t0


class PromptTooLongError(ValueError):
    """A conversation that does not fit the model's positions (HTTP 413)."""


def token_strings(tokenizer, ids: List[int]) -> List[str]:
    """One display string per token id: the text each token adds to the decoded response (a character split
    over two byte tokens shows on the second, the first is ""), special tokens by their name ("<|endoftext|>")."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    out, prev, kept = [], "", []
    for i in ids:
        if i in special:
            out.append(tokenizer.convert_ids_to_tokens(int(i)))
            continue
        kept.append(int(i))
        text = tokenizer.decode(kept, skip_special_tokens=True)
        out.append(text[len(prev):] if text.startswith(prev) else text)
        prev = text
    return out


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

