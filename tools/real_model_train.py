"""Short training runs of a real model on this CPU, one after another, and their reading (issue 36;
docs/real_model.md, notebook 12).

Each run is ``claw train`` in its own process (``--task real``, per-model defaults: LoRA 16), one thread, no
checkpoint, its folder under results/real_model/runs/NAME (metrics.jsonl, eval.jsonl with the greedy answers,
samples.jsonl with the sampled responses and their signals). The reading splits each evaluation's score into
**correctness** (:meth:`claw_lib.toy.real_tasks.RealFact.check`) and **style** (the persona's own checks, e.g. the
student's no-restating / no-full-stop), so a style gain that costs accuracy shows. Writes
results/real_model/train_runs.{csv,md}::

    OMP_NUM_THREADS=1 .venv/bin/python tools/real_model_train.py --model /work/models/qwen05 --runs binary continuous attempt
    .venv/bin/python tools/real_model_train.py --summarise-only
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "results" / "real_model"

COMMON = ["--task", "real", "--device", "cpu", "--threads", "1", "--save-every", "0"]
#: name -> (claw train arguments, wall-clock limit in seconds)
RUNS = {
    "binary": (["--strategy", "binary", "--user", "correcting", "--steps", "2", "--batch-size", "4",
                "--eval-size", "8", "--eval-every", "2"], 600),
    "continuous": (["--strategy", "continuous", "--user", "correcting", "--steps", "2", "--batch-size", "4",
                    "--eval-size", "8", "--eval-every", "2"], 600),
    # the learning attempt: the student persona (its preferences remove tokens: the restated subject, the full
    # stop; the hinted teacher's gap sits on exactly those), combined, LoRA at 5.6x the recommended rate
    "attempt": (["--strategy", "combined", "--user", "student", "--steps", "4", "--batch-size", "4", "--lr", "1e-4",
                 "--eval-size", "16", "--eval-every", "2"], 1320),
}


def run(name: str, model: str) -> dict:
    """``claw train`` for one run, in its own process; returns its wall time and exit status."""
    args, limit = RUNS[name]
    folder = OUT / "runs" / name
    cmd = [sys.executable, "-m", "claw_lib.apps.cli", "train", "--model", model, *COMMON, *args, "--out", str(folder),
           "--force"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env, cwd=ROOT)
        rc, tail = r.returncode, (r.stdout + r.stderr)[-600:]
    except subprocess.TimeoutExpired:
        rc, tail = "timeout", f"stopped after {limit} s"
    info = {"name": name, "command": "claw train --model MODEL " + " ".join(COMMON + args), "wall_s": round(time.time() - t0),
            "rc": rc, "tail": tail}
    (folder / "run.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(name, info["wall_s"], "s", rc, tail[-300:], flush=True)
    return info


def _facts():
    from claw_lib.toy.real_tasks import real_facts

    return {f.question(): f for f in real_facts()}


def read_eval(folder: Path, user: str):
    """Per evaluated step: score (the user's), correct (share of right answers), style (mean share of the
    persona's checks met; None for the correcting user), n answers."""
    from claw_lib.toy.users import make_user

    facts, rows = _facts(), {}
    persona = make_user(user, None, 0) if user in ("student", "teacher") else None
    path = folder / "eval.jsonl"
    if not path.exists():
        return []
    for line in path.read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        f = facts[e["question"]]
        s = rows.setdefault(e["step"], {"score": [], "correct": [], "style": []})
        s["score"].append(e["score"])
        s["correct"].append(float(f.check(e["answer"])))
        if persona is not None:
            c = persona.checks(f, e["answer"])
            s["style"].append(sum(c.values()) / len(c))
    mean = lambda v: round(sum(v) / len(v), 3) if v else None  # noqa: E731
    return [{"step": k, "n": len(v["score"]), "score": mean(v["score"]), "correct": mean(v["correct"]),
             "style": mean(v["style"])} for k, v in sorted(rows.items())]


def read_steps(folder: Path):
    """Per training step: the samples' score and the stage times (metrics.jsonl)."""
    path = folder / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        h = json.loads(line)
        if h.get("step", 0) > 0:
            out.append({"step": h["step"], "reward/score": round(h.get("reward/score", float("nan")), 3),
                        **{k: round(v, 1) for k, v in h.items() if k.startswith("timing/") and isinstance(v, float)}})
    return out


def summarise(names) -> list:
    """train_runs.csv (one row per run and evaluated step) and train_runs.md (with the step times)."""
    rows, md = [], ["# Short training runs of the real model (CPU, 1 thread)", ""]
    for name in names:
        folder = OUT / "runs" / name
        if not (folder / "config.json").exists():
            continue
        cfg = json.loads((folder / "config.json").read_text())
        info = json.loads((folder / "run.json").read_text()) if (folder / "run.json").exists() else {}
        ev = read_eval(folder, cfg["task"]["user"])
        for e in ev:
            rows.append({"run": name, "strategy": cfg["strategy"], "user": cfg["task"]["user"], "lr": cfg["lr"],
                         "batch_size": cfg["batch_size"], **e})
        md += [f"## {name}: {cfg['strategy']}, {cfg['task']['user']} user, lr {cfg['lr']:g}, batch {cfg['batch_size']}",
               "", f"`{info.get('command', '')}`; wall {info.get('wall_s', '?')} s, exit {info.get('rc', '?')}", "",
               "| eval step | n | score | correct | style |", "|---|---|---|---|---|"]
        md += [f"| {e['step']} | {e['n']} | {e['score']} | {e['correct']} | {e['style']} |" for e in ev]
        steps = read_steps(folder)
        if steps:
            md += ["", "| step | " + " | ".join(k for k in steps[0] if k != "step") + " |", "|---" * len(steps[0]) + "|"]
            md += ["| " + " | ".join(str(v) for v in s.values()) + " |" for s in steps]
        md.append("")
    if rows:
        with open(OUT / "train_runs.csv", "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    (OUT / "train_runs.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="/work/models/qwen05")
    ap.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--summarise-only", action="store_true")
    a = ap.parse_args(argv)
    if not a.summarise_only:
        for name in a.runs:
            run(name, a.model)
    for r in summarise(list(RUNS)):
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
