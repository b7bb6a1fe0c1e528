"""A judge behind any OpenAI-compatible endpoint (vLLM, SGLang, another ``claw serve``, a hosted API).

The same prompts and parsers as the local :class:`~claw_lib.signals.judges.LLMJudge` (OpenClaw-RL's rules:
the last ``\\boxed{d}``, ``[HINT_START]...[HINT_END]``), sent through the official ``openai`` client; ``m``
completions per question (the request's ``n``, or ``m`` requests where the server ignores ``n``). A request
that fails is a failed vote (score None), never a crash of the judge loop.
"""
from __future__ import annotations

from typing import List

from ..signals.judges import (HINT_DECISIONS, SCORE_VALUES, HintVote, Vote, hint_prompt, judge_prompt, parse_boxed,
                              parse_hint)

__all__ = ["RemoteJudge"]


class RemoteJudge:
    """url: the server's base (``http://host:port``, with or without ``/v1``); model: the name to ask for (empty:
    the first model its ``/v1/models`` lists); m votes at ``temperature``, at most ``max_tokens`` each."""

    def __init__(self, url: str, model: str = "", m: int = 3, temperature: float = 0.6, max_tokens: int = 512,
                 timeout_s: float = 60.0):
        import openai

        base = url.rstrip("/")
        self.client = openai.OpenAI(base_url=base if base.endswith("/v1") else base + "/v1", api_key="none",
                                    timeout=timeout_s, max_retries=1)
        self.model, self.m, self.temperature, self.max_tokens = model, m, temperature, max_tokens

    def _model(self) -> str:
        if not self.model:
            self.model = self.client.models.list().data[0].id
        return self.model

    def _ask(self, messages: List[dict]) -> List[str]:
        """m completions of ``messages``; "" for each that failed."""
        out: List[str] = []
        try:
            while len(out) < self.m:
                r = self.client.chat.completions.create(model=self._model(), messages=messages, n=self.m - len(out),
                                                        temperature=self.temperature, max_tokens=self.max_tokens)
                got = [c.message.content or "" for c in r.choices]
                out.extend(got or [""])
        except Exception:  # an unreachable or failing judge: the missing votes fail
            out.extend([""] * (self.m - len(out)))
        return out[:self.m]

    def votes(self, response: str, next_state: str, role: str = "user") -> List[Vote]:
        return [Vote(parse_boxed(t, SCORE_VALUES), t) for t in self._ask(judge_prompt(response, next_state, role))]

    def hint_votes(self, response: str, next_state: str, role: str = "user") -> List[HintVote]:
        return [HintVote(parse_boxed(t, HINT_DECISIONS) == 1, parse_hint(t), t)
                for t in self._ask(hint_prompt(response, next_state, role))]
