"""OPD's health on the teacher user and on the student user, step by step (why OPD lost its lead on the student:
issue 26, notebook 09b section 2): the share of turns with a hint, the teacher-minus-student gap on the hinted
turns (mean per token, and each response's worst token), and the teacher's mass on the student's own tokens.

    .venv/bin/python tools/opd_health.py --out results/opd_health.json   # refuses to overwrite without --force

OPD (policy-gradient form), dense hints, 16 steps, batch 16, seeds 0-2: the settings of results/table3 and
results/table3_extra ("teacher", "student"), with the per-step metrics those grids do not keep.
"""
import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEYS = ("opd/accepted_fraction", "opd/gap_mean", "opd/worst_gap_mean", "opd/teacher_mass", "reward/score")


def measure(users=("teacher", "student"), seeds=(0, 1, 2), steps=16) -> dict:
    """{user: {seed: [{step, eval/score (when evaluated), and KEYS}]}}"""
    from claw_lib.config import PPOConfig
    from claw_lib.rl.grids import SETTINGS
    from claw_lib.rl.run import train

    out = {}
    for user in users:
        out[user] = {}
        for seed in seeds:
            cfg = SETTINGS[user].apply(PPOConfig(strategy="opd", seed=seed, steps=steps, batch_size=16, eval_every=2,
                                                 progress=False))
            out[user][seed] = [{k: h[k] for k in ("step", "eval/score", *KEYS) if k in h} for h in train(cfg)]
    return out


def main(argv=None) -> int:
    from claw_lib.utils import add_report_args, atomic_write, check_new_file, report_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_report_args(ap, "the measurements (JSON)")
    a = ap.parse_args(argv)
    out = report_path(a)
    data = measure()
    text = json.dumps(data, indent=1) + "\n"
    if out is None:
        print(text)
    else:
        try:  # checked again at the write: a file made meanwhile is kept (TL20)
            check_new_file(out, a.force)
            with atomic_write(out, replace=a.force) as f:
                f.write(text)
        except (ValueError, FileExistsError) as e:
            raise SystemExit(f"error: {e}") from None
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
