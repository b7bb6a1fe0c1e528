"""``claw show RUN``: a short ``claw train`` writes what its model said, ``claw show`` prints it (before and after,
one step's samples, one evaluation, the records as JSON); bad input is one line and exit code 2."""
import json

import pytest

from claw_lib.apps.cli import main
from claw_lib.rl.samples import read_run


def run(args, capsys):
    capsys.readouterr()
    try:
        rc = main(args)
    except SystemExit as e:  # argparse's refusal of a bad option (one line, exit code 2)
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("show") / "run"
    rc = main(["train", "--steps", "2", "--batch-size", "4", "--eval-size", "4", "--max-new-tokens", "8",
               "--threads", "1", "--save-every", "0", "--out", str(d)])
    assert rc == 0
    return d


def test_show_prints_the_answers_before_and_after(run_dir, capsys):
    rc, out, err = run(["show", str(run_dir)], capsys)
    evals = read_run(run_dir).evals
    assert rc == 0 and not err
    lines = out.splitlines()
    assert "samples at steps 1-2; evaluations at steps 0-2" in lines[0]
    mean = lambda s: sum(r["score"] for r in evals[s]) / 4  # noqa: E731
    changed = sum(a["answer"] != b["answer"] for a, b in zip(evals[0], evals[2]))
    assert lines[1] == (f"evaluation, step 0 -> step 2: mean score {mean(0):.3f} -> {mean(2):.3f}; "
                        f"{changed} of 4 answers changed")
    for before, after in zip(evals[0], evals[2]):  # every prompt with both answers
        assert before["question"] in out and before["answer"] in out and after["answer"] in out


def test_show_step_prints_each_sample_with_its_signal(run_dir, capsys):
    rc, out, _ = run(["show", str(run_dir), "--step", "1", "--limit", "0"], capsys)
    rows = read_run(run_dir).samples[1]
    assert rc == 0 and f"samples at step 1: {len(rows)} responses" in out
    for r in rows:
        assert r["question"] in out and r["response"] in out and r["next_state"] in out
        shown = [t for t in r["tokens"] if t.strip()]
        v = next(v for t, v, m in zip(r["tokens"], r["signal"], r["mask"]) if m and t.strip()) \
            if any(r["mask"]) else None
        assert shown[0] in out and (v is None or f"[{v:+.2f}]" in out)
    assert out.count("    judge:  score") == len(rows)


def test_show_eval_and_json(run_dir, capsys):
    rc, out, _ = run(["show", str(run_dir), "--eval", "--step", "0"], capsys)
    evals = read_run(run_dir).evals[0]
    assert rc == 0 and "evaluation at step 0: mean score" in out and all(r["answer"] in out for r in evals)
    rc, out, _ = run(["show", str(run_dir), "--step", "2", "--json", "--limit", "2"], capsys)
    assert rc == 0 and [json.loads(x) for x in out.splitlines()] == read_run(run_dir).samples[2][:2]


@pytest.mark.parametrize("args, says", [
    (["--step", "7"], "step 7 is not in {d}: its samples cover steps 1-2"),
    (["--eval", "--step", "9"], "step 9 is not in {d}: its evaluations cover steps 0-2"),
    (["--step", "-1"], "argument --step: must be >= 0, got -1"),
])
def test_a_step_the_run_did_not_record_is_one_line(run_dir, capsys, args, says):
    rc, out, err = run(["show", str(run_dir)] + args, capsys)
    assert rc == 2 and not out and says.format(d=run_dir) in one_line(err)


def test_a_folder_without_a_run_is_one_line(tmp_path, capsys):
    rc, _, err = run(["show", str(tmp_path / "nowhere")], capsys)
    assert rc == 2 and one_line(err) == f"claw show: no run folder {tmp_path / 'nowhere'}"
    rc, _, err = run(["show", str(tmp_path)], capsys)
    assert rc == 2 and "holds no samples.jsonl or eval.jsonl" in one_line(err)
    (tmp_path / "eval.jsonl").write_text("{]\n", encoding="utf-8")
    rc, _, err = run(["show", str(tmp_path)], capsys)
    assert rc == 2 and "eval.jsonl line 1 is not a JSON record" in one_line(err)


def test_show_reads_the_live_servers_folder(tmp_path, capsys):
    """The live server's turns, with their judged samples, by the policy version that served them."""
    import openai

    from claw_lib.config import PPOConfig
    from claw_lib.serve import LiveServer, ServeConfig

    q = [{"role": "user", "content": "土耳其的首都是哪里？"}]
    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=12),
                      train=False)
    with LiveServer(cfg, port=0, out=tmp_path / "srv") as srv:
        c = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)
        a = c.chat.completions.create(model="tiny", messages=q, extra_headers={"X-Session-Id": "s"})
        c.chat.completions.create(model="tiny", messages=q + [{"role": "assistant", "content": a.choices[0].message.content},
                                                              {"role": "user", "content": "不对，是安卡拉。"}],
                                  extra_headers={"X-Session-Id": "s", "X-Session-Done": "true"})
        assert srv.wait_idle(60)
    rr = read_run(tmp_path / "srv")
    first = rr.samples[0][0]
    assert rr.kind == "serve" and first["next_state"] == "不对，是安卡拉。" and first["judge"]["score"] == -1
    rc, out, _ = run(["show", str(tmp_path / "srv"), "--step", "0"], capsys)
    assert rc == 0 and "live server" in out and a.choices[0].message.content.strip() in out and "不对，是安卡拉。" in out
    rc, _, err = run(["show", str(tmp_path / "srv"), "--eval"], capsys)
    assert rc == 2 and "has no evaluation" in one_line(err)
