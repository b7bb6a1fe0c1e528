"""Write the reproduction ledger, docs/reproduction.md, from the committed results (no training).

    .venv/bin/python tools/ledger.py            # print the ledger
    .venv/bin/python tools/ledger.py --check    # exit 1 if docs/reproduction.md differs from what this prints
    .venv/bin/python tools/ledger.py --write    # write docs/reproduction.md (the kit's own file: it is generated)

One row per claim of the two source documents (the article on token-level rewards, the OpenClaw-RL digest) and of the
paper's second version (v2, from a third party's transcription: docs/openclaw_v2.md): the kit's setting, its result,
the strength of the evidence and a verdict. Every number of a trained result is computed here from results/*/ablation.csv
(and results/serve/sessions_to_stable.csv for the live system) with claw_lib.rl.ablation, and every number of a
measurement (the probe sets, the serving benchmark, the real model) is read from its committed file under results/,
so the ledger cannot drift
from the results; tests/test_ledger.py fails when the committed page differs from what this script writes. Rows whose
result is one worked example in a notebook (the article's alignment and reward examples) name the notebook that asserts
it.

The verdict rule (shown in the page's legend, RULE_EN):
- the seed count is fixed before looking: ten seeds per setting (FIXED_SEEDS); a grid extended after a look at fewer
  seeds says so, and the seeds added after the look are reported alone and must pass on their own;
- a paired difference is beyond noise when |mean| > t * s.e., with t Student's two-sided 95 % critical value for the
  seeds used (t(9) = 2.26 for ten seeds, t(2) = 4.30 for three), not 2 s.e.; rows whose |mean| / s.e. lies within
  20 % of t either side are marked borderline;
- *reproduced*: the claim's direction beyond noise on the fixed seed count (or exact, or a held-out measurement past
  its target beyond noise); *not reproduced*: the opposite beyond noise on the same evidence, or a claim of no
  difference contradicted beyond noise; *direction only*: the claim's sign on the mean and on more seeds than the
  other sign, not beyond noise (or beyond it on fewer seeds than fixed); *tie*: no direction (as many seeds each
  way, or every seed equal) and within noise, its own verdict, consistent with a claim of no difference and not
  evidence against a claimed one; *inconclusive*: the rest (the opposite sign within noise, or on fewer seeds
  than fixed); *not run*: nothing measured the claim.
"""
import argparse
import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.rl.ablation import UNTIL_STABLE, load_results, paired, summarise  # noqa: E402

OUT = ROOT / "docs" / "reproduction.md"
VERDICTS = ("reproduced", "direction only", "tie", "inconclusive", "not reproduced", "not run")
ZH = {"reproduced": "复现", "direction only": "只有方向", "tie": "持平", "inconclusive": "无定论",
      "not reproduced": "没有复现", "not run": "没有运行"}
#: the seed count of every grid, fixed before its results were read
FIXED_SEEDS = 10
#: a row whose |mean| / s.e. lies within this share of the critical value, either side, is borderline
BORDER = 0.2
RULE_EN = [
    "- **Verdict rule / 判定规则** (applied by `tools/ledger.py` to every row):",
    f"  - the seed count is fixed before looking: {FIXED_SEEDS} seeds per setting. A grid extended after a look at fewer",
    "    seeds says so; the seeds added after the look are reported alone and must pass on their own.",
    "  - beyond noise: |mean| > t x s.e., t the two-sided 95 % critical value of Student's t for the seeds used",
    "    (t(9) = 2.26 for ten seeds, t(4) = 2.78 for five, t(2) = 4.30 for three), not 2 s.e.; *borderline*: |mean| / s.e.",
    f"    within {BORDER:.0%} of t, either side.",
    "  - **reproduced**: the claim's direction beyond noise on the fixed seed count (or exact, or a held-out measurement",
    "    past its target beyond noise). **not reproduced**: the same evidence the other way (the opposite direction beyond",
    "    noise, or a claim of no difference contradicted beyond noise). **direction only**: the claim's sign on the mean",
    "    and on more seeds than the other sign, not beyond noise (or beyond it on fewer seeds than fixed). **tie**: no",
    "    direction (as many seeds each way, or every seed equal), within noise: consistent with a claim of no difference,",
    "    not evidence against a claimed one. **inconclusive**: the rest (the opposite sign within noise, or on fewer seeds",
    "    than fixed). **not run**: nothing measured the claim.",
    "  - 种子数在看结果之前固定（每个设置十个）；看过之后再加种子的网格会注明，并单独报告后加的那一半，它必须自己过关。",
    "    超出噪声：|均值| > t x 标准误，t 取所用种子数的 Student t 分布双侧 95 % 临界值（十个种子 t(9) = 2.26），不是 2 个标准误；",
    "    |均值| / 标准误 在 t 上下 20 % 之内记为临界。复现：主张的方向超出噪声且种子数足够；没有复现：同样强度的反向证据；",
    "    只有方向：均值和多数种子是主张的方向，但没有超出噪声；持平：没有方向；无定论：其余情况；没有运行：没有测量。",
]


def t_crit(n: int) -> float:
    """Student's t two-sided 95 % critical value for a mean over ``n`` paired seeds (n - 1 degrees of freedom)."""
    from scipy.stats import t

    return float(t.ppf(0.975, n - 1))


def ratio(p) -> float:
    """|mean| / s.e. of a paired difference; inf for a nonzero mean with s.e. 0, 0 for a zero mean."""
    if p["mean"] == 0:
        return 0.0
    return abs(p["mean"]) / p["se"] if p.get("se") else float("inf")


def beyond(p) -> bool:
    """Whether a paired difference is beyond noise: |mean| > t(n - 1) x s.e. (no s.e. given: never)."""
    return p.get("se") is not None and p["n"] > 1 and ratio(p) > t_crit(p["n"])


def borderline(p) -> bool:
    """|mean| / s.e. within :data:`BORDER` of the critical value, either side."""
    if p.get("se") is None or p["n"] < 2:
        return False
    t = t_crit(p["n"])
    return (1 - BORDER) * t <= ratio(p) <= (1 + BORDER) * t


def evidence(p) -> str:
    """The evidence label of a paired difference (:func:`claw_lib.rl.ablation.paired`): seeds, |mean| / s.e. against
    t, borderline, and a grid extended after a look (``p["second"]``: the seeds added after it, alone)."""
    n, t = p["n"], t_crit(p["n"])
    if p.get("se") is None:
        return f"{n} seeds, paired, no s.e. / {n} 个种子配对，没有标准误"
    side, zh = (">", "超出噪声") if beyond(p) else ("<=", "在噪声之内")
    en = f"{n} seeds, paired, {ratio(p):.2f} s.e. {side} t({n - 1}) = {t:.2f}"
    cn = f"{n} 个种子配对，{ratio(p):.2f} 个标准误，{zh}"
    if borderline(p):
        en, cn = en + ", borderline", cn + "，临界"
    if p.get("second"):
        q = p["second"]
        f = ".1f" if abs(q["mean"]) >= 1 else ".3f"
        en += (f"; extended after a look at {n - q['n']} seeds, the {q['n']} added alone {q['mean']:+{f}} +- {q['se']:{f}},"
               f" {ratio(q):.2f} s.e. {'>' if beyond(q) else '<='} t({q['n'] - 1}) = {t_crit(q['n']):.2f}")
        cn += f"；看过 {n - q['n']} 个种子后扩展，后加的 {q['n']} 个单独 {q['mean']:+{f}} +- {q['se']:{f}}"
    return f"{en} / {cn}"


def verdict(p, sign: int) -> str:
    """The verdict of a paired difference under the rule (module docstring). ``sign`` +1: the claim says the
    difference is positive, -1 negative, 0 that there is none. ``p`` may count the seeds (wins / ties / losses) and
    carry ``second``, the seeds added after a look, which must pass alone for a reproduced / not reproduced."""
    full = p["n"] >= FIXED_SEEDS
    if sign == 0:
        if not beyond(p):
            return "tie"
        return "not reproduced" if full and _second_agrees(p, None) else "inconclusive"
    d = p["mean"] * sign
    if beyond(p):
        if d > 0:
            return "reproduced" if full and _second_agrees(p, sign) else "direction only"
        return "not reproduced" if full and _second_agrees(p, -sign) else "inconclusive"
    if "wins" in p and "losses" in p:
        support, against = (p["wins"], p["losses"]) if sign > 0 else (p["losses"], p["wins"])
    else:
        support, against = int(d > 0), int(d < 0)
    if d == 0 or support == against:
        return "tie"
    return "direction only" if d > 0 and support > against else "inconclusive"


def _second_agrees(p, sign) -> bool:
    """A grid extended after a look: the seeds added after it, alone, beyond noise in direction ``sign`` (None:
    either direction). A grid not extended: True."""
    q = p.get("second")
    if not q:
        return True
    return beyond(q) and (sign is None or q["mean"] * sign > 0)


def score(p) -> str:
    return f"{p['mean']:+.3f} +- {p['se']:.3f} ({p['wins']} / {p['ties']} / {p['losses']} of {p['n']} better / tied / worse)"


def speed(p, unit="steps") -> str:
    return (f"{p['mean']:+.1f} +- {p['se']:.1f} {unit} ({p['losses']} / {p['ties']} / {p['wins']} of {p['n']} "
            "faster / tied / slower)")


def cell(v) -> str:
    """Steps until stable (never = the run length) and the seeds that got there."""
    return f"{v['until_stable']:.1f} ({v['stable']}/{v['n']})"


def rows_of(*folders):
    return [r for f in folders for r in load_results(ROOT / "results" / f)[0]]


def live_row():
    """The live system (claw serve + claw simulate): sessions until stable, combined vs binary_rl, per seed."""
    from claw_lib.serve.simulate import counted_sessions, sessions_until_stable

    with open(ROOT / "results" / "serve" / "sessions_to_stable.csv", newline="") as f:
        recs = list(csv.DictReader(f))
    runs = {}
    for r in recs:
        runs.setdefault((r["strategy"], int(r["seed"])), []).append(r)
    val = {}
    for key, rs in runs.items():
        rs.sort(key=lambda r: int(r["session"]))
        v = sessions_until_stable([r["holds"] == "True" for r in rs])
        val[key] = (counted_sessions(v, int(rs[0]["run_sessions"])), v is not None)
    rows = [{"user": "live", "strategy": s, "seed": k, "sessions": c} for (s, k), (c, _) in val.items()]
    p = paired(rows, "live", "combined", "binary_rl", key="sessions")
    # seeds 0-4 were run first and read (within noise); seeds 5-9 were added after that look
    p["second"] = paired([r for r in rows if r["seed"] >= 5], "live", "combined", "binary_rl", key="sessions")
    reached = {s: sum(ok for (t, _), (_, ok) in val.items() if t == s) for s in ("combined", "binary_rl")}
    n = {s: sum(t == s for t, _ in val) for s in ("combined", "binary_rl")}
    means = {s: sum(c for (t, _), (c, _) in val.items() if t == s) / n[s] for s in n}
    p["run_sessions"] = max(int(r["run_sessions"]) for r in recs)
    return p, reached, n, means


def judged(p, sign):
    """(evidence, verdict) of a paired difference under the rule."""
    return evidence(p), verdict(p, sign)


def article_rows(add) -> None:
    """The article (000): its worked examples, each asserted in the notebook named (tests/test_ledger.py checks that
    every number of these results is in that notebook's stored outputs), and its A/B from results/pair_ab/."""
    A = "article"
    add(A, "§4: semantic edit distance marks 伦敦 -> 巴黎 as a replace", "§4：语义编辑距离把 伦敦 -> 巴黎 判为替换",
        "nb 02 §3 (`claw_lib.alignment.dp`)", "replace, cost 0.564 > threshold 0.3", "exact (asserted in nb 02) / 精确",
        "reproduced")
    add(A, "§4: per-token `encode(token)` loses the context", "§4：逐 token 单独编码会丢掉上下文",
        "nb 01 §2, §5", "isolated 0.000 vs contextual 0.128; MiniLM makes 伦敦 ≈ 巴黎 (a fake match)",
        "exact (asserted in nb 01) / 精确", "reproduced")
    add(A, "§5-1: binary token rewards [.5, .5, .5, .5, -1, .5]", "§5-1：二值 token 奖励 [.5, .5, .5, .5, -1, .5]",
        "nb 03 §1", "identical", "exact (asserted in nb 03) / 精确", "reproduced")
    add(A, "§5-2, as the kit reads it (three outputs against one correction; the article corrects one output to 巴黎 or "
        "马赛): continuous rewards grade the severity (伦敦 worse than 马赛)",
        "§5-2，工具包的读法（三个输出对一个纠正；文章是把一个输出纠正成 巴黎 或 马赛）：连续奖励区分错误的严重程度（伦敦比马赛更差）",
        "nb 04 §2", "the encoder ranks 马赛 (0.632) > 北京 > 伦敦 (0.566)", "exact (asserted in nb 04) / 精确",
        "not reproduced")
    add(A, "§5-3: strategy B is more reasonable than A", "§5-3：策略 B 比 A 更合理",
        "nb 05b (B as the kit reads it)", "A puts -17.83 on 法 (the join); B puts the penalty on 伦 only",
        "exact (asserted in nb 05b) / 精确", "reproduced")
    rtg = {"n": 3, "mean": 0.642 - 0.933, "se": None, "wins": 0, "ties": 0, "losses": 3}
    add(A, "§6-4: credit a token with the rewards at and after it (the reward-to-go)", "§6-4：只用该时间步及之后的回报（reward-to-go）",
        "nb 08 \"What PPO sees\", a reward on every token", "0.642 vs 0.933 (direct) at step 4, worse on all 3 seeds",
        "three seeds x four steps, fewer than fixed / 三个种子、四步，少于固定的种子数", verdict(rtg, +1))
    add(A, "§6-2: normalising the rewards stabilises training", "§6-2：对奖励做归一化让训练更稳定",
        "nb 08 \"What PPO sees\" (`advantage=\"whiten\"`)",
        "stability (the spread over seeds or steps) not measured; the score: 0.933 at step 4, as direct; 0.808 vs 0.875 at step 2",
        "untested (stability); three seeds x four steps for the score / 稳定性未测；分数只有三个种子、四步", "not run")
    first = {"n": 3, "mean": 0.0, "se": 0.0, "wins": 0, "ties": 3, "losses": 0}
    add(A, "§6-1: the first sub-token is enough (as good as spreading the reward)", "§6-1：只给第一个子 token 就够了（和分摊一样好）",
        "nb 08 \"What PPO sees\" (first vs spread)", "first = spread on every seed",
        "three seeds, equal on each / 三个种子，每个都相等", verdict(first, 0))
    _pair_ab_rows(add)
    add(A, "§7: a token reward model is more efficient (it scores an output without a correction or an alignment)",
        "§7：token 级奖励模型更高效（打分不需要纠正和对齐）", "nb 13",
        "one encoding per output, no alignment: true by construction, but not timed against the alignment",
        "untested (no timing) / 未测试（没有计时）", "not run")
    add(A, "§7: ... and more accurate", "§7：……而且更准", "nb 13", "value AUC 0.436 on unseen countries (chance 0.5)",
        "held-out set (asserted in nb 13) / 留出集", "not reproduced")
    add(A, "§5 fusion (binary + perplexity smoothing), §6-2 shaping and decayed credit, §6-3 cleaning, confidence and "
        "aggregation, in training", "§5 融合（二值 + 困惑度平滑）、§6-2 塑形与衰减、§6-3 清洗、置信度与聚合，用于训练",
        "shown on examples in nb 07; no training run uses them", "-", "untested / 未测试", "not run")
    rise = {"n": 1, "mean": 0.009, "se": None}
    add(A, "§8-2: the mean token reward rises during training", "§8-2：训练中 token 奖励的均值上升",
        "nb 10 §2, binary token rewards, correcting user, one run of 10 steps",
        "trend of the mean token reward +0.009 per step", "one seed / 一个种子", verdict(rise, +1))


def _pair_ab_rows(add) -> None:
    """§8-4 from results/pair_ab/: ten seeds, extended after the three-seed grid (seeds 0-2) did not show binary's
    lead; the seeds added after that look (3-9) are reported alone."""
    ab = rows_of("pair_ab")
    for m, zh in (("binary", "二值"), ("continuous", "连续")):
        p = paired(ab, "correcting-pair", m, "sentence")
        p["second"] = paired([r for r in ab if r["seed"] >= 3], "correcting-pair", m, "sentence")
        first = paired([r for r in ab if r["seed"] < 3], "correcting-pair", m, "sentence")
        add("article", f"§8-4: token-level ({m}) beats sentence-level rewards", f"§8-4：token 级（{zh}）奖励胜过句子级",
            "two-part questions, `results/pair_ab/`, final score",
            f"{score(p)}; the three-seed grid first (seeds 0-2: {first['mean']:+.3f})", *judged(p, +1))


def alignment_row(add) -> None:
    """The article's core claim in general: the alignment locates the corrected words, on the held-out test splits
    of the three probe sets (results/probe_reviser.json, tools/probe_report.py); judged on the real outputs' hit
    rate against the target the README states for it (0.9), binomial s.e. over the split's pairs."""
    import json

    m = json.loads((ROOT / "results" / "probe_reviser.json").read_text(encoding="utf-8"))["metrics"]
    hpr = lambda k: "{:.2f} / {:.2f} / {:.2f}".format(*(m[k][x] for x in ("hit_rate", "precision", "recall")))  # noqa: E731
    real = m["rules, binary | real | test"]
    miss = {"n": real["n"], "mean": real["hit_rate"] - ALIGN_TARGET,
            "se": float(np.sqrt(real["hit_rate"] * (1 - real["hit_rate"]) / real["n"]))}
    add("article", "§4-§5: the alignment locates the corrected words in general (not only in the worked example)",
        "§4-§5：对齐能普遍地找到被纠正的词（不只是示例）",
        "hit / precision / recall of the negative words on the probe sets' test splits, "
        "`results/probe_reviser.json` (tools/probe_report.py)",
        f"v2 {hpr('rules, binary | v2 | test')}; long {hpr('rules, binary | long | test')}; real outputs of a 0.5B model "
        f"{hpr('rules, binary | real | test')} (with the reviser {hpr('reviser, binary | real | test')}); "
        f"the real outputs' hit {real['hit_rate']:.2f} against the target {ALIGN_TARGET}",
        f"held-out test split of {real['n']} pairs, deterministic rules; hit {real['hit_rate'] - ALIGN_TARGET:+.2f} from "
        f"the target, {ratio(miss):.1f} binomial s.e. / 留出 test 划分，{real['n']} 对", verdict(miss, +1))


#: the real-output probe set's hit-rate target (README.md, docs/reviser.md)
ALIGN_TARGET = 0.9


def _binary_rl_gain(t3):
    """Binary RL's gain over the untrained model per seed (teacher user, sparse hints): final - base, paired."""
    g = np.array([r["final_score"] - r["base_score"] for r in t3
                  if (r["user"], r["strategy"]) == ("teacher-vague", "binary_rl")])
    return {"n": len(g), "mean": float(g.mean()), "se": float(g.std(ddof=1) / np.sqrt(len(g))),
            "wins": int((g > 0).sum()), "ties": int((g == 0).sum()), "losses": int((g < 0).sum())}


def table3_rows(add) -> None:
    """The digest's Table 3 (teacher user, sparse hints: the paper's regime), its step-8 pattern and Binary RL's gain."""
    D = "digest"
    t3 = rows_of("table3")
    s3 = summarise(t3)
    p = paired(t3, "teacher-vague", "opd", "binary_rl")
    add(D, "Table 3: OPD > Binary RL after 16 steps (0.72 vs 0.23)", "表 3：16 步后 OPD > Binary RL（0.72 对 0.23）",
        "teacher user, sparse hints, `results/table3/`, final score",
        f"{s3[('teacher-vague', 'opd')]['final']:.2f} vs {s3[('teacher-vague', 'binary_rl')]['final']:.2f}; {score(p)}",
        evidence(p), verdict(p, +1))
    p = paired(t3, "teacher-vague", "combined", "opd")
    add(D, "Table 3: Combined > OPD after 16 steps (0.81 vs 0.72)", "表 3：16 步后 Combined > OPD（0.81 对 0.72）",
        "teacher user, sparse hints, `results/table3/`, final score",
        f"{s3[('teacher-vague', 'combined')]['final']:.2f} vs {s3[('teacher-vague', 'opd')]['final']:.2f}; {score(p)}",
        evidence(p), verdict(p, +1))
    ex = rows_of("table3_extra")
    p = paired(ex, "student", "combined", "opd")
    add(D, "Combined is the best method (student user)", "Combined 是最好的方法（学生型用户）",
        "student user, dense hints, `results/table3_extra/`, final score", score(p), *judged(p, +1))
    p = paired(ex, "student", "opd", "binary_rl")
    add(D, "OPD > Binary RL (student user)", "OPD > Binary RL（学生型用户）",
        "student user, dense hints, `results/table3_extra/`, final score", score(p), *judged(p, +1))
    _step8_rows(add, t3)
    slow_start_cause_row(add)
    b, g = s3[("teacher-vague", "binary_rl")], _binary_rl_gain(t3)
    little = dict(g, mean=g["mean"] - (0.23 - 0.17))
    little.pop("wins"), little.pop("losses")
    add(D, "Binary RL gains little (0.17 -> 0.23)", "Binary RL 收获很小（0.17 -> 0.23）",
        "teacher user, sparse hints, `results/table3/`, final - base per seed, against the paper's gain of 0.06",
        f"{b['base']:.2f} -> {b['final']:.2f}; gain {score(g)}", *judged(little, -1))


def slow_start_cause_row(add) -> None:
    """The digest's cause of OPD's slow start, strict filtering that leaves few samples: the share of hinted turns
    whose hint the filter accepts in OPD's first four steps (results/opd_health.json, tools/opd_health.py: dense
    hints, three seeds per user)."""
    import json

    doc = json.loads((ROOT / "results" / "opd_health.json").read_text(encoding="utf-8"))
    early = {u: float(np.mean([r["opd/accepted_fraction"] for runs in doc[u].values() for r in runs
                               if "opd/accepted_fraction" in r and r["step"] <= 4])) for u in ("teacher", "student")}
    add("digest", "OPD starts slowly because strict filtering leaves few samples", "OPD 起步慢，是因为严格的过滤只留下很少的样本",
        "the share of hinted turns whose hint is accepted, steps 1-4, dense hints, `results/opd_health.json`",
        f"teacher {early['teacher']:.2f}, student {early['student']:.2f}: the filter keeps most hints where no slow start "
        "was seen; where hints are sparse (the complaints are vague) the kit's samples are few by construction, not by "
        "filtering", "three seeds per user, one regime / 每个用户三个种子，一种设置", "inconclusive")


def _step8_rows(add, t3) -> None:
    """The paper's step-8 column: OPD no better than Binary RL after 8 steps (0.25 each), in the paper's regime
    (results/table3/, teacher user, sparse hints) and in the setting built after that regime showed the opposite
    (results/step8/, nine complaints in ten vague)."""
    D = "digest"
    claim = ("OPD is no better than Binary RL after 8 steps (the paper's Table 3: 0.25 each; the digest: \"slow early\")",
             "8 步后 OPD 不比 Binary RL 好（论文表 3：都是 0.25；解读：“前期见效慢”）")
    p = paired(t3, "teacher-vague", "opd", "binary_rl", "score_at_8")
    add(D, *claim, "the paper's regime: teacher user, sparse hints (half the complaints vague), `results/table3/`, "
        "score at step 8", score(p), *judged(p, 0))
    st8 = rows_of("step8")
    p = paired(st8, "teacher-sparse", "opd", "binary_rl", "score_at_8")
    add(D, *claim, "teacher user, nine in ten complaints vague, `results/step8/`, score at step 8; this setting was "
        "built after the paper's regime showed the opposite (the row above)", score(p), *judged(p, 0))
    p = paired(st8, "teacher-sparse", "opd", "binary_rl")
    add(D, "... and far ahead by step 16", "……到第 16 步遥遥领先",
        "the same runs (nine in ten vague), final score", score(p), *judged(p, +1))


def digest_rows(add) -> None:
    """The digest (003) beyond Table 3: interactions per user, the process reward, the live system, what is not run."""
    D = "digest"
    s3, sx = summarise(rows_of("table3")), summarise(rows_of("table3_extra"))
    s48 = summarise(rows_of("teacher_48_steps"))
    te, st = s3[("teacher", "combined")], sx[("student", "combined")]
    add(D, "the student user needs more interactions than the teacher user (36 vs 24)",
        "学生型用户比老师型用户需要更多交互（36 对 24）",
        "Combined, dense hints, steps until stable (never = the run length): 16 steps `results/table3/` and "
        "`results/table3_extra/`; 48 steps `results/teacher_48_steps/` (no 48-step student run)",
        f"16 steps: teacher {cell(te)}, student {cell(st)}; 48 steps: teacher {cell(s48[('teacher', 'combined')])}",
        f"unpaired and censored: stable within 16 steps on {te['stable']} of {te['n']} teacher seeds, {st['stable']} of "
        f"{st['n']} student seeds (Fisher's exact p = {_fisher(te, st):.2f}) / 不配对、有截断：16 步内老师型 "
        f"{te['stable']}/{te['n']}、学生型 {st['stable']}/{st['n']} 个种子稳定", "direction only")
    ch = rows_of("chain")
    p = paired(ch, "tool-chain", ("tool-chain-prm", "binary_rl"), "binary_rl")
    add(D, "process reward (PRM) helps on long tool tasks (0.17 -> 0.30)", "过程奖励（PRM）在长程工具任务上有帮助（0.17 -> 0.30）",
        "episodes of 2-4 tool calls, outcome + process votes vs outcome, `results/chain/`, final score", score(p),
        evidence(p), verdict(p, +1))
    lp, reached, n, means = live_row()
    add(D, "the live system, its loops run in lock-step (the client waits for the judge and the trainer after each "
        "turn): Combined reaches a stable preference in fewer sessions than Binary RL (the kit's comparison; the "
        "digest makes none)", "在线系统，各循环同步运行（每轮之后客户端等待评判器和训练器）：Combined 比 Binary RL 用更少的会话让偏好稳定"
        "（工具包自己的比较，解读里没有）",
        f"`claw serve` + `claw simulate(wait_each_turn=True)`, teacher user, {lp['run_sessions']} sessions, "
        "`results/serve/sessions_to_stable.md`",
        f"combined {means['combined']:.1f} ({reached['combined']}/{n['combined']}), binary_rl {means['binary_rl']:.1f} "
        f"({reached['binary_rl']}/{n['binary_rl']}) sessions until stable (never = {lp['run_sessions']}); {speed(lp, 'sessions')}",
        *judged(lp, -1))
    serve_bench_row(add)
    opd_direction_row(add)
    add(D, "GUI, SWE, terminal tracks; 128 environments", "GUI、SWE、终端等赛道；128 个环境", "-", "-",
        "untested / 未测试", "not run")


def _fisher(a, b) -> float:
    """Two-sided Fisher's exact p of 'stable within the run' on two unpaired users' seeds."""
    from scipy.stats import fisher_exact

    return float(fisher_exact([[a["stable"], a["n"] - a["stable"]], [b["stable"], b["n"] - b["stable"]]])[1])


def serve_bench_row(add) -> None:
    """The digest's first contribution, the asynchronous architecture: its cost and gain as benchmarks/bench_serve.py
    measured them (results/serve/bench_serve.md; one benchmark, three rotating repeats, no seeds)."""
    import re

    text = (ROOT / "results" / "serve" / "bench_serve.md").read_text(encoding="utf-8")
    p50, p95 = re.search(r"\| on / off \| \| ([\d.]+) \| ([\d.]+) \|", text).groups()
    asy, step, ratio_ = re.search(r"Means: async ([\d.]+) sessions/min, step by step ([\d.]+) \(async / step = ([\d.]+)\)",
                                  text).groups()
    add("digest", "the asynchronous, non-blocking system: serving is not held up by training, and the loops in "
        "parallel give more throughput", "异步、不阻塞的系统：训练不拖住服务，各循环并行带来更高吞吐",
        "`benchmarks/bench_serve.py`, tiny GPT, 2 shared CPU cores, `results/serve/bench_serve.md`",
        f"serving latency with training on / off: p50 x{p50}, p95 x{p95}; sessions per minute async {asy} vs step by "
        f"step {step} (async / step = {ratio_}: no throughput gain on 2 cores)",
        "one benchmark, three repeats, no seeds; a shared 2-core machine / 一次基准、三次重复，没有种子；共享的 2 核机器",
        "inconclusive")


def opd_direction_row(add) -> None:
    """OPD's per-token direction (the digest's mechanism) on the real model, with controls
    (results/real_model/signal_controls.csv, tools/real_model_signal.py): where the most negative token lands."""
    with open(ROOT / "results" / "real_model" / "signal_controls.csv", newline="") as f:
        hit = {(r["source"], r["removal"]): (float(r["hit"]), int(r["n"])) for r in csv.DictReader(f)
               if r["signal"] == "opd"}
    a, r, ru, lo = hit[("all", "raw")], hit[("real", "raw")], hit[("real", "contrast_unrelated")], hit[("probe_long", "raw")]
    add("digest", "OPD's advantage is negative on the token the hinted teacher avoids (a per-token direction)",
        "OPD 的优势在带提示的教师避开的 token 上为负（逐 token 的方向）",
        "Qwen2.5-Coder-0.5B-Instruct as the hinted teacher, `results/real_model/signal_controls.csv`; nb 06 shows it "
        "exactly on the tiny GPT",
        f"the most negative token in the corrected span on {a[0]} of {a[1]} items; {r[0]} of the {r[1]} real-output items "
        f"({ru[0]} with the unrelated contrast subtracted); {lo[0]} of the {lo[1]} long probe items",
        f"one model, {a[1]} items, no target fixed before the run / 一个模型，{a[1]} 条，事先没有定目标", "direction only")


def real_model_rows(add) -> None:
    """What the real-model runs (results/real_model/: train_runs.csv, learning_pilots.csv, learning.csv,
    learning_reference.csv) showed: correctness before and after every run, and the one style result against a
    one-line prompt."""
    runs = _real_runs()
    up = [k for k, (c0, c1, *_) in runs.items() if c1 > c0]
    same = [k for k, (c0, c1, *_) in runs.items() if c1 == c0]
    corr = {k: v for k, v in runs.items() if k[1] == "correcting"}
    add("article", "token rewards from the user's corrections make a real model answer more correctly (the article's "
        "use case)", "来自用户纠正的 token 奖励让真实模型答得更对（文章的用法）",
        "Qwen2.5-Coder-0.5B-Instruct, correcting user, binary and continuous token rewards, "
        "`results/real_model/train_runs.csv`",
        "; ".join(f"{k[0]}: correct {c0} -> {c1} ({n} prompts, {steps} steps)" for k, (c0, c1, n, steps, _) in corr.items()),
        "2 steps of 4 samples, 8 prompts, one seed: untested at this size / 两步、每步 4 个样本、8 个提示：这个规模等于没测",
        "inconclusive")
    add("digest", "the model gets better from users' next messages (on a real model, measured by correctness)",
        "模型从用户的下一条消息中变好（真实模型上，以正确率衡量）",
        "every real-model training run: `results/real_model/train_runs.csv`, `learning_pilots.csv`, `learning.csv`",
        f"no run answered more correctly: {len(up)} of {len(runs)} runs raised correctness, {len(same)} left it unchanged "
        f"(both 2 steps on 8 prompts), {len(runs) - len(up) - len(same)} lowered it (held-out, three seeds: "
        + " / ".join(str(v[1]) for k, v in runs.items() if k[0].startswith("final")) + f" from {runs[('final_seed0', 'student')][0]})",
        "one to three seeds per setting, 8-36 prompts / 每个设置一到三个种子、8-36 个提示", "inconclusive")
    add("digest", "OPD teaches a real model the user's style (student user, on questions it never trained on)",
        "OPD 让真实模型学会用户的风格（学生型用户，没训练过的问题）", _style_setting(), _style_result(runs),
        "three seeds; no better than a one-line prompt / 三个种子；不比一行提示好", "direction only")


def _real_runs():
    """{(run, user): (correct first, correct last, prompts, steps, (style first, style last))} of every real-model
    training run, from the three committed CSVs (eval rows by step)."""
    runs = {}
    for name in ("train_runs.csv", "learning_pilots.csv", "learning.csv"):
        with open(ROOT / "results" / "real_model" / name, newline="") as f:
            for r in csv.DictReader(f):
                runs.setdefault((r["run"], r["user"]), []).append(r)
    out = {}
    for k, rs in runs.items():
        rs.sort(key=lambda r: int(r["step"]))
        out[k] = (float(rs[0]["correct"]), float(rs[-1]["correct"]), int(rs[0]["n"]), int(rs[-1]["step"]),
                  (rs[0]["style"], rs[-1]["style"]))
    return out


def _style_setting() -> str:
    return ("`opd_kl`, student user, lr 5e-5, 12 steps, 36 held-out questions, `results/real_model/learning.csv`; the "
            "untrained model with the preference stated in one line, `learning_reference.csv`")


def _style_result(runs) -> str:
    """The three held-out seeds' style and correctness after training against the base model asked plainly and
    with the preference in its prompt."""
    with open(ROOT / "results" / "real_model" / "learning_reference.csv", newline="") as f:
        ref = {r["prompt"]: r for r in csv.DictReader(f) if (r["split"], r["user"]) == ("heldout", "student")}
    final = [v for k, v in runs.items() if k[0].startswith("final")]
    style = np.mean([float(v[4][1]) for v in final])
    correct = np.mean([v[1] for v in final])
    return (f"style {final[0][4][0]} -> {style:.3f}, correct {final[0][0]} -> {correct:.3f} (mean of {len(final)} seeds); "
            f"the untrained model told the preference in one line: style {ref['hinted']['style']}, correct "
            f"{ref['hinted']['correct']}: the trained style is no better than the prompt's, at lower correctness")


def v2_rows(add) -> None:
    """The paper's second version (v2): sessions until stable there, steps until stable (never = 16) here."""
    V = "v2 (transcription)"
    v2 = rows_of("table3", "table3_extra", "v2", "hints", "joint")
    regimes = (("teacher", "dense hints", "提示密集"), ("teacher-vague", "sparse hints", "提示稀疏"))
    for user, label, zh in regimes:
        p = paired(v2, user, (f"{user}-v2", "combined"), "binary_rl", UNTIL_STABLE)
        add(V, f"Hybrid < GRPO (Binary RL) in sessions until stable (teacher persona, separate: 14.0 vs 18.0; here {label})",
            f"稳定所需会话数 Hybrid < GRPO（Binary RL）（老师角色，分别优化：14.0 对 18.0；这里{zh}）",
            f"teacher user, {label}, `results/v2/` + `results/table3/`, steps until stable", speed(p), evidence(p),
            verdict(p, -1))
    for user, label, zh in regimes:
        p = paired(v2, f"{user}-v2", "combined", "opd_kl", UNTIL_STABLE)
        add(V, f"Hybrid < OPD-only (teacher persona, separate: 14.0 vs 17.6; here {label})",
            f"Hybrid < 只用 OPD（老师角色，分别优化：14.0 对 17.6；这里{zh}）",
            f"teacher user, {label}, `results/v2/`, steps until stable", speed(p), evidence(p), verdict(p, -1))
    for user, label, zh in regimes:
        p = paired(v2, user, "binary_rl", (f"{user}-v2", "opd_kl"), UNTIL_STABLE)
        add(V, f"GRPO < OPD-only (the joint average, 14.1 vs 29.7; v2's own separate teacher row has 18.0 vs 17.6, "
            f"the other way; here teacher, {label})",
            f"GRPO < 只用 OPD（联合优化的平均 14.1 对 29.7；第二版自己分别优化的老师行是 18.0 对 17.6，方向相反；这里老师型用户，{zh}）",
            f"teacher user, {label}, `results/v2/` + `results/table3/`, steps until stable", speed(p), evidence(p),
            verdict(p, -1))
    ta = rows_of("ta")
    p = paired(ta, "ta-v2", "binary_rl", "opd_kl", UNTIL_STABLE)
    add(V, "GRPO < OPD-only (TA persona; separate 22.4 vs 36.0)", "GRPO < 只用 OPD（助教角色；分别优化 22.4 对 36.0）",
        "TA persona, `results/ta/`, steps until stable", speed(p), evidence(p), verdict(p, -1))
    p = paired(ta, "ta-v2", "combined", "binary_rl", UNTIL_STABLE)
    add(V, "Hybrid < GRPO (TA persona; separate 11.8 vs 22.4)", "Hybrid < GRPO（助教角色；分别优化 11.8 对 22.4）",
        "TA persona, `results/ta/`, steps until stable", speed(p), evidence(p), verdict(p, -1))
    p = paired(v2, "teacher", ("joint-v2:teacher", "combined"), ("teacher-v2", "combined"), UNTIL_STABLE)
    add(V, "joint optimisation is faster than separate (Hybrid 10.3 vs 15.0)", "联合优化比分别优化更快（Hybrid 10.3 对 15.0）",
        "teacher persona, Hybrid, joint - separate, `results/joint/` + `results/v2/`, steps until stable", speed(p),
        evidence(p), verdict(p, -1))
    p = paired(v2, "teacher-vague-v2", ("teacher-vague-v2-overlap", "combined"), "combined", UNTIL_STABLE)
    add(V, "choosing the hint by top-k overlap beats a random pick (12.5 vs 16.1)",
        "按 top-k 重合挑选提示胜过随机挑选（12.5 对 16.1）",
        "no random pick run; against the whole hint (v1's rule), sparse hints, `results/hints/`",
        f"overlap - whole hint {speed(p)}", "untested against a random pick / 没有与随机挑选比较", "not run")


def ledger_rows():
    """[(source, claim_en, claim_zh, setting, result, evidence, verdict)] in the order of the page."""
    out = []

    def add(source, en, zh, setting, result, ev, v):
        assert v in VERDICTS, v
        out.append((source, en, zh, setting, result, ev, v))

    for part in (article_rows, alignment_row, table3_rows, digest_rows, real_model_rows, v2_rows):
        part(add)
    return out


def render() -> str:
    rows = ledger_rows()
    head = [
        "# Reproduction ledger / 复现账本",
        "",
        "Generated by `tools/ledger.py` from the committed results (`results/*/ablation.csv`,",
        "`results/serve/sessions_to_stable.csv`, `results/serve/bench_serve.md`, `results/probe_reviser.json`,",
        "`results/real_model/*.csv`); `tests/test_ledger.py` fails when this page differs from what the script",
        "writes. Do not edit by hand: change the script or the results, then `.venv/bin/python tools/ledger.py --write`.",
        "",
        "由 `tools/ledger.py` 从已提交的结果生成；本页与脚本输出不一致时 `tests/test_ledger.py` 会失败。不要手改：改脚本或结果，",
        "再运行 `.venv/bin/python tools/ledger.py --write`。",
        "",
        "- **Sources / 来源:** the article on token-level rewards and the OpenClaw-RL digest (the two documents the kit",
        "  follows; [docs/seed_map.md](seed_map.md) lists them part by part), and the paper's second version",
        "  (arXiv 2603.10165 v2), whose numbers come from a third",
        "  party's transcription ([docs/openclaw_v2.md](openclaw_v2.md) says which). 文章、OpenClaw-RL 解读，以及论文第二版",
        "  （数字来自第三方转录）。",
        "- **Scale / 规模:** a 1.6M-parameter GPT and rule-based simulated users here, Qwen3-4B and an LLM judge in the paper:",
        "  compare directions, not values; the rows on a real model (Qwen2.5-Coder-0.5B-Instruct on a CPU) say so. 这里是",
        "  1.6M 参数的 GPT 和规则用户，论文是 Qwen3-4B 和 LLM 评判器：比较方向，不比较数值；真实模型的行会注明。",
        "- **Scores / 分数:** paired per seed, a - b, mean +- s.e., then the seeds on which a was better / tied / worse.",
        "- **Speed / 速度:** steps until the score holds 0.9 three evaluations in a row, a seed that never gets there counted at",
        "  the run length (16), paired per seed, then the seeds on which a was faster / tied / slower (the live system:",
        "  sessions, never = the run's length). 稳定所需步数，从未做到记为训练长度，按种子配对。",
        "- **Evidence / 证据:** seeds, paired, |mean| / s.e. against Student's t for those seeds / exact (one deterministic",
        "  computation) / a held-out set / untested.",
        *RULE_EN,
        "",
                "| # | source | claim / 结论 | kit setting | result | evidence / 证据 | verdict / 判定 |",
        "|---|---|---|---|---|---|---|",
    ]
    body = [f"| {i} | {src} | {en}<br>{zh} | {setting} | {res} | {ev} | **{v}** / {ZH[v]} |"
            for i, (src, en, zh, setting, res, ev, v) in enumerate(rows, 1)]
    counts = {v: sum(r[-1] == v for r in rows) for v in VERDICTS}
    tail = ["", "Totals / 合计: " + ", ".join(f"{v} {counts[v]}" for v in VERDICTS) + ".", "", multiplicity(rows)]
    return "\n".join(head + body + tail) + "\n"


def multiplicity(rows) -> str:
    """The page's line on multiplicity: how many rows are a test at the 95 % level, and how many chance verdicts that
    allows when no effect were real."""
    tested = sum(" s.e. " in r[5] for r in rows)
    border = sum("borderline" in r[5] for r in rows)
    return (f"**Multiplicity / 多重比较:** {len(rows)} rows, {tested} of them a paired test at the 95 % level with no "
            f"correction for their number: if none of those effects were real, about {tested * 0.05:.1f} of them would "
            f"still come out beyond noise by chance (one in twenty). A single verdict, above all one of the {border} "
            f"borderline rows, can be such a chance; a direction that several rows share is less likely to be. "
            f"{len(rows)} 行，其中 {tested} 行是 95 % 水平的配对检验，没有按检验次数校正：即使这些效应都不存在，"
            f"也约有 {tested * 0.05:.1f} 行会碰巧超出噪声；单独一行（特别是 {border} 个临界行）可能就是这样的偶然。")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="exit 1 if docs/reproduction.md is not what this writes")
    g.add_argument("--write", action="store_true", help="write docs/reproduction.md")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        if not same:
            print(f"error: {OUT} differs from tools/ledger.py's output; run it with --write", file=sys.stderr)
        return 0 if same else 1
    if a.write:
        from claw_lib.utils import atomic_write

        with atomic_write(OUT) as f:
            f.write(text)
        print(f"wrote {OUT}")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
