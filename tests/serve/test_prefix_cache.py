"""The serving engine's prefix cache: what it keeps and evicts (against brute force), and that an answer read from
cached keys and values is the answer without the cache, token for token (greedy and seeded sampling, the tiny GPT
and a rotary model with grouped-query attention), for repeated prompts, prompts that extend a finished turn, any
batch composition, and after a weight swap (the cache is emptied: no answer reads another version's keys)."""
import random
import threading

import numpy as np
import pytest
import torch

from claw_lib.models.lm import encode, load_causal_lm, stop_token_ids
from claw_lib.prompts import build_prompt
from claw_lib.rl.ppo import decode_response
from claw_lib.serve.batcher import Batcher
from claw_lib.serve.prefix_cache import PrefixCache, common_prefix
from claw_lib.serve.runner import ModelRunner
from claw_lib.serve.sampling import SamplingParams
from claw_lib.serve.sequence import Sequence, TokenTexts

QUESTIONS = [("土耳其的首都是哪里？", "zh"), ("What is the capital of France?", "en"), ("日本的首都是哪里？请回答。", "zh"),
             ("Which city is the capital of Australia, and why?", "en"), ("法国的首都？", "zh")]


@pytest.fixture(scope="module")
def lm():
    return load_causal_lm("tiny")


def seq(lm, ids, seed=None, **kw):
    model, tok = lm
    params = SamplingParams(**{"temperature": 0.0, "max_tokens": 20, **kw})
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    return Sequence(list(ids), params, tuple(stop_token_ids(model, tok)), lambda x: decode_response(tok, x),
                    TokenTexts(tok), gen)


def prompt_ids(lm, q, lang):
    return encode(lm[1], build_prompt(q, lang))


def drive(model, schedule, budget, max_batch=16):
    """The scheduler by hand with a prefix cache of ``budget`` tokens: ``schedule`` maps a step to the sequences
    that join at it; returns the runner (its cache and counters)."""
    b = Batcher(model, max_batch=max_batch, prefix_tokens=budget)
    runner = ModelRunner(model, b.prefix)
    step, left = 0, dict(schedule)
    while left or b.running:
        b.iterate(runner, left.pop(step, []))
        step += 1
    return runner


# ---------------------------------------------------------------------- the cache itself

def test_common_prefix_is_the_brute_force_one():
    rng = random.Random(0)
    for _ in range(500):
        a = [rng.randrange(3) for _ in range(rng.randint(0, 12))]
        b = a[:rng.randint(0, len(a))] + [rng.randrange(3) for _ in range(rng.randint(0, 6))]
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        assert common_prefix(a, b) == n == common_prefix(tuple(b), tuple(a))


def kv(n, layers=2):
    return [(torch.full((1, n, 1), float(i)), torch.full((1, n, 1), -float(i))) for i in range(layers)]


def test_lookup_finds_the_longest_common_prefix_and_insert_keeps_the_budget():
    c = PrefixCache(10)
    c.insert([1, 2, 3], kv(3))
    c.insert([1, 2, 4, 5], kv(4))
    n, got = c.lookup([1, 2, 4, 9])
    assert n == 3 and got[1][0].shape == (1, 3, 1) and (c.hits, c.reused_tokens) == (1, 3)
    assert c.lookup([7, 1]) == (0, []) and c.lookups == 2
    c.insert([1, 2, 3, 6], kv(4))  # covers [1, 2, 3]: that entry goes
    assert set(c.entries) == {(1, 2, 4, 5), (1, 2, 3, 6)} and c.tokens == 8
    c.insert([1, 2], kv(2))  # an entry already starts with it: nothing new
    assert c.tokens == 8
    c.lookup([1, 2, 4])  # (1, 2, 4, 5) is now the most recently used
    c.insert([8, 8, 8], kv(3))  # 11 > 10: the least recently used goes
    assert set(c.entries) == {(1, 2, 4, 5), (8, 8, 8)} and c.tokens == 7
    c.insert(list(range(11)), kv(11))  # longer than the budget: not kept
    assert c.tokens == 7
    off = PrefixCache(0)
    off.insert([1], kv(1))
    assert off.lookup([1, 2]) == (0, []) and not off.entries
    with pytest.raises(ValueError, match="budget"):
        PrefixCache(-1)


# ---------------------------------------------------------------------- answers with and without it

@pytest.mark.parametrize("seed", range(3))
def test_repeated_prompts_in_any_batch_give_the_answers_without_the_cache(lm, seed):
    """The same questions several times, greedy and sampled, joining at random steps: identical ids and log-probs
    within 1e-5 of a run with the cache off; the cache really served most of the prompts' tokens."""
    rng = random.Random(seed)
    picks = [QUESTIONS[rng.randrange(len(QUESTIONS))] for _ in range(rng.randint(6, 10))]
    kws = [dict(max_tokens=rng.randint(1, 20), temperature=rng.choice([0.0, 1.0]), seed=k) for k in range(len(picks))]
    schedule_steps = [rng.randint(0, 15) for _ in picks]

    def run(budget):
        seqs = [seq(lm, prompt_ids(lm, q, lang), **kw) for (q, lang), kw in zip(picks, kws)]
        schedule = {}
        for s, at in zip(seqs, schedule_steps):
            schedule.setdefault(at, []).append(s)
        return seqs, drive(lm[0], schedule, budget, max_batch=rng.randint(2, 8))

    off, _ = run(0)
    on, runner = run(4096)
    for a, b in zip(off, on):
        assert a.ids == b.ids and a.finish_reason == b.finish_reason
        assert np.allclose(a.logprobs, b.logprobs, atol=1e-5)
    looked = runner.prefix.looked_tokens
    assert runner.prefix.hits >= 1 and runner.prefix.reused_tokens <= looked


def test_the_next_turn_reads_the_finished_turn_from_the_cache(lm):
    """A second prompt that is the first prompt, its answer and more: its prefill starts where the first turn's
    tokens end (prompt + answer but the last sampled token, which was never fed), and its answer is unchanged."""
    first_ids = prompt_ids(lm, "What is the capital of France?", "en")
    first = seq(lm, first_ids, max_tokens=12)
    runner = drive(lm[0], {0: [first]}, 4096)
    second_ids = first_ids + first.ids + prompt_ids(lm, "日本的首都是哪里？", "zh")
    reused = runner.prefix.reused_tokens
    warm = seq(lm, second_ids)
    b = Batcher(lm[0], prefix_tokens=4096)
    b.prefix = runner.prefix
    b.iterate(runner, [warm])
    while b.running:
        b.iterate(runner, [])
    assert runner.prefix.reused_tokens - reused == len(first_ids) + len(first.ids) - 1
    cold = seq(lm, second_ids)
    drive(lm[0], {0: [cold]}, 0)
    assert warm.ids == cold.ids and np.allclose(warm.logprobs, cold.logprobs, atol=1e-5)


def test_a_weight_swap_empties_the_cache(lm):
    """Through the scheduler thread: a prompt answered, the weights changed in place inside exclusive(), the same
    prompt again: the second answer is the new weights' (as a fresh batcher without a cache gives), not one read
    from the old weights' keys."""
    import copy

    model = copy.deepcopy(lm[0]).eval()
    ids = prompt_ids(lm, "日本的首都是哪里？请回答。", "zh")
    b = Batcher(model, prefix_tokens=4096, idle_s=0.2)
    b.submit([seq(lm, ids)])
    assert b.prefix.entries
    with b.exclusive(), torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        b.version = 1
    assert not b.prefix.entries
    again = seq(lm, ids)
    b.submit([again])
    fresh = seq(lm, ids)
    Batcher(model, prefix_tokens=0).submit([fresh])
    assert again.ids == fresh.ids and np.allclose(again.logprobs, fresh.logprobs, atol=1e-5)


def test_threads_with_a_cache_get_their_own_answers(lm):
    """Concurrent callers of one batcher with the cache on, each question twice: the answers of a batcher without."""
    qs = QUESTIONS * 2
    solo = []
    for q, lang in qs:
        s = seq(lm, prompt_ids(lm, q, lang), temperature=1.0, seed=len(solo))
        Batcher(lm[0], max_batch=1).submit([s])
        solo.append(s)
    b = Batcher(lm[0], prefix_tokens=4096)
    seqs = [seq(lm, prompt_ids(lm, q, lang), temperature=1.0, seed=k) for k, (q, lang) in enumerate(qs)]
    threads = [threading.Thread(target=b.submit, args=([s],)) for s in seqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [s.ids for s in seqs] == [a.ids for a in solo]
    assert b.prefix.hits >= 1


def test_a_rope_model_with_grouped_query_attention_reads_its_cache_right():
    """A small random Qwen2 (rotary positions, 2 key-value heads for 4 query heads): prompts sharing prefixes of
    different lengths, and one extending a finished answer, give Hugging Face's own greedy answers, with the
    log-probs of a forward over the whole sequence."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg).eval()
    rng = random.Random(1)
    base = [rng.randrange(1, 97) for _ in range(9)]
    prompts = [base[:4] + [5, 6], base, base + [7, 8, 9], base[:7] + [11], [3]]

    def make(p):
        return Sequence(p, SamplingParams(temperature=0.0, max_tokens=10), (), lambda ids: "", _Blank())

    seqs = [make(p) for p in prompts]
    runner = drive(model, {0: seqs[:1], 1: seqs[1:2], 4: seqs[2:4], 30: seqs[4:]}, 4096)
    later = make(prompts[2] + seqs[2].ids + [4, 4])
    b = Batcher(model, prefix_tokens=4096)
    b.prefix = runner.prefix
    b.iterate(runner, [later])
    while b.running:
        b.iterate(runner, [])
    assert runner.prefix.hits >= 3
    for s in seqs + [later]:
        p = s.prompt_ids
        with torch.no_grad():
            ref = model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                 max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=0)[0, len(p):]
            full = torch.tensor([p + s.ids])
            lp = torch.log_softmax(model(input_ids=full).logits[0, len(p) - 1:-1].float(), dim=-1)
        assert s.ids == ref.tolist()
        assert np.allclose(s.logprobs, lp.gather(1, torch.tensor(s.ids)[:, None])[:, 0].numpy(), atol=1e-5)


class _Blank:
    def add(self, i):
        return " "


def test_the_setting_is_checked():
    from claw_lib.serve.config import ServeConfig, check_serve_config

    with pytest.raises(ValueError, match="prefix_cache_tokens"):
        check_serve_config(ServeConfig(prefix_cache_tokens=-1))
    assert ServeConfig().prefix_cache_tokens > 0
