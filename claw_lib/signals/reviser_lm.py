"""The language models the reviser asks (:mod:`claw_lib.signals.reviser`): one small interface, three
implementations.

An LM for the reviser has three methods:

* ``chat(conversations, budgets, samples, temperature, seed, batch_size) -> [[str]]``: per conversation (a list of
  ``{"role", "content"}`` messages), its greedy reply, then ``samples`` sampled ones; ``budgets``: per conversation,
  the most new tokens its replies may have;
* ``yes_probability(conversations, batch_size) -> [float]``: per conversation, P(yes) / (P(yes) + P(no)) of the
  first reply token (the gate "does the reply correct anything");
* ``length(text) -> int``: the number of tokens of ``text`` (to size the budgets).

:class:`LocalLM` is a Hugging Face causal LM with a chat template (the kit's :func:`~claw_lib.models.lm.generate`;
``adapters_off``: a policy with LoRA adapters read as its base, the frozen reviser of a training run), :class:`RemoteLM`
an OpenAI-compatible endpoint through the official ``openai`` client, :class:`CachedLM` either of them with every reply
kept in a JSONL file (measure once, tune the reviser's selection and validation offline, ``tools/probe_report.py``).
A test's scripted LM needs only the three methods. torch (:mod:`claw_lib.models.lm`, :mod:`claw_lib.models.lora`)
is imported inside :class:`LocalLM`'s methods only: a URL reviser, the cache and the rules stay torch-free.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from ..prompts import has_chat_template
from ..text.tokens import tokenize
from .endpoint import open_endpoint

__all__ = ["LocalLM", "RemoteLM", "CachedLM", "parse_yes"]


def parse_yes(text: str) -> Optional[float]:
    """1.0 / 0.0 for a reply that starts with yes / no (either language: 是 / 对, 否 / 不), None otherwise."""
    t = text.strip().lower().lstrip("*\"'“「")
    if t.startswith(("yes", "是", "对")):
        return 1.0
    if t.startswith(("no", "否", "不")):
        return 0.0
    return None


def _progress(total: int, desc: str):
    from tqdm.auto import tqdm  # lazy: tqdm.auto looks for a notebook (IPython): only for a long batch

    return tqdm(total=total, desc=desc, unit="prompt", file=sys.stderr, disable=None, leave=False)


class LocalLM:
    """A local HF causal LM with a chat template: ``model, tokenizer`` as :func:`claw_lib.models.lm.load_causal_lm`
    returns them. adapters_off: every call runs with the model's LoRA adapters switched off (the base model: a
    training run's frozen reviser without a second copy of the weights)."""

    def __init__(self, model, tokenizer, adapters_off: bool = False):
        if not has_chat_template(tokenizer):
            raise ValueError("the reviser needs an instruct model with a chat template (its tokenizer has none)")
        self.model, self.tok, self.adapters_off = model, tokenizer, adapters_off

    def _ctx(self):
        from ..models.lora import adapters_disabled  # lazy: models.lora imports torch: LocalLM only

        return adapters_disabled(self.model) if self.adapters_off else contextlib.nullcontext()

    def _prompts(self, conversations) -> List[str]:
        return [self.tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in conversations]

    def length(self, text: str) -> int:
        """The number of tokens of ``text``."""
        from ..models.lm import encode  # lazy: models.lm imports torch: LocalLM only

        return len(encode(self.tok, text))

    def _generate(self, prompts, budgets, greedy, temperature, seed, batch_size, bar) -> List[str]:
        """One reply per prompt, prompts of similar length batched together (less padding); each reply cut to its
        own budget (greedy replies are the same as with that budget alone)."""
        from ..models.lm import encode, generate  # lazy: models.lm imports torch: LocalLM only

        order = sorted(range(len(prompts)), key=lambda k: len(encode(self.tok, prompts[k])))
        out: List[str] = [""] * len(prompts)
        for s in range(0, len(order), batch_size):
            chunk = order[s:s + batch_size]
            with self._ctx():
                gens = generate(self.model, self.tok, [prompts[k] for k in chunk], max(budgets[k] for k in chunk),
                                temperature=temperature, greedy=greedy, seed=None if seed is None else seed + s,
                                batch_size=len(chunk))
            for k, g in zip(chunk, gens):
                short = len(g.ids) <= budgets[k]
                out[k] = g.text if short else self.tok.decode(g.ids[:budgets[k]], skip_special_tokens=True)
            bar.update(len(chunk))
        return out

    def chat(self, conversations, budgets: Sequence[int], samples: int, temperature: float, seed: int,
             batch_size: int) -> List[List[str]]:
        """Per conversation: the greedy reply, then ``samples`` sampled ones (at ``temperature``, seeded)."""
        prompts = self._prompts(conversations)
        budgets = list(budgets)
        with _progress(len(prompts) * (1 + samples), "reviser") as bar:
            out = [[t] for t in self._generate(prompts, budgets, True, 1.0, None, batch_size, bar)]
            if samples > 0:
                rep = [p for p in prompts for _ in range(samples)]
                sampled = self._generate(rep, [b for b in budgets for _ in range(samples)], False, temperature, seed,
                                         batch_size, bar)
                for k, text in enumerate(sampled):
                    out[k // samples].append(text)
        return out

    def yes_probability(self, conversations, batch_size: int) -> List[float]:
        """P(yes) / (P(yes) + P(no)) of the first reply token, per conversation (one forward pass each; "yes", "Yes",
        " yes", " Yes" and the same for no, each its first token)."""
        import torch  # lazy: torch: LocalLM only

        from ..models.lm import encode  # lazy: models.lm imports torch: LocalLM only

        yes = sorted({encode(self.tok, w)[0] for w in ("yes", "Yes", " yes", " Yes")})
        no = sorted({encode(self.tok, w)[0] for w in ("no", "No", " no", " No")})
        dev = next(self.model.parameters()).device
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        ids = [encode(self.tok, p) for p in self._prompts(conversations)]
        out: List[float] = []
        with _progress(len(ids), "reviser gate") as bar, torch.no_grad(), self._ctx():
            for s in range(0, len(ids), batch_size):
                chunk = ids[s:s + batch_size]
                L = max(len(x) for x in chunk)
                inp = torch.tensor([[pad] * (L - len(x)) + x for x in chunk], device=dev)  # (b, L), left padded
                att = torch.tensor([[0] * (L - len(x)) + [1] * len(x) for x in chunk], device=dev)
                pos = (att.cumsum(-1) - 1).clamp(min=0)
                lp = torch.log_softmax(self.model(input_ids=inp, attention_mask=att, position_ids=pos)
                                       .logits[:, -1].float(), -1)  # (b, V)
                out += torch.sigmoid(torch.logsumexp(lp[:, yes], -1) - torch.logsumexp(lp[:, no], -1)).tolist()
                bar.update(len(chunk))
        return out


class RemoteLM:
    """An OpenAI-compatible endpoint (vLLM, SGLang, ``claw serve``, a hosted API) through the official ``openai``
    client, ``batch_size`` requests in flight at once. url: ``http://host:port`` with or without ``/v1``; model: the name
    to ask for (empty: the first one its ``/v1/models`` lists; :func:`~claw_lib.signals.endpoint.open_endpoint` asks it
    at once: an endpoint that cannot be reached is refused here with one line). A request
    that fails later gives empty replies (that pair falls back to the rules) and is counted in ``failures``."""

    def __init__(self, url: str, model: str = "", timeout_s: float = 120.0):
        self.client, self.model = open_endpoint(url, model, timeout_s, "reviser")
        self.failures = 0

    def length(self, text: str) -> int:
        """About two sub-tokens per word (no tokenizer here)."""
        return 2 * len(tokenize(text))

    def _ask(self, messages, n: int, temperature: float, max_tokens: int, **extra):
        """``n`` choices of one request (the request's ``n``, several requests where a server ignores it); [] on a
        failure."""
        out = []
        try:
            while len(out) < n:
                r = self.client.chat.completions.create(model=self.model, messages=messages, n=n - len(out),
                                                        temperature=temperature, max_tokens=max_tokens, **extra)
                if not r.choices:
                    break
                out.extend(r.choices)
        except Exception:  # an endpoint that fails on this request: the pair falls back to the rules
            self.failures += 1
        return out[:n]

    @staticmethod
    def _parallel(fn, items, batch_size: int) -> list:
        """``fn`` on every item, ``batch_size`` requests in flight at once (a serving engine batches them), in order."""
        with ThreadPoolExecutor(max_workers=max(1, min(batch_size, len(items) or 1))) as pool:
            return list(pool.map(fn, items))

    def chat(self, conversations, budgets: Sequence[int], samples: int, temperature: float, seed: int,
             batch_size: int) -> List[List[str]]:
        def one(mb):
            m, b = mb
            texts = [c.message.content or "" for c in self._ask(m, 1, 0.0, b)] or [""]
            if samples > 0:
                got = [c.message.content or "" for c in self._ask(m, samples, temperature, b)]
                texts += got + [""] * (samples - len(got))
            return texts
        return self._parallel(one, list(zip(conversations, budgets)), batch_size)

    def yes_probability(self, conversations, batch_size: int) -> List[float]:
        """From the first token's top log-probs where the server returns them (P(yes) / (P(yes) + P(no))), else from
        the greedy reply's first word (1 / 0; 0.5 when it is neither, or the request failed)."""
        return self._parallel(self._yes, list(conversations), batch_size)

    def _yes(self, messages) -> float:
        got = self._ask(messages, 1, 0.0, 1, logprobs=True, top_logprobs=10)
        p = None
        if got and got[0].logprobs and got[0].logprobs.content:
            mass = {"yes": 0.0, "no": 0.0}
            for t in got[0].logprobs.content[0].top_logprobs:
                y = parse_yes(t.token)
                if y is not None:
                    mass["yes" if y else "no"] += math.exp(t.logprob)
            p = mass["yes"] / (mass["yes"] + mass["no"]) if mass["yes"] + mass["no"] > 0 else None
        if p is None and got:
            p = parse_yes(got[0].message.content or "")
        return 0.5 if p is None else float(p)


class CachedLM:
    """An LM whose every reply is kept in a JSONL file (one line per conversation asked, appended as soon as it is
    answered, so a stopped run keeps what it had): the same conversation asked again with the same settings is
    answered from the file. lm: the LM asked on a miss (None: a miss is an error naming the conversation); path: the
    file (created if missing); label: conversation -> a dict written beside the reply (e.g. the probe set and the
    row id), for readers of the file. ``spent``: the LM seconds of every reply answered so far, from the file or not
    (the time the replies took when they were made: s/pair without running the LM again).

    A line: ``{"key", "kind": "chat" | "yes", "settings", "messages", "reply": [texts] | P(yes), **label}``; the key is
    the sha256 of kind, settings and messages."""

    def __init__(self, lm, path, label: Optional[Callable[[list], Dict]] = None):
        self.lm, self.path, self.label = lm, Path(path), label
        self.cache: Dict[str, object] = {}
        self.seconds: Dict[str, float] = {}
        self.hits = self.misses = 0
        self.spent = 0.0
        if self.path.exists():
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        self.cache[r["key"]], self.seconds[r["key"]] = r["reply"], r.get("seconds", 0.0)

    @staticmethod
    def key(kind: str, settings: dict, messages: list) -> str:
        raw = json.dumps([kind, settings, messages], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()

    def length(self, text: str) -> int:
        return self.lm.length(text) if self.lm is not None else 2 * len(tokenize(text))

    def _through(self, kind: str, conversations, settings: List[dict], ask, chunk: int) -> list:
        """The replies of ``conversations``, the missing ones asked ``chunk`` at a time (``ask(indices)``) and
        appended to the file after each chunk with ``seconds``: the chunk's wall time per conversation."""
        keys = [self.key(kind, s, m) for s, m in zip(settings, conversations)]
        todo = [k for k, key in enumerate(keys) if key not in self.cache]
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        if todo and self.lm is None:
            raise KeyError(f"no cached reply for {conversations[todo[0]][-1]['content'][:80]!r} ({kind}, "
                           f"{settings[todo[0]]}) and no LM to ask")
        for s in range(0, len(todo), chunk):
            part, t0 = todo[s:s + chunk], time.perf_counter()
            got = ask(part)
            sec = (time.perf_counter() - t0) / len(part)
            with open(self.path, "a", encoding="utf-8") as f:
                for k, reply in zip(part, got):
                    self.cache[keys[k]], self.seconds[keys[k]] = reply, round(sec, 3)
                    line = {"key": keys[k], "kind": kind, "settings": settings[k], "messages": conversations[k],
                            "reply": reply, "seconds": round(sec, 3),
                            **(self.label(conversations[k]) if self.label else {})}
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
                f.flush()
                os.fsync(f.fileno())
        self.spent += sum(self.seconds.get(key, 0.0) for key in keys)
        return [self.cache[key] for key in keys]

    def chat(self, conversations, budgets, samples, temperature, seed, batch_size):
        settings = [{"max_new_tokens": int(b), "samples": samples, "temperature": temperature, "seed": seed}
                    for b in budgets]
        return self._through("chat", conversations, settings, lambda todo: self.lm.chat(
            [conversations[k] for k in todo], [budgets[k] for k in todo], samples, temperature, seed, batch_size),
            4 * batch_size)

    def yes_probability(self, conversations, batch_size):
        return self._through("yes", conversations, [{}] * len(conversations), lambda todo: self.lm.yes_probability(
            [conversations[k] for k in todo], batch_size), 4 * batch_size)
