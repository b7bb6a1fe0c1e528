"""The PPO loop: every strategy, resume, golden trajectories, public stages, a Hugging Face folder."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from claw_lib.config import LossConfig, OPDConfig, PPOConfig, TaskConfig, override
from claw_lib.rl.ppo import STRATEGIES
from claw_lib.rl.run import train

GOLDEN = Path(__file__).parent / "golden" / "trajectories.json"


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
    hist = train(PPOConfig(strategy="opd_kl", task=TaskConfig(user="teacher"), loss=LossConfig(distill=distill, distill_topk=4), steps=2, batch_size=6,
                           eval_prompts=4, progress=False))
    losses = [h["policy/loss"] for h in hist[1:]]
    assert all(np.isfinite(x) and x >= 0 for x in losses) and any(x > 0 for x in losses)
    with pytest.raises(ValueError, match="distill must be"):
        train(PPOConfig(strategy="opd_kl", loss=LossConfig(distill="reverse"), steps=1, progress=False))


@pytest.mark.parametrize("strategy", ["sentence", "binary"])
def test_smoke_two_part_questions(strategy):
    hist = train(PPOConfig(strategy=strategy, task=TaskConfig(questions="pair", misconception_share=1.0), steps=1, batch_size=4,
                           eval_prompts=4, progress=False))
    assert np.isfinite(hist[-1]["policy/loss"]) and 0 <= hist[-1]["eval/score"] <= 1


def test_smoke_gae_with_value_head_and_kl(tmp_path):
    hist = train(PPOConfig(strategy="binary_rl", steps=2, batch_size=4, eval_prompts=8, advantage="gae",
                           loss=LossConfig(kl_coef=0.1), epochs=2, minibatches=2, progress=False))
    assert "value/explained_variance" in hist[-1] and np.isfinite(hist[-1]["value/explained_variance"])
    hist = train(PPOConfig(strategy="binary_rl", steps=1, batch_size=4, eval_prompts=8, advantage="grpo", progress=False))
    assert np.isfinite(hist[-1]["policy/loss"])


def strip_timings(hist):
    return [{k: v for k, v in h.items() if not k.startswith(("timing/", "memory/"))} for h in hist]  # machine-dependent


def test_resume_after_interruption_gives_the_same_run(tmp_path):
    cfg = PPOConfig(strategy="combined", steps=4, batch_size=4, eval_prompts=8, save_every=2, progress=False)
    full = train(cfg, tmp_path / "full")
    part = train(cfg, tmp_path / "part", stop_after=3)   # interrupted after step 3; last checkpoint: step 2
    assert len(part) == 4
    resumed = train(cfg, tmp_path / "part")              # resumes from step 2
    assert strip_timings(resumed) == strip_timings(full)


#: golden runs: name -> PPOConfig overrides of a short run (3 steps of 8 prompts, or 2 of 6)
GOLDEN_RUNS = {
    "combined": {"strategy": "combined", "task.user": "teacher", "steps": 3, "batch_size": 8, "eval_prompts": 16},
    "binary": {"strategy": "binary", "steps": 2, "batch_size": 6, "eval_prompts": 8},
    "perplexity": {"strategy": "perplexity", "steps": 2, "batch_size": 6, "eval_prompts": 8},
    "opd_kl_topk": {"strategy": "opd_kl", "task.user": "teacher", "loss.distill": "topk_reverse_kl", "steps": 2,
                    "batch_size": 6, "eval_prompts": 8},
    "binary_rl_gae": {"strategy": "binary_rl", "advantage": "gae", "loss.kl_coef": 0.1, "epochs": 2, "minibatches": 2,
                      "steps": 2, "batch_size": 4, "eval_prompts": 8},
}


def golden_config(name: str) -> PPOConfig:
    return override(PPOConfig(seed=0, progress=False), GOLDEN_RUNS[name])


@pytest.mark.parametrize("name", list(GOLDEN_RUNS))
def test_golden_trajectory(name):
    """Short runs whose every logged number (timings aside) is stored in golden/trajectories.json and
    compared with a relative tolerance of 1e-3 (TRL's invariant tests do the same). If the loop
    changes on purpose, re-record with ``python tools/record_golden.py`` and review the diff."""
    hist = strip_timings(train(golden_config(name)))
    gold = json.loads(GOLDEN.read_text())[name]
    assert len(hist) == len(gold)
    for h, g in zip(hist, gold):
        assert h.keys() == g.keys()
        for k in g:
            assert h[k] == pytest.approx(g[k], rel=1e-3, abs=1e-5), (name, h["step"], k)


def record_golden() -> None:
    """Write golden/trajectories.json from the current code (tools/record_golden.py calls this)."""
    GOLDEN.write_text(json.dumps({n: strip_timings(train(golden_config(n))) for n in GOLDEN_RUNS}, indent=1) + "\n")


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def chat_lm_dir(tmp_path_factory):
    """A random Qwen2-architecture model with a ChatML template, saved as a Hugging Face folder: the
    shape of a user's instruct checkpoint (e.g. Qwen2.5-0.5B-Instruct), small enough for a CPU test."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from claw_lib.toy.corpus import sample_corpus
    from claw_lib.toy.pretrain import train_tokenizer
    from claw_lib.toy.world import FactWorld

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
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.prompts import teacher_prompt
    from claw_lib.toy.users import FactEnv

    _, tok = load_causal_lm(chat_lm_dir)
    task = FactEnv(user="teacher", tokenizer=tok).sample(1)[0]
    assert task.prompt.startswith("<|im_start|>user\n") and task.prompt.endswith("<|im_start|>assistant\n")
    tp = teacher_prompt(task.fact.question(), "Say Keep it up!", task.fact.lang, tokenizer=tok)
    assert "[user's hint / instruction]\nSay Keep it up!<|im_end|>" in tp
    cfg = PPOConfig(strategy=strategy, task=TaskConfig(user="teacher"), model=chat_lm_dir, steps=2, batch_size=4, eval_prompts=4,
                    max_new_tokens=8, progress=False)
    hist = train(cfg, tmp_path)
    assert [h["step"] for h in hist] == [0, 1, 2]
    assert all(np.isfinite(v) for h in hist for v in h.values() if isinstance(v, float))
    assert json.loads((tmp_path / "config.json").read_text())["model"] == chat_lm_dir


def test_public_stages_give_what_train_gives():
    """One step through rollout -> compute_signals -> compute_advantages -> ppo_update, by hand, logs the
    same numbers as train() (which loads its own copy of the policy) and leaves the same weights."""
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.rl.ppo import Scorer, compute_advantages, compute_signals, ppo_update, rollout
    from claw_lib.signals.opd import frozen_teacher
    from claw_lib.toy.users import FactEnv

    from claw_lib.utils import set_threads

    cfg = PPOConfig(strategy="combined", task=TaskConfig(user="teacher"), steps=1, batch_size=6, eval_prompts=4,
                    progress=False)
    set_threads(cfg.threads)
    policy, tok = load_causal_lm("tiny")
    ref = frozen_teacher(policy)  # the OPD teacher; the KL term is off, so the rollout does not run it
    ro = rollout(policy, tok, FactEnv(user="teacher", seed=cfg.seed), cfg, step=0)
    assert ro.logprobs.shape == ro.batch.response_mask.shape == (6, max(len(r) for r in ro.response_ids))
    sig = compute_signals(ro, cfg, Scorer.for_run(cfg, policy, ref, tok))
    adv = compute_advantages(ro, sig, cfg)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=0.0)
    stats = ppo_update(policy, opt, ro, sig, adv, cfg, step=0)
    by_hand = {"reward/score": float(np.mean(ro.scores)), **sig.metrics, **adv.metrics, **stats}
    by_train = train(cfg)[1]
    for k, v in by_hand.items():
        assert v == pytest.approx(by_train[k], rel=1e-5, abs=1e-6), k
    # one clipped step from ratio 1: nothing clipped, and the loss is minus the advantage averaged as
    # upstream does for combined: each response's token mean, then the mean over the responses with a sample
    assert stats["policy/clipfrac"] == 0.0
    A, M = adv.advantages, adv.mask.float()
    per_response = (A * M).sum(1) / M.sum(1).clamp(min=1)
    rows = adv.sample_rows.float()
    assert stats["policy/loss"] == pytest.approx(-float((per_response * rows).sum() / rows.sum()), abs=1e-6)


def test_a_reference_only_when_something_needs_it():
    """No frozen copy of the policy unless the KL term, the frozen OPD teacher or the perplexity judge needs it;
    with adapters the reference is the same model with them switched off (no copy either)."""
    from claw_lib.models.lora import AdapterDisabled
    from claw_lib.rl.ppo import needs_reference
    from claw_lib.rl.run import _Run

    assert not needs_reference(PPOConfig(strategy="binary_rl"))
    assert not needs_reference(PPOConfig(strategy="combined", opd=OPDConfig(teacher="live")))
    assert needs_reference(PPOConfig(strategy="combined")) and needs_reference(PPOConfig(strategy="perplexity"))
    assert needs_reference(override(PPOConfig(strategy="binary_rl"), {"loss.kl_coef": 0.1}))
    run = _Run.start(PPOConfig(strategy="binary_rl", eval_prompts=2, progress=False), None, False, False)
    assert run.ref is None and run.scorer.teacher is None
    run = _Run.start(PPOConfig(strategy="combined", eval_prompts=2, progress=False), None, False, False)
    assert run.ref is not None and run.ref is not run.policy and run.scorer.teacher is run.ref
    run = _Run.start(PPOConfig(strategy="combined", lora_rank=2, eval_prompts=2, progress=False), None, False, False)
    assert isinstance(run.ref, AdapterDisabled) and run.ref.model is run.policy and run.scorer.teacher is run.ref


def test_lora_run_trains_only_the_adapters_and_keeps_the_teacher(tmp_path):
    """A run with adapters: only they change (the base weights are bit-identical after training), the teacher
    scores as the initial model, the checkpoint holds the adapters only, and the run resumes to the same result."""
    from claw_lib.models.lm import ids_logprobs, load_causal_lm
    from claw_lib.rl.run import _Run

    cfg = PPOConfig(strategy="combined", steps=2, batch_size=4, eval_prompts=4, lora_rank=4, lr=3e-2, save_every=1,
                    progress=False)
    run = _Run.start(cfg, None, False, False)
    base0 = {n: p.detach().clone() for n, p in run.policy.named_parameters() if not p.requires_grad}
    from claw_lib.rl.run import _train

    _train(run, None)
    moved = [n for n, p in run.policy.named_parameters() if p.requires_grad]
    assert moved and all("lora_" in n for n in moved)
    assert all(torch.equal(p, base0[n]) for n, p in run.policy.named_parameters() if not p.requires_grad)
    initial, tok = load_causal_lm("tiny")
    ro_p, ro_r = [[5, 6, 7]], [[8, 9, 10, 11]]
    t_lp = ids_logprobs(run.ref, ro_p, ro_r, 0)[0][0]
    assert np.allclose(t_lp, ids_logprobs(initial, ro_p, ro_r, 0)[0][0], atol=1e-5)
    assert not np.allclose(ids_logprobs(run.policy, ro_p, ro_r, 0)[0][0], t_lp, atol=1e-4)
    full = train(cfg, tmp_path / "full")
    ck = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=False)
    assert ck["model"] and all("lora_" in n for n in ck["model"])
    part = train(cfg, tmp_path / "part", stop_after=1)
    resumed = train(cfg, tmp_path / "part")
    assert len(part) == 2 and strip_timings(resumed) == strip_timings(full)
    assert all(h["memory/peak_gib"] > 0 for h in full[1:]) and full[0]["timing/load_s"] > 0


def test_opd_health_metrics_by_hand():
    """opd/gap_mean, opd/worst_gap_mean, opd/teacher_mass over the hinted responses, against the formulas; no hinted
    response: no metric (the keys are absent, as objective/kl without a KL term)."""
    from claw_lib.rl.ppo import _opd_health

    old = np.array([[-0.5, -0.1, -3.0], [0.0, 0.0, 0.0], [-2.0, -0.2, -0.1]])
    t = {0: np.array([-1.0, -2.0]), 2: np.array([-0.5])}  # response 0 has 2 tokens, response 2 has 1
    h = _opd_health(t, old)
    gaps = [-1.0 + 0.5, -2.0 + 0.1, -0.5 + 2.0]
    assert h["opd/gap_mean"] == pytest.approx(np.mean(gaps))
    assert h["opd/worst_gap_mean"] == pytest.approx(np.mean([min(gaps[:2]), gaps[2]]))
    assert h["opd/teacher_mass"] == pytest.approx(np.mean(np.exp([-1.0, -2.0, -0.5])))
    assert _opd_health({}, old) == {} and _opd_health(t, None) == {}


def test_subtoken_modes_in_the_loop():
    """PPOConfig.subtokens decides how a word's reward reaches its sub-tokens: on one batch, "spread" gives
    every sub-token of a word the word's reward, "first" the first one only (0 on the rest), "split" divides
    it (the sums per word agree with "spread"'s first sub-token); checked against words_to_subtokens."""
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.rl.ppo import Scorer, compute_signals, rollout
    from claw_lib.signals.opd import frozen_teacher
    from claw_lib.toy.users import FactEnv

    policy, tok = load_causal_lm("tiny")
    ref = frozen_teacher(policy)
    base = PPOConfig(strategy="binary", task=TaskConfig(questions="pair"), steps=1, batch_size=6, eval_prompts=4,
                     progress=False)
    ro = rollout(policy, tok, FactEnv(user="correcting", seed=0, questions="pair"), base, step=0)
    rows = {m: compute_signals(ro, override(base, {"subtokens": m}), Scorer.for_run(base, policy, ref, tok)).token_signal
            for m in ("spread", "first", "split")}
    multi = 0
    for b, ids in enumerate(ro.response_ids):
        n = len(ids)
        spread, first, split = (rows[m][b, :n].cpu().numpy() for m in ("spread", "first", "split"))
        # first: a subset of spread's values, zero elsewhere; split: never larger in size than spread
        assert np.all((first == spread) | (first == 0))
        assert np.all(np.abs(split) <= np.abs(spread) + 1e-6) and np.all(np.sign(split) == np.sign(spread))
        multi += int(np.sum((first == 0) & (spread != 0)))
    assert multi > 0  # some word of this batch has more than one sub-token
    with pytest.raises(ValueError, match="subtokens must be one of"):
        train(PPOConfig(subtokens="last", steps=1, progress=False))


def test_whiten_and_reward_to_go_advantages():
    """advantage "whiten": the direct signal whitened over the mask (masked mean 0, std 1); "reward_to_go":
    core.reward_to_go of the signal with cfg.gamma; both keep the mask, and train() runs with either."""
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.ops import masked_mean
    from claw_lib.rl.core import reward_to_go
    from claw_lib.rl.ppo import Scorer, compute_advantages, compute_signals, rollout
    from claw_lib.signals.opd import frozen_teacher
    from claw_lib.toy.users import FactEnv

    policy, tok = load_causal_lm("tiny")
    cfg = PPOConfig(strategy="binary", task=TaskConfig(questions="pair"), steps=1, batch_size=6, eval_prompts=4,
                    progress=False)
    ro = rollout(policy, tok, FactEnv(user="correcting", seed=1, questions="pair"), cfg, step=0)
    sig = compute_signals(ro, cfg, Scorer.for_run(cfg, policy, frozen_teacher(policy), tok))
    direct = compute_advantages(ro, sig, cfg)
    white = compute_advantages(ro, sig, override(cfg, {"advantage": "whiten"}))
    rtg = compute_advantages(ro, sig, override(cfg, {"advantage": "reward_to_go", "gamma": 0.5}))
    M = sig.mask
    assert torch.equal(direct.advantages, sig.token_signal) and torch.equal(white.mask, M) and torch.equal(rtg.mask, M)
    w = white.advantages[M]
    assert float(masked_mean(white.advantages, M)) == pytest.approx(0.0, abs=1e-5)
    assert float(w.std()) == pytest.approx(1.0, abs=1e-4) and torch.all(white.advantages[~M] == 0)
    assert torch.allclose(rtg.advantages, reward_to_go(sig.token_signal, M, 0.5))
    for adv in ("whiten", "reward_to_go"):
        h = train(override(cfg, {"advantage": adv}))
        assert np.isfinite(h[-1]["policy/loss"])


@pytest.mark.parametrize("strategy", ["opd_kl", "combined"])
def test_v2_clipped_topk_loss_in_the_update(strategy):
    """loss.distill="topk_clipped": the first update's loss, computed here from the policy before the update and the
    teacher on sig.teacher_batch, averaged per response then over the responses with a sample (upstream's sample
    mean). opd_kl: the v2 top-k loss on the student's own top 4 ids, hinted turns only. combined (the v2 hybrid):
    minus the judge's score w_rl r on the sampled tokens (ratio 1) plus w_opd x the top-k loss, on every turn with
    a sample, the teacher reading the student's own prompt where there is no hint. Nothing is clipped at ratio 1."""
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.ops import gather_positions
    from claw_lib.rl.core import aggregate_loss
    from claw_lib.rl.ppo import Scorer, compute_advantages, compute_signals, ppo_update, rollout
    from claw_lib.signals.opd import clipped_topk_opd, frozen_teacher, judge_turn
    from claw_lib.toy.users import FactEnv

    cfg = PPOConfig(strategy=strategy, task=TaskConfig(user="teacher", p_vague=0.5), steps=1, batch_size=8,
                    eval_prompts=4, progress=False,
                    loss=LossConfig(distill="topk_clipped", clipped_k=4, clipped_gap=1.0, eps_high=0.28))
    policy, tok = load_causal_lm("tiny")
    ref = frozen_teacher(policy)
    ro = rollout(policy, tok, FactEnv(user="teacher", seed=0, p_vague=0.5), cfg, step=0)
    sig = compute_signals(ro, cfg, Scorer.for_run(cfg, policy, ref, tok))
    adv = compute_advantages(ro, sig, cfg)
    kinds = [judge_turn(t, f.next_state).kind for t, f in zip(ro.texts, ro.feedback)]
    want_rows = [k in (("both", "opd") if strategy == "opd_kl" else ("both", "opd", "rl")) for k in kinds]
    assert adv.mask.any(1).tolist() == want_rows and "rl" in kinds and any(k in ("both", "opd") for k in kinds)
    with torch.no_grad():
        s_lp = torch.log_softmax(gather_positions(policy(input_ids=ro.batch.input_ids,
                                                         attention_mask=ro.batch.attention_mask).logits,
                                                  ro.batch.logit_index).float(), -1)
        tb = sig.teacher_batch
        t_lp = torch.log_softmax(gather_positions(ref(input_ids=tb.input_ids, attention_mask=tb.attention_mask).logits,
                                                  tb.logit_index).float(), -1)
        old_k, ids = s_lp.topk(4, -1)
        per_pos, _ = clipped_topk_opd(old_k, old_k, t_lp.gather(-1, ids), 1.0, 0.2, 0.28)
        want = float(aggregate_loss(per_pos, adv.mask, "sample_mean", adv.sample_rows))
        if strategy == "combined":
            scores = [judge_turn(t, f.next_state).score for t, f in zip(ro.texts, ro.feedback)]
            A = adv.advantages
            assert all(torch.all(A[b][adv.mask[b]] == float(r)) for b, r in enumerate(scores))   # w_rl = 1
            want += float(aggregate_loss(-A, adv.mask, "sample_mean", adv.sample_rows))
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=0.0)
    stats = ppo_update(policy, opt, ro, sig, adv, cfg, step=0, teacher=ref)
    assert stats["policy/loss"] == pytest.approx(want, abs=1e-5) and stats["policy/clipfrac"] == 0.0
    hist = train(override(cfg, {"steps": 2}))
    assert all(np.isfinite(h["policy/loss"]) for h in hist[1:])


def test_hint_selection_by_overlap_in_the_loop():
    """opd.hint_candidates=3: "longest" gives v1's hints exactly; "overlap" picks, on every turn with several
    candidates, the one whose hinted teacher's top-4 shares most with the student's top-4 over the response,
    recomputed here one candidate at a time without padding; at least one turn of the batch has a choice to make.
    The student's top-4 comes from the rollout's forward; a rollout made without it is refused by name."""
    from claw_lib.models.lm import encode, load_causal_lm
    from claw_lib.prompts import teacher_prompt
    from claw_lib.rl.grids import SETTINGS
    from claw_lib.rl.ppo import Scorer, compute_signals, rollout
    from claw_lib.signals.judges import hint_candidates
    from claw_lib.signals.opd import frozen_teacher
    from claw_lib.toy.envs import make_env

    policy, tok = load_causal_lm("tiny")
    ref = frozen_teacher(policy)
    base = SETTINGS["teacher"].apply(PPOConfig(strategy="combined", batch_size=16, eval_prompts=4, progress=False))
    overlap = override(base, {"opd.hint_candidates": 3, "opd.hint_selection": "overlap"})
    ro = rollout(policy, tok, make_env(base.task, 0, tok), overlap, step=0)  # keeps the policy's top-4 per position
    assert ro.old_topk[0].shape == ro.logprobs.shape + (4,)
    bare = rollout(policy, tok, make_env(base.task, 0, tok), base, step=0)  # the same samples, no top-k kept
    assert bare.response_ids == ro.response_ids and bare.old_topk is None
    with pytest.raises(ValueError, match="needs the sampling policy's top 4 ids per position"):
        compute_signals(bare, overlap, Scorer.for_run(overlap, policy, ref, tok))
    hints = {}
    for sel, n in (("longest", 1), ("longest", 3), ("overlap", 3)):
        cfg = override(base, {"opd.hint_candidates": n, "opd.hint_selection": sel})
        hints[(sel, n)] = compute_signals(ro, cfg, Scorer.for_run(cfg, policy, ref, tok)).hints
    assert hints[("longest", 3)] == hints[("longest", 1)]
    cfg = override(base, {"opd.hint_candidates": 3})
    chosen = 0
    with torch.no_grad():
        for b, (text, fb, task) in enumerate(zip(ro.texts, ro.feedback, ro.tasks)):
            from claw_lib.signals.opd import judge_turn

            cands = hint_candidates(judge_turn(text, fb.next_state, cfg=cfg.opd).hint_votes, 10, 3)
            if len(cands) < 2:
                assert hints[("overlap", 3)][b] == hints[("longest", 1)][b]
                continue
            resp = ro.response_ids[b]

            def top4(model, prompt_ids):
                ids = torch.tensor([prompt_ids + resp])
                logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:len(prompt_ids) - 1 + len(resp)]
                return [set(row.topk(4).indices.tolist()) for row in logits]

            s = top4(policy, ro.prompt_ids[b])
            sums = []
            for h in cands:
                t = top4(ref, encode(tok, teacher_prompt(task.fact.question(), h, task.fact.lang, tokenizer=tok,
                                                         form=task.form)))
                sums.append(sum(len(a & c) for a, c in zip(s, t)))
            assert hints[("overlap", 3)][b] == cands[sums.index(max(sums))], (cands, sums)
            chosen += 1
    assert chosen > 0


def test_the_kl_coefficient_reaches_the_loss():
    """Reef found a configured KL coefficient that reached the loss as 0.0. Two runs that differ only in kl_coef
    (0.1 and 10.1) take the same first minibatch step (the policy is the reference there: KL 0 and no gradient from
    it), so on the second minibatch they differ by the KL term alone: the logged loss differs by exactly
    (10.1 - 0.1) x the logged KL, which is not 0 (float32 losses: to 1%)."""
    def run(kl):
        cfg = PPOConfig(strategy="binary_rl", steps=1, batch_size=6, eval_prompts=2, minibatches=2, progress=False,
                        lr=2e-3, loss=LossConfig(kl_coef=kl, loss_agg="token_mean"))  # a step large enough to see
        return train(cfg)[1]

    low, high = run(0.1), run(10.1)
    assert high["objective/kl"] == pytest.approx(low["objective/kl"], rel=1e-6) and low["objective/kl"] > 1e-6
    assert high["policy/loss"] - low["policy/loss"] == pytest.approx(10.0 * low["objective/kl"], rel=1e-2)


@pytest.mark.parametrize("changes", [
    {"strategy": "binary_rl", "loss.loss_agg": "token_mean"},
    {"strategy": "combined", "loss.loss_agg": "sample_mean", "task.user": "teacher"},
    {"strategy": "binary_rl", "advantage": "gae", "loss.kl_coef": 0.1, "loss.loss_agg": "token_mean"},
    {"strategy": "opd_kl"},
])
def test_micro_batches_take_the_same_step_as_the_whole_minibatch(changes):
    """``micro_batch`` scores a minibatch a part at a time and adds up the gradients, each part weighted by its share
    of the tokens (token_mean) or sample rows (sample_mean): two steps of training log the same numbers (to float32
    rounding) with parts of one row, of two rows, and the whole minibatch at once; with the value head and the KL
    term as well."""
    def run(micro):
        base = override(PPOConfig(steps=2, batch_size=6, eval_prompts=2, minibatches=2, progress=False),
                        {**changes, "micro_batch": micro})
        return train(base)

    whole, ones, twos = run(None), run(1), run(2)
    for a, b, c in zip(whole, ones, twos):
        for k, v in a.items():
            if k.startswith(("timing/", "memory/")) or not isinstance(v, float):  # measured, not computed
                continue
            assert b[k] == pytest.approx(v, rel=1e-4, abs=1e-6), k
            assert c[k] == pytest.approx(v, rel=1e-4, abs=1e-6), k
