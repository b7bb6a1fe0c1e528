"""A real model as the judge of training (issue 36): how ``claw train --judge MODEL`` reads the real-world turns.

The policy (the same real model) answers real-world questions (:mod:`claw_lib.toy.real_tasks`, the training split)
by sampling at temperature 1 as a training rollout does, the three users of ``--task real`` (correcting, student,
teacher) reply, and each turn is judged as the training loop judges it: :func:`claw_lib.signals.opd.judge_turn` with
the judge ``claw train --judge MODEL --judge-votes M`` builds (:func:`claw_lib.apps.train_judge.training_judge`:
OpenClaw-RL's prompts, M sampled votes of at most 512 new tokens at temperature 0.6), and with the rule judge for
comparison. Measured per turn:

* **agreement** of the judge's majority vote with the simulated user: +1 where the user is satisfied (score 1),
  -1 where not (a correction, a restated preference, a vague complaint); a 0 vote agrees with neither;
* **failed votes** (no valid ``\\boxed{}``: ``judge/failed_share`` in training);
* **hints accepted** on the unsatisfied turns (a good vote: ``\\boxed{1}`` and a hint longer than 10 characters),
  and whether the hint is a real one (it states the true answer, or names the user's preference: :func:`is_real`);
* the **10-character rule on Chinese hints**: hints of good votes that the rule rejects (10 characters or fewer),
  how many of them are real hints, each listed;
* **seconds per turn** (the judge's two questions, its M votes each, one turn at a time as the loop asks).

Turns are judged one after another, round-robin over the users and languages, and appended to the CSV as they
finish, so ``--minutes`` can stop early with a balanced sample; ``--summarise-only`` rewrites the Markdown from the
CSV. Writes results/real_model/judge.{csv,md}::

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python tools/real_model_judge.py --model /work/models/qwen05 --minutes 45 --force
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "results" / "real_model"
PERSONAS = ("correcting", "student", "teacher")
#: words of each user's stated preference: a hint that names one of them is a real hint about the style
PREFERENCE_KEYS = {"student": ("句号", "答案", "正式", "full stop", "casual", "just the answer"),
                   "teacher": ("好问题", "加油", "完整", "Good question", "Keep it up", "full sentence")}
FIELDS = ("index", "persona", "lang", "kind", "question", "truth", "response", "correct", "next_state", "user_score",
          "user_kind", "expected", "judge_score", "judge_votes", "judge_failed", "judge_hint", "hint_votes",
          "rule_score", "rule_hint", "seconds", "cpu_seconds", "raw")


def is_real(hint: str, fact, persona: str) -> bool:
    """A hint that says something the user meant: it states the true answer (and none of the listed wrong ones:
    :meth:`~claw_lib.toy.real_tasks.RealFact.check`) or names the persona's preference (:data:`PREFERENCE_KEYS`)."""
    h = (hint or "").strip()
    if not h:
        return False
    low = h.casefold()
    return fact.check(h) or any(k.casefold() in low for k in PREFERENCE_KEYS.get(persona, ()))


def make_turns(model, tok, n: int, seed: int, max_new_tokens: int):
    """n turns, round-robin over :data:`PERSONAS`: (persona, env, task, the policy's sampled answer)."""
    from claw_lib.models.lm import generate
    from claw_lib.toy.real_tasks import RealTaskEnv

    per = -(-n // len(PERSONAS))
    by = {}
    for k, p in enumerate(PERSONAS):
        env = RealTaskEnv(user=p, split="train", seed=seed + 101 * k, tokenizer=tok)
        tasks = env.sample(per)
        gens = generate(model, tok, [t.prompt for t in tasks], max_new_tokens=max_new_tokens, temperature=1.0,
                        seed=seed + k)
        by[p] = [(p, env, t, g.text) for t, g in zip(tasks, gens)]
    return [by[p][i] for i in range(per) for p in PERSONAS][:n]


def judge_row(index: int, turn, judge, cfg) -> dict:
    """One turn judged by ``judge`` (timed) and by the rule judge: a CSV row of :data:`FIELDS`."""
    from claw_lib.signals.opd import judge_turn

    persona, env, task, response = turn
    fb = env.step(task, response)
    t0, c0 = time.perf_counter(), time.process_time()
    ts = judge_turn(response, fb.next_state, judge, cfg.opd, fb.role)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    rule = judge_turn(response, fb.next_state, None, cfg.opd, fb.role)
    f = task.fact
    return {"index": index, "persona": persona, "lang": f.lang, "kind": f.kind, "question": f.question(),
            "truth": f.truth, "response": response, "correct": int(f.check(response)), "next_state": fb.next_state,
            "user_score": round(fb.score, 4), "user_kind": fb.kind, "expected": 1 if fb.score >= 1 else -1,
            "judge_score": ts.score, "judge_votes": json.dumps([v.score for v in ts.votes]),
            "judge_failed": ts.failed_votes[0], "judge_hint": ts.hint or "",
            "hint_votes": json.dumps([{"positive": v.positive, "hint": v.hint} for v in ts.hint_votes],
                                     ensure_ascii=False),
            "rule_score": rule.score, "rule_hint": rule.hint or "", "seconds": round(secs, 2),
            "cpu_seconds": round(cpu, 2),
            "raw": json.dumps([v.text for v in ts.votes] + [v.text for v in ts.hint_votes], ensure_ascii=False)}


def read_rows(path: Path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _fact(row):
    from claw_lib.toy.real_tasks import real_facts

    return next(f for f in real_facts() if f.lang == row["lang"] and f.question() == row["question"])


def agreement(rows, key: str) -> dict:
    """Share of turns whose majority vote (``key``: judge_score or rule_score) is the user's sign; its counts; and the
    share among the turns whose vote is not 0 (``agree_voted``: when the judge gives a verdict, is it the user's?)."""
    got = [(int(r[key]), int(r["expected"])) for r in rows]
    table = {f"{e:+d}/{s:+d}": sum(1 for g, x in got if (x, g) == (e, s)) for e in (1, -1) for s in (1, 0, -1)}
    voted = [g == e for g, e in got if g != 0]
    return {"n": len(got), "agree": float(np.mean([g == e for g, e in got])) if got else float("nan"),
            "voted": len(voted), "agree_voted": float(np.mean(voted)) if voted else float("nan"), **table}


def hint_stats(rows, plain: bool = False) -> dict:
    """Hints on the unsatisfied turns (judge and rule), and the 10-character rule on the judge's zh hints. ``plain``:
    the judge was asked the "plain" hint question (``--hint-prompt plain``), whose answers have no box to fail."""
    from claw_lib.signals.judges import HINT_DECISIONS, parse_boxed

    unsat = [r for r in rows if int(r["expected"]) == -1]
    real = lambda r, h: is_real(h, _fact(r), r["persona"])  # noqa: E731
    short = []  # the good votes' hints the rule rejects in Chinese turns
    for r in rows:
        for v in json.loads(r["hint_votes"]):
            if r["lang"] == "zh" and v["positive"] and v["hint"] and len(v["hint"].strip()) <= 10:
                short.append((r, v["hint"].strip()))
    zh_good = [(r, v["hint"]) for r in rows for v in json.loads(r["hint_votes"])
               if r["lang"] == "zh" and v["positive"] and v["hint"]]
    failed = [(r, t) for r in unsat for t in json.loads(r["raw"])[len(json.loads(r["judge_votes"])):]
              if not plain and parse_boxed(t, HINT_DECISIONS) is None]  # hint votes without a valid decision box
    texts = [t for r in rows for t in json.loads(r["raw"])[len(json.loads(r["judge_votes"])):]]  # every hint answer
    return {"unsatisfied": len(unsat), "failed_hint_votes": len(failed), "hint_answers": len(texts),
            "with_block": sum("[HINT_START]" in t and "[HINT_END]" in t for t in texts),
            "with_box": sum("\\boxed{" in t for t in texts),
            "failed_hint_real": sum(real(r, t) for r, t in failed),
            "judge_accepted": sum(bool(r["judge_hint"]) for r in unsat),
            "judge_real": sum(bool(r["judge_hint"]) and real(r, r["judge_hint"]) for r in unsat),
            "rule_accepted": sum(bool(r["rule_hint"]) for r in unsat),
            "rule_real": sum(bool(r["rule_hint"]) and real(r, r["rule_hint"]) for r in unsat),
            "judge_hint_on_satisfied": sum(bool(r["judge_hint"]) for r in rows if int(r["expected"]) == 1),
            "zh_good_hints": len(zh_good), "zh_rejected_short": len(short),
            "zh_rejected_real": sum(real(r, h) for r, h in short), "short": short,
            "rule_zh_short": sum(1 for r in unsat if r["lang"] == "zh" and r["next_state"].strip()
                                 and len(r["next_state"].strip()) <= 10)}


def rule_on_answers(min_chars: int = 10) -> list:
    """The 10-character rule on hints a judge could write for each of the 154 questions, per language: the correcting
    user's correction (the full sentence after "不对，" / "No, "), the full sentence alone, and the shortest real hint
    ("是X。" / "It is X."): (language, form, questions, rejected as ``min_chars`` characters or fewer)."""
    from claw_lib.toy.real_tasks import real_facts

    forms = {"correction": lambda f: ("不对，" if f.lang == "zh" else "No, ") + f.sentence,
             "full sentence": lambda f: f.sentence,
             "shortest (是X。 / It is X.)": lambda f: f"是{f.truth}。" if f.lang == "zh" else f"It is {f.truth}."}
    out = []
    for lang in ("zh", "en"):
        facts = [f for f in real_facts() if f.lang == lang]
        out += [(lang, name, len(facts), sum(len(make(f).strip()) <= min_chars for f in facts))
                for name, make in forms.items()]
    return out


def row_failed(r, plain: bool = False) -> int:
    """A judged turn's failed votes, counted again from its stored votes and answers by the training's own rule
    (:attr:`claw_lib.signals.opd.TurnSignal.failed_votes`; a plain hint answer read as ``parse_plain_hint`` reads it),
    so that a CSV written before that rule knew plain votes is read as training reads it now."""
    from claw_lib.signals.judges import HintVote, Vote, parse_plain_hint
    from claw_lib.signals.opd import TurnSignal

    rl = json.loads(r["judge_votes"])
    hints = [parse_plain_hint(t) if plain else HintVote(False, None, t) for t in json.loads(r["raw"])[len(rl):]]
    return TurnSignal(0, None, [Vote(v) for v in rl], hints).failed_votes[0]


def summarise(rows, settings: str = "", plain: bool = False) -> str:
    """The Markdown report of the judged turns (``settings``: a line saying how they were made; ``plain``: the hint
    question was the "plain" one)."""
    from claw_lib.utils import limits_section

    if not rows:
        return "# A real model as the judge of training\n\nNo turn was judged.\n"
    secs = np.array([float(r["seconds"]) for r in rows])
    cpu = np.array([float(r["cpu_seconds"]) for r in rows])
    votes = sum(len(json.loads(r["judge_votes"])) + len(json.loads(r["hint_votes"])) for r in rows)
    failed = sum(row_failed(r, plain) for r in rows)
    rl_votes = [v for r in rows for v in json.loads(r["judge_votes"])]
    h = hint_stats(rows, plain)
    lines = _reading(rows, h, plain) + [""] + _agreement_lines(rows) + [""] + _hint_lines(h)
    head = [f"**{len(rows)} turns** judged; **failed votes {failed} of {votes} = {failed / max(votes, 1):.1%}** "
            f"(judge/failed_share): Binary RL votes {sum(v is None for v in rl_votes)} of {len(rl_votes)}, hint votes "
            f"{failed - sum(v is None for v in rl_votes)} of {votes - len(rl_votes)}; **seconds per turn** (the judge alone, one turn at a time, one thread): CPU "
            f"mean {cpu.mean():.1f}, median {np.median(cpu):.1f}, max {cpu.max():.1f}; wall mean {secs.mean():.1f} on "
            "the shared machine."]
    return "\n".join(["# A real model as the judge of training (tools/real_model_judge.py)", "", settings, ""] + head
                     + [""] + lines
                     + ["", "Every turn, with the judge's raw answers: judge.csv.", "",
                        limits_section(LIMITS["plain" if plain else "openclaw"])]) + "\n"


def _reading(rows, h, plain: bool = False):
    """The report's conclusion, from the numbers."""
    a, rule = agreement(rows, "judge_score"), {(lang, form): k for lang, form, _, k in rule_on_answers()}
    votes = (f"**Reading.** The judge's Binary RL votes that parse agree with the simulated user on "
             f"{a['agree_voted']:.0%} of the {a['voted']} turns it voted on; on the other {a['n'] - a['voted']} of "
             f"{a['n']} its vote failed or was 0 (no Binary RL sample). ")
    if plain:
        hints = (f"Asked the plain hint question, it gave an accepted hint on {h['judge_accepted']} of the "
                 f"{h['unsatisfied']} unsatisfied turns ({h['judge_real']} real: the true answer or the user's "
                 f"preference) and on {h['judge_hint_on_satisfied']} satisfied turns (hints where there was nothing to "
                 f"learn); the rule judge: {h['rule_accepted']} ({h['rule_real']} real). ")
    elif h["judge_accepted"] == 0:
        hints = (f"{h['judge_accepted']} of its {h['hint_answers']} hint answers gave an accepted hint ({h['with_box']} "
                 "had a decision box at all), so OPD and combined would get no hint from it: with this model as its own "
                 "judge, training is Binary RL on the turns it voted on. ")
    else:
        hints = (f"{h['judge_accepted']} of its {h['hint_answers']} hint answers gave an accepted hint "
                 f"({h['judge_real']} real). ")
    short = "The 10-character rule had nothing to reject here; on" if not h["zh_rejected_short"] else \
        f"The 10-character rule rejected {h['zh_rejected_short']} of its Chinese hints ({h['zh_rejected_real']} real); on"
    return [votes + hints + short + " real hints a judge could write it rejects every shortest Chinese hint (是X。), "
            f"{rule['zh', 'full sentence']} of 77 Chinese full sentences and {rule['en', 'shortest (是X。 / It is X.)']} "
            "of 77 shortest English ones."]


def _agreement_lines(rows):
    out = ["## Agreement with the simulated user", "",
           "Expected vote: +1 where the user is satisfied (score 1), -1 where not. Counts `user/vote`.", "",
           "| users | judge | turns | agree | +1/+1 | +1/0 | +1/-1 | -1/+1 | -1/0 | -1/-1 | agree where it voted +-1 |",
           "|" + "---|" * 11]
    for name, sub in [("all", rows)] + [(p, [r for r in rows if r["persona"] == p]) for p in PERSONAS] \
            + [(lang, [r for r in rows if r["lang"] == lang]) for lang in ("zh", "en")]:
        for key, who in (("judge_score", "real model"), ("rule_score", "rule judge")):
            a = agreement(sub, key)
            out.append(f"| {name} | {who} | {a['n']} | {a['agree']:.2f} | " + " | ".join(
                str(a[f"{e:+d}/{s:+d}"]) for e in (1, -1) for s in (1, 0, -1)) + f" | {a['agree_voted']:.2f} of "
                f"{a['voted']} |")
    return out + ["", "The rule judge reads the simulated users' own phrasing (its markers are theirs), so its agreement "
                  "is the ceiling of this setting, not a rival's score."]


def _hint_lines(h):
    out = ["## Hints", "",
           f"Unsatisfied turns: {h['unsatisfied']}. Accepted hint (a good vote, longer than 10 characters): real model "
           f"{h['judge_accepted']} ({h['judge_real']} real: the true answer or the user's preference), rule judge "
           f"{h['rule_accepted']} ({h['rule_real']} real). Real-model hints on satisfied turns: "
           f"{h['judge_hint_on_satisfied']}. Hint votes on unsatisfied turns without a valid decision box (failed): "
           f"{h['failed_hint_votes']}, of which {h['failed_hint_real']} state the true answer or the preference in "
           "their text (often by quoting the user's reply): what the judge lost to the format, not to the content. "
           f"Of its {h['hint_answers']} hint answers, {h['with_block']} hold a [HINT_START]...[HINT_END] block and "
           f"{h['with_box']} any \\boxed{{}}.", "",
           "### The 10-character rule on Chinese hints", "",
           f"Good votes' hints in Chinese turns: {h['zh_good_hints']}; rejected as 10 characters or fewer: "
           f"**{h['zh_rejected_short']}**, of which **{h['zh_rejected_real']} are real hints**. (The rule judge's hint "
           f"is the user's reply: {h['rule_zh_short']} unsatisfied Chinese replies are 10 characters or fewer.)", ""]
    if h["short"]:
        out += ["| persona | question | hint | chars | real |", "|---|---|---|---|---|"]
        out += [f"| {r['persona']} | {r['question']} | {hint} | {len(hint)} | "
                f"{'yes' if is_real(hint, _fact(r), r['persona']) else 'no'} |" for r, hint in h["short"]]
        out.append("")
    out += ["The rule on real hints a judge could write, for every question (independent of the judge's run):", "",
            "| language | hint | questions | rejected (10 characters or fewer) |", "|---|---|---|---|"]
    out += [f"| {lang} | {name} | {n} | {k} ({k / n:.0%}) |" for lang, name, n, k in rule_on_answers()]
    return out


def run(args) -> int:
    """Judge turns until ``--turns`` or ``--minutes`` of this process's CPU time, appending each row to the CSV."""
    import torch

    from claw_lib.apps.train_judge import training_judge
    from claw_lib.config import OPDConfig, PPOConfig

    torch.set_num_threads(args.threads)
    cfg = PPOConfig(strategy="combined", device="cpu", seed=args.seed,
                    opd=OPDConfig(judge=args.model, m=args.votes, hint_prompt=args.hint_prompt))
    judge = training_judge(cfg)
    inner = judge._get()                       # the judge's own model also plays the policy: one load
    turns = make_turns(inner.model, inner.tok, args.turns, args.seed, args.max_new_tokens)
    csv_path, t0 = Path(args.out) / "judge.csv", time.process_time()
    with open(csv_path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for k, turn in enumerate(turns):
            if args.minutes and time.process_time() > 60 * args.minutes:
                print(f"stopped after {k} turns ({args.minutes} CPU minutes)", flush=True)
                break
            row = judge_row(k, turn, judge, cfg)
            w.writerow(row)
            f.flush()
            print(f"[{time.process_time() - t0:6.0f} CPU s] {k} {row['persona']} {row['lang']} user {row['expected']:+d} "
                  f"judge {row['judge_score']:+d} rule {row['rule_score']:+d} {row['seconds']} s", flush=True)
    return 0


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
#: by hint prompt (``--hint-prompt``): the committed runs' pages
LIMITS = {
    "openclaw": [
        'that a real model judges well enough to train with: this 0.5B model gave no accepted hint in 60 turns, so '
        'OPD would get nothing, and 65 % of its votes failed',
        'a larger judge or more votes: one 0.5B model, one vote per question, on a CPU',
    ],
    "plain": [
        'that a real model judges well enough to train with: asked the plain question, this 0.5B model gave a hint '
        'on every unsatisfied turn (51 of 51) but only 20 of them state the true answer or the preference, it gave '
        'hints on 8 satisfied turns too, and 29 % of its Binary RL votes failed (no box)',
        'that a hint helps the policy: a hint was counted as real when its text holds the truth or the preference, '
        'not by training on it',
        'a larger judge or more votes: one 0.5B model, one vote per question, on a CPU; 59 turns (the run stopped at '
        'its 30 CPU-minute budget)',
    ],
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="/work/models/qwen05", help="the real model: judge and policy")
    ap.add_argument("--turns", type=int, default=60, help="turns to judge, round-robin over the three users")
    ap.add_argument("--votes", type=int, default=1, help="the judge's votes per question (--judge-votes; default 1)")
    ap.add_argument("--max-new-tokens", type=int, default=48, help="the policy's answer length (the per-model default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=0,
                    help="stop once the process has used this many CPU minutes, loading included (0: every turn)")
    ap.add_argument("--out", default=str(OUT), help="folder of judge.csv and judge.md (default results/real_model)")
    ap.add_argument("--hint-prompt", default="openclaw", choices=("openclaw", "plain"),
                    help="how the judge is asked for a hint (--hint-prompt of claw train; default openclaw)")
    ap.add_argument("--summarise-only", action="store_true", help="re-read judge.csv and rewrite judge.md")
    ap.add_argument("--force", action="store_true", help="replace judge.csv / judge.md if they exist")
    a = ap.parse_args(argv)
    from claw_lib.utils import check_new_file, publish_report

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    try:  # nothing is replaced without --force (--summarise-only rewrites only the report)
        for path in ([] if a.summarise_only else [out / "judge.csv"]) + [out / "judge.md"]:
            check_new_file(path, a.force or (a.summarise_only and path.suffix == ".md"))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if not a.summarise_only:
        run(a)
    settings = (f"Judge and policy: {a.model}, float32 on the CPU, one thread. The judge as `claw train --judge MODEL "
                f"--judge-votes {a.votes} --hint-prompt {a.hint_prompt}` builds it: OpenClaw-RL's vote prompt and "
                + ("OpenClaw-RL's hint prompt" if a.hint_prompt == "openclaw" else "the plain hint question")
                + f", {a.votes} vote(s) per question at temperature "
                f"0.6, at most 512 new tokens. The policy's answers sampled at temperature 1 ({a.max_new_tokens} tokens) "
                f"to the real-world questions' training split, seed {a.seed}, round-robin over the correcting, student and "
                "teacher users and both languages.")
    publish_report(summarise(read_rows(out / "judge.csv"), settings, a.hint_prompt == "plain"), out / "judge.md",
                   force=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
