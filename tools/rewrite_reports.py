"""Write the ablation.md of committed grids again from their ablation.csv and curves.json (no training), after a
change of the report's columns (e.g. the user turns until the target holds three evaluations in a row).

    .venv/bin/python tools/rewrite_reports.py --force                 # every grid under results/
    .venv/bin/python tools/rewrite_reports.py results/table3 --force  # one

Without --force nothing is written: the committed reports are never replaced by accident.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.rl.ablation import rewrite_report  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, help="grid folders (default: every results/**/ablation.csv)")
    ap.add_argument("--force", action="store_true", help="replace their ablation.md")
    a = ap.parse_args(argv)
    folders = a.folders or sorted(p.parent for p in (ROOT / "results").rglob("ablation.csv"))
    missing = [f for f in folders if not (f / "ablation.csv").exists()]
    if missing:
        print(f"error: no ablation.csv in {missing[0]}", file=sys.stderr)
        return 1
    if not a.force:
        print(f"error: this replaces ablation.md in {len(folders)} folder(s); pass --force", file=sys.stderr)
        return 1
    failed = 0
    for f in folders:
        try:
            rewrite_report(f)
        except (ValueError, OSError) as e:  # a folder the kit did not write, a malformed table: one line each
            print(f"error: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"rewrote {f / 'ablation.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
