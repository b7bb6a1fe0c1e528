"""The committed tutorials as a reader sees them (issue 15): both languages, no missing glyphs, teaching order."""
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_explanations_are_in_chinese_and_english(path):
    """Every explanation (a markdown cell with more than 15 English words) also has Chinese."""
    nb = nbformat.read(path, as_version=4)
    prose = [c.source for c in nb.cells if c.cell_type == "markdown" and len(re.findall(r"[A-Za-z]{3,}", c.source)) > 15]
    assert prose, path.name
    english_only = [c[:80] for c in prose if not CJK.search(c)]
    assert not english_only, english_only


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_figure_misses_a_glyph(path):
    """matplotlib warns "Glyph ... missing from font(s)" into the cell's output when a label cannot be drawn."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert "missing from font" not in str(out.get("text", "")), (path.name, cell.source[:60])


def test_the_tiny_lm_is_introduced_before_it_is_used():
    """Notebook numbers follow the teaching order: 05a (the toy world and the tiny GPT) comes before the first
    notebook that loads the LM."""
    users = [p.name for p in NOTEBOOKS if "load_causal_lm" in p.read_text(encoding="utf-8")]
    assert users and users[0].startswith("05a_"), users


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_stderr_in_committed_outputs(path):
    """Warnings reach a cell's stderr only sometimes (the kernel flushes stderr asynchronously), so a committed
    stderr output makes nbval flaky; the kit silences the known noise at its source instead (lm.generate)."""
    nb = nbformat.read(path, as_version=4)
    noisy = [c.source[:60] for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert not noisy, noisy


#: notebooks whose Chinese prose still quotes with ASCII quotes (none left: may only shrink)
ASCII_QUOTE_EXEMPT: set = set()


def ascii_quoted_in_chinese(text: str) -> list:
    """Phrases in ASCII double quotes on a line of Chinese prose (inline code and fenced code blocks excepted):
    Chinese prose quotes with “…” (review-teaching-3: 16 such phrases in notebook 09)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    found = []
    for line in text.splitlines():
        plain = re.sub(r"`[^`]*`", "", line)
        if len(CJK.findall(plain)) > 0.5 * len(re.findall(r"[A-Za-z]", plain)):
            found += re.findall(r'"[^"\n]*"', plain)
    return found


def test_ascii_quotes_are_found():
    assert ascii_quoted_in_chinese('先说"好问题！"，再回答') == ['"好问题！"']
    assert ascii_quoted_in_chinese('先说“好问题！”；`x = "a"` 里的代码不算') == []
    assert ascii_quoted_in_chinese('The user says "好问题！" first, then answers in a full sentence') == []
    assert ascii_quoted_in_chinese('代码块：\n```\nS = "法国的首都是伦敦。"\n```\n') == []


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem not in ASCII_QUOTE_EXEMPT]
                         + [NOTEBOOKS[0].parents[1] / "README.zh-CN.md"], ids=lambda p: p.stem)
def test_chinese_prose_quotes_with_chinese_quotation_marks(path):
    text = path.read_text(encoding="utf-8") if path.suffix == ".md" else "\n".join(
        c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    assert not ascii_quoted_in_chinese(text), (path.name, ascii_quoted_in_chinese(text)[:5])


def test_notebook_00_lists_the_notebooks_with_a_grader():
    """00's module table names, for `exercises.py`, exactly the notebooks that call its check()."""
    nb00 = nbformat.read(NOTEBOOKS[0], as_version=4)
    row = next(line for c in nb00.cells if c.cell_type == "markdown" for line in c.source.splitlines()
               if line.startswith("| `exercises.py` |"))
    listed = set(row.rstrip(" |").rsplit("|", 1)[1].replace(" ", "").split(","))
    graded = {p.name.split("_")[0] for p in NOTEBOOKS
              if any(c.cell_type == "code" and "check(\"" in c.source for c in nbformat.read(p, as_version=4).cells)}
    assert listed == graded, (sorted(listed), sorted(graded))


#: v2's numbers as notebooks 09a-09c and the READMEs quote them: "Hybrid 10.3 < GRPO 14.1 < OPD-only 29.7" or "14.0 / 18.0 / 17.6"
V2_ORDER = re.compile(r"Hybrid (\d+\.\d) < GRPO (\d+\.\d) < (?:OPD-only|只用 OPD) (\d+\.\d)")
V2_TRIPLE = re.compile(r"(?<![\d.])(\d+\.\d) / (\d+\.\d) / (\d+\.\d)(?![\d.])")


def v2_triples(text: str) -> set:
    return {m.groups() for pattern in (V2_ORDER, V2_TRIPLE) for m in pattern.finditer(text)}


def test_v2_triples_are_found():
    assert v2_triples("v2: Hybrid 10.3 < GRPO 14.1 < OPD-only 29.7; joint 8.2 / 12.0 / 34.0; (6/2/2), 0.97 / 0.91") == \
        {("10.3", "14.1", "29.7"), ("8.2", "12.0", "34.0")}


def test_v2_numbers_quoted_are_rows_of_the_transcription():
    """Every Hybrid / GRPO / OPD-only triple that notebooks 09a-09c and the READMEs quote is one row (or printed average) of
    docs/openclaw_v2.md's transcription of v2's Table 3, in that order (review-teaching-3: a joint row was quoted for
    a separate run)."""
    root = NOTEBOOKS[0].parents[1]
    table = (root / "docs" / "openclaw_v2.md").read_text(encoding="utf-8").replace("†", "")
    rows = {tuple(c.strip() for c in line.split("|")[3:6]) for line in table.splitlines()
            if line.startswith("| joint |") or line.startswith("| separate |")}
    texts = {p.stem: "\n".join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "markdown")
             for p in NOTEBOOKS if p.stem.startswith("09")}
    assert "09c_v2_and_the_tool_task" in texts
    texts.update({name: (root / name).read_text(encoding="utf-8") for name in ("README.md", "README.zh-CN.md")})
    for name, text in texts.items():
        quoted = v2_triples(text)
        assert not quoted - rows, (name, sorted(quoted - rows))
    assert ("14.0", "18.0", "17.6") in rows and ("10.3", "14.1", "29.7") in rows


#: the most English words of prose (markdown cells) a notebook may hold: about 18 minutes of reading at 225 words a
#: minute (review-teaching-4 §4: notebook 09 had 8,164 and was split in three, notebook 12 in two)
MAX_ENGLISH_WORDS = 4000


def english_words(text: str) -> int:
    """Runs of Latin letters, as the review counted them (code spans and numbers included in the text, letters only)."""
    return len(re.findall(r"[A-Za-z]+", text))


def test_english_words_are_counted():
    assert english_words("The paper's Table 3 (`teacher-vague`) 论文的表 3") == 6   # The paper s Table teacher vague


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_is_a_wall_of_prose(path):
    nb = nbformat.read(path, as_version=4)
    n = english_words("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    assert n <= MAX_ENGLISH_WORDS, f"{path.name}: {n} English words of prose (at most {MAX_ENGLISH_WORDS}: split it)"


def test_each_notebook_has_one_title_that_names_it():
    """A notebook opens with "# NN · title", NN its file's number: the split notebooks 09a-09c and 12a-12b each say
    what they hold, not the title of the notebook they came from."""
    for path in NOTEBOOKS:
        first = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
        assert first.startswith(f"# {path.stem.split('_')[0]} · "), (path.name, first)
