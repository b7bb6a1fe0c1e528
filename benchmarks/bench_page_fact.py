"""The one-fact correction of a real model, done in the chat page: a headless Chromium types into ``claw serve``'s
page what a person would, and reads what the page shows.

    python benchmarks/bench_page_fact.py --model /path/to/Qwen2.5-0.5B-Instruct [--lang en] [--lr 1e-4] [--anchor]
        [--rounds 8] [--max-cpu-minutes 10] [--heldout 9] --out results/serve/page_fact_qwen05.md
        [--json results/serve/page_fact_qwen05.json]

Measured, not a test (issue 45's "done when", the part benchmarks/bench_live_fact.py does through the ``openai``
client). The fact and the held-out questions are chosen as ``bench_live_fact.py --facts split`` chooses them (side
turns through the ``openai`` client: the first training fact that is not a dev fact the model answers wrong; the
eval split's capital questions held out). Then, in the page (Debian's chromium through playwright; greedy on, as the
page starts): each round asks the question with the prompt box and **send**, types the correction and presses
**end session** (the page then starts a new session), waits until the page's status shows a new policy version and
its "version live" banner is in the conversation, and reads the next greedy answer the page shows to the same
question. It stops when that answer is right, after ``--rounds`` rounds, or at ``--max-cpu-minutes`` of the
server's CPU (``/proc``, from its start, model loading included). The held-out questions are asked again through the
client at the end. Writes a Markdown page (and ``--json``) with each round as the page showed it.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from claw_lib.serve.page_driver import CHROMIUM_ARGS, answer_text, chromium_path, say, shown_version  # noqa: E402
from claw_lib.serve.process import cpu_seconds, wait_idle  # noqa: E402
from claw_lib.text.phrases import CORRECTION_LEADS, with_lead  # noqa: E402
from claw_lib.utils import limits_section, publish_report, script_main  # noqa: E402

import bench_live_fact as fact_bench  # noqa: E402  (the fact, the held-out questions, the dev file: as it picks them)

ANSWER_S = 900.0  # longest wait for one answer to show in the page
LIMITS = [
    "A person: the person here is a script typing into the page in a headless Chromium and reading what it shows; "
    "what a person would make of the page (the token colours, the banner) is not measured.",
    "More than one fact, one model and one seed: one correction on one fact, the model decoded from its int8 copy, "
    "greedy, with one learning rate.",
    "That the fact was learned rather than the question's answer memorised: the changed answer is to the same "
    "question, word for word; paraphrases and the other language were not asked.",
    "A quiet machine: CPU minutes are the server's own, on 2 shared cores, model loading included.",
]


def page_rounds(page, url: str, proc, target, correction: str, a) -> list:
    """The rounds in the page (module docstring); one row per round, with what the page showed."""
    rows, answer = [], None
    for k in range(a.rounds):
        msg = say(page, target.text, timeout_s=ANSWER_S)
        asked = answer_text(msg)
        v = shown_version(page)
        say(page, correction, end=True, timeout_s=ANSWER_S)
        wait_idle(url, a.wait_s, poll_s=2.0)
        page.wait_for_function(f"Number(document.getElementById('st-policy-version').textContent) > {v}",
                               timeout=60_000)
        live = shown_version(page)
        banner = page.locator(f"[data-testid=version-live][data-version='{live}']")
        banner.wait_for(state="visible", timeout=60_000)
        answer = say(page, target.text, timeout_s=ANSWER_S)
        after = answer_text(answer)
        rows.append({"round": k + 1, "asked": asked, "version_before": v, "version_after": live,
                     "banner": banner.inner_text().strip(), "answer_after": after,
                     "answer_version": int(answer.get_attribute("data-policy-version")),
                     "greedy": answer.get_attribute("data-greedy") == "true", "right": bool(target.check(after)),
                     "server_cpu_min": round(cpu_seconds(proc.pid) / 60, 2)})
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
        page.click("#new-session")  # the check question's session stays open; the next round is a new session
        if rows[-1]["right"] or rows[-1]["server_cpu_min"] >= a.max_cpu_minutes:
            break
    return rows


def in_the_page(url: str, proc, target, correction: str, a) -> tuple:
    """(the rounds, the page's errors): the page opened in Chromium, greedy checked, the rounds driven."""
    from playwright.sync_api import sync_playwright

    chromium = chromium_path()
    if chromium is None:
        raise RuntimeError("no chromium: install Debian's chromium (apt-get install chromium) to drive the page")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            problems = []
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.goto(url + "/", timeout=120_000)
            page.wait_for_function("document.getElementById('st-policy-version').textContent.trim() !== '–'",
                                   timeout=120_000)
            if not page.is_checked("#greedy"):
                raise RuntimeError("the page did not start with greedy on")
            return page_rounds(page, url, proc, target, correction, a), problems
        finally:
            browser.close()


def render(res: dict) -> str:
    """The Markdown report of one run (``res``: what :func:`main` writes as JSON)."""
    rows = res["rounds"]
    right = next((r for r in rows if r["right"]), None)
    cell = lambda t: t.replace("|", "/").replace("\n", " ")[:140]  # noqa: E731
    lines = ["# A real model corrected on one fact in the chat page", "",
             f"Model `{Path(res['model']).name}`, `claw serve` with {res['serve_flags']}; the page driven in a "
             "headless Chromium. Written by `benchmarks/bench_page_fact.py`; see its docstring.", "",
             f"The fact: **{res['question']}** (truth: {res['truth']}). The model's greedy answer before: "
             f"\"{res['wrong_answer']}\". The correction typed: \"{res['correction']}\".", "",
             "| round | the page's answer when asked | version live after | the banner | the page's next greedy answer "
             "| right | server CPU min |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {cell(r['asked'])} | {r['version_after']} | {cell(r['banner'])} | "
              f"{cell(r['answer_after'])} | {r['right']} | {r['server_cpu_min']} |" for r in rows]
    first = (f"- The page's greedy answer was right after round {right['round']}, at {right['server_cpu_min']:.1f} "
             "CPU min") if right else "- The page's greedy answer was never right"
    lines += ["", first +
              f" (the target: within {res['max_cpu_minutes']:g} CPU minutes).",
              fact_bench.heldout_line(res, "the eval split's capital questions, asked through the client"),
              f"- Adapters written: {', '.join(res['adapters']) or 'none'}.",
              f"- Errors in the page: {len(res['page_errors'])}" + "".join(f"\n  - {e}" for e in res["page_errors"]),
              "", limits_section(LIMITS)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    fact_bench.add_fact_args(ap, heldout=9)
    a = ap.parse_args(argv)
    out = fact_bench.check_fact_args(a)
    if a.from_json is not None:
        publish_report(render(json.loads(a.from_json.read_text(encoding="utf-8"))), out, a.force)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, chat, (target, wrong, others, before), named = fact_bench.serve_and_choose(a, Path(tmp), True)
        try:
            correction = with_lead(CORRECTION_LEADS[target.lang][0], target.answer(), target.lang)
            t0 = time.time()
            rows, problems = in_the_page(url, proc, target, correction, a)
            wall = round(time.time() - t0, 1)
            after = {f.text: fact_bench.ask(chat, f.text) for f in others}
            adapters = sorted(p.name for p in (Path(tmp) / "run" / "adapters").glob("v*"))
        finally:
            fact_bench.stop(proc)
    res = {"model": a.model, "serve_flags": named, "question": target.text, "truth": target.truth,
           "wrong_answer": wrong, "correction": correction, "rounds": rows, "page_wall_s": wall,
           "page_errors": problems, "heldout_before": before, "heldout_after": after, "adapters": adapters,
           "max_cpu_minutes": a.max_cpu_minutes}
    fact_bench.write_result(res, a, out, render)
    return 0

if __name__ == "__main__":
    raise SystemExit(script_main(main))
