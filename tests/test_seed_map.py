"""docs/seed_map.md sends readers to sections that exist and teach what the map says they teach.

The map's pointers read "nb NN §K (what the section teaches)", several sections of one notebook as
"nb 06 §2 (...), §3 (...)" or "nb 01 §2 (...) and §5 (...)", a range as "nb 07 §1–2". For every
pointer in the map's tables this proves:

(a) the notebook ``notebooks/NN_*.ipynb`` exists;
(b) it has a markdown heading "## K." (K may be 0, or 3b);
(c) the words in parentheses after the pointer share at least one significant word with that
    heading. Only the heading is used, not the text under it: the text under 09 §3 (the loss
    defaults) mentions OPD and the text under 09 §2 mentions tokens, so it would let through the
    wrong pointers "nb 09 §3 (OPD in two forms)" and "nb 09 §2 (token-level vs sentence-level ...)"
    that the review of the tutorials found;
(d) a pointer without parentheses (the Chinese summaries repeat the English text's pointers bare)
    repeats a pointer of the same row that has them, so no pointer escapes check (c).

Checked against the map of commit 50dd61b (before the fix): the test fails on 09 §2 (the A/B test, which is
§9), 09 §3 (OPD in two forms, §6) and the bare 09 §4 (timing, §10). Putting any of the old section numbers
back into the fixed map, the student user's 09 §1 (it is §4) included, fails too.
"""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED_MAP = ROOT / "docs" / "seed_map.md"
NOTEBOOKS = ROOT / "notebooks"

# "nb 09", or "§6" / "§1–2" with an optional "(description)" right after it
POINTER = re.compile(r"\bnb (\d\d[a-c]?)\b|§(\d+[a-z]?)(?:[–-](\d+))?(?:\s*\(([^()]*)\))?")
# too common to tell sections apart ("user": every section of notebook 09 is about one)
STOPWORDS = {"the", "and", "for", "with", "from", "its", "how", "what", "which", "does", "into", "that",
             "this", "are", "not", "one", "two", "three", "own", "user"}


def pointers(text):
    """(line number, notebook, section, description or None) for every "§K" in the map's table rows;
    a "§K" belongs to the last "nb NN" before it on the same row."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            continue
        nb = None
        for m in POINTER.finditer(line):
            if m.group(1):
                nb = m.group(1)
                continue
            assert nb is not None, f"line {lineno}: §{m.group(2)} without a notebook before it"
            first, last = m.group(2), m.group(3)
            secs = [first] if last is None else [str(k) for k in range(int(first), int(last) + 1)]
            for sec in secs:
                found.append((lineno, nb, sec, m.group(4)))
    return found


def headings(nb):
    """{"K": heading text} for the "## K. ..." lines of the notebook's markdown cells."""
    [path] = NOTEBOOKS.glob(f"{nb}_*.ipynb")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    out = {}
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                m = re.match(r"## (\d+[a-z]?)\. (.*)", line)
                if m:
                    out[m.group(1)] = m.group(2)
    return out


def words(text):
    """Significant English words, lower case, a plural "s" dropped (costs ~ cost)."""
    out = set()
    for w in re.findall(r"[a-z][a-z0-9_]+", text.lower()):
        if len(w) >= 3 and w not in STOPWORDS:
            out.add(w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w)
    return out


POINTERS = pointers(SEED_MAP.read_text(encoding="utf-8"))


def test_the_map_has_pointers():
    assert len(POINTERS) >= 40
    # the notebooks the map names by section
    assert {nb for _, nb, _, _ in POINTERS} >= {"00", "01", "02", "05a", "06", "07", "09a", "09b", "09c", "10"}


@pytest.mark.parametrize("lineno, nb, sec, desc", POINTERS,
                         ids=[f"line{n}-nb{nb}-s{sec}-{'described' if d else 'bare'}" for n, nb, sec, d in POINTERS])
def test_pointer_names_its_section(lineno, nb, sec, desc):
    assert len(list(NOTEBOOKS.glob(f"{nb}_*.ipynb"))) == 1, f"line {lineno}: no notebook {nb}"
    heads = headings(nb)
    assert sec in heads, f"line {lineno}: notebook {nb} has no section '## {sec}.'"
    if desc is not None:
        shared = words(desc) & words(heads[sec])
        assert shared, f"line {lineno}: nb {nb} §{sec} ({desc}) but the section is '{heads[sec]}'"


def test_bare_pointers_repeat_a_described_one_in_their_row():
    described = {(n, nb, sec) for n, nb, sec, desc in POINTERS if desc is not None}
    bare = [(n, nb, sec) for n, nb, sec, desc in POINTERS if desc is None]
    unchecked = [f"line {n}: nb {nb} §{sec}" for n, nb, sec in bare if (n, nb, sec) not in described]
    assert unchecked == [], "pointers without a description, none with one in the same row: " + ", ".join(unchecked)


#: the seed article's section headings, verbatim ("Token级" as the article writes it; the glossary's "token 级" is for
#: the kit's own prose): the map's heading column quotes them
ARTICLE_HEADINGS = ["从“用户说不对”到“模型改哪里”：Token级监督的实战价值", "监督信号的粒度光谱：从段落到Token的演进",
                    "实战架构：OpenClaw-RL中Token级监督的生成流水线", "核心实战一：基于语义编辑距离的Token对齐",
                    "核心实战二：从对齐结果到Token级奖励信号", "避坑指南：Token级监督实战中的常见陷阱与对策",
                    "进阶实战：整合到OpenClaw-RL训练循环", "效果评估与迭代：如何判断Token级监督是否起作用"]
SEED_ARTICLE = sorted((ROOT.parent / "shared" / "seeds").glob("000_*.txt"))


def test_the_heading_column_quotes_the_article():
    rows = [line.split("|") for line in SEED_MAP.read_text(encoding="utf-8").splitlines()
            if re.match(r"\| \d \| ", line)]
    assert [(int(r[1]), r[2].strip()) for r in rows] == list(enumerate(ARTICLE_HEADINGS, 1))


@pytest.mark.skipif(not SEED_ARTICLE, reason="the seed article is not in this checkout (../shared/seeds/)")
def test_the_headings_are_the_articles_own():
    text = SEED_ARTICLE[0].read_text(encoding="utf-8")
    assert [h for h in ARTICLE_HEADINGS if h + "\n" not in text] == []
