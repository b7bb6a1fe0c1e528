"""Train the learned localiser (:mod:`claw_lib.signals.localiser`) from a clean clone, in one command:
generated pairs (:mod:`claw_lib.toy.localiser_data`), the network, the threshold chosen on the probe sets' dev splits
(:mod:`claw_lib.toy.localiser_fit`). Seeded and on one thread: the same settings give the same checkpoint.

    OMP_NUM_THREADS=1 python tools/train_localiser.py                   # -> data/localiser.pt (refused if it exists)
    python tools/train_localiser.py --force                             # replace it
    python tools/train_localiser.py --out /tmp/loc.pt --pairs 2000 --styles restate quote_reject
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claw_lib.signals.localiser import CHECKPOINT, FEATURE_SETS  # noqa: E402
from claw_lib.toy.localiser_data import STYLES  # noqa: E402
from claw_lib.toy.localiser_fit import FitSettings, fit_localiser  # noqa: E402


def main(argv=None) -> int:
    d = FitSettings()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=CHECKPOINT, help=f"the checkpoint (default {CHECKPOINT.name} in data/)")
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    ap.add_argument("--pairs", type=int, default=d.pairs, help="generated training pairs")
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--epochs", type=int, default=d.epochs)
    ap.add_argument("--hidden", type=int, default=d.hidden)
    ap.add_argument("--features", choices=FEATURE_SETS, default=d.features)
    ap.add_argument("--styles", nargs="+", choices=STYLES, default=list(STYLES), help="the reply styles trained on")
    a = ap.parse_args(argv)
    from claw_lib.utils import atomic_write, check_new_file, seed_everything

    try:
        out = check_new_file(a.out, a.force)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    seed_everything(a.seed)
    t0 = time.time()
    enc = None
    if a.features == "rules":
        from claw_lib.alignment.encoders import load_encoder

        enc = load_encoder("e5")
    loc = fit_localiser(FitSettings(a.pairs, a.seed, tuple(a.styles), a.features, a.epochs, a.hidden), enc)
    with atomic_write(out, "wb", encoding=None, replace=a.force) as f:
        loc.save(f)
    print(json.dumps({"out": str(out), "threshold": loc.threshold, "seconds": round(time.time() - t0, 1),
                      **loc.meta}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
