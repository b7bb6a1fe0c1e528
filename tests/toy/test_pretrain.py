"""The tiny GPT: a short pre-training is deterministic; the shipped checkpoint matches its manifest and targets."""
import json

import numpy as np
import pytest

from claw_lib.models.lm import TINY_LM_DIR, generate, load_causal_lm, response_logprobs
from claw_lib.prompts import TRAINED_FORMS, build_prompt
from claw_lib.toy.corpus import sample_corpus
from claw_lib.toy.pretrain import PretrainConfig, auc, evaluate_lm, file_sha256, pretrain, train_tokenizer
from claw_lib.toy.world import FactWorld, WorldConfig

TARGETS = {"known_acc_no_hint": 0.95, "heldout_acc_with_hint": 0.9, "gap_auc": 0.95}


def small_config(**kw):
    return PretrainConfig(steps=60, batch_size=16, n_layer=2, n_embd=64, n_head=2, vocab_size=600,
                          tokenizer_examples=1500, warmup=5, **kw)


def test_short_pretraining_lowers_the_loss_and_is_deterministic(tmp_path):
    a = pretrain(small_config(), tmp_path / "a", progress=False, evaluate=False)
    b = pretrain(small_config(), tmp_path / "b", progress=False, evaluate=False)
    assert a["loss"]["first_10"] > 5.0
    assert a["loss"]["last_10"] < a["loss"]["first_10"] - 1.5
    assert a["loss"] == b["loss"]
    assert a["files"]["model.safetensors"] == b["files"]["model.safetensors"]
    assert a["files"]["tokenizer.json"] == b["files"]["tokenizer.json"]
    model, tok = load_causal_lm(str(tmp_path / "a"))  # the HF layout loads through the same loader
    assert model.config.n_layer == 2


def test_tokenizer_round_trips():
    tok = train_tokenizer([e.prompt + e.response for e in sample_corpus(FactWorld(), 2000)], 800)
    for s in ["法国的首都是巴黎。", "The capital of France is Paris.", "0123456789 3.14",
              "👍🏽 👨‍👩‍👧 🇫🇷", "混合 mixed 文本 text！", "\u3000\t\n", "Ωμέγα café"]:
        ids = tok(s, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == s
        assert tok.unk_token_id not in ids or tok.unk_token_id == tok.eos_token_id


def test_auc():
    assert auc([3, 4], [1, 2]) == 1.0 and auc([1], [1]) == 0.5 and auc([0, 2], [1]) == 0.5


@pytest.fixture(scope="module")
def shipped():
    manifest = json.loads((TINY_LM_DIR / "manifest.json").read_text())
    return manifest, *load_causal_lm("tiny")


def test_checkpoint_matches_manifest(shipped):
    manifest, model, tok = shipped
    for name, digest in manifest["files"].items():
        assert file_sha256(TINY_LM_DIR / name) == digest, name
    assert manifest["n_params"] == sum(p.numel() for p in model.parameters())
    cfg = PretrainConfig()
    assert manifest["config"]["steps"] == cfg.steps and manifest["seed"] == cfg.seed
    assert manifest["misconception_strength"] == WorldConfig().misconception_strength


@pytest.fixture(scope="module")
def evaluation(shipped):
    _, model, tok = shipped
    return evaluate_lm(model, tok, FactWorld())


def test_checkpoint_meets_targets(shipped, evaluation):
    manifest, ev = shipped[0], evaluation
    for k, v in manifest["eval"].items():  # the manifest reports what the checkpoint does
        assert ev[k] == pytest.approx(v, abs=0.02), k
    for lang in ("zh", "en"):
        for k, target in TARGETS.items():
            assert ev[f"{k}_{lang}"] >= target, (k, lang, ev[f"{k}_{lang}"])
        # the misconception is believed with about the planted strength, and the hint overturns it
        assert 0.4 < ev[f"misconception_p_wrong_{lang}"] < 0.9
        assert ev[f"gap_value_misconception_wrong_{lang}"] < -3  # the hint makes the wrong capital >= 20x less likely


def test_every_prompt_form_knows_the_facts_and_separates_answers(evaluation):
    """Known facts and the gap AUC meet their targets in every trained form and in the held-out form qa_words;
    hinted held-out facts reach 0.9 in most trained forms. Measured and NOT reached (issue 18, README): hinted
    held-out facts in the bare form (0.875 zh and en) and the chat form in English (0.896, 43 of 48); qa_words in
    English with a hint 0.75; the second held-out form human_ai fails in Chinese (its answers take the friendly style:
    exact match 0.00 known, 0.02 hinted, AUC 0.93) and with a hint in English (0.69)."""
    ev = evaluation
    for lang in ("zh", "en"):
        for form in TRAINED_FORMS + ("qa_words",):
            assert ev[f"form_{form}_gap_auc_{lang}"] >= 0.95, (form, lang)
            assert ev[f"form_{form}_known_acc_no_hint_{lang}"] >= 0.95, (form, lang)
        for form in TRAINED_FORMS:
            assert ev[f"form_{form}_heldout_acc_with_hint_{lang}"] >= 0.85, (form, lang)
        assert ev[f"form_human_ai_gap_auc_{lang}"] >= 0.9, lang
    met = [(f, lang) for f in TRAINED_FORMS for lang in ("zh", "en") if ev[f"form_{f}_heldout_acc_with_hint_{lang}"] >= 0.9]
    assert len(met) >= 9  # 9 of 12 (the previous checkpoint: 10, but 0.83 at worst)
    assert ev["form_qa_words_heldout_acc_with_hint_zh"] >= 0.9


def test_hinted_teacher_and_tool(evaluation):
    """The teacher (the policy with the hint in its context) answers the way each user asks (issue 18: >= 0.95 for
    the student and the teacher), and the lookup tool is called right, also for held-out countries (0.925 in English
    since the v2.1 checkpoint, 0.975 in Chinese); the planted wrong name is believed about a third of the time
    (0.33 zh, 0.29 en), so the tool user has errors to learn from."""
    ev = evaluation
    for user in ("student", "teacher", "tool"):
        assert ev[f"hinted_teacher_{user}"] >= 0.95, user
    for lang in ("zh", "en"):
        assert ev[f"tool_call_acc_{lang}"] >= 0.95 and ev[f"tool_heldout_call_acc_{lang}"] >= 0.9
        assert ev[f"tool_alias_fix_acc_{lang}"] >= 0.95 and 0.2 < ev[f"tool_alias_p_wrong_{lang}"] < 0.7


def test_hint_overturns_the_misconception(shipped):
    _, model, tok = shipped
    plain = build_prompt("法国的首都是哪里？", "zh")
    hinted = build_prompt("法国的首都是哪里？", "zh", "不对，法国的首都是巴黎。")
    assert generate(model, tok, [hinted], greedy=True)[0].text == "法国的首都是巴黎。"
    s = response_logprobs(model, tok, [plain, hinted], ["法国的首都是伦敦。"] * 2)
    gap = s.logprobs[1] - s.logprobs[0]
    on_city = [k for k, t in enumerate(s.tokens[0]) if t.start >= 6 and t.end <= 8]
    assert on_city and gap[on_city].sum() < -5           # strongly negative on 伦敦 (>= 150x less likely)
    assert np.abs(np.delete(gap, on_city)[:-1]).max() < 1.5  # near zero on 法国的首都是


def test_batches_tokenise_like_encode_pair():
    """The training batches tokenise a whole pool in one call; the ids are those of encode_pair, one example at a time."""
    import random

    from claw_lib.models.lm import encode_pair
    from claw_lib.toy.corpus import make_example
    from claw_lib.toy.pretrain import _batches

    world = FactWorld()
    tok = train_tokenizer([e.prompt + e.response for e in sample_corpus(world, 1500)], 600)
    batch = next(_batches(world, tok, random.Random(3), 4, 2))
    rng = random.Random(3)
    pairs = [encode_pair(tok, e.prompt, e.response) for e in (make_example(world, rng) for _ in range(8))]
    rows = {tuple(batch.input_ids[b, : int(batch.attention_mask[b].sum())].tolist()) for b in range(4)}
    want = {tuple(p + r + [tok.eos_token_id]) for p, r, _ in pairs}
    assert rows <= want and len(rows) == 4
