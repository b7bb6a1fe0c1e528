"""The scheduler of the serving engine: concurrent requests decode together (continuous batching).

One thread owns the model runner (:mod:`claw_lib.serve.runner`). Each iteration, between two decode steps, it
admits waiting sequences (prefilled together, then rows of the batch), feeds every running row its last token,
samples one token per row (:func:`~claw_lib.serve.runner.sample`, each sequence with its own generator, so a
sampled answer does not depend on who else is in the batch), and lets finished sequences leave. Callers
(:meth:`Batcher.submit`, from the HTTP worker threads) wait until their sequences are done.

Weight swaps: :meth:`Batcher.exclusive` stops admissions, waits until the running batch drains, and holds the
model for the swap; every sequence records the version it was admitted under, and no swap happens while it runs,
so each answer is wholly written by one version. The thread ends after ``idle_s`` seconds without work and is
started again by the next request.
"""
from __future__ import annotations

import contextlib
import threading
from collections import deque
from typing import Deque, List

import torch

from .prefix_cache import PrefixCache
from .runner import ModelRunner, sample
from .sequence import Sequence

__all__ = ["Batcher"]


class Batcher:
    """Continuous batching over ``model`` (a causal LM in eval mode; ``model`` may be replaced inside
    :meth:`exclusive`). max_batch: rows decoded together at most (1: one sequence at a time, the baseline);
    lp_temperature: the temperature of the recorded log-probs (the trainer's); prefix_tokens: the prefix cache's
    budget in tokens (:mod:`claw_lib.serve.prefix_cache`; 0: off), emptied whenever the weights or the version
    change."""

    def __init__(self, model, max_batch: int = 16, lp_temperature: float = 1.0, idle_s: float = 2.0,
                 prefix_tokens: int = 0):
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be an integer >= 1, got {max_batch!r}")
        self.model, self.max_batch, self.lp_temperature, self.idle_s = model, max_batch, lp_temperature, idle_s
        self.prefix = PrefixCache(prefix_tokens)
        self._prefix_for = (None, None)  # the (model, version) the prefix cache's entries were read with
        self.version = 0
        self.cond = threading.Condition()
        self.waiting: Deque[Sequence] = deque()
        self.running: List[Sequence] = []
        self.swaps = 0  # swaps waiting for the batch to drain, or under way
        self.steps = 0  # decode iterations so far
        self._thread = None

    # ------------------------------------------------------------------ callers
    def submit(self, seqs: List[Sequence]) -> None:
        """Decode ``seqs`` with the running batch; returns when all are done (re-raises a decoding error)."""
        with self.cond:
            self.waiting.extend(seqs)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="claw-batcher", daemon=True)
                self._thread.start()
            self.cond.notify_all()
        for s in seqs:
            s.done.wait()
        for s in seqs:
            if s.error is not None:
                raise s.error

    @contextlib.contextmanager
    def exclusive(self):
        """The model to oneself, between decode steps: admissions stop, the running batch drains, then the block
        runs (a weight swap); admissions resume after it."""
        with self.cond:
            self.swaps += 1
            self.cond.wait_for(lambda: not self.running and not self._busy)
            self._busy = True
        try:
            yield
        finally:
            with self.cond:
                self.swaps -= 1
                self._busy = False
                self.prefix.clear()  # the block may have changed the weights in place
                self.cond.notify_all()

    _busy = False  # a decode iteration or a swap holds the model

    # ------------------------------------------------------------------ the scheduler thread
    def _admit(self) -> List[Sequence]:
        """Under the lock: the waiting sequences that join now (none while a swap waits)."""
        if self.swaps or self._busy:
            return []
        out = []
        while self.waiting and len(self.running) + len(out) < self.max_batch:
            s = self.waiting.popleft()
            s.version = self.version
            out.append(s)
        return out

    def _loop(self) -> None:
        runner = ModelRunner(self.model, self.prefix)
        while True:
            with self.cond:
                new = self._admit()
                while not new and not self.running:
                    if not self.cond.wait(self.idle_s) and not self.waiting:
                        self._thread = None
                        return
                    new = self._admit()
                self._busy = True
            try:
                runner.model = self.model
                if self._prefix_for[0] is not self.model or self._prefix_for[1] != self.version:
                    self.prefix.clear()
                    self._prefix_for = (self.model, self.version)
                self.iterate(runner, new)
            except BaseException as e:  # the model failed: every sequence in the batch gets the error
                for s in self.running + new:
                    s.fail(e)
                self.running = []
                runner.reset()
                self.prefix.clear()
            with self.cond:
                self._busy = False
                self.cond.notify_all()

    def iterate(self, runner: ModelRunner, new: List[Sequence]) -> None:
        """One scheduler iteration: the ``new`` rows join (:meth:`ModelRunner.join`: their prompts read but the last
        token), then one decode step feeds every row its next input (a running row's last sampled token, a new
        row's last prompt token) and samples one token each; finished rows leave (what they read kept in the prefix
        cache for the prompts that extend it) and their callers are woken. The thread's loop calls it; a test may
        drive it directly to choose at which step each sequence joins."""
        if new:
            runner.join([s.prompt_ids for s in new])
        rows = self.running + new
        if rows:
            self._emit(rows, runner.step([s.ids[-1] if s.ids else s.prompt_ids[-1] for s in rows]))
        keep = []
        for i, s in enumerate(rows):
            if not s.finished:
                keep.append(i)
            else:
                runner.remember(i, list(s.prompt_ids) + s.ids[:-1])
        runner.keep(keep)
        self.running = [rows[i] for i in keep]
        self.steps += 1
        for s in rows:
            if s.finished:
                s.done.set()

    def _emit(self, seqs: List[Sequence], logits: torch.Tensor) -> None:
        """Sample one token per row of ``logits`` (B, V) and hand it to its sequence with its log-prob under
        the recorded temperature and, where asked, the top alternatives."""
        lp = torch.log_softmax(logits.float() / self.lp_temperature, dim=-1)
        k = max(s.params.top_logprobs for s in seqs)
        top_lp, top_ids = lp.topk(k, dim=-1) if k else (None, None)
        toks = sample(logits, [s.params.temperature for s in seqs], [s.params.top_p for s in seqs],
                      [s.generator for s in seqs])
        lps = lp.gather(1, torch.tensor(toks, device=lp.device)[:, None])[:, 0].tolist()
        for b, (s, tok) in enumerate(zip(seqs, toks)):
            top = [] if not s.params.top_logprobs else \
                list(zip(top_ids[b, :s.params.top_logprobs].tolist(), top_lp[b, :s.params.top_logprobs].tolist()))
            s.add(tok, lps[b], top)
