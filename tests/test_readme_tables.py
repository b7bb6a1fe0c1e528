"""The README's result tables are the output of tools/readme_tables.py on the committed result files."""
import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.tool_module import load_tool

ROOT = Path(__file__).resolve().parents[1]


def test_every_row_of_the_generated_tables_is_in_the_readme():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        load_tool("readme_tables").main()
    rows = [line for line in out.getvalue().splitlines() if line.startswith("| ") and "---" not in line]
    readme = (ROOT / "README.md").read_text()
    assert len(rows) > 60
    missing = [r for r in rows if r not in readme]
    assert not missing, missing[:5]


def test_both_readmes_show_every_probe_set_with_and_without_the_reviser():
    """Every set's dev and test split, rules and reviser, as tools/readme_tables.py prints them from
    results/probe_reviser.json, in README.md and README.zh-CN.md alike."""
    rows = load_tool("readme_tables").reviser_rows().splitlines()[2:]
    assert len(rows) == 3 * 2 * 2
    for name in ("README.md", "README.zh-CN.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        missing = [r for r in rows if r not in text]
        assert not missing, (name, missing[:3])


def test_both_readmes_show_the_learned_localiser_on_every_probe_set():
    """The learned localiser beside the rules and their combination, every set's dev and test split, as
    tools/readme_tables.py prints them from results/probe_localiser.json, in README.md and README.zh-CN.md alike."""
    rows = load_tool("readme_tables").localiser_rows().splitlines()[2:]
    assert len(rows) == 3 * 2 * 3
    for name in ("README.md", "README.zh-CN.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        missing = [r for r in rows if r not in text]
        assert not missing, (name, missing[:3])


def _generated(lang):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        load_tool("readme_tables").main([] if lang == "en" else ["--lang", "zh"])
    return [line for line in out.getvalue().splitlines() if line.startswith("| ") and "---" not in line]


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_NUMERIC_CELL = re.compile(r"^[\s\d.+\-/()*%x×,]*$")


def _numbers(line):
    """The numbers of a table row's numeric cells (cells made only of numbers and separators: labels are left out,
    so a row and its translation compare equal), or None for a row without a decimal number."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    nums = tuple(n for c in cells if c and _NUMERIC_CELL.match(c) for n in _NUMBER.findall(c))
    return nums if any("." in n for n in nums) else None


def _table_rows(text):
    return [ln for ln in text.splitlines() if ln.startswith("|") and not set(ln) <= set("|-: ")]


def test_the_chinese_tables_are_the_generated_ones():
    """README.zh-CN.md shows tools/readme_tables.py --lang zh's tables row for row, and each is an English row with
    its labels translated and its numbers untouched."""
    zh, en = _generated("zh"), _generated("en")
    assert len(zh) > 40
    readme = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    missing = [r for r in zh if r not in readme]
    assert not missing, missing[:5]
    en_numbers = {_numbers(r) for r in en}
    assert all(_numbers(r) in en_numbers for r in zh if _numbers(r))


def test_both_readmes_agree_on_every_number_of_every_table():
    """Every table row of README.zh-CN.md with a decimal number has the numbers, in order, of a row of README.md."""
    en = {_numbers(r) for r in _table_rows((ROOT / "README.md").read_text(encoding="utf-8"))}
    zh = [r for r in _table_rows((ROOT / "README.zh-CN.md").read_text(encoding="utf-8")) if _numbers(r)]
    assert len(zh) > 90
    differ = [r for r in zh if _numbers(r) not in en]
    assert not differ, differ[:5]


def test_an_untranslated_label_is_refused():
    mod = load_tool("readme_tables")
    head = mod.HEAD.format(n=16)
    text = "## table3\n\n" + head + "\n| a new setting | Binary RL | 0.20 | 0.50 | 0.60 +- 0.10 | 16.0 +- 0.0 (0/10) |  |"
    text += "\n\n## table3-extra\n\n\n\n## engines\n\n"
    with pytest.raises(KeyError, match="a new setting"):
        mod.to_zh(text)
