"""The paper's personal-agent experiment, live: one arm of one persona on one seed, resumable; and the summary.

    python tools/personal_agent.py run --model /path/to/Qwen2.5-0.5B-Instruct --persona student --arm combined \\
        --seed 0 --runs runs/personal_agent --gsm8k test.jsonl        # the same command goes on after a kill
    python tools/personal_agent.py summary --runs runs/personal_agent --ceiling results/personal_agent/ceiling \\
        --out results/personal_agent/summary.json

``run`` starts ``claw serve`` on a free localhost port with the arm's settings (:data:`ARMS`; its folder
``RUNS/PERSONA/ARM/seedS/server`` is resumed by the same command), drives the stream with ``claw simulate --stream
gsm8k --resume`` (``sessions.jsonl``), waits until the server has judged every turn and trained every full batch,
then asks the held-out problems as side turns (never trained on), greedy, with no system prompt (the prompt-only
control: with it), and reads the persona's verdict and the gold answer (``heldout.jsonl``, one line per problem,
resumed). ``done.json`` holds the run's numbers (with the serving engine's prefix-cache counters since the server's
last start, ``prefix_cache``); the server's CPU time is added up over restarts (``progress.json``).

Arms: ``combined``, ``binary_rl`` and ``opd`` train with that strategy; ``no_training`` serves the untrained model
(its held-out numbers are the "before"); ``prompt_only`` serves the untrained model with the persona's preference as
a system prompt on every request. ``summary`` writes ``summary.json`` in the experiment's shape
(``{"model", "personas": {P: {"stream", "ceiling", "arms": {ARM: {...}}}}}``) from every finished run.
"""
from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.config import HOMEWORK_PERSONAS  # noqa: E402
from claw_lib.serve.process import cpu_seconds, start_claw_serve, wait_idle  # noqa: E402
from claw_lib.serve.simulate import sessions_until_stable  # noqa: E402
from claw_lib.toy.gsm8k import is_correct  # noqa: E402
from claw_lib.toy.homework import HOMEWORK_LANGS, checks, first_request, preference  # noqa: E402
from claw_lib.utils import atomic_write, check_out_file, limits_section, script_main  # noqa: E402
from claw_lib.utils import mean_se as utils_mean_se  # noqa: E402

#: arm -> (claw serve flags, claw simulate flags)
ARMS = {"combined": (["--strategy", "combined"], []), "binary_rl": (["--strategy", "binary_rl"], []),
        "opd": (["--strategy", "opd"], []), "no_training": (["--no-train"], []),
        "prompt_only": (["--no-train"], ["--prompted"])}
#: seconds to wait for a server to answer after it starts (a 0.5B model loads in 30-60 s on a loaded CPU)
START_TIMEOUT_S = 900


def run_dir(a) -> Path:
    return Path(a.runs) / f"{a.persona}_{a.lang}" / a.arm / f"seed{a.seed}"


def start_server(a, folder: Path):
    """``claw serve`` for the arm (:func:`claw_lib.serve.process.start_claw_serve`, its output in
    ``folder/serve.log``): (process, url) once it answers."""
    flags = ["--model", a.model, "--seed", a.seed, "--serving-format", a.serving_format, "--max-tokens-limit",
             a.max_tokens, "--batch-size", a.batch_size, "--max-new-tokens", a.max_tokens, "--threads", a.threads,
             "--out", folder / "server"] + ARMS[a.arm][0] + a.serve_args
    return start_claw_serve(flags, folder / "serve.log", START_TIMEOUT_S)


def drive_stream(a, url: str, folder: Path) -> None:
    """``claw simulate --stream gsm8k --resume`` against ``url`` (the sessions go to ``folder/sessions.jsonl``)."""
    cmd = [sys.executable, "-m", "claw_lib.apps.cli", "simulate", "--url", url, "--stream", "gsm8k", "--user",
           a.persona, "--lang", a.lang, "--seed", str(a.seed), "--concurrency", str(a.concurrency), "--max-tokens",
           str(a.max_tokens), "--max-turns", str(a.max_turns), "--timeout", "3600",
           "--wait-trained", str(a.wait_trained), "--session-prefix", f"{a.persona}-{a.arm}-s{a.seed}",
           "--out", str(folder / "sessions.jsonl"), "--resume"] + ARMS[a.arm][1] + problem_args(a, "stream")
    if a.sessions is not None:
        cmd += ["--sessions", str(a.sessions)]
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if rc:  # claw simulate printed its one-line reason; the same command resumes
        raise SystemExit(f"error: claw simulate exited with {rc} (its message is above); the same command resumes")


def problem_args(a, split: str) -> list:
    return ["--problems", a.problems] if a.problems else ["--split", split] + (["--gsm8k", a.gsm8k] if a.gsm8k else [])


def heldout(a, url: str, folder: Path) -> list:
    """Ask every held-out problem once as a side turn (no session: never trained on), greedy, ``a.concurrency`` at
    once; one line per problem in ``folder/heldout.jsonl`` (``{"problem", "accepted", "correct", "tokens",
    "version", "reply"}``), the ones already there kept. Returns the rows in the split's order."""
    from concurrent.futures import ThreadPoolExecutor

    from claw_lib.serve.homework_sim import stream_problems

    problems = stream_problems("heldout", a.gsm8k, a.heldout_problems or a.problems)[:a.heldout]
    path = folder / "heldout.jsonl"
    done = heldout_rows(folder)
    todo = [p for p in problems if p.index not in done]

    def ask(p):
        _, msgs = first_request(a.persona, a.lang, p, a.seed)
        if "--prompted" in ARMS[a.arm][1]:
            msgs = [{"role": "system", "content": preference(a.persona, a.lang)}] + msgs
        resp = httpx.post(url + "/v1/chat/completions", timeout=3600,
                          json={"messages": msgs, "temperature": 0.0, "max_tokens": a.max_tokens})
        if resp.status_code != 200:  # one line naming the server's answer; the problems answered so far are kept
            raise SystemExit(f"error: the server answered HTTP {resp.status_code} to held-out problem {p.index}: "
                             f"{resp.text[:200]}; see {folder / 'serve.log'}; the same command resumes")
        r = resp.json()
        reply = r["choices"][0]["message"]["content"] or ""
        row = {"problem": p.index, "accepted": all(checks(a.persona, reply).values()),
               "correct": is_correct(reply, p.gold), "tokens": r["usage"]["completion_tokens"],
               "version": (r.get("claw") or {}).get("policy_version"), "reply": reply}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return row

    with ThreadPoolExecutor(max_workers=a.concurrency) as pool:
        done.update({r["problem"]: r for r in pool.map(ask, todo)})
    return [done[p.index] for p in problems]


def mean_se(xs) -> tuple:
    """(mean, standard error) of 0/1 values, rounded to 4 places (:func:`claw_lib.utils.mean_se`); None where
    there are too few values for it (no value: both; one: the standard error)."""
    m, se = utils_mean_se(xs)
    return tuple(None if math.isnan(v) else round(v, 4) for v in (m, se))


def finish(a, folder: Path, rows: list, cpu_s: float, status: dict) -> dict:
    """``done.json``: the run's numbers (module docstring)."""
    sessions = [json.loads(x) for x in (folder / "sessions.jsonl").read_text(encoding="utf-8").splitlines() if x]
    stable = sessions_until_stable([s["first_accepted"] for s in sessions])
    style, style_se = mean_se([r["accepted"] for r in rows])
    correct, correct_se = mean_se([r["correct"] for r in rows])
    out = {"persona": a.persona, "lang": a.lang, "arm": a.arm, "seed": a.seed, "model": a.model,
           "sessions": len(sessions), "sessions_to_adaptation": stable,
           "first_accepted": [s["first_accepted"] for s in sessions],
           "first_correct": [s["first_correct"] for s in sessions],
           "first_tokens": [s["first_tokens"] for s in sessions], "first_version": [s["first_version"] for s in sessions],
           "heldout_n": len(rows), "heldout_style": style, "heldout_style_se": style_se,
           "heldout_correct": correct, "heldout_correct_se": correct_se, "cpu_minutes": round(cpu_s / 60, 1),
           "policy_version": status.get("policy_version"), "updates": status.get("updates"),
           "prefix_cache": status.get("prefix_cache"),
           "serving_format": a.serving_format, "max_tokens": a.max_tokens, "max_turns": a.max_turns,
           "wait_trained_s": getattr(a, "wait_trained", None)}
    with atomic_write(folder / "done.json", replace=True) as f:
        json.dump(out, f, indent=1)
    return out


def run(a) -> int:
    """One arm of one persona on one seed (module docstring); resumable: the same command goes on."""
    folder = run_dir(a)
    if (folder / "done.json").is_file():
        print(f"{folder}: done already ({folder / 'done.json'})")
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    progress = folder / "progress.json"
    spent = json.loads(progress.read_text())["cpu_s"] if progress.is_file() else 0.0
    # a kill (SIGTERM) becomes SystemExit: it stops a server still loading (start_claw_serve) or runs the finally
    # below (the server stopped, CPU time kept)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    proc, url = start_server(a, folder)
    try:
        drive_stream(a, url, folder)
        wait_idle(url, a.wait_s)
        rows = heldout(a, url, folder)
        status = httpx.get(url + "/v1/claw/status", timeout=30).json()
    finally:
        cpu = spent + cpu_seconds(proc.pid)
        with atomic_write(progress, replace=True) as f:
            json.dump({"cpu_s": cpu}, f)
        proc.terminate()
        proc.wait(timeout=120)
    out = finish(a, folder, rows, cpu, status)
    print(json.dumps({k: v for k, v in out.items() if not isinstance(v, list)}))
    return 0


def ceiling_of(path: Path) -> dict:
    """``{"untrained", "prompted", "hinted"}`` acceptance rates (greedy) of a ceiling file of
    tools/personal_agent_ceiling.py, with the counts they come from."""
    res = json.loads(path.read_text(encoding="utf-8"))
    r = res["results"][0]["greedy"]
    out = {}
    for cond, s in r.items():
        ran = s["n"] - s["too_long"]
        out[cond] = {"accepted": s["accepted"], "correct": s["correct"], "n": ran,
                     "rate": round(s["accepted"] / ran, 4) if ran else None}
    return {**out, "split": res["split"], "serving_format": res.get("serving_format", "full")}


def update_metrics(folder: Path) -> dict:
    """The server's updates (``server/metrics.csv``): how many, each one's seconds, and per update the mean gap
    |log pi_serving - log pi_trainer| per token (nats) and the mean importance ratio (upstream's
    ``train_rollout_logprob_abs_diff``; 1 and 0 when serving and training compute the same function)."""
    import csv

    path = folder / "server" / "metrics.csv"
    rows = list(csv.DictReader(path.open(encoding="utf-8"))) if path.is_file() else []
    col = lambda k: [round(float(r[k]), 4) for r in rows if r.get(k) not in (None, "")]  # noqa: E731
    return {"updates": len(rows), "update_s": col("timing/update_s"),
            "tis_abs_diff": col("tis/rollout_logprob_abs_diff"), "tis_ratio_mean": col("tis/ratio_mean"),
            "staleness_mean": col("staleness_mean")}


def run_record(folder: Path) -> dict:
    """A run's numbers: its ``done.json``, or for a run that has not finished (cut by a session's end) what its
    sessions so far say, marked ``"partial": true`` (held-out numbers only from problems already asked); with the
    server's updates (:func:`update_metrics`)."""
    if (folder / "done.json").is_file():
        return {**json.loads((folder / "done.json").read_text(encoding="utf-8")), "partial": False,
                **update_metrics(folder)}
    persona, lang = folder.parent.parent.name.rsplit("_", 1)
    rows = [json.loads(x) for x in (folder / "sessions.jsonl").read_text(encoding="utf-8").splitlines() if x]
    rows.sort(key=lambda r: r["session"])
    rows = [r for k, r in enumerate(rows) if r["session"] == k]  # the stream's unbroken start only
    progress = folder / "progress.json"
    cpu = json.loads(progress.read_text())["cpu_s"] / 60 if progress.is_file() else None
    config = folder / "server" / "config.json"
    model = json.loads(config.read_text(encoding="utf-8"))["serve"]["ppo"]["model"] if config.is_file() else None
    return {"persona": persona, "lang": lang, "arm": folder.parent.name, "seed": int(folder.name[4:]),
            "model": model, "sessions": len(rows), "partial": True,
            "sessions_to_adaptation": sessions_until_stable([r["first_accepted"] for r in rows]),
            "first_accepted": [r["first_accepted"] for r in rows], "heldout_n": 0,
            "cpu_minutes": None if cpu is None else round(cpu, 1), **update_metrics(folder)}


def arm_summary(runs: list) -> dict:
    """One arm over its seeds: per-seed sessions to adaptation (None: never), the held-out means over seeds (with
    the pooled standard error of the problems' 0/1 values), CPU minutes."""
    def pooled(key):
        xs = [v for r in runs for v in r[key]] if all(key in r for r in runs) else []
        return mean_se(xs)

    for r in runs:
        held = Path(r["_folder"]) / "heldout.jsonl"
        rows = [json.loads(x) for x in held.read_text(encoding="utf-8").splitlines() if x] if held.is_file() else []
        r["_style"], r["_correct"] = [x["accepted"] for x in rows], [x["correct"] for x in rows]
        r["heldout_n"] = len(rows)
    style, style_se = pooled("_style")
    correct, correct_se = pooled("_correct")
    return {"seeds": [r["seed"] for r in runs], "sessions": [r["sessions"] for r in runs],
            "sessions_to_adaptation": [r["sessions_to_adaptation"] for r in runs],
            "first_accepted": [sum(r["first_accepted"]) for r in runs], "partial": [r["partial"] for r in runs],
            "heldout_n": [r["heldout_n"] for r in runs], "heldout_style": style, "heldout_style_se": style_se,
            "heldout_correct": correct, "heldout_correct_se": correct_se,
            "cpu_minutes": [r["cpu_minutes"] for r in runs],
            **{k: [r[k] for r in runs] for k in ("updates", "update_s", "tis_abs_diff", "tis_ratio_mean",
                                                 "staleness_mean")}}


def summary(a) -> int:
    """``summary.json`` (module docstring) from every run under ``--runs`` (finished or partial: :func:`run_record`)
    and the ceiling files."""
    out = check_out_file(a.out, a.force)
    found = {}
    for f in sorted(Path(a.runs).glob("*/*/seed*/sessions.jsonl")):
        r = {**run_record(f.parent), "_folder": str(f.parent)}
        found.setdefault((r["persona"], r["lang"]), {}).setdefault(r["arm"], []).append(r)
    personas, model = {}, None
    for (persona, lang), arms in found.items():
        model = model or next((r["model"] for rs in arms.values() for r in rs if r["model"]), None)
        ceil = Path(a.ceiling) / f"{persona}_{lang}.json" if a.ceiling else None
        personas[persona if lang == "en" else f"{persona}_{lang}"] = {
            "lang": lang, "stream": next(iter(arms.values()))[0]["sessions"],
            "ceiling": ceiling_of(ceil) if ceil is not None and ceil.is_file() else None,
            "arms": {arm: arm_summary(rs) for arm, rs in arms.items()}}
    for ceil in sorted(Path(a.ceiling).glob("*_*.json")) if a.ceiling else ():  # personas measured, not yet run
        persona, lang = ceil.stem.rsplit("_", 1)
        key = persona if lang == "en" else f"{persona}_{lang}"
        if key not in personas:
            personas[key] = {"lang": lang, "stream": None, "ceiling": ceiling_of(ceil), "arms": {}}
    with atomic_write(out, replace=a.force) as f:
        json.dump({"model": a.model_name or (Path(model).name if model else None), "personas": personas}, f, indent=1)
    print(f"summary: {out} ({sum(len(p['arms']) for p in personas.values())} arms)")
    return 0


def ceiling_table(folder: Path) -> list:
    """Markdown lines: per ceiling file, acceptance and correctness of each condition (greedy), and the hints."""
    lines = ["| persona | lang | problems | untrained: accepted, correct | prompted: accepted, correct | "
             "hinted: accepted, correct (replies that drew a hint) |", "|---|---|---|---|---|---|"]
    for f in sorted(folder.glob("*.json")):
        res = json.loads(f.read_text(encoding="utf-8"))
        for r in res["results"]:
            g = r["greedy"]
            cells = [f"{g[c]['accepted']}/{g[c]['n'] - g[c]['too_long']}, {g[c]['correct']}/{g[c]['n'] - g[c]['too_long']}"
                     for c in ("untrained", "prompted", "hinted")]
            lines.append(f"| {r['persona']} | {r['lang']} | {len(r['problems'])} | " + " | ".join(cells) + " |")
    return lines


def landing_lines(folder: Path) -> list:
    """Markdown lines: where OPD's negative advantage lands on the untrained replies (share of the negative mass
    per token class, raw and with the drift controls), from the ceiling files that have it."""
    lines = ["| persona | lang | variant | replies | first | style | number | other |",
             "|---|---|---|---|---|---|---|---|"]
    for f in sorted(folder.glob("*.json")):
        for r in json.loads(f.read_text(encoding="utf-8"))["results"]:
            land = r.get("landing")
            for variant, per in (land or {}).get("classes", {}).items():
                cells = [f"{per[c]['negative_share']:.2f} ({per[c]['most_negative']})" for c in
                         ("first", "style", "number", "other")]
                lines.append(f"| {r['persona']} | {r['lang']} | {variant} | {land['replies']} | " + " | ".join(cells)
                             + " |")
    return lines


def runs_table(summary_data: dict) -> list:
    """Markdown lines: per persona and arm, the live runs' numbers."""
    lines = ["| persona | arm | seeds | sessions | first replies accepted | sessions to adaptation | held-out style "
             "(s.e.) | held-out correct (s.e.) | CPU min | updates (minutes each: median (min-max)) | serving vs "
             "trainer log-prob gap per token, nats: median (min-max) over updates | staleness, versions: median "
             "(min-max) over updates |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for persona, p in summary_data["personas"].items():
        for arm, r in p["arms"].items():
            adapt = ", ".join(("not yet" if part else "never") if x is None else str(x)
                              for x, part in zip(r["sessions_to_adaptation"], r["partial"]))
            sessions = ", ".join(f"{n}{' (cut)' if part else ''}" for n, part in zip(r["sessions"], r["partial"]))
            lines.append(f"| {persona} | {arm} | {len(r['seeds'])} | {sessions} | {r['first_accepted']} | "
                         f"{adapt} | {r['heldout_style']} ({r['heldout_style_se']}) | {r['heldout_correct']} "
                         f"({r['heldout_correct_se']}) | {r['cpu_minutes']} | "
                         + "; ".join(f"{n} ({spread([x / 60 for x in u], 1)})"
                                     for n, u in zip(r["updates"], r["update_s"]))
                         + " | " + "; ".join(spread(g, 2) for g in r["tis_abs_diff"])
                         + " | " + "; ".join(spread(g, 2) for g in r.get("staleness_mean", [[]] * len(r["seeds"])))
                         + " |")
    return lines


def spread(xs, digits: int) -> str:
    """``"median (min-max)"`` of a run's per-update values, rounded to ``digits``; ``"-"`` when there are none."""
    if not xs:
        return "-"
    xs = sorted(xs)
    mid = (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2
    return f"{mid:.{digits}f} ({xs[0]:.{digits}f}-{xs[-1]:.{digits}f})"


def heldout_rows(folder: Path) -> dict:
    """{problem index: row} of a run's ``heldout.jsonl`` ({} when it has none yet)."""
    path = folder / "heldout.jsonl"
    if not path.is_file():
        return {}
    return {r["problem"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r}


def heldout_table(runs_root: Path) -> list:
    """Markdown lines: per persona, seed and arm, held-out acceptance and correctness (mean, s.e.), and each arm's
    paired difference from the untrained model (``no_training``) on the problems both answered: mean of the
    per-problem differences and its standard error. The untrained run of the same seed where there is one, else the
    lowest seed's, named in the seed cell ("1 (vs 0)"): its held-out replies are greedy with no training, so its seed
    changes only its stream (the int8 copy's batched arithmetic can still flip a token)."""
    lines = ["| persona | seed | arm | problems | accepted (s.e.) | correct (s.e.) | accepted - untrained (s.e.) | "
             "correct - untrained (s.e.) |", "|---|---|---|---|---|---|---|---|"]
    for persona_dir in sorted(p for p in runs_root.iterdir() if p.is_dir()):
        bases = {f.name: (f, rows) for f in sorted(persona_dir.glob("no_training/seed*")) for rows in [heldout_rows(f)]
                 if rows}  # seed folder name -> (untrained run, its held-out rows), each file read once
        if not bases:
            continue
        for folder in sorted(persona_dir.glob("*/seed*"), key=lambda f: (int(f.name[4:]), f.parent.name)):
            rows = heldout_rows(folder)
            if not rows:
                continue
            base, before = bases.get(folder.name) or bases[min(bases, key=lambda n: int(n[4:]))]
            cells = [f"{m:.2f} ({se:.2f})" for m, se in (mean_se([r[k] for r in rows.values()])
                                                          for k in ("accepted", "correct"))]
            common = sorted(set(rows) & set(before))
            for key in ("accepted", "correct"):
                if folder == base:  # the untrained model itself
                    cells.append("-")
                    continue
                m, se = mean_se([int(rows[k][key]) - int(before[k][key]) for k in common])
                cells.append(f"{m:+.2f} ({se:.2f})")
            seed = folder.name[4:] + ("" if base.name == folder.name else f" (vs {base.name[4:]})")
            lines.append(f"| {persona_dir.name} | {seed} | {folder.parent.name} | {len(rows)} | " + " | ".join(cells)
                         + " |")
    return lines


def checks_table(runs_root: Path) -> list:
    """Markdown lines: per persona, seed and arm, how many held-out replies pass each of the persona's acceptance
    checks (:func:`claw_lib.toy.homework.checks`, read again from the stored reply) and how many stopped at the run's
    token cap (``max_tokens`` in its ``done.json``; a reply cut there has no closing words and no final number)."""
    lines = []
    for persona_dir in sorted(p for p in runs_root.iterdir() if p.is_dir()):
        persona = persona_dir.name.rsplit("_", 1)[0]
        held = {f: list(heldout_rows(f).values()) for f in persona_dir.glob("*/seed*")}
        held = {f: rows for f, rows in held.items() if rows}
        if persona not in HOMEWORK_PERSONAS or not held:
            continue
        names = list(checks(persona, ""))
        lines += ["", f"| persona | seed | arm | problems | {' | '.join(names)} | cut at the token cap |",
                  "|---|---|---|---|" + "---|" * (len(names) + 1)]
        for folder in sorted(held, key=lambda f: (f.name, f.parent.name)):
            rows = held[folder]
            passed = [checks(persona, r["reply"]) for r in rows]
            done = folder / "done.json"
            cap = json.loads(done.read_text(encoding="utf-8")).get("max_tokens") if done.is_file() else None
            cut = "-" if cap is None else str(sum(r["tokens"] >= cap for r in rows))
            lines.append(f"| {persona_dir.name} | {folder.name[4:]} | {folder.parent.name} | {len(rows)} | "
                         + " | ".join(str(sum(c[n] for c in passed)) for n in names) + f" | {cut} |")
    return lines


def figure(runs_root: Path, path: Path) -> None:
    """``path`` (PNG): per live run, the first replies accepted so far against the session (the stream's order)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for f in sorted(runs_root.glob("*/*/seed*/sessions.jsonl")):
        d = run_record(f.parent)
        acc = [int(x) for x in d["first_accepted"]]
        ax.plot(range(1, len(acc) + 1), [sum(acc[:k + 1]) for k in range(len(acc))],
                label=f"{d['persona']} {d['arm']} seed {d['seed']}")
    ax.set_xlabel("session (the stream's order)")
    ax.set_ylabel("first replies accepted so far")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: the report's closing section (claw_lib.utils.limits_section): what the runs behind it do not establish
LIMITS = [
    "Anything beyond this model (Qwen2.5-Coder-0.5B-Instruct, a GGUF re-quantisation of the AWQ checkpoint, converted "
    "to fp32) and this machine (2 shared CPU cores): the paper's and Reef's models are 4B-9B on GPUs.",
    "A difference between arms beyond one seed: the paired differences are over the problems of one seed's runs, so "
    "their standard errors leave out how much another seed would move them; a run cut short (its sessions marked "
    "'(cut)') says only what its sessions so far say.",
    "The ceiling beyond its problems: 8 dev problems per persona, greedy, decoded from the int8 serving copy (its "
    "greedy answers can differ from full precision's), answers cut at 320 tokens (a cut answer has no final number, "
    "so correctness is a lower bound).",
    "A tuned learning rate: the teacher's trained arms train LoRA adapters at 1e-4 (5.6x the kit's per-model default "
    "1.8e-5, at which three updates had not changed a 0.5B model's greedy answers), chosen before the run and not "
    "tuned on dev problems.",
    "CPU minutes across machines: the student's Binary RL and prompt-only runs and the teacher's Binary RL seed 1 ran "
    "on a later machine (2 cores that compute bfloat16 natively; the weights kept in float32, as in every run), so "
    "their CPU minutes compare with each other, not with the other runs'.",
    "The paper's protocol exactly: the user is the kit's scripted persona (no LLM), a session allows two answers "
    "instead of upstream's eight (the controls, which do not train, one: only the first is measured), and the judge "
    "is the kit's rule judge.",
]


def tokens_section(out: Path) -> list:
    """The report's token colours (``tokens.json`` beside it, written by tools/personal_agent_tokens.py; drawn as
    ``tokens.png``), or nothing where no trained run has been read that way yet."""
    src = out.with_name("tokens.json")
    if not src.is_file():
        return []
    import importlib.util
    spec = importlib.util.spec_from_file_location("personal_agent_tokens", Path(__file__).with_name(
        "personal_agent_tokens.py"))  # the sibling tool that wrote tokens.json draws it
    tokens = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tokens)
    data = json.loads(src.read_text(encoding="utf-8"))
    tokens.draw(data, out.with_name("tokens.png"))
    moved = {k: sum(abs(x) > 0.1 for x in data[k]["delta"]) for k in ("before", "after")}
    return ["## What training changed, token by token", "",
            f"Held-out problem {data['problem']} (chosen by the rule: {data['chosen_by']}), the untrained model's reply "
            f"(before) and {data['run']}'s (after), each token coloured by the change in its log-probability under "
            f"`{data['adapter']}` (blue: more likely after training, red: less). Tokens moved by more than 0.1 nats: "
            f"{moved['before']} of {len(data['before']['delta'])} before, {moved['after']} of "
            f"{len(data['after']['delta'])} after.", "", "![token colours](tokens.png)", ""]


def report(a) -> int:
    """``report.md`` (and ``curves.png`` beside it): the ceiling, where OPD's signal lands, the live runs."""
    out = check_out_file(a.out, a.force)
    data = json.loads(Path(a.summary).read_text(encoding="utf-8"))
    fig = out.with_name("curves.png")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure(Path(a.runs), fig)
    text = ["# The personal agent on a real model: ceiling and live runs", "",
            f"Model: {data['model']}. Written by `tools/personal_agent.py report` from `{Path(a.summary).name}`, the "
            "ceiling files of `tools/personal_agent_ceiling.py` and the runs' `done.json`.", "",
            "## The ceiling: what the model does for each persona before training (dev problems, greedy)", ""]
    text += ceiling_table(Path(a.ceiling)) + ["", "## Where OPD's negative advantage lands on the untrained replies",
                                              "", "Share of the negative advantage mass per token class (in brackets: "
                                              "replies whose most negative token is there).", ""]
    text += landing_lines(Path(a.ceiling)) + ["", "## The live runs", ""] + runs_table(data)
    text += ["", "## Held-out problems, no system prompt (the prompt-only control: with it), greedy", "",
             "Each arm against the untrained model on the same problems (paired: the mean of the per-problem "
             "differences and its standard error).", ""] + heldout_table(Path(a.runs))
    text += ["", "The same replies check by check: how many pass each of the persona's checks (a reply is accepted "
             "when it passes all), and how many stopped at the token cap."] + checks_table(Path(a.runs))
    text += ["", f"![first replies accepted per session]({fig.name})", ""] + tokens_section(out)
    text += [limits_section(LIMITS), ""]
    with atomic_write(out, replace=a.force) as f:
        f.write("\n".join(text))
    print(f"report: {out}")
    return 0


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="one arm of one persona on one seed (resumable)")
    r.add_argument("--model", default="tiny", help="the tiny GPT (default) or a local Hugging Face folder")
    r.add_argument("--persona", default="student", choices=HOMEWORK_PERSONAS)
    r.add_argument("--lang", default="en", choices=HOMEWORK_LANGS)
    r.add_argument("--arm", default="combined", choices=tuple(ARMS))
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--runs", default="runs/personal_agent", help="the runs' folder (default runs/personal_agent)")
    r.add_argument("--gsm8k", default=None, help="GSM8K's test.jsonl (default: $CLAW_GSM8K)")
    r.add_argument("--problems", default=None, help="a GSM8K-shaped file as the stream instead (the tests)")
    r.add_argument("--heldout-problems", default=None, help="a GSM8K-shaped file as the held-out set (the tests)")
    r.add_argument("--sessions", type=int, default=None, help="the stream's first N sessions only")
    r.add_argument("--heldout", type=int, default=50, help="the held-out split's first N problems (default all 50)")
    r.add_argument("--concurrency", type=int, default=4, help="sessions at once (default 4)")
    r.add_argument("--max-tokens", type=int, default=320, help="longest answer in tokens (default 320)")
    r.add_argument("--batch-size", type=int, default=4, help="samples per update (default 4)")
    r.add_argument("--max-turns", type=int, default=8,
                   help="answers per session before the user gives up (default 8, as upstream; the first answer is "
                        "the one judged, the complaint on it is its training signal)")
    r.add_argument("--serving-format", default="full", choices=("full", "bf16", "int8"))
    r.add_argument("--threads", type=int, default=1, help="the server's torch threads (default 1)")
    r.add_argument("--wait-trained", type=float, default=120.0, metavar="SECONDS",
                   help="after each session wait at most this long for the server to judge and train what it has "
                        "(claw simulate's flag; default 120; longer: updates land between sessions on a slow CPU)")
    r.add_argument("--wait-s", type=float, default=3600.0, help="longest wait for the last updates (default 3600)")
    r.add_argument("--serve-args", nargs=argparse.REMAINDER, default=[], help="more claw serve flags, last")
    s = sub.add_parser("summary", help="summary.json from the finished runs")
    s.add_argument("--runs", default="runs/personal_agent")
    s.add_argument("--ceiling", default=None, help="the folder of the ceiling files (PERSONA_LANG.json)")
    s.add_argument("--out", required=True)
    s.add_argument("--model-name", default=None, help="the model's name in the summary (default: its folder's)")
    s.add_argument("--force", action="store_true", help="replace --out")
    rp = sub.add_parser("report", help="report.md and curves.png from summary.json, the ceiling and the runs")
    rp.add_argument("--summary", required=True)
    rp.add_argument("--ceiling", required=True)
    rp.add_argument("--runs", default="runs/personal_agent")
    rp.add_argument("--out", required=True)
    rp.add_argument("--force", action="store_true", help="replace --out")
    a = ap.parse_args(argv)
    if a.cmd == "run" and a.wait_trained < 0:
        raise ValueError(f"--wait-trained must be 0 or more seconds, got {a.wait_trained}")
    for name in ("sessions", "heldout", "concurrency", "max_tokens", "batch_size", "max_turns"):
        v = getattr(a, name, None)
        if v is not None and v < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {v}")
    return a


def main(argv=None) -> int:
    a = parse(argv)
    return {"run": run, "summary": summary, "report": report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(script_main(main))
