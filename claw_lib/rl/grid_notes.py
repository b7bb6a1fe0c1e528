"""What a grid's ``ablation.md`` does not establish, and the dated corrections of its reading: the closing sections
that :func:`claw_lib.rl.ablation.report_text` appends, so that ``claw reproduce`` and ``tools/rewrite_reports.py``
write them again with the table.

Three bullets hold for every grid and are computed from its rows (:func:`grid_limits`: scale, seeds against
Student's t, the run's length); :data:`GRID_NOTES` adds, per results folder name, what that grid alone leaves open
and where a later run changed how it was read (docs/reproduction.md applies the same rule row by row).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..utils import limits_section

#: per results folder name: (what this grid alone does not establish, [(date, what a later run changed)])
GRID_NOTES: Dict[str, Tuple[List[str], List[Tuple[str, str]]]] = {
    "results": (
        ["an ordering between methods: three seeds are the quick grid's smoke test, not a comparison (CONTRIBUTING.md)"],
        [("2026-11-30", "on the regenerated tiny GPT (v2.1) these three seeds no longer showed binary token rewards ahead "
                        "of the sentence-level reward on two-part questions; the ten-seed comparison is "
                        "`results/pair_ab/`")]),
    "pair_ab": (
        ["a comparison fixed before looking: these ten seeds were run after the three-seed quick grid (seeds 0-2, binary "
         "- sentence -0.075) had not shown binary's lead; the seeds added after that look (3-9) alone give +0.236 +- 0.047 "
         "(docs/reproduction.md reports them separately)"], []),
    "table3": (
        ["that Combined beats OPD: +0.065 +- 0.045 (sparse hints) and +0.077 +- 0.051 (dense) are within Student's "
         "t(9) = 2.26 s.e.",
         "the paper's values: its Table 3 column is printed only next to `teacher-vague`, the setting that stands for "
         "the paper's regime"],
        [("2026-12-07", "at step 8 in the paper's regime (`teacher-vague`) OPD - Binary RL is +0.186 +- 0.072 (8 of 10 "
                        "seeds better, beyond t(9)): the paper's \"no better at step 8\" is not reproduced here; earlier "
                        "readings cited only `results/step8/`")]),
    "step8": (
        ["what the paper's regime does: this setting (nine complaints in ten vague) was built after the paper's regime "
         "(`results/table3/`, half vague) showed OPD ahead at step 8 (+0.186 +- 0.072)"],
        [("2026-12-07", "\"OPD starts behind Binary RL, as in the paper\" was the first reading of -0.128 +- 0.085 at "
                        "step 8 (7 of 10 seeds worse); that is 1.5 s.e., within noise under the ledger's rule (t(9) = "
                        "2.26): a tie at step 8, not a lag")]),
    "table3_extra": (
        ["that Combined beats OPD on the student with dense hints: +0.058 +- 0.027 is 2.1 s.e., within t(9) = 2.26 "
         "(borderline)"],
        [("2026-11-30", "on the regenerated tiny GPT (v2.1) OPD no longer beats Binary RL on the student user (the "
                        "previous checkpoint had Combined 0.79 > OPD 0.76 > Binary RL 0.52 with dense hints)"),
         ("2026-12-07", "Combined - OPD on the student with dense hints (+0.058 +- 0.027) was read as beyond two "
                        "standard errors; under Student's t(9) = 2.26 it is within noise, a borderline direction")]),
    "engines": (
        ["a difference between the engines: five seeds, every paired difference within noise",
         "anything on a GPU or with several processes: both engines ran on one CPU process"],
        [("2026-11-30", "TRL's Binary RL was +0.13 above the kit's loop on the previous checkpoint (4 of 5 seeds); on "
                        "the regenerated tiny GPT (v2.1) the difference is +0.047 +- 0.088")]),
    "teacher_48_steps": (
        ["the student user at 48 steps (no such run), so how many more interactions the student needs than the "
         "teacher is censored at 16 steps",
         "an ordering: three seeds"], []),
    "chain": (
        ["a learned process reward model: the process votes come from the simulated tool user's rule",
         "other tool tasks: one task, reports of 2-4 lookups about a country"], []),
    "v2": (
        ["the paper's second version's own numbers: they come from a third party's transcription "
         "(docs/openclaw_v2.md)"], []),
    "hints": (
        ["that the top-k overlap beats a random pick of the hint: no random pick was run; the comparison is with the "
         "whole hint (v1's rule) and the shortest candidate"], []),
    "joint": (
        ["the paper's joint setting: two personas on one tiny GPT, questions of two topics (capitals, flag colours)"], []),
    "ta": (
        ["the paper's TA persona as a person: a rule-based simulated user with the persona's checks"], []),
}


def grid_limits(rows: Sequence[Dict], name: Optional[str] = None) -> str:
    """The closing sections of a grid's report: three bullets from its ``rows`` (the scale, the seeds and Student's t
    critical value an ordering needs, the run's length) and, for a results folder ``name`` in :data:`GRID_NOTES`,
    that grid's own bullets and dated corrections."""
    from scipy.stats import t  # lazy: scipy loads only when a grid page is written

    seeds = sorted({r["seed"] for r in rows})
    steps = max(int(r["steps"]) for r in rows) if rows else 0
    n = len(seeds)
    crit = f"t({n - 1}) = {t.ppf(0.975, n - 1):.2f}" if n > 1 else "more than one seed"
    limits = [
        "a real model or the paper's values: a 1.6M-parameter GPT with rule-based simulated users, so compare directions "
        "with the paper, not numbers (docs/reproduction.md)",
        f"an ordering whose paired difference is within noise: {n} seeds, so an ordering needs |mean| above {crit} "
        "standard errors of the paired difference; a mean alone orders nothing",
        f"what happens after {steps} steps: a seed that never held the target is counted at the run's length, a lower "
        "bound",
    ]
    own, corrections = GRID_NOTES.get(name or "", ([], []))
    return limits_section(limits + list(own), corrections)
