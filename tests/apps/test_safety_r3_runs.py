"""Third reliability review (issue 32, ids as in ``../shared/notes/review-reliability-3.md``; see tests/README.md):
runs repeat, inputs are read as written, and a mistake is one line.

Every random initialisation happens after seeding (the LoRA adapters are drawn from the run's seed); every
enumerated input value (a ``role``) is validated where it is read; a model whose tokenizer does not fit it, and a
float16 run whose weights overflow, are one line naming the cause. Each test names the review ids it covers.
"""
import json
import re

import pytest
import torch

from claw_lib.models.lm import TINY_LM_DIR

from .safety import message, run

SMALL = ["--steps", "2", "--batch-size", "2", "--eval-size", "2", "--threads", "1"]


def _values(folder, key="policy/loss"):
    return [json.loads(x).get(key) for x in (folder / "metrics.jsonl").read_text().splitlines()]


# --------------------------------------------------------------------------- LoRA
def test_the_same_lora_run_repeats_bit_for_bit_LR01(tmp_path, capsys):
    """LR01: the same command and seed give the same LoRA run, and a LoRA run extended from its checkpoint is the
    uninterrupted run (before: the adapters were drawn before the run was seeded, from torch's per-process state,
    and the losses differed from step 2 on)."""
    torch.manual_seed(1)  # another state of the global generator before each run: it must not matter
    assert run(["train", "--lora-rank", "4", "--out", str(tmp_path / "a")] + SMALL, capsys)[0] == 0
    torch.manual_seed(2)
    assert run(["train", "--lora-rank", "4", "--out", str(tmp_path / "b")] + SMALL, capsys)[0] == 0
    a, b = (tmp_path / "a" / "metrics.jsonl").read_text(), (tmp_path / "b" / "metrics.jsonl").read_text()
    strip = [{k: v for k, v in json.loads(x).items() if not k.startswith(("timing/", "memory/"))} for x in
             a.splitlines()], [{k: v for k, v in json.loads(x).items() if not k.startswith(("timing/", "memory/"))}
                               for x in b.splitlines()]
    assert strip[0] == strip[1] and len(strip[0]) == 3
    # an extended LoRA run is the uninterrupted one (before: 38 values differed)
    lora = ["train", "--lora-rank", "4", "--batch-size", "2", "--eval-size", "2", "--threads", "1"]
    assert run(lora + ["--steps", "3", "--out", str(tmp_path / "a")], capsys)[0] == 0
    assert run(lora + ["--steps", "3", "--out", str(tmp_path / "c")], capsys)[0] == 0
    assert _values(tmp_path / "a") == _values(tmp_path / "c") and len(_values(tmp_path / "c")) == 4
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.models.lora import add_lora, trainable_state_dict

    m1, m2 = load_causal_lm("tiny")[0], load_causal_lm("tiny")[0]
    state = torch.random.get_rng_state()
    add_lora(m1, 2, seed=5)
    assert torch.equal(state, torch.random.get_rng_state())  # the global generator is left alone
    add_lora(m2, 2, seed=5)
    s1, s2 = trainable_state_dict(m1), trainable_state_dict(m2)
    assert s1.keys() == s2.keys() and all(torch.equal(s1[k], s2[k]) for k in s1)


def test_a_lora_checkpoint_without_its_adapters_is_refused_LR06(tmp_path, capsys):
    """LR06: a LoRA checkpoint that holds none of the adapters' weights is refused in one line (before: loaded with
    strict=False, the run went on with fresh random adapters under the old history)."""
    r = tmp_path / "r"
    args = ["train", "--lora-rank", "4", "--batch-size", "2", "--eval-size", "2", "--threads", "1", "--out", str(r)]
    assert run(args + ["--steps", "2"], capsys)[0] == 0
    ck = torch.load(r / "checkpoint.pt", weights_only=False)
    ck["model"] = {}
    torch.save(ck, r / "checkpoint.pt")
    rc, _, err = run(args + ["--steps", "3"], capsys)
    line = message(err)
    assert rc == 2 and "does not fit this run's model" in line and "0 of the run's" in line


# --------------------------------------------------------------------------- --input values
def _opd_lines(tmp_path, capsys, rows):
    f = tmp_path / "t.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    rc, out, err = run(["opd", "--input", str(f)], capsys)
    return rc, [json.loads(x) for x in out.splitlines()], err


def test_an_unknown_role_is_that_lines_error_IN01_IN01b(tmp_path, capsys):
    """IN01: a role that is not "user" or "tool" ("bogus", 5, null) is that line's error record, never read as the
    user's reply. IN01b: "Tool" (a capital) is an error too, while "tool" scores a tool's error -1."""
    base = {"prompt": "查询法国的首都", "response": "lookup(法兰西, 首都)",
            "next_state": "Error: unknown country 法兰西; did you mean 法国?"}
    rows = [{**base, "role": r} for r in ("bogus", 5, None, "Tool", "tool")]
    rc, out, err = _opd_lines(tmp_path, capsys, rows)
    assert rc == 1 and "4 of 5 lines failed" in err
    for k, got in enumerate(["\"bogus\"", "5", "null", "\"Tool\""]):
        assert out[k]["line"] == k + 1 and out[k]["error"].startswith("'role' must be one of 'user', 'tool'"), out[k]
        assert out[k]["error"].endswith("got " + got)
    assert out[4]["score"] == -1


def test_the_rule_judge_refuses_an_unknown_role_H04():
    """H04: RuleJudge.vote / hint refuse role="Tool" naming it (before: read as the user's, score 0)."""
    from claw_lib.signals.judges import RuleJudge

    for fn in (RuleJudge().vote, RuleJudge().hint, RuleJudge().votes):
        with pytest.raises(ValueError, match="role must be one of .* got 'Tool'"):
            fn("x", "Error: no such tool", role="Tool")
    assert RuleJudge().vote("x", "Error: no such tool", role="tool").score == -1


def test_a_lone_surrogate_is_that_lines_error_IN07(tmp_path, capsys):
    """IN07: "\\ud800" in an --input line is that line's "not valid Unicode" record (before: the tokenizer's
    TextEncodeInput message)."""
    f = tmp_path / "s.jsonl"
    f.write_text('{"prompt": "q", "response": "\\ud800", "next_state": "不对"}\n', encoding="utf-8")
    rc, out, err = run(["opd", "--input", str(f)], capsys)
    rec = json.loads(out.splitlines()[0])
    assert rc == 1 and rec["line"] == 1 and "'response' is not valid Unicode" in rec["error"]


# --------------------------------------------------------------------------- models that do not fit
@pytest.fixture()
def foreign_tokenizer(tmp_path):
    """The tiny GPT with a tokenizer of more ids than its embedding has rows (as one copied from another model)."""
    import shutil

    from transformers import AutoTokenizer

    m = tmp_path / "m"
    shutil.copytree(TINY_LM_DIR, m)
    (m / "manifest.json").unlink()
    tok = AutoTokenizer.from_pretrained(m)
    tok.add_tokens([f"extra{i}" for i in range(64)])
    tok.save_pretrained(m)
    return m


def test_a_tokenizer_that_does_not_fit_the_model_is_one_line_MF06_MF06b_MF06c(foreign_tokenizer, capsys):
    """MF06 (opd), MF06b (train), MF06c (the perplexity judge): one line, the tokenizer does not fit the model
    (before: IndexError in the embedding lookup)."""
    m = str(foreign_tokenizer)
    for args in (["opd", "--prompt", "法国的首都是哪里？", "--response", "法国的首都是伦敦。", "--next-state",
                  "不对，法国的首都是巴黎。", "--model", m],
                 ["train", "--model", m, "--steps", "1", "--batch-size", "2", "--eval-size", "2"],
                 ["rewards", "法国的首都是伦敦。", "不对，法国的首都是巴黎。", "--strategy", "perplexity", "--judge", m]):
        rc, _, err = run(args, capsys)
        line = message(err)
        assert rc == 2 and "does not fit its model" in line and "2112 ids" in line, line


# --------------------------------------------------------------------------- float16
def test_float16_divergence_names_dtype_in_both_engines_DT01_ET12(tmp_path, capsys):
    """DT01: a float16 kit run whose weights overflow names --dtype (before: --lr, --kl-coef and --w-rl-negative
    at their defaults). ET12: the TRL engine stops the same way after the update (before: a traceback from
    TRL's sampler at the next step)."""
    for engine in ("kit", "trl"):
        rc, _, err = run(["train", "--engine", engine, "--strategy", "binary_rl", "--dtype", "float16", "--steps", "2",
                          "--batch-size", "2", "--eval-size", "2"], capsys)
        line = message(re.sub(r"[^\n]*?\d+%\|[^\n\]]*\]", "\n", err))  # TRL's open bar shares the line
        assert rc == 2 and "NaN or inf" in line and "with --dtype float16" in line and "--lr" not in line, line
