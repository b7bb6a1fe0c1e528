"""PPO pieces against formulas, smoke runs of every strategy, resume, and a golden trajectory."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from claw_lib.ablation import markdown_table, ordering_report, paired, reproduce, steps_to_target, summarise
from claw_lib.ppo import STRATEGIES, PPOConfig, clipped_surrogate, gae, gae_loop, kl_estimate, train

GOLDEN = Path(__file__).parent / "golden" / "ppo_combined.json"


def test_gae_vectorised_equals_loop_float64():
    torch.manual_seed(0)
    B, T = 5, 9
    r = torch.randn(B, T, dtype=torch.float64)
    v = torch.randn(B, T, dtype=torch.float64)
    lengths = [9, 4, 1, 7, 0]
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
    for gamma, lam in [(1.0, 0.95), (0.9, 0.8), (0.99, 1.0), (1.0, 0.0)]:
        a1, ret1 = gae(r, v, mask, gamma, lam)
        a2, ret2 = gae_loop(r, v, mask, gamma, lam)
        assert torch.allclose(a1, a2, atol=1e-12) and torch.allclose(ret1 * mask, ret2 * mask, atol=1e-12)
    # lambda = 1, gamma = 1: advantage = reward-to-go minus value
    a, _ = gae(r, v, mask, 1.0, 1.0)
    n = 9
    rtg = torch.flip(torch.cumsum(torch.flip(r[0, :n], [0]), 0), [0])
    assert torch.allclose(a[0, :n], rtg - v[0, :n], atol=1e-12)


def test_clipped_surrogate_on_hand_built_ratios():
    old = torch.zeros(1, 4)
    lp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 1.5]]))  # ratios 1.5, 0.5, 1.1, 1.5
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    loss, clipfrac = clipped_surrogate(lp, old, adv, mask, eps=0.2, eps_high=0.28)
    # A>0, r=1.5: min(1.5, 1.28) = 1.28; A>0, r=0.5: min(0.5, 0.8) = 0.5;
    # A<0, r=1.1: -max(1.1, 1.1) = -1.1; A<0, r=1.5: -max(1.5, 1.28) = -1.5
    expected = -(1.28 + 0.5 - 1.1 - 1.5) / 4
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert clipfrac.item() == pytest.approx(0.25)  # only the first token is clipped
    mask2 = torch.tensor([[True, False, False, False]])
    assert clipped_surrogate(lp, old, adv, mask2)[0].item() == pytest.approx(-1.28, abs=1e-6)


def test_kl_estimators_against_exact_kl():
    torch.manual_seed(1)
    logits_p, logits_q = torch.randn(7), torch.randn(7)
    lp, lq = logits_p.log_softmax(-1), logits_q.log_softmax(-1)
    exact = (lp.exp() * (lp - lq)).sum()
    # expectations under pi of each estimator, computed exactly over the support
    k1 = (lp.exp() * kl_estimate(lp, lq, "k1")).sum()
    k3 = (lp.exp() * kl_estimate(lp, lq, "k3")).sum()
    assert k1.item() == pytest.approx(exact.item(), abs=1e-6)
    assert k3.item() == pytest.approx(exact.item(), abs=1e-6)
    assert (kl_estimate(lp, lq, "k3") >= 0).all()
    with pytest.raises(ValueError):
        kl_estimate(lp, lq, "k2")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_smoke_two_steps_every_strategy(strategy, tmp_path):
    hist = train(PPOConfig(strategy=strategy, steps=2, batch_size=4, eval_prompts=8, progress=False), tmp_path)
    assert [h["step"] for h in hist] == [0, 1, 2]
    for h in hist[1:]:
        assert all(np.isfinite(v) for v in h.values())
        assert 0 <= h["reward/score"] <= 1
    assert (tmp_path / "metrics.csv").exists() and len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("distill", ["forward_kl", "topk_reverse_kl"])
def test_distillation_losses_are_divergences(distill):
    """opd_kl with either divergence: a KL (forward, or reverse over the teacher's top-K plus a tail
    bin) is >= 0, so the logged loss is too; an unknown name is refused before any work."""
    hist = train(PPOConfig(strategy="opd_kl", user="teacher", distill=distill, distill_topk=4, steps=2, batch_size=6,
                           eval_prompts=4, progress=False))
    losses = [h["policy/loss"] for h in hist[1:]]
    assert all(np.isfinite(x) and x >= 0 for x in losses) and any(x > 0 for x in losses)
    with pytest.raises(ValueError, match="distill must be"):
        train(PPOConfig(strategy="opd_kl", distill="reverse", steps=1, progress=False))


@pytest.mark.parametrize("strategy", ["sentence", "binary"])
def test_smoke_two_part_questions(strategy):
    hist = train(PPOConfig(strategy=strategy, questions="pair", misconception_share=1.0, steps=1, batch_size=4,
                           eval_prompts=4, progress=False))
    assert np.isfinite(hist[-1]["policy/loss"]) and 0 <= hist[-1]["eval/score"] <= 1


def test_smoke_gae_with_value_head_and_kl(tmp_path):
    hist = train(PPOConfig(strategy="binary_rl", steps=2, batch_size=4, eval_prompts=8, advantage="gae",
                           kl_coef=0.1, epochs=2, minibatches=2, progress=False))
    assert "value/explained_variance" in hist[-1] and np.isfinite(hist[-1]["value/explained_variance"])
    hist = train(PPOConfig(strategy="binary_rl", steps=1, batch_size=4, eval_prompts=8, advantage="grpo", progress=False))
    assert np.isfinite(hist[-1]["policy/loss"])


def _strip(hist):
    return [{k: v for k, v in h.items() if not k.startswith("timing/")} for h in hist]


def test_resume_after_interruption_gives_the_same_run(tmp_path):
    cfg = PPOConfig(strategy="combined", steps=4, batch_size=4, eval_prompts=8, save_every=2, progress=False)
    full = train(cfg, tmp_path / "full")
    part = train(cfg, tmp_path / "part", stop_after=3)   # interrupted after step 3; last checkpoint: step 2
    assert len(part) == 4
    resumed = train(cfg, tmp_path / "part")              # resumes from step 2
    assert _strip(resumed) == _strip(full)


def test_golden_trajectory():
    """A fixed short run; if the loop changes on purpose, regenerate with
    `python -c "from tests.test_ppo import write_golden; write_golden()"` and review the diff."""
    hist = _strip(train(golden_config()))
    gold = json.loads(GOLDEN.read_text())
    assert len(hist) == len(gold)
    for h, g in zip(hist, gold):
        assert h.keys() == g.keys()
        for k in g:
            assert h[k] == pytest.approx(g[k], abs=2e-3), (h["step"], k)


def golden_config():
    return PPOConfig(strategy="combined", user="teacher", steps=3, batch_size=8, eval_prompts=16, seed=0, progress=False)


def write_golden():
    GOLDEN.write_text(json.dumps(_strip(train(golden_config())), indent=1) + "\n")


def test_ablation_helpers(tmp_path):
    assert steps_to_target([(0, 0.2), (2, 0.5), (4, 0.95)], 0.9) == 4
    assert steps_to_target([(0, 0.2)], 0.9) is None
    rows = [{"strategy": "opd", "user": "teacher", "seed": s, "base_score": 0.2, "score_at_8": 0.5, "final_score": f,
             "steps_to_target": None} for s, f in [(0, 0.6), (1, 0.8)]]
    s = summarise(rows)[("teacher", "opd")]
    assert s["final"] == pytest.approx(0.7) and s["final_std"] == pytest.approx(0.1) and s["reached"] == 0
    assert "0.25 / 0.72" in markdown_table(rows)
    with pytest.raises(ValueError, match="unknown setting"):
        reproduce(tmp_path, users=["boss"], progress=False)
    with pytest.raises(ValueError, match="grid must be one of"):
        reproduce(tmp_path, grid="huge", progress=False)
    with pytest.raises(ValueError, match="unknown strategy"):
        reproduce(tmp_path, strategies=["ppo"], users=["teacher"], progress=False)


def test_paired_difference_against_hand_computation():
    finals = {"combined": [0.9, 1.0, 0.8, 0.95], "opd": [0.8, 1.0, 0.9], "binary_rl": [0.5, 0.6, 0.7, 0.6]}
    rows = [{"strategy": k, "user": "teacher", "seed": s, "final_score": f}
            for k, v in finals.items() for s, f in enumerate(v)]
    p = paired(rows, "teacher", "combined", "opd")
    d = np.array([0.1, 0.0, -0.1])  # seed 3 has no opd run: not paired
    assert p["n"] == 3 and p["mean"] == pytest.approx(d.mean(), abs=1e-12)
    assert p["se"] == pytest.approx(np.sqrt(((d - d.mean()) ** 2).sum() / 2) / np.sqrt(3))
    assert (p["wins"], p["ties"], p["losses"]) == (1, 1, 1)
    assert paired(rows, "student", "combined", "opd") is None
    one = paired([r for r in rows if r["seed"] == 0], "teacher", "combined", "opd")
    assert one["n"] == 1 and one["se"] == 0.0
    rep = ordering_report(rows)
    assert "| teacher | combined - opd | +0.000 +- 0.058 | 1 / 1 / 1 |" in rep
    assert "| teacher | opd - binary_rl | +0.300 +- 0.058 | 3 / 0 / 0 |" in rep
    assert ordering_report([r for r in rows if r["strategy"] == "combined"]) == ""


def test_reproduce_passes_each_settings_config(tmp_path, monkeypatch):
    import claw_lib.ablation as ab

    seen = []

    def fake_train(cfg):
        seen.append(cfg)
        return [{"step": 0, "eval/score": 0.1}, {"step": 1, "eval/score": 0.5 + 0.1 * cfg.seed}]

    monkeypatch.setattr(ab, "train", fake_train)
    rows = ab.reproduce(tmp_path, users=["teacher-rl-pos", "teacher-vague"], strategies=["opd", "combined"],
                        seeds=[0, 1], steps=1, progress=False)
    by = {(c.strategy, c.p_vague, c.w_rl_negative) for c in seen}
    assert by == {("combined", None, 0.0), ("opd", 0.5, None), ("combined", 0.5, None)}  # rl-pos runs combined only
    assert len(rows) == 6 and (tmp_path / "ablation.md").exists()
    p = ab.paired(rows, "teacher-rl-pos", "combined", ("teacher-vague", "opd"))
    assert p["n"] == 2 and p["mean"] == pytest.approx(0.0) and p["ties"] == 2
    assert "| teacher-vague | combined - opd | +0.000 +- 0.000 | 0 / 2 / 0 |" in (tmp_path / "ablation.md").read_text()
    back, curves = ab.load_results(tmp_path)
    assert json.dumps(back) == json.dumps(rows) and curves["teacher-vague/opd/1"] == [(0, 0.1), (1, 0.6)]
    with pytest.raises(FileNotFoundError, match="claw reproduce"):
        ab.load_results(tmp_path / "nothing")


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def chat_lm_dir(tmp_path_factory):
    """A random Qwen2-architecture model with a ChatML template, saved as a Hugging Face folder: the
    shape of a user's instruct checkpoint (e.g. Qwen2.5-0.5B-Instruct), small enough for a CPU test."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from claw_lib.pretrain import train_tokenizer
    from claw_lib.world import FactWorld, sample_corpus

    d = tmp_path_factory.mktemp("random-qwen2-chat")
    tok = train_tokenizer([e.prompt + e.response for e in sample_corpus(FactWorld(), 500)], 400)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHATML
    torch.manual_seed(0)
    m = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                                     eos_token_id=tok.eos_token_id, tie_word_embeddings=True))
    m.save_pretrained(d)
    tok.save_pretrained(d)
    return str(d)


@pytest.mark.parametrize("strategy", ["combined", "binary", "opd_kl"])
def test_smoke_a_hugging_face_folder_with_a_chat_template(strategy, chat_lm_dir, tmp_path):
    """Smoke test: the PPO loop on a model given by path, as a GPU user would pass a model name."""
    from claw_lib.lm import load_causal_lm
    from claw_lib.opd import teacher_prompt
    from claw_lib.users import FactEnv

    _, tok = load_causal_lm(chat_lm_dir)
    task = FactEnv(user="teacher", tokenizer=tok).sample(1)[0]
    assert task.prompt.startswith("<|im_start|>user\n") and task.prompt.endswith("<|im_start|>assistant\n")
    tp = teacher_prompt(task.fact.question(), "Say Keep it up!", task.fact.lang, tokenizer=tok)
    assert "[user's hint / instruction]\nSay Keep it up!<|im_end|>" in tp
    cfg = PPOConfig(strategy=strategy, user="teacher", model=chat_lm_dir, steps=2, batch_size=4, eval_prompts=4,
                    max_new_tokens=8, progress=False)
    hist = train(cfg, tmp_path)
    assert [h["step"] for h in hist] == [0, 1, 2]
    assert all(np.isfinite(v) for h in hist for v in h.values() if isinstance(v, float))
    assert json.loads((tmp_path / "config.json").read_text())["model"] == chat_lm_dir


def test_hinted_teacher_is_what_opd_distils_towards():
    """With the teacher user's hint in context the shipped tiny GPT answers as that user wants (the
    premise of OPD on this task), although without it it rarely does; the user's RNG is restored."""
    from claw_lib.lm import load_causal_lm
    from claw_lib.ppo import hinted_teacher_score
    from claw_lib.users import FactEnv

    model, tok = load_causal_lm("tiny")
    env = FactEnv(user="teacher", seed=0, p_vague=0.5)
    state = env.user.rng.getstate()
    q = hinted_teacher_score(model, tok, env, n=16)
    assert env.user.rng.getstate() == state
    assert q["n"] == 16 and 0 < q["n_hinted"] < 16  # vague complaints give no hint
    assert q["base"] < 0.5 and q["teacher"] >= 0.9
