"""Re-record the golden PPO trajectories (tests/rl/golden/trajectories.json).

Run only after a change to the PPO loop that is meant to move its numbers, then review the diff of
the JSON file and say in the commit message why the numbers moved:

    .venv/bin/python tools/record_golden.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.rl.test_ppo import GOLDEN, record_golden  # noqa: E402

if __name__ == "__main__":
    record_golden()
    print(f"wrote {GOLDEN}; review it with `git diff {GOLDEN}`")
