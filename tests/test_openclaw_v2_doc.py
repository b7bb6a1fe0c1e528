"""docs/openclaw_v2.md: the transcribed v2 tables add up as the page says they do.

Every printed average in a per-persona table is recomputed from its three rows (student, TA, teacher). It
must equal their mean to within 0.05 unless the page marks it with a dagger, and a dagger must mark exactly
the averages that do not equal their mean. A misread cell, or a wrong claim on the page, fails here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "openclaw_v2.md"
PERSONAS = ("student", "TA", "teacher")
PRINTED = "average (printed)"
DAGGER = "\u2020"


def _tables(text: str) -> List[List[List[str]]]:
    """Markdown tables of ``text``: lists of rows of stripped cells, separator rows dropped."""
    tables, cur = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                cur.append(cells)
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def _persona_tables() -> List[List[List[str]]]:
    return [t for t in _tables(DOC.read_text(encoding="utf-8")) if any(r[1:2] == [PRINTED] for r in t[1:])]


def _averages(table: List[List[str]]) -> List[Dict]:
    """One entry per printed average: group, column, printed value, dagger, mean of the persona rows."""
    header, rows = table[0], table[1:]
    out = []
    for group in dict.fromkeys(r[0] for r in rows):
        personas = {r[1]: r for r in rows if r[0] == group and r[1] in PERSONAS}
        printed = [r for r in rows if r[0] == group and r[1] == PRINTED]
        assert sorted(personas) == sorted(PERSONAS) and len(printed) == 1, f"{group}: rows {sorted(personas)}"
        for j in range(2, len(header)):
            cell = printed[0][j]
            mean = sum(float(personas[p][j]) for p in PERSONAS) / len(PERSONAS)
            out.append({"group": group, "column": header[j], "printed": float(cell.rstrip(DAGGER)),
                        "dagger": cell.endswith(DAGGER), "mean": mean})
    return out


def test_the_page_has_the_v2_tables():
    # Table 3 (two settings), 4, 5 (two support sets), 7
    assert len(_persona_tables()) == 5


@pytest.mark.parametrize("table", _persona_tables(), ids=lambda t: t[1][0])
def test_daggers_mark_exactly_the_averages_that_do_not_add_up(table):
    for a in _averages(table):
        off = abs(a["printed"] - a["mean"]) > 0.05
        assert off == a["dagger"], (f"{a['group']} / {a['column']}: printed {a['printed']}, rows give "
                                    f"{a['mean']:.3f}, dagger {a['dagger']}")


def test_the_issue_numbers_are_the_joint_averages_and_the_page_names_the_one_that_does_not_add_up():
    joint = {a["column"]: a for t in _persona_tables() for a in _averages(t) if a["group"] == "joint"}
    assert {c: joint[c]["printed"] for c in ("Hybrid RL", "GRPO", "OPD")} == {"Hybrid RL": 10.3, "GRPO": 14.1,
                                                                               "OPD": 29.7}
    assert joint["Hybrid RL"]["mean"] == pytest.approx(10.4)  # 31.2 / 3, as the page says
    assert "31.2 / 3 = 10.40" in DOC.read_text(encoding="utf-8")
    # v2's ordering holds on the rows as well as on the printed averages
    assert joint["Hybrid RL"]["mean"] < joint["GRPO"]["mean"] < joint["OPD"]["mean"]


def test_the_seed_map_has_a_row_for_the_page():
    seed_map = (ROOT / "docs" / "seed_map.md").read_text(encoding="utf-8")
    rows = [line for line in seed_map.splitlines() if line.startswith("|") and "openclaw_v2.md" in line]
    assert len(rows) == 1 and "2603.10165v2" in rows[0]
