"""The README's result tables are the output of tools/readme_tables.py on the committed result files."""
import contextlib
import io
from pathlib import Path

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
