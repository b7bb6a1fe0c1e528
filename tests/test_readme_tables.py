"""The README's PPO result tables are the output of tools/readme_tables.py on the committed result files."""
import contextlib
import importlib.util
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_row_of_the_generated_tables_is_in_the_readme():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "tools" / "readme_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        mod.main()
    rows = [line for line in out.getvalue().splitlines() if line.startswith("| ") and "---" not in line]
    readme = (ROOT / "README.md").read_text()
    assert len(rows) > 60
    missing = [r for r in rows if r not in readme]
    assert not missing, missing[:5]
