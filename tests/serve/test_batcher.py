"""The serving engine's batched decoding on the tiny GPT: an answer is the same token for token alone or in a
batch (whoever joins or leaves at whichever step), its recorded log-probs are the model's own (recomputed by
ids_logprobs over the whole sequence), sampling does not depend on the batch, and a weight swap waits for the
running batch (each answer is written by one version)."""
import random
import threading
import time

import numpy as np
import pytest
import torch

from claw_lib.models.lm import encode, generate, ids_logprobs, load_causal_lm, stop_token_ids
from claw_lib.prompts import build_prompt
from claw_lib.rl.ppo import decode_response
from claw_lib.serve.batcher import Batcher
from claw_lib.serve.runner import ModelRunner, sample
from claw_lib.serve.sampling import SamplingParams
from claw_lib.serve.sequence import Sequence, TokenTexts

QUESTIONS = [("土耳其的首都是哪里？", "zh"), ("What is the capital of France?", "en"), ("日本的首都是哪里？请回答。", "zh"),
             ("Which city is the capital of Australia, and why?", "en"), ("法国的首都？", "zh"), ("hi", "en")]


@pytest.fixture(scope="module")
def lm():
    return load_causal_lm("tiny")


def make(lm, question, lang="en", seed=None, **kw):
    model, tok = lm
    params = SamplingParams(**{"temperature": 0.0, "max_tokens": 24, **kw})
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    return Sequence(encode(tok, build_prompt(question, lang)), params, tuple(stop_token_ids(model, tok)),
                    lambda ids: decode_response(tok, ids), TokenTexts(tok), gen)


def alone(lm, q, lang, **kw):
    s = make(lm, q, lang, **kw)
    Batcher(lm[0], max_batch=1).submit([s])
    return s


def drive(lm, schedule, max_batch=16):
    """Run the scheduler by hand: ``schedule`` maps a step to the sequences that join at it."""
    b, runner = Batcher(lm[0], max_batch=max_batch), ModelRunner(lm[0])
    step, left, widths = 0, dict(schedule), []
    while left or b.running:
        b.iterate(runner, left.pop(step, []))
        widths.append(runner.rows)
        step += 1
    return b, widths


def test_greedy_alone_is_generate_and_the_log_probs_are_the_models(lm):
    """Alone, the engine's greedy answer is lm.generate's, and each recorded log-prob is ids_logprobs' within 1e-5."""
    model, tok = lm
    for q, lang in QUESTIONS:
        s = alone(lm, q, lang)
        g = generate(model, tok, [build_prompt(q, lang)], max_new_tokens=24, greedy=True)[0]
        assert s.ids == g.ids and s.text == g.text.strip()
        assert s.finish_reason == ("stop" if g.finished else "length")
        ref = ids_logprobs(model, [s.prompt_ids], [s.ids], 0)[0][0]
        assert np.abs(ref - np.array(s.logprobs)).max() < 1e-5


def test_greedy_answers_are_the_same_in_a_batch_of_mixed_lengths_joining_at_different_steps(lm):
    model, _ = lm
    solo = {q: alone(lm, q, lang) for q, lang in QUESTIONS}
    seqs = {q: make(lm, q, lang) for q, lang in QUESTIONS}
    schedule = {0: [seqs[QUESTIONS[0][0]]], 2: [seqs[q] for q, _ in QUESTIONS[1:3]], 5: [seqs[QUESTIONS[3][0]]],
                9: [seqs[q] for q, _ in QUESTIONS[4:]]}
    _, widths = drive(lm, schedule)
    assert max(widths) >= 4  # they really shared decode steps
    for q, s in seqs.items():
        assert s.ids == solo[q].ids and s.text == solo[q].text
        ref = ids_logprobs(model, [s.prompt_ids], [s.ids], 0)[0][0]
        assert np.abs(ref - np.array(s.logprobs)).max() < 1e-5


@pytest.mark.parametrize("seed", range(4))
def test_any_batch_composition_gives_the_alone_answers(lm, seed):
    """Random subsets of the questions, random max_tokens, random join steps, a random batch limit."""
    model, _ = lm
    rng = random.Random(seed)
    picks = [QUESTIONS[rng.randrange(len(QUESTIONS))] for _ in range(rng.randint(2, 7))]
    lengths = [rng.randint(1, 30) for _ in picks]
    solo = [alone(lm, q, lang, max_tokens=n) for (q, lang), n in zip(picks, lengths)]
    seqs = [make(lm, q, lang, max_tokens=n) for (q, lang), n in zip(picks, lengths)]
    schedule = {}
    for s in seqs:
        schedule.setdefault(rng.randint(0, 12), []).append(s)
    drive(lm, schedule, max_batch=rng.randint(1, 8))
    for a, s in zip(solo, seqs):
        assert s.ids == a.ids and len(s.ids) <= s.params.max_tokens
        assert np.allclose(s.logprobs, a.logprobs, atol=1e-5)


def test_sampled_answers_do_not_depend_on_the_batch(lm):
    """Each sequence draws from its own generator: with the same seed, the same tokens alone or batched."""
    kw = dict(temperature=1.0, max_tokens=20, top_p=0.9)
    solo = [alone(lm, q, lang, seed=k, **kw) for k, (q, lang) in enumerate(QUESTIONS)]
    seqs = [make(lm, q, lang, seed=k, **kw) for k, (q, lang) in enumerate(QUESTIONS)]
    drive(lm, {k % 3: [s for j, s in enumerate(seqs) if j % 3 == k % 3] for k in range(3)})
    assert [s.ids for s in seqs] == [a.ids for a in solo]
    assert len({tuple(a.ids) for a in solo}) > 1


def test_threads_decode_together_and_get_their_own_answers(lm):
    """Concurrent callers (as the HTTP workers are) share decode steps and each gets the alone answer."""
    solo = [alone(lm, q, lang) for q, lang in QUESTIONS]
    b = Batcher(lm[0], max_batch=16)
    seqs = [make(lm, q, lang) for q, lang in QUESTIONS]
    threads = [threading.Thread(target=b.submit, args=([s],)) for s in seqs]
    for t in threads:
        t.start()
        time.sleep(0.005)
    for t in threads:
        t.join(60)
    assert [s.ids for s in seqs] == [a.ids for a in solo]
    assert b.steps < sum(len(s.ids) for s in seqs)  # fewer steps than one at a time


def test_max_batch_one_decodes_one_sequence_at_a_time(lm):
    seqs = [make(lm, q, lang, max_tokens=10) for q, lang in QUESTIONS[:3]]
    b = Batcher(lm[0], max_batch=1)
    threads = [threading.Thread(target=b.submit, args=([s],)) for s in seqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert b.steps == sum(len(s.ids) for s in seqs)


def test_a_swap_waits_for_the_running_batch_and_later_requests_get_the_new_version(lm):
    b = Batcher(lm[0], max_batch=4)
    first = make(lm, *QUESTIONS[0], max_tokens=60, temperature=1.0, seed=0)
    t = threading.Thread(target=b.submit, args=([first],))
    t.start()
    while not b.running:
        time.sleep(0.001)
    swapped_at = {}

    def swap():
        with b.exclusive():
            swapped_at["running"] = list(b.running)
            b.version = 1

    sw = threading.Thread(target=swap)
    sw.start()
    time.sleep(0.01)
    later = make(lm, *QUESTIONS[1])
    b.submit([later])  # waits for the swap: it is admitted only after it
    t.join(60)
    sw.join(60)
    assert first.done.is_set() and swapped_at["running"] == []
    assert first.version == 0 and later.version == 1


def test_sample_follows_top_p_and_temperature():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    g = torch.Generator().manual_seed(0)
    assert sample(logits[None], [0.0], [1.0], [g]) == [0]
    draws = [sample(logits[None], [1.0], [0.7], [g])[0] for _ in range(400)]
    assert set(draws) == {0, 1}  # the nucleus of mass 0.7 is {0, 1}
    assert abs(draws.count(0) / 400 - 0.5 / 0.8) < 0.08
    free = [sample(logits[None], [1.0], [1.0], [g])[0] for _ in range(2000)]
    assert all(abs(free.count(k) / 2000 - p) < 0.04 for k, p in enumerate([0.5, 0.3, 0.15, 0.05]))
    assert {sample(logits[None], [1.0], [0.0], [g])[0] for _ in range(20)} == {0}
    rows = torch.stack([logits, logits.flip(0)])  # rows do not interact: greedy beside sampled
    assert sample(rows, [0.0, 0.0], [1.0, 1.0], [None, None]) == [0, 3]


def test_stop_strings_cut_the_answer_and_the_stream_never_shows_them():
    """A toy decoder (one character per id): the streamed deltas add up to the answer, which ends before the stop
    string; text that might begin a stop string is held back until it does not."""
    chars = "abc的首都x"
    events = []
    s = Sequence([1], SamplingParams(temperature=0.0, max_tokens=20, stop=("的首",)), (99,),
                 lambda ids: "".join(chars[i] for i in ids), _CharTexts(chars), sink=events.append)
    for i in [0, 1, 3, 2, 3, 4, 5]:
        if s.finished:
            break
        s.add(i, -0.1, [])
    assert s.text == "ab的c" and s.finish_reason == "stop" and s.ids == [0, 1, 3, 2, 3, 4]
    assert "".join(e["content"] for e in events) == s.text
    assert [e["content"] for e in events] == ["a", "b", "", "的c", "", ""]


class _CharTexts:
    def __init__(self, chars):
        self.chars = chars

    def add(self, i):
        return self.chars[i]


def test_a_rope_model_with_grouped_query_attention_decodes_the_same_batched():
    """A small random Qwen2 (rotary positions, 2 key-value heads for 4 query heads), built offline: greedy answers of
    prompts of different lengths joining at different steps equal Hugging Face's own greedy generate, one by one."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg).eval()
    rng = random.Random(1)
    prompts = [[rng.randrange(1, 97) for _ in range(n)] for n in (3, 11, 7, 19, 5)]
    seqs = [Sequence(p, SamplingParams(temperature=0.0, max_tokens=12), (), lambda ids: "", _CharTexts(" " * 97))
            for p in prompts]
    drive((model, None), {0: seqs[:2], 3: seqs[2:4], 6: seqs[4:]})
    for p, s in zip(prompts, seqs):
        with torch.no_grad():
            ref = model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                 max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)[0, len(p):]
        assert s.ids == ref.tolist()
