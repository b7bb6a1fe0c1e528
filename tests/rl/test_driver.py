"""The seam between the stages and their drivers (claw_lib.rl.driver, issue 44): the same two turns enter through the
kit's loop (``ppo.rollout``), the TRL engine (``ClawGRPOTrainer._rollout``, on TRL's tensors: prompts left-padded,
completions right-padded past the longest) and the live server (``serve.loops.turn_rollout``, on recorded turns), and
the stages receive the same thing from each: the same packed batch, log-probs, tasks (prompt, question, language, the
hinted teacher's prompt), and from stage 2 the same signals."""
import types

import pytest
import torch

from claw_lib.config import PPOConfig
from claw_lib.models.lm import encode, load_causal_lm
from claw_lib.prompts import build_prompt
from claw_lib.rl import ppo
from claw_lib.rl.driver import make_rollout, signal_tensors
from claw_lib.serve.loops import turn_rollout
from claw_lib.serve.sessions import Turn
from claw_lib.toy.env import Feedback, Task
from claw_lib.toy.world import FactWorld

trl_engine = pytest.importorskip("claw_lib.integrations.trl", reason="the TRL engine needs trl and accelerate",
                                 exc_type=ImportError)

CFG = PPOConfig(strategy="combined", batch_size=2, seed=0, progress=False, threads=1)
ANSWERS = ("法国的首都是伦敦。", "The capital is Paris.")
NEXT = ("不对，法国的首都是巴黎。", "Thanks, that is right.")


@pytest.fixture(scope="module")
def two_turns():
    policy, tok = load_causal_lm("tiny")
    facts = FactWorld().facts("known")[:2]
    tasks = [Task(f, build_prompt(f.question(), f.lang, tokenizer=tok), "kit") for f in facts]
    responses = [encode(tok, a) + [tok.eos_token_id] for a in ANSWERS]
    return policy, tok, tasks, responses


def _loop(policy, tok, tasks, responses, monkeypatch):
    fb = dict(zip((t.prompt for t in tasks), NEXT))
    env = types.SimpleNamespace(reset=lambda seed: None, sample=lambda n: list(tasks),
                                step=lambda task, text: Feedback(fb[task.prompt], 0.0, "served"))
    monkeypatch.setattr(ppo, "generate", lambda *a, **k: [types.SimpleNamespace(ids=r) for r in responses])
    return ppo.rollout(policy, tok, env, CFG, step=0)


def _trl(policy, tok, tasks, loop_ro):
    """TRL's batch dict for the same rows: prompts left-padded, completions right-padded to 3 more than the longest,
    TRL's own old log-probs (the loop's, padded the same way)."""
    P, C = max(map(len, loop_ro.prompt_ids)), max(map(len, loop_ro.response_ids)) + 3
    pad = tok.pad_token_id
    p_ids = torch.tensor([[pad] * (P - len(p)) + p for p in loop_ro.prompt_ids])
    c_ids = torch.tensor([r + [pad] * (C - len(r)) for r in loop_ro.response_ids])
    old = torch.zeros(2, C, dtype=torch.float64)  # TRL's dtype may differ: the seam casts to float32
    old[:, :loop_ro.logprobs.shape[1]] = loop_ro.logprobs
    p_mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in loop_ro.prompt_ids])
    out = {"prompt_ids": p_ids, "prompt_mask": p_mask,
           "completion_ids": c_ids, "completion_mask": torch.tensor([[1] * len(r) + [0] * (C - len(r))
                                                                    for r in loop_ro.response_ids]),
           "old_per_token_logps": old}
    trainer = types.SimpleNamespace(tasks=list(tasks), processing_class=tok, cfg=CFG, model=policy)
    return trl_engine.ClawGRPOTrainer._rollout(trainer, [{"task_index": 0}, {"task_index": 1}], out,
                                               [Feedback(n, 0.0, "served") for n in NEXT])


def _serve(tok, tasks, loop_ro):
    turns = [Turn("s", b, 0, [{"role": "user", "content": t.question}], t.prompt, loop_ro.texts[b],
                  loop_ro.prompt_ids[b], loop_ro.response_ids[b],
                  loop_ro.logprobs[b, :len(loop_ro.response_ids[b])].tolist(), 0.0, question=t.question, lang=t.lang,
                  next_state=NEXT[b], next_role="user") for b, t in enumerate(tasks)]
    engine = types.SimpleNamespace(tokenizer=tok, device=torch.device("cpu"), chat=False)
    return turn_rollout(turns, engine)


def test_the_three_drivers_give_the_stages_the_same_two_turns(two_turns, monkeypatch):
    policy, tok, tasks, responses = two_turns
    loop = _loop(policy, tok, tasks, responses, monkeypatch)
    rollouts = {"loop": loop, "trl": _trl(policy, tok, tasks, loop), "serve": _serve(tok, tasks, loop)}
    hint = "法国的首都是巴黎。"
    signals = {}
    for name, ro in rollouts.items():
        assert (ro.prompt_ids, ro.response_ids, ro.texts) == (loop.prompt_ids, loop.response_ids, loop.texts), name
        for f in ("input_ids", "attention_mask", "response_mask", "logit_index"):
            assert torch.equal(getattr(ro.batch, f), getattr(loop.batch, f)), (name, f)
        assert ro.logprobs.dtype == torch.float32 and torch.equal(ro.logprobs, loop.logprobs), name
        assert ro.ref_logprobs is None and ro.old_topk is None, name
        assert [f.next_state for f in ro.feedback] == list(NEXT), name
        assert [(t.prompt, t.question, t.lang, t.teacher_prompt(hint, tok)) for t in ro.tasks] == \
            [(t.prompt, t.question, t.lang, t.teacher_prompt(hint, tok)) for t in loop.tasks], name
        signals[name] = ppo.compute_signals(ro, CFG, ppo.Scorer(tok, teacher=policy))
    s0 = signals["loop"]
    assert s0.mask[0].any() and s0.hints[0] is not None  # the correction gives a hinted sample: not a trivial match
    for name, s in signals.items():
        assert torch.equal(s.token_signal, s0.token_signal) and torch.equal(s.mask, s0.mask), name
        assert s.hints == s0.hints and s.metrics == s0.metrics, name


def test_signal_rows_become_tensors_past_each_row_zero():
    """signal_tensors against a hand-made (B, T) pair: rows shorter than T padded with 0 / False, the mask cut by
    the response mask (the server reads these rows back from samples.jsonl)."""
    rmask = torch.tensor([[True, True, True], [True, False, False]])
    A, M = signal_tensors([([0.5, -1.0, 2.0], [True, False, True]), ([3.0, 4.0], [True, True])], rmask)
    assert A.dtype == torch.float32 and A.tolist() == [[0.5, -1.0, 2.0], [3.0, 4.0, 0.0]]
    assert M.tolist() == [[True, False, True], [True, False, False]]


def test_make_rollout_reads_rows_and_padded_tensors_alike():
    """A driver's log-probs as rows (the server) or as a tensor padded past T (TRL) give the same (B, T) tensor,
    0 outside the responses."""
    rows = [[-0.5, -1.5], [-2.0]]
    padded = torch.tensor([[-0.5, -1.5, 7.0, 7.0], [-2.0, 7.0, 7.0, 7.0]], dtype=torch.float64)
    a = make_rollout([None, None], [[5, 6], [7]], [[1, 2], [3]], ["", ""], [], 0, "cpu", logprobs=rows)
    b = make_rollout([None, None], [[5, 6], [7]], [[1, 2], [3]], ["", ""], [], 0, "cpu", logprobs=padded)
    assert a.logprobs.tolist() == b.logprobs.tolist() == [[-0.5, -1.5], [-2.0, 0.0]]
