"""Third reliability review (issue 32, ids as in ``../shared/notes/review-reliability-3.md``; see tests/README.md):
the library gives the command line's answers, and a run is checked against its model and machine before it starts.

Where the command line refuses a value, the library raises an error that names it: never NaN, inf, a silently
ignored setting or a TypeError deep inside (config.validate, token_rewards, align_texts, the OPD and judge helpers).
A setting that does not fit the model or the machine (``max_new_tokens`` beyond the positions, a batch beyond the
free memory, a top-k beyond the vocabulary) is refused once the model is loaded and before anything is written
(:mod:`claw_lib.rl.fit`), naming the flag on the command line. Each test names the review ids it covers.
"""
import math

import pytest
import torch

from claw_lib.config import OPDConfig, PPOConfig, RewardConfig, TaskConfig, validate

from .safety import message, run

PAIR = ("法国的首都是伦敦。", "不对，法国的首都是巴黎。")


# --------------------------------------------------------------------------- config.validate
def test_counts_are_integers_and_numbers_are_numbers_C01_C02_C03():
    """C01: steps=2.5 is refused naming steps (before: accepted, then a TypeError after the model loaded). C02:
    batch_size=True is refused (before: run as 1). C03: lora_rank="4" is refused naming lora_rank (before: a
    TypeError comparing str and int)."""
    with pytest.raises(ValueError, match=r"^steps must be an integer, got 2.5"):
        validate(PPOConfig(steps=2.5))
    with pytest.raises(TypeError, match=r"^batch_size must be a number, got True"):
        validate(PPOConfig(batch_size=True))
    with pytest.raises(TypeError, match=r"^lora_rank must be a number, got '4'"):
        PPOConfig(lora_rank="4")
    validate(PPOConfig(steps=3, lr=1e-4))  # an int or a float where a float is meant


def test_task_settings_the_task_ignores_are_refused_C04_TC04_TC05_J02(capsys):
    """C04: an unknown relation is refused naming task.relations (before: KeyError in the world). TC04, J02:
    `--questions pair` with the tool-chain or joint user is refused as for the teacher user (before: recorded,
    then single questions asked). TC05: `--p-vague` with the tool-chain user is refused (before: stored, ignored)."""
    with pytest.raises(ValueError, match="task.relations must be"):
        validate(PPOConfig(task=TaskConfig(relations=("bogus",))))
    for args, flag in ((["--user", "tool-chain", "--strategy", "binary_rl", "--questions", "pair"], "--questions"),
                       (["--user", "joint", "--questions", "pair"], "--questions"),
                       (["--user", "tool-chain", "--strategy", "binary_rl", "--p-vague", "0.9"], "--p-vague")):
        rc, _, err = run(["train", "--steps", "1", "--batch-size", "2", "--eval-size", "2"] + args, capsys)
        line = message(err)
        assert rc == 2 and line.startswith(f"claw train: {flag} ") and ("'correcting' only" in line or
                                                                      "means nothing" in line), line


def test_reward_ranges_are_refused_in_the_library_R03_R10():
    """R03: lo above hi is refused (before: every reward clipped to an inverted range). R10: ppl_scale 0 is
    refused (before: numpy's divide-by-zero warning and rewards of +-1)."""
    from claw_lib.signals.rewards import token_rewards

    with pytest.raises(ValueError, match=r"reward.lo \(1.0\) must not exceed reward.hi \(-1.0\)"):
        token_rewards(*PAIR, "continuous", RewardConfig(lo=1.0, hi=-1.0))
    with pytest.raises(ValueError, match=r"reward.ppl_scale must be in \(0, inf\), got 0"):
        token_rewards(*PAIR, "perplexity", RewardConfig(ppl_scale=0))


# --------------------------------------------------------------------------- token_rewards, align_texts
def test_token_rewards_refuses_what_it_would_ignore_R01_R05_R06_R07():
    """R01: judge_weight > 0 without a judge is refused (before: the rewards of weight 0, silently). R05: a judge
    that is not (model, tokenizer). R06: an id beyond the judge's vocabulary (before: IndexError). R07: empty
    response_ids for a non-empty output (before: six rewards of 0)."""
    from claw_lib.signals.rewards import token_rewards

    with pytest.raises(ValueError, match="judge_weight 1.0 needs a judge"):
        token_rewards("The capital of France is London.", "No, Paris.", "binary", RewardConfig(judge_weight=1.0))
    with pytest.raises(ValueError, match=r"judge must be a \(model, tokenizer\) pair"):
        token_rewards("a b", "c d", "perplexity", judge=(None, None))
    with pytest.raises(ValueError, match="beyond the judge's vocabulary .*: 99999"):
        token_rewards(*PAIR, "perplexity", response_ids=[99999])
    with pytest.raises(ValueError, match="response_ids is empty"):
        token_rewards(*PAIR, "perplexity", response_ids=[])
    with pytest.raises(ValueError, match="integer token ids"):
        token_rewards(*PAIR, "perplexity", response_ids=[1.5])
    assert len(token_rewards("", PAIR[1], "perplexity", response_ids=[]).rewards) == 0  # an empty sample: fine


def test_align_texts_checks_its_tokens_and_layer_A07_A03():
    """A07: output_tokens of another text are refused (before: an alignment of 'a', 'different', ... against
    the correction). A03: layer="8" is refused naming the layer (before: TypeError comparing int and str)."""
    from claw_lib import align_texts, tokenize

    with pytest.raises(ValueError, match="output_tokens are not the output's: token 'a'"):
        align_texts(*PAIR, output_tokens=tokenize("a different text"))
    with pytest.raises(TypeError, match="reward.align.layer must be a number, got '8'"):
        align_texts("a", "b", layer="8")
    ta = align_texts(*PAIR, output_tokens=tokenize(PAIR[0]))
    assert [t.text for t in ta.output_tokens] == [t.text for t in tokenize(PAIR[0])]


# --------------------------------------------------------------------------- OPD and judge helpers
def test_opd_helpers_refuse_bad_arguments_P01_P02_P04_P06():
    """P01: clip=NaN (before: silently no clip). P02: negative eps (before: clamp with min > max, loss 0.511).
    P04: no candidate (before: argmax's IndexError). P06: float ids (before: a choice among scores)."""
    from claw_lib.signals.opd import clipped_topk_opd, overlap_choice

    x = torch.log(torch.tensor([[0.5, 0.25]]))
    t = torch.log(torch.tensor([[0.25, 0.5]]))
    with pytest.raises(ValueError, match="clip must be a finite number, got nan"):
        clipped_topk_opd(x, x, t, clip=float("nan"))
    with pytest.raises(ValueError, match=r"eps must be in \[0, 1\), got -1.0"):
        clipped_topk_opd(x + 0.1, x, t, eps=-1.0, eps_high=-1.0)
    assert float(clipped_topk_opd(x, x, t)[0]) == pytest.approx(math.log(2) / 3, abs=1e-6)  # the worked case
    with pytest.raises(ValueError, match="no candidate hint"):
        overlap_choice(torch.zeros(3, 2, dtype=torch.long), torch.zeros(0, 3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="student_topk must hold integer token ids"):
        overlap_choice(torch.randn(3, 2), torch.randn(2, 3, 2))


def test_hint_candidates_refuses_bad_arguments_H01_H02_H03():
    """H01: max_candidates=-1 (before: the longest dropped). H02: min_chars=-5 (before: an empty candidate).
    H03: a hint that is not a string (before: AttributeError)."""
    from claw_lib.signals.judges import HintVote, hint_candidates

    votes = [HintVote(True, "不对，法国的首都是巴黎。你要说好问题。"), HintVote(True, "不对，法国的首都是巴黎。")]
    with pytest.raises(ValueError, match="max_candidates must be an integer >= 1, got -1"):
        hint_candidates(votes, max_candidates=-1)
    with pytest.raises(ValueError, match="min_chars must be an integer >= 0, got -5"):
        hint_candidates([HintVote(True, ""), HintVote(True, "   ")], min_chars=-5)
    with pytest.raises(TypeError, match="hint must be a string or None, got int 5"):
        hint_candidates([HintVote(True, 5)])
    assert hint_candidates(votes, min_chars=0) == ["不对，法国的首都是巴黎。", "不对，法国的首都是巴黎。你要说好问题。"]


def test_empty_means_and_bad_probe_lines_K01_D01(tmp_path):
    """K01: episode_success of no episode is NaN, as the kit's other empty means (before: 0.0). D01: a line that is
    not JSON names its line in the file (before: JSONDecodeError at line 1 of the line)."""
    from claw_lib.toy.chains import episode_success
    from claw_lib.toy.probe import PROBE_V2, load_probe_set

    assert math.isnan(episode_success([], []))
    b = tmp_path / "b.jsonl"
    b.write_text("".join(open(PROBE_V2, encoding="utf-8").readlines()[:2]) + '{"id": "x", oops}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="probe line 3: not valid JSON"):
        load_probe_set(b)


# --------------------------------------------------------------------------- a run fits its model and machine
def test_max_new_tokens_beyond_the_positions_is_refused_before_anything_is_written_MX01_MX03_ET13(tmp_path, capsys):
    """MX01: `--max-new-tokens 200` (the tiny GPT has 160 positions) is refused naming --max-new-tokens, and nothing
    is left in the folder, so the corrected command runs (before: config.json left, the next run refused). MX03:
    8192 (inside validate's bound) the same. ET13: the TRL engine the same."""
    r = tmp_path / "r"
    for extra in (["--max-new-tokens", "200", "--out", str(r)], ["--max-new-tokens", "8192"],
                  ["--engine", "trl", "--strategy", "binary_rl", "--max-new-tokens", "200"]):
        rc, _, err = run(["train", "--steps", "1", "--batch-size", "2", "--eval-size", "2"] + extra, capsys)
        line = message(err)
        assert rc == 2 and line.startswith("claw train: --max-new-tokens ") and "positions" in line, line
        assert "use --max-new-tokens <=" in line and not r.exists()
    rc, _, _ = run(["train", "--steps", "1", "--batch-size", "2", "--eval-size", "2", "--out", str(r)], capsys)
    assert rc == 0


def test_a_batch_beyond_the_free_memory_is_refused_at_once_TC10(capsys, monkeypatch):
    """TC10: `--user tool-chain --batch-size 4096` (about 12,000 sequences) is refused at once with the estimate,
    naming --batch-size (before: killed by the OOM killer at 22.4 GB after 130 s, nothing said). The free memory
    is made small here, so the test needs no big machine; the estimate is checked against a measured step."""
    import claw_lib.rl.fit as fit

    monkeypatch.setattr(fit, "free_memory_bytes", lambda device: 4 * 2**30)
    rc, _, err = run(["train", "--user", "tool-chain", "--strategy", "binary_rl", "--batch-size", "4096", "--steps",
                      "1", "--eval-size", "2"], capsys)
    line = message(err)
    assert rc == 2 and line.startswith("claw train: --batch-size 4096 needs about") and "GiB are free" in line
    assert "sequences of 4096 episodes" in line and "use --batch-size <=" in line
    from claw_lib.models.lm import load_causal_lm

    model = load_causal_lm("tiny")[0]
    # measured (issue 32): 256 vs 64 tool-chain episodes, 27,969 tokens more, 1.22 GiB more peak memory
    est = fit.step_bytes(27_969, model) / 2**30
    assert 1.22 <= est <= 2 * 1.22


def test_top_k_beyond_the_vocabulary_is_refused_C07_C11():
    """C07 (opd.selection_k) and C11 (loss.clipped_k) beyond the model's vocabulary are refused naming them,
    before the first step (before: the step failed asking for a rollout made with the step's config)."""
    from claw_lib.config import LossConfig
    from claw_lib.rl.run import train

    with pytest.raises(ValueError, match=r"^opd.selection_k 1000000 exceeds the model's vocabulary of 2048"):
        train(PPOConfig(strategy="combined", steps=1, batch_size=4, eval_prompts=2, progress=False,
                        task=TaskConfig(user="student"),
                        opd=OPDConfig(hint_candidates=3, hint_selection="overlap", selection_k=10**6),
                        loss=LossConfig(distill="topk_clipped")))
    with pytest.raises(ValueError, match=r"^loss.clipped_k 1000000 exceeds the model's vocabulary of 2048"):
        train(PPOConfig(strategy="opd_kl", steps=1, batch_size=4, eval_prompts=2, progress=False,
                        task=TaskConfig(user="teacher"), loss=LossConfig(distill="topk_clipped", clipped_k=10**6)))


def test_the_configs_relations_are_the_worlds_C04():
    """C04 (the other side): config.FACT_RELATIONS, which validate checks task.relations against without importing
    the world, are the fact world's relations."""
    from claw_lib.config import FACT_RELATIONS
    from claw_lib.toy.world import RELATIONS

    assert tuple(RELATIONS) == FACT_RELATIONS
