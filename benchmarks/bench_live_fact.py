"""A person corrects a real model on one fact through ``claw serve``: how much CPU time until its answer changes.

    python benchmarks/bench_live_fact.py --model /path/to/Qwen2.5-0.5B-Instruct [--lang en] [--lr 1e-4]
        [--max-cpu-minutes 10] [--rounds 8] [--heldout 8] [--out results/serve/live_fact_qwen05.md]
        [--json results/serve/live_fact_qwen05.json]
        [--facts split --anchor [--anchor-from dev|train] [--anchor-coef 100] [--anchor-steps 1]] [--skip N]

Measured, not a test (issue 45's "done when": a person correcting the 0.5B model on one fact it gets wrong sees its
next answer to that question change within 10 minutes of CPU time, answers to held-out questions unchanged, every
version written as an adapter). Steps, all through the official ``openai`` client against ``claw serve`` in a child
process (``claw_lib.serve.process``; the int8 serving copy, PEFT LoRA, one sample per update):

1. the greedy answers (side turns: never trained on) to every capital question of the real-world task set
   (:mod:`claw_lib.toy.real_tasks`, ``--lang``); the first the model gets wrong is the fact to correct, and the
   first ``--heldout`` of the others (right or wrong) are the held-out questions;
2. each round, a session: the person asks the question (greedy), answers with the kit's correcting user's
   correction ("No, the capital of Australia is Canberra.") and ends the session; the server judges the turn and
   trains on it (one update per correction); the script waits until the update is published, then asks the
   question again as a side turn, greedy. It stops when the answer is right, after ``--rounds`` rounds, or when the
   server has used ``--max-cpu-minutes`` of CPU;
3. the held-out questions again: how many greedy answers are unchanged, word for word.

CPU minutes are the server process's (user + system, ``/proc``), from its start, model loading included.
Writes a Markdown page with the rounds, the held-out answers and what it does not establish.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.serve.process import cpu_seconds, start_claw_serve, wait_idle  # noqa: E402
from claw_lib.text.phrases import CORRECTION_LEADS, with_lead  # noqa: E402
from claw_lib.toy.real_tasks import real_facts  # noqa: E402
from claw_lib.utils import add_report_args, atomic_write, check_new_file, limits_section, publish_report, \
    report_path, script_main  # noqa: E402

#: the anchor's prompts by --anchor-from, as the reports name their file
ANCHOR_POOLS = {"dev": "DEV_FACTS", "train": "TRAIN_FACTS_BUT_THE_CORRECTED"}
ANCHOR_WHAT = {"dev": "the dev capital questions", "train": "every training capital question but the corrected one"}
#: where the held-out questions come from, by --facts
HELDOUT_FROM = {"first": "the set's other capital questions", "split": "the eval split's capital questions"}
LIMITS = [
    "A person in the page: the person here is a script sending the page's requests through the `openai` client "
    "(the same API the page calls); the page itself was not driven.",
    "More than one fact, one model and one seed: one correction on one fact, the model decoded from its int8 copy, "
    "greedy, with one learning rate.",
    "That the fact was learned rather than the question's answer memorised: the changed answer is to the same "
    "question, word for word; paraphrases and the other language were not asked.",
    "A quiet machine: CPU minutes are the server's own, on 2 shared cores, model loading included.",
]
TABLE_LIMITS = [LIMITS[0],
                "More than one run per setting: each row is one run (one seed) on one fact; two rows of the same fact "
                "compare one run with one run.",
                "Tuned settings: the anchor's weight and steps were varied on the anchor's own KL (the dev questions); "
                "every held-out result of every run is in the table, whatever it showed.",
                LIMITS[3] + " The anchor's steps are part of the server's CPU minutes."]


def ask(chat, question: str, session: str | None = None, done: bool = False, history=()) -> str:
    """One greedy chat completion (``chat``: (the openai client, the served model's id)); ``session``: a main-line
    turn of that session (``done``: the session ends)."""
    client, model = chat
    headers = {} if session is None else {"X-Session-Id": session, "X-Turn-Type": "main",
                                          **({"X-Session-Done": "true"} if done else {})}
    msgs = list(history) + [{"role": "user", "content": question}]
    r = client.chat.completions.create(model=model, messages=msgs, temperature=0.0, extra_headers=headers)
    return r.choices[0].message.content or ""


def choose(chat, lang: str, n_heldout: int, split: bool = False, skip: int = 0) -> tuple:
    """(the fact to correct, its wrong answer, the held-out facts, their answers before): step 1. ``split``: the
    fact is the first one answered wrong among the training facts that are not dev facts, the held-out facts are
    the eval split's (never seen by the gate), instead of the first ``n_heldout`` of all the others. ``skip``: the
    first ``skip`` facts answered wrong are passed over (another fact for the same run)."""
    facts = [f for f in real_facts() if f.kind == "capital" and f.lang == lang]
    pool = [f for f in facts if f.split == "train" and not f.dev] if split else facts
    answers, wrong = {}, 0
    for f in pool:
        answers[f.text] = ask(chat, f.text)
        if not f.check(answers[f.text]):
            wrong += 1
            if wrong > skip:
                target = f
                break
    else:
        raise RuntimeError(f"the model answers {wrong} of the {len(pool)} capital questions ({lang}) wrong, and "
                           f"--skip is {skip}: nothing to correct")
    others = [f for f in facts if (f.split == "eval" if split else f is not target)][:n_heldout]
    before = {f.text: answers.get(f.text) or ask(chat, f.text) for f in others}
    return target, answers[target.text], others, before


def gate_file(path: Path, lang: str, pool: str = "dev", but: str | None = None) -> Path:
    """``path``: the publish gate's probes (claw_lib.serve.gate), the capital facts of ``lang`` in ``pool`` (the
    truth as the expected text): ``dev``, the dev facts; ``train``, every training fact (the dev ones included) but
    the question ``but`` (the one corrected)."""
    rows = [{"prompt": f.text, "expected": f.truth} for f in real_facts()
            if f.kind == "capital" and f.lang == lang and (f.dev if pool == "dev" else f.split == "train")
            and f.text != but]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def rounds(chat, url: str, proc, target, correction: str, a) -> list:
    """Step 2: correct, wait for the update, ask again; one row per round."""
    rows = []
    for k in range(a.rounds):
        session = f"fact-{k:02d}"
        first = ask(chat, target.text, session)
        ask(chat, correction, session, done=True,
            history=[{"role": "user", "content": target.text}, {"role": "assistant", "content": first}])
        st = wait_idle(url, a.wait_s, poll_s=2.0)
        after = ask(chat, target.text)
        rows.append({"round": k + 1, "asked": first, "policy_version": st.get("policy_version"),
                     "updates": st.get("updates"), "samples_scored": st.get("samples_scored"),
                     "stopped": st.get("stopped_reason"), "skipped": st.get("last_skipped"),
                     "gate": (st.get("publish_gate") or {}).get("last"),
                     "anchor_kl": [(st.get("metrics") or {}).get(k) for k in ("anchor/kl", "anchor/kl_after")],
                     "anchor_prompts": (st.get("anchor") or {}).get("prompts"),
                     "answer_after": after, "right": bool(target.check(after)),
                     "server_cpu_min": round(cpu_seconds(proc.pid) / 60, 2)})
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
        if rows[-1]["right"] or rows[-1]["server_cpu_min"] >= a.max_cpu_minutes:
            break
    return rows


def table(runs: list) -> str:
    """A Markdown table of several runs (``runs``: (their JSON's path, its content)): per run the fact, the server's
    flags, the round whose answer was first right and its CPU minutes, the held-out answers unchanged and right
    before and after, and the anchor's KL after the last update (before -> after its anchor steps)."""
    lines = ["# A real model corrected on one fact: the runs side by side", "",
             "Each row one run of `benchmarks/bench_live_fact.py` (its JSON named in the first column); greedy answers; "
             "held-out: the eval split's capital questions, never trained on or anchored.", "",
             "| run | fact | claw serve flags | rounds | first right (round, server CPU min) | held-out unchanged | "
             "held-out right before -> after | anchor KL, last update (nats) |", "|---|---|---|---|---|---|---|---|"]
    for path, res in runs:
        rows, before = res["rounds"], res["heldout_before"]
        right = next((r for r in rows if r["right"]), None)
        moved, right_before, right_after = heldout_counts(res)
        kl = rows[-1].get("anchor_kl") or [None, None]
        lines.append(f"| {path.stem} | {res['question']} | {res['serve_flags']} | {len(rows)} | "
                     + (f"{right['round']}, {right['server_cpu_min']}" if right else
                        f"never (at {rows[-1]['server_cpu_min']})")
                     + f" | {len(before) - len(moved)} of {len(before)} | {right_before} -> {right_after} | "
                     + ("-" if None in kl else f"{kl[0]:.4f} -> {kl[1]:.4f}") + " |")
    return "\n".join(lines + ["", limits_section(TABLE_LIMITS)]) + "\n"


def heldout_counts(res: dict) -> tuple:
    """(the held-out questions whose greedy answer moved, how many were right before, how many after) of a run."""
    before, after = res["heldout_before"], res["heldout_after"]
    facts = {f.text: f for f in real_facts()}
    right = [sum(bool(facts[q].check(ans[q])) for q in before) for ans in (before, after)]
    return [q for q in before if before[q] != after[q]], right[0], right[1]


def heldout_line(res: dict, where: str) -> str:
    """The report's line on the held-out questions (``where`` they come from): how many greedy answers are unchanged
    word for word, how many right before and after, and each one that moved."""
    before, after = res["heldout_before"], res["heldout_after"]
    moved, right_before, right_after = heldout_counts(res)
    return (f"- Held-out questions ({where}, {len(before)}): {len(before) - len(moved)} greedy answers unchanged word "
            f"for word; right before {right_before}, after {right_after} (the target: all unchanged)."
            + "".join(f"\n  - {q} \"{before[q][:80]}\" -> \"{after[q][:80]}\"" for q in moved))


def page(res: dict) -> str:
    """The Markdown report of one run (``res``: what :func:`main` writes as JSON)."""
    rows = res["rounds"]
    changed = next((r for r in rows if r["answer_after"] != res["wrong_answer"]), None)
    right = next((r for r in rows if r["right"]), None)
    lines = ["# A person corrects a real model on one fact, live", "",
             f"Model `{Path(res['model']).name}`, `claw serve` with {res['serve_flags']}. Written by "
             "`benchmarks/bench_live_fact.py`; see its docstring.", "",
             f"The fact: **{res['question']}** (truth: {res['truth']}). The model's greedy answer before: "
             f"\"{res['wrong_answer']}\". The correction: \"{res['correction']}\".", "",
             "| round | version after | server CPU min | greedy answer after | right |", "|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['policy_version']} | {r['server_cpu_min']} | "
              f"{r['answer_after'].replace('|', '/').replace(chr(10), ' ')[:160]} | {r['right']} |" for r in rows]
    when = lambda r: "never" if r is None else f"round {r['round']}, at {r['server_cpu_min']:.1f} CPU min"  # noqa: E731
    lines += ["",
              f"- The answer first changed: {when(changed)}; first right: {when(right)} (the target: within "
              f"{res['max_cpu_minutes']:g} CPU minutes).",
              heldout_line(res, HELDOUT_FROM[res.get("facts", "first")]),
              f"- Adapters written: {', '.join(res['adapters']) or 'none'}."]
    if res.get("gate"):
        lines += ["- The publish gate (the dev capital questions, answer contains the truth; the live version and the "
                  "candidate each scored in full precision): " + "; ".join(
                      f"update of version {g['version']}: {g['score_before']:.3f} -> {g['score_after']:.3f} "
                      f"({'published' if g['passed'] else 'kept the live version'})"
                      for g in {r["gate"]["version"]: r["gate"] for r in rows if r.get("gate")}.values()) + "."]
    if res.get("anchor"):
        n = rows[-1].get("anchor_prompts")
        lines += [f"- The anchor ({ANCHOR_WHAT[res.get('anchor_from') or 'dev']}"
                  + (f", {n} prompts" if n else "") + ", the initial model's greedy answers to them): KL(initial || "
                  "policy) per answer token after each update's optimizer step -> after its anchor step, nats: "
                  + "; ".join(
                      f"round {r['round']}: {r['anchor_kl'][0]:.4f} -> {r['anchor_kl'][1]:.4f}" for r in rows
                      if r.get("anchor_kl") and None not in r["anchor_kl"]) + "."]
    lines += ["", limits_section(LIMITS)]
    return "\n".join(lines) + "\n"


def add_fact_args(ap: argparse.ArgumentParser, heldout: int) -> None:
    """The flags this benchmark and benchmarks/bench_page_fact.py share (``heldout``: the --heldout default)."""
    ap.add_argument("--model", required=True, help="a local Hugging Face folder (the real model)")
    ap.add_argument("--lang", default="en", choices=("en", "zh"))
    ap.add_argument("--lr", type=float, default=None, help="claw serve --lr (default: the per-model default)")
    ap.add_argument("--rounds", type=int, default=8, help="corrections at most (default 8)")
    ap.add_argument("--max-cpu-minutes", type=float, default=10.0, help="stop when the server has used this much")
    ap.add_argument("--heldout", type=int, default=heldout, help=f"held-out questions (default {heldout})")
    ap.add_argument("--anchor", action="store_true",
                    help="claw serve --anchor with capital questions as its prompts (which: --anchor-from; use with "
                         "--facts split)")
    ap.add_argument("--anchor-from", choices=ANCHOR_POOLS, default="dev",
                    help="the anchor's prompts: dev, the dev capital questions (default); train, every training "
                         "capital question but the corrected one (the fact is then chosen on a server without the "
                         "anchor, which makes way for the anchored one)")
    ap.add_argument("--anchor-coef", type=float, default=None, help="claw serve --anchor-coef (default: the server's)")
    ap.add_argument("--anchor-steps", type=int, default=None, help="claw serve --anchor-steps (default: the server's)")
    ap.add_argument("--skip", type=int, default=0,
                    help="pass over the first SKIP facts the model answers wrong (default 0: the first is corrected)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wait-s", type=float, default=1800.0, help="longest wait for one update (default 1800)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rounds and answers as JSON")
    ap.add_argument("--from-json", type=Path, default=None, help="write the page from a run's JSON, running nothing")
    add_report_args(ap, "the Markdown report")


def check_fact_args(a) -> Path:
    """The report's path, after the checks both benchmarks make (ValueError, one line)."""
    if a.rounds < 1 or a.heldout < 1 or a.max_cpu_minutes <= 0 or a.skip < 0:
        raise ValueError("--rounds and --heldout must be >= 1, --max-cpu-minutes > 0 and --skip >= 0")
    if a.anchor_from == "train" and (not a.anchor or getattr(a, "facts", "split") != "split"):
        raise ValueError("--anchor-from train needs --anchor and --facts split (the fact is a training fact)")
    if a.json is not None and a.from_json is None:
        check_new_file(a.json, a.force)
    return report_path(a)


def serve_flags(a, tmp: Path, but: str | None = None, anchor: bool = True) -> tuple:
    """(``claw serve``'s flags for the run in the folder ``tmp``, the same as the report names them: the facts'
    files as ``ANCHOR_POOLS[pool]``); ``but``: the corrected question, left out of a ``train`` anchor; ``anchor``
    False: without the anchor whatever ``a`` says."""
    flags = ["--serving-format", "int8", "--batch-size", 1, "--lora-impl", "peft", "--threads", a.threads] + \
        (["--lr", a.lr] if a.lr is not None else [])
    files, named = [], []
    anchor = anchor and a.anchor
    for on, flag, name, pool in ((getattr(a, "gate", False), "--publish-gate", "gate.jsonl", "dev"),
                                 (anchor, "--anchor", "anchor.jsonl", a.anchor_from)):
        if on:  # the questions (the initial model's answers to them are the anchor's)
            files += [flag, gate_file(tmp / name, a.lang, pool, but)]
            named += [flag, ANCHOR_POOLS[pool]]
    coef = [x for flag, v in (("--anchor-coef", a.anchor_coef), ("--anchor-steps", a.anchor_steps))
            if anchor and v is not None for x in (flag, v)]
    return ["--model", a.model] + flags + files + coef, " ".join(map(str, flags + named + coef))


def serve_and_choose(a, tmp: Path, split: bool) -> tuple:
    """Start ``claw serve`` for the run in ``tmp`` and choose the fact (:func:`choose`): (the process, its URL, the
    chat (client, model id), ``choose``'s tuple, the flags as the report names them). With ``--anchor-from train``
    the fact is chosen on a server without the anchor (the same initial model, so the same greedy answers), which then
    makes way for the anchored one, whose anchor is every training question but the one chosen."""
    chosen = None
    if a.anchor and a.anchor_from == "train":
        proc, url, chat = start_chat(serve_flags(a, tmp, anchor=False)[0], tmp / "choose")
        try:
            chosen = choose(chat, a.lang, a.heldout, split, a.skip)
        finally:
            stop(proc)
    flags, named = serve_flags(a, tmp, but=chosen[0].text if chosen else None)
    proc, url, chat = start_chat(flags, tmp / "run")
    try:
        chosen = chosen or choose(chat, a.lang, a.heldout, split, a.skip)
    except BaseException:
        stop(proc)
        raise
    return proc, url, chat, chosen, named


def start_chat(flags: list, out: Path) -> tuple:
    """(``claw serve`` started with ``flags`` and ``--out out`` (its log beside), its URL, (an ``openai`` client for
    it, the served model's id))."""
    import openai

    proc, url = start_claw_serve(flags + ["--out", out], out.parent / f"{out.name}.log")
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", timeout=1800, max_retries=0)
    try:
        return proc, url, (client, client.models.list().data[0].id)
    except BaseException:
        stop(proc)
        raise


def stop(proc) -> None:
    """Stop a server started by :func:`start_chat` (SIGTERM; its records are flushed)."""
    proc.terminate()
    proc.wait(timeout=120)


def write_result(res: dict, a, out: Path, render) -> None:
    """``--json`` (if asked) and the Markdown report ``render(res)``."""
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(a.json, replace=a.force) as f:
            json.dump(res, f, indent=1, ensure_ascii=False)
    publish_report(render(res), out, a.force)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_fact_args(ap, heldout=8)
    ap.add_argument("--facts", choices=("first", "split"), default="first",
                    help="first: the first wrong fact, held out the first --heldout others; split: the first wrong "
                         "training fact that is not a dev fact, held out the eval split's facts")
    ap.add_argument("--gate", action="store_true",
                    help="claw serve --publish-gate with the dev capital facts as probes (use with --facts split)")
    ap.add_argument("--table", type=Path, nargs="+", default=None,
                    help="write one table of several runs' JSON (one row each), running nothing")
    a = ap.parse_args(argv)
    out = check_fact_args(a)
    if a.table:
        publish_report(table([(p, json.loads(p.read_text(encoding="utf-8"))) for p in a.table]), out, a.force)
        return 0
    if a.from_json is not None:
        publish_report(page(json.loads(a.from_json.read_text(encoding="utf-8"))), out, a.force)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, chat, (target, wrong, others, before), named = serve_and_choose(a, Path(tmp), a.facts == "split")
        try:
            correction = with_lead(CORRECTION_LEADS[target.lang][0], target.answer(), target.lang)
            rows = rounds(chat, url, proc, target, correction, a)
            after = {f.text: ask(chat, f.text) for f in others}
            adapters = sorted(p.name for p in (Path(tmp) / "run" / "adapters").glob("v*"))
        finally:
            stop(proc)
    res = {"model": a.model, "serve_flags": named, "facts": a.facts, "gate": a.gate, "anchor": a.anchor,
           "anchor_from": a.anchor_from if a.anchor else None,
           "question": target.text, "truth": target.truth, "wrong_answer": wrong, "correction": correction,
           "rounds": rows, "heldout_before": before, "heldout_after": after, "adapters": adapters,
           "max_cpu_minutes": a.max_cpu_minutes}
    write_result(res, a, out, page)
    return 0

if __name__ == "__main__":
    raise SystemExit(script_main(main))
