"""What an update changed, token by token: one held-out problem's reply before training (the untrained model's, from
the no-training control) and after (the trained arm's), each token coloured by how much the trained adapter moved
its log-probability, log pi_trained(y_t | x, y_<t) - log pi_base(y_t | x, y_<t) (nats), the prompt being the held-out
request exactly as it was sent (no system prompt).

    python tools/personal_agent_tokens.py --model /path/to/Qwen2.5-0.5B-Instruct \\
        --run RUNS/teacher_en/combined/seed0 --control RUNS/teacher_en/no_training/seed0 --out tokens.json
    python tools/personal_agent_tokens.py --from-json tokens.json --png tokens.png   # the figure alone

The problem is chosen by a rule, not by eye: the first held-out problem (the split's order) whose reply the trained
arm's user accepted and the untrained model's was not; else the first whose replies differ; else the first.
The adapter is the run's last published version (``server/adapters/vN``, the highest N). ``--out`` is refused if it
exists, unless ``--force``; ``--png`` draws both replies (red: less likely after training, blue: more likely).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.utils import atomic_write, check_out_file, script_main  # noqa: E402


def heldout(folder: Path) -> list:
    """The rows of ``folder/heldout.jsonl`` in the order they were written (one per problem)."""
    path = folder / "heldout.jsonl"
    if not path.is_file():
        raise ValueError(f"{path} does not exist: run the arm to its held-out problems first")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def choose(trained: list, control: list) -> tuple:
    """(problem index, the rule that chose it) by the rule in the module docstring; both lists keyed by problem."""
    before = {r["problem"]: r for r in control}
    common = [r for r in trained if r["problem"] in before]
    if not common:
        raise ValueError("the run and the control share no held-out problem")
    for rule, pick in (("accepted after, not before", lambda r: r["accepted"] and not before[r["problem"]]["accepted"]),
                       ("the replies differ", lambda r: r["reply"] != before[r["problem"]]["reply"]),
                       ("the first problem", lambda r: True)):
        hit = next((r for r in common if pick(r)), None)
        if hit is not None:
            return hit["problem"], rule


def last_adapter(run: Path) -> Path:
    """The run's highest published adapter folder (``server/adapters/vN``)."""
    found = sorted((p for p in (run / "server" / "adapters").glob("v*") if p.name[1:].isdigit()),
                   key=lambda p: int(p.name[1:]))
    if not found:
        raise ValueError(f"{run}/server/adapters holds no published version: the run has not published one yet")
    return found[-1]


def prompt_text(tokenizer, persona: str, lang: str, problem: int, seed: int, gsm8k, problems=None) -> str:
    """The held-out request of ``problem`` as the server built its prompt (:func:`claw_lib.serve.engine.served_task`)."""
    from claw_lib.prompts import has_chat_template
    from claw_lib.serve.engine import served_task
    from claw_lib.serve.homework_sim import stream_problems
    from claw_lib.toy.homework import first_request
    found = [q for q in stream_problems("heldout", gsm8k, problems) if q.index == problem]
    if not found:
        raise ValueError(f"problem {problem} is not among the held-out problems")
    return served_task(tokenizer, first_request(persona, lang, found[0], seed)[1], has_chat_template(tokenizer)).prompt


def compute(a) -> dict:
    """Both replies' tokens and their log-prob change under the run's last adapter."""
    from claw_lib.models.lm import load_causal_lm, response_logprobs
    from claw_lib.models.peft_lora import load_adapter
    run, control = Path(a.run), Path(a.control)
    done = json.loads((run / "done.json").read_text(encoding="utf-8")) if (run / "done.json").is_file() else {}
    trained, untrained = heldout(run), heldout(control)
    problem, rule = (a.problem, "asked") if a.problem is not None else choose(trained, untrained)
    rows = {"before": next(r for r in untrained if r["problem"] == problem),
            "after": next(r for r in trained if r["problem"] == problem)}
    adapter = last_adapter(run)
    model, tok = load_causal_lm(a.model)
    prompt = prompt_text(tok, a.persona or done.get("persona", "teacher"), a.lang or done.get("lang", "en"),
                         problem, int(done.get("seed", 0)), a.gsm8k, a.problems)
    replies = [rows["before"]["reply"], rows["after"]["reply"]]
    base = response_logprobs(model, tok, [prompt] * 2, replies, batch_size=1)
    new = response_logprobs(load_adapter(model, adapter), tok, [prompt] * 2, replies, batch_size=1)
    name = str(run.relative_to(run.parents[2]))  # persona_lang/arm/seedN
    out = {"problem": problem, "chosen_by": rule, "adapter": f"{name}/server/adapters/{adapter.name}", "run": name,
           "control": str(control.relative_to(control.parents[2]))}
    for i, key in enumerate(("before", "after")):
        out[key] = {"accepted": rows[key]["accepted"], "correct": rows[key]["correct"],
                    "tokens": [t.text for t in base.tokens[i]],
                    "delta": [round(float(x), 4) for x in new.logprobs[i] - base.logprobs[i]]}
    return out


def draw(data: dict, path: Path) -> None:
    """Both replies, each token's background by its change (blue: more likely after training; red: less)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    vmax = max(float(np.percentile(np.abs(data[k]["delta"]), 95)) for k in ("before", "after")) or 1.0
    cmap, fig = plt.get_cmap("RdBu"), plt.figure(figsize=(12, 14))
    fig.text(0.01, 0.995, f"held-out problem {data['problem']} ({data['chosen_by']}); colour: log-prob change under "
             f"{data['adapter']} (nats, +-{vmax:.2f} full scale)", fontsize=9, va="top")
    y = 0.975
    for key in ("before", "after"):
        d = data[key]
        fig.text(0.01, y, f"{key}: accepted {d['accepted']}, correct {d['correct']}", fontsize=10, weight="bold",
                 va="top")
        y, x = y - 0.02, 0.01
        for tok, dv in zip(d["tokens"], d["delta"]):
            for j, piece in enumerate(tok.split("\n")):
                if j:
                    y, x = y - 0.014, 0.01
                if not piece:
                    continue
                width = 0.0062 * len(piece)
                if x + width > 0.99:
                    y, x = y - 0.014, 0.01
                level = max(-1.0, min(1.0, dv / vmax))
                fig.text(x, y, piece, fontsize=7, family="monospace", va="top",
                         color="white" if abs(level) > 0.6 else "black",  # readable on the darkest shades
                         bbox=dict(facecolor=cmap(0.5 + 0.5 * level), pad=0.5, lw=0))
                x += width
        y -= 0.03
    fig.savefig(path, dpi=110, bbox_inches="tight")  # cropped to the text: short replies leave no blank page
    plt.close(fig)


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="the base model's folder (the run's)")
    ap.add_argument("--run", help="the trained arm's run folder (with done.json, heldout.jsonl, server/adapters)")
    ap.add_argument("--control", help="the no-training control's run folder (same persona and language)")
    ap.add_argument("--problem", type=int, default=None, help="a held-out problem index (default: the rule above)")
    ap.add_argument("--persona", default=None, help="default: the run's done.json")
    ap.add_argument("--lang", default=None, help="default: the run's done.json")
    ap.add_argument("--gsm8k", default=None, help="GSM8K's test.jsonl (default: $CLAW_GSM8K)")
    ap.add_argument("--problems", default=None, help="the run's --problems file, where it had one")
    ap.add_argument("--out", default=None, help="the JSON to write")
    ap.add_argument("--from-json", default=None, help="draw from this JSON instead of computing")
    ap.add_argument("--png", default=None, help="also draw the figure here")
    ap.add_argument("--force", action="store_true", help="replace --out / --png if they exist")
    a = ap.parse_args(argv)
    if a.from_json is None and not (a.model and a.run and a.control and a.out):
        ap.error("--model, --run, --control and --out are needed (or --from-json)")
    return a


def main(argv=None) -> int:
    a = parse(argv)
    if a.from_json:
        data = json.loads(Path(a.from_json).read_text(encoding="utf-8"))
    else:
        out = check_out_file(a.out, a.force)
        data = compute(a)
        with atomic_write(out, replace=a.force) as f:
            f.write(json.dumps(data, ensure_ascii=False, indent=1) + "\n")
        print(f"tokens: {out}")
    if a.png:
        draw(data, check_out_file(a.png, a.force))
        print(f"figure: {a.png}")
    return 0


if __name__ == "__main__":
    script_main(main)
