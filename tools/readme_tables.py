"""Print the README's result tables from the committed grids (results/*/ablation.csv) and probe measurements
(results/probe_reviser.json, results/probe_localiser.json).

    .venv/bin/python tools/readme_tables.py            # every table, in the order the README shows them
    .venv/bin/python tools/readme_tables.py --out t.md # also written there (refused if it exists; --force)
    .venv/bin/python tools/readme_tables.py --lang zh  # the tables README.zh-CN.md shows, with Chinese labels

Each table is what `claw reproduce` wrote, with readable setting names: the README's tables are copied from this
output, so they cannot drift from the result files by hand. README.zh-CN.md's are the same tables with the labels and
headers translated (:func:`to_zh`; the numbers untouched), for the sections in :data:`ZH_SECTIONS`;
tests/test_readme_tables.py checks that both READMEs agree on every number of every table.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.rl.ablation import PAPER, UNTIL_STABLE, load_results, paired, summarise  # noqa: E402

METHOD = {"binary_rl": "Binary RL", "opd": "OPD (policy gradient)", "combined": "Combined",
          "opd_kl": "OPD as distillation (forward KL)", "sentence": "sentence-level (control)",
          "binary": "binary tokens", "continuous": "continuous tokens", "perplexity": "perplexity tokens"}
HEAD = ("| setting | method | base | after 8 steps | after {n} steps | steps until stable, never = {n} (reached) | "
        "paper (Qwen3-4B): 8 / 16 |\n"
        "|---|---|---|---|---|---|---|")
PAIR_HEAD = ("| setting | difference | final score, mean +- s.e. | seeds better / tied / worse | "
             "steps until stable, mean +- s.e. | seeds faster / tied / slower |\n|---|---|---|---|---|---|")


def score_rows(folder, settings, strategies, paper_for=(), steps=16, header=True):
    """One row per (setting, strategy): base, after 8, final mean +- std, the one speed measure (steps until the
    score holds 0.9 three evaluations in a row, a seed that never gets there counted at the run length; mean +- s.e.,
    and the seeds that got there: claw_lib.rl.ablation.until_stable); with
    ``header``, the table's two header lines first (without, rows to append to a table printed before)."""
    s = summarise(load_results(ROOT / folder)[0])
    lines = []
    for user, label in settings:
        for strat, name in strategies:
            v = s.get((user, strat))
            if v is None:
                continue
            p = PAPER.get(strat) if user in paper_for else None
            lines.append(f"| {label} | {name} | {v['base']:.2f} | {v['at_8']:.2f} | {v['final']:.2f} +- {v['final_std']:.2f} | "
                         f"{v['until_stable']:.1f} +- {v['until_stable_se']:.1f} ({v['stable']}/{v['n']}) | "
                         f"{'' if p is None else f'{p[0]:.2f} / {p[1]:.2f}'} |")
    return "\n".join(([HEAD.format(n=steps)] if header else []) + lines)


def pair_rows(folder, items):
    """Paired differences by seed, of the final score and of the steps until stable (never = the run length; a
    negative difference is faster): items are (label, setting, a, b, difference name); ``folder`` may be a list of
    folders whose rows are paired across (same seeds)."""
    rows = [r for f in ([folder] if isinstance(folder, str) else folder) for r in load_results(ROOT / f)[0]]
    lines = []
    for label, user, a, b, name in items:
        p = paired(rows, user, a, b)
        q = paired(rows, user, a, b, UNTIL_STABLE)
        lines.append(f"| {label} | {name} | {p['mean']:+.3f} +- {p['se']:.3f} | {p['wins']} / {p['ties']} / {p['losses']} | "
                     f"{q['mean']:+.1f} +- {q['se']:.1f} | {q['losses']} / {q['ties']} / {q['wins']} |")
    return "\n".join([PAIR_HEAD] + lines)


def main(argv=()) -> int:
    """Print the tables (``argv``: the command line's arguments; an unknown one is an error, TL10); with
    ``--out`` also write them there, checked before and again at the write (utils.publish_report)."""
    import argparse
    import contextlib
    import io

    from claw_lib.utils import add_report_args, publish_report, report_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_report_args(ap, "the tables (Markdown)")
    ap.add_argument("--lang", choices=("en", "zh"), default="en",
                    help="zh: the sections README.zh-CN.md shows, labels and headers in Chinese")
    a = ap.parse_args(list(argv))
    out = report_path(a)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        tables()
        print("\n## reading the correction (reviser)\n")
        print(reviser_rows())
        print("\n## the learned localiser\n")
        print(localiser_rows())
    text = buf.getvalue().rstrip("\n")
    publish_report(to_zh(text) if a.lang == "zh" else text, out, a.force)
    return 0


#: the sections of the tables that README.zh-CN.md shows (its Table 3, student and engines paragraphs)
ZH_SECTIONS = ("table3", "table3-extra", "engines")
HEAD_ZH = ("| 设置 | 方法 | 训练前 | 8 步后 | {n} 步后 | 稳定所需步数，从未稳定记为 {n}（做到的种子数） | 论文（Qwen3-4B）：8 / 16 步 |\n"
           "|---|---|---|---|---|---|---|")
PAIR_HEAD_ZH = ("| 设置 | 差值 | 最终分数之差，均值 +- 标准误 | 种子：更好 / 持平 / 更差 | 稳定所需步数之差，均值 +- 标准误 | "
                "种子：更快 / 持平 / 更慢 |\n|---|---|---|---|---|---|")
#: every label of the ZH_SECTIONS tables (settings, methods, differences) in Chinese; numbers kept as they are
LABELS_ZH = {
    "sparse hints (half vague)": "提示稀疏（一半含糊）", "hint in every complaint": "每次抱怨都有提示",
    "sparse hints": "提示稀疏", "sparse hints, old loss": "提示稀疏，旧损失", "sparse hints, kit loop": "提示稀疏，工具包的循环",
    "sparse hints, TRL GRPOTrainer": "提示稀疏，TRL 的 GRPOTrainer", "sparse hints, TRL": "提示稀疏，TRL",
    "student, hint in every complaint": "学生型，每次抱怨都有提示", "student, sparse hints": "学生型，提示稀疏",
    "tool user": "工具型用户", "OPD (policy gradient)": "OPD（策略梯度）",
    "OPD as distillation (forward KL)": "OPD 作为蒸馏（前向 KL）",
    "Combined without its -1 broadcast (`opd.w_rl_negative=0`)": "Combined 去掉 -1 的广播（`opd.w_rl_negative=0`）",
    "OPD distilled with top-K reverse KL (K = 16)": "OPD 用 top-K 反向 KL 蒸馏（K = 16）",
    "Combined without -1 broadcast - OPD": "Combined 去掉 -1 的广播 - OPD",
    "Binary RL: old loss (mean over all tokens) - new default": "Binary RL：旧损失（对所有 token 取平均）- 新默认",
    "OPD: old loss (mean over all tokens) - new default": "OPD：旧损失（对所有 token 取平均）- 新默认",
    "Combined: old loss (mean over all tokens) - new default": "Combined：旧损失（对所有 token 取平均）- 新默认",
    "OPD: old OPD clip +-2 - new default": "OPD：旧的 OPD 截断 +-2 - 新默认",
    "Combined: old OPD clip +-2 - new default": "Combined：旧的 OPD 截断 +-2 - 新默认",
    "Binary RL: TRL - kit": "Binary RL：TRL - 工具包", "OPD (policy gradient): TRL - kit": "OPD（策略梯度）：TRL - 工具包",
    "Combined: TRL - kit": "Combined：TRL - 工具包",
}


def to_zh(text: str) -> str:
    """The :data:`ZH_SECTIONS` of the tables' output ``text`` (sections start with "## name"), headers and labels
    in Chinese, every number cell unchanged. KeyError names a label with no translation."""
    sections = {}
    for part in ("\n" + text).split("\n## ")[1:]:
        name, _, body = part.partition("\n")
        sections[name.strip()] = body.strip("\n")
    heads = {HEAD.format(n=n): HEAD_ZH.format(n=n) for n in (16, 48)}
    heads[PAIR_HEAD] = PAIR_HEAD_ZH
    out = []
    for name in ZH_SECTIONS:
        body = sections[name]
        for en, zh in heads.items():
            body = body.replace(en, zh)
        lines = []
        for line in body.splitlines():
            cells = line.split(" | ")
            if line.startswith("| ") and "---" not in line and not any(ch > "\u2e80" for ch in line):
                cells[0] = "| " + LABELS_ZH.get(cells[0][2:], cells[0][2:])
                cells[1] = LABELS_ZH.get(cells[1], cells[1])
                missing = [c.strip("| ") for c in cells[:2] if c.strip("| ") not in LABELS_ZH.values()
                           and c.strip("| ") not in _SAME_IN_ZH]
                if missing:
                    raise KeyError(f"no Chinese label for {missing[0]!r}: add it to LABELS_ZH")
            lines.append(" | ".join(cells))
        out.append(f"## {name}\n\n" + "\n".join(lines))
    return "\n\n".join(out)


#: labels that read the same in Chinese (method names the Chinese text keeps in English)
_SAME_IN_ZH = {"Binary RL", "Combined", "Combined - OPD", "OPD - Binary RL"}


SETS = (("v2", "v2 (one sentence)"), ("long", "long (2-5 sentences)"), ("real", "real outputs (0.5B model)"))


def reviser_rows(path="results/probe_reviser.json", strategy="binary") -> str:
    """The alignment rewards with and without the reviser on every probe set's dev and test split: hit / precision /
    recall of the negative words, all and per language, the whole-span recall, the share of no-error rows with no
    negative word, and on how many pairs the revision gave the rewards (elsewhere the rules did: no usable revision,
    or with ``combine="rules_first"`` the rules found a contradiction; results/probe_reviser.json, written by
    tools/probe_report.py --reviser)."""
    import json

    metrics = json.loads((ROOT / path).read_text(encoding="utf-8"))["metrics"]

    def cell(m):
        return f"{m['hit_rate']:.2f} / {m['precision']:.2f} / {m['recall']:.2f}"

    lines = ["| set | split | reader | all | zh | en | whole-span recall | no-error rows ok | pairs through the revision |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, label in SETS:
        for split in ("dev", "test"):
            for reader in ("rules", "reviser"):
                m = metrics[f"{reader}, {strategy} | {key} | {split}"]
                lang = m["groups"]["lang"]
                used = f"{m['sources'].get('revision', 0)} / {m['n']}" if reader == "reviser" else ""
                lines.append(f"| {label} | {split} | {reader} | {cell(m)} | {cell(lang['zh'])} | {cell(lang['en'])} | "
                             f"{m['span_recall']:.2f} | {m['no_error_ok']:.2f} | {used} |")
    return "\n".join(lines)


def localiser_rows(path="results/probe_localiser.json", strategy="binary") -> str:
    """The learned localiser beside the rules and their combination (the rules where they find a
    contradiction, else the localiser) on every probe set's dev and test split: hit / precision / recall, all and per
    language, whole-span recall, no-error rows, pairs per second (results/probe_localiser.json, written by
    tools/probe_localiser.py)."""
    import json

    doc = json.loads((ROOT / path).read_text(encoding="utf-8"))
    metrics, speed = doc["metrics"], doc["pairs_per_second"]

    def cell(m):
        return f"{m['hit_rate']:.2f} / {m['precision']:.2f} / {m['recall']:.2f}"

    readers = (("rules", "rules"), ("learned", "learned"), ("rules first, then learned", "rules + learned (rules first)"))
    lines = ["| set | split | reader | all | zh | en | whole-span recall | no-error rows ok | pairs/s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, label in SETS:
        for split in ("dev", "test"):
            for reader, name in readers:
                m = metrics[f"{name}, {strategy} | {key} | {split}"]
                lang = m["groups"]["lang"]
                ps = speed.get(f"{reader} {key} {split}")
                lines.append(f"| {label} | {split} | {reader} | {cell(m)} | {cell(lang['zh'])} | {cell(lang['en'])} | "
                             f"{m['span_recall']:.2f} | {m['no_error_ok']:.2f} | {'' if ps is None else f'{ps:.0f}'} |")
    return "\n".join(lines)


def tables() -> None:
    """Every table, printed in the README's order (Table 3 and the engines here, the rest in :func:`later_tables`)."""
    four = [(k, METHOD[k]) for k in ("binary_rl", "opd", "combined", "opd_kl")]
    print("## table3\n")
    print(score_rows("results/table3", [("teacher-vague", "sparse hints (half vague)"), ("teacher", "hint in every complaint")],
                     four, paper_for=("teacher-vague",)))
    print(score_rows("results/table3", [("teacher-vague-rl-pos", "sparse hints (half vague)"), ("teacher-rl-pos", "hint in every complaint")],
                     [("combined", "Combined without its -1 broadcast (`opd.w_rl_negative=0`)")], header=False))
    print(score_rows("results/table3_extra", [("teacher-vague-topk", "sparse hints (half vague)"), ("teacher-topk", "hint in every complaint")],
                     [("opd_kl", "OPD distilled with top-K reverse KL (K = 16)")], header=False))
    print()
    print(pair_rows("results/table3", [
        ("sparse hints", "teacher-vague", "combined", "opd", "Combined - OPD"),
        ("sparse hints", "teacher-vague", "opd", "binary_rl", "OPD - Binary RL"),
        ("hint in every complaint", "teacher", "combined", "opd", "Combined - OPD"),
        ("hint in every complaint", "teacher", "opd", "binary_rl", "OPD - Binary RL"),
        ("sparse hints", "teacher-vague", ("teacher-vague-rl-pos", "combined"), "opd", "Combined without -1 broadcast - OPD"),
        ("hint in every complaint", "teacher", ("teacher-rl-pos", "combined"), "opd", "Combined without -1 broadcast - OPD")]))
    print()
    print(pair_rows("results/table3", [
        ("sparse hints", "teacher-vague", ("teacher-vague-token-mean", "binary_rl"), "binary_rl", "Binary RL: old loss (mean over all tokens) - new default"),
        ("sparse hints", "teacher-vague", ("teacher-vague-token-mean", "opd"), "opd", "OPD: old loss (mean over all tokens) - new default"),
        ("sparse hints", "teacher-vague", ("teacher-vague-token-mean", "combined"), "combined", "Combined: old loss (mean over all tokens) - new default"),
        ("sparse hints", "teacher-vague", ("teacher-vague-clip2", "opd"), "opd", "OPD: old OPD clip +-2 - new default"),
        ("sparse hints", "teacher-vague", ("teacher-vague-clip2", "combined"), "combined", "Combined: old OPD clip +-2 - new default"),
        ("sparse hints, old loss", "teacher-vague-token-mean", "combined", "opd", "Combined - OPD"),
        ("sparse hints, old loss", "teacher-vague-token-mean", "opd", "binary_rl", "OPD - Binary RL")]))
    print("\n## table3-extra\n")
    print(score_rows("results/table3_extra", [("student", "student, hint in every complaint"), ("student-vague", "student, sparse hints"),
                                              ("tool", "tool user")], four))
    print()
    print(pair_rows("results/table3_extra", [
        (label, user, a, b, name) for user, label in [("student", "student, hint in every complaint"),
                                                       ("student-vague", "student, sparse hints"), ("tool", "tool user")]
        for a, b, name in [("combined", "opd", "Combined - OPD"), ("opd", "binary_rl", "OPD - Binary RL")]]))
    print("\n## engines\n")
    three = [(k, METHOD[k]) for k in ("binary_rl", "opd", "combined")]
    print(score_rows("results/engines", [("teacher-vague", "sparse hints, kit loop"),
                                         ("teacher-vague@trl", "sparse hints, TRL GRPOTrainer")], three))
    print()
    print(pair_rows("results/engines", [
        ("sparse hints", "teacher-vague", ("teacher-vague@trl", s), s, f"{n}: TRL - kit") for s, n in three] + [
        ("sparse hints, TRL", "teacher-vague@trl", "opd", "binary_rl", "OPD - Binary RL")]))
    later_tables(four)


def later_tables(four) -> None:
    """The tables after the engines': the quick grid, 48 steps, the chain, v2, hint selection, joint, the TA."""
    print("\n## quick grid (two-part questions) and 48 steps\n")
    print(score_rows("results", [("correcting-pair", "two-part questions"), ("correcting", "one-part questions")],
                     [(k, METHOD[k]) for k in ("sentence", "binary", "continuous")]))
    print()
    print(pair_rows("results", [("two-part questions", "correcting-pair", "binary", "sentence", "binary - sentence"),
                                ("two-part questions", "correcting-pair", "continuous", "sentence", "continuous - sentence")]))
    print()
    print(score_rows("results/teacher_48_steps", [("teacher", "teacher, 48 steps")], four, steps=48))
    print("\n## multi-step tool task (chain)\n")
    print(score_rows("results/chain", [("tool-chain", "episodes of 2-4 calls, outcome only"),
                                       ("tool-chain-prm", "episodes of 2-4 calls, outcome + process votes")],
                     [("binary_rl", "Binary RL broadcast of each step's reward")]))
    print()
    print(pair_rows("results/chain", [("episodes of 2-4 calls", "tool-chain", ("tool-chain-prm", "binary_rl"), "binary_rl",
                                       "outcome + process votes - outcome only")]))
    print("\n## the paper's second version (v2)\n")
    v2 = [("opd_kl", "OPD-only, v2 clipped top-k loss"), ("combined", "Hybrid, v2 clipped top-k loss")]
    print(score_rows("results/v2", [("teacher-vague-v2", "sparse hints (half vague)"), ("teacher-v2", "hint in every complaint"),
                                    ("student-v2", "student, hint in every complaint")], v2))
    print()
    print(pair_rows(["results/v2", "results/table3", "results/table3_extra"], [
        (label, user, (f"{user}-v2", a), b, name) for user, label in [("teacher-vague", "sparse hints"),
                                                                       ("teacher", "hint in every complaint"),
                                                                       ("student", "student, hint in every complaint")]
        for a, b, name in [("opd_kl", "opd", "OPD-only v2 - OPD v1"), ("combined", "combined", "Hybrid v2 - Combined v1"),
                           ("combined", (f"{user}-v2", "opd_kl"), "Hybrid v2 - OPD-only v2")]]))
    print("\n## hint selection (hints)\n")
    print(score_rows("results/hints", [(f"{u}-v2-{sel}", f"{label}, {sel}") for u, label in
                                       [("teacher-vague", "sparse hints (half vague)"),
                                        ("student", "student, hint in every complaint")] for sel in ("overlap", "shortest")],
                     [("combined", "Hybrid, v2 loss, three hint candidates")]))
    print()
    print(pair_rows(["results/hints", "results/v2"], [
        (label, f"{u}-v2{b}", (f"{u}-v2-overlap", "combined"), "combined", f"overlap - {name}")
        for u, label in [("teacher-vague", "sparse hints"), ("student", "student, hint in every complaint")]
        for b, name in [("", "whole hint (v1)"), ("-shortest", "shortest")]]))
    print("\n## joint vs separate (joint)\n")
    j3 = [("binary_rl", "GRPO (Binary RL)"), ("opd_kl", "OPD-only, v2 loss"), ("combined", "Hybrid, v2 loss")]
    print(score_rows("results/joint", [("joint-v2:teacher", "joint, teacher persona (capitals)"),
                                       ("joint-v2:student", "joint, student persona (flag colours)"),
                                       ("student-colour-v2", "separate, student persona (flag colours)")], j3))
    print()
    separate = {"teacher": {"binary_rl": ("teacher", "binary_rl"), "opd_kl": ("teacher-v2", "opd_kl"),
                            "combined": ("teacher-v2", "combined")},
                "student": {m: ("student-colour-v2", m) for m, _ in j3}}
    print(pair_rows(["results/joint", "results/v2", "results/table3"], [
        (f"{p} persona", p, (f"joint-v2:{p}", m), separate[p][m], f"{name}: joint - separate")
        for p in ("teacher", "student") for m, name in j3]))
    print("\n## the TA persona (ta)\n")
    print(score_rows("results/ta", [("ta-v2", "TA persona, alone")], j3))
    print()
    print(pair_rows("results/ta", [("TA persona", "ta-v2", "combined", "binary_rl", "Hybrid - GRPO"),
                                   ("TA persona", "ta-v2", "binary_rl", "opd_kl", "GRPO - OPD-only")]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
