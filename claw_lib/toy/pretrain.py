"""Pre-train the kit's tiny GPT on the fact world, and evaluate it (``claw pretrain``; notebook 05a).

Deterministic from the seed: the corpus, the byte-level BPE tokenizer and the weights are
regenerated the same way on the same software (CPU, fixed thread count). The checkpoint is saved
in the standard Hugging Face layout with a ``manifest.json`` (sha256 of every file, config, seed,
loss curve, evaluation), so exactly the same loading code serves a real Hugging Face model.

Cost: ``claw pretrain`` (corpus, tokenizer, 1,500 steps of batch 44, evaluation) ran in 281 s (4 min 41 s) on the
quiet 2-core dev machine, 264 s of it before the evaluation; an earlier run of the same configuration, before the
pool was tokenised in one call, took 300 s. Where the time went (torch profiler, the previous configuration, one
thread): 61 % matrix products (about 117 GFLOP/s, compute-bound), 17 % GPT-2's tanh GELU written out element by
element, 7 % attention, 2 % making batches. So: two threads (the machine's two cores: 1.8x on a step), the same GELU
as one fused kernel (``gelu_pytorch_tanh``: -16 % of a step, same loss to 4 digits), an MLP of 2 x n_embd instead of
4 x, batch 44 instead of 48, and a cleaner mix: a style instruction alone about a fresh country asked the model to
invent that country's fact (now the correction always comes first; ``p_style_fresh``), and questions now and then
open with a lead-in (``p_question_lead``). The previous checkpoint took 657 s (1 thread, batch 48, 4 x MLP). Tried and dropped: ``torch.compile`` (64 s to compile,
then slower steps), bf16 autocast (4 % faster, not worth the precision), width 160 (279 s, weaker prompt forms),
batch 40 (260 s, hinted chat English 0.77), a length pool of 32 (less padding, lower gap AUCs). GPU time is not
measured (no GPU was lent). Tests never retrain it.
"""
from __future__ import annotations

import json
import math
import os
import platform
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from ..models.lm import generate, load_causal_lm, pack, response_logprobs
from ..models.loading import ModelNotAvailableError, file_sha256, verify_manifest, write_manifest
from ..prompts import CHAT_MARKERS, PROMPT_FORMS, build_prompt, response_text
from ..text.phrases import CORRECTION_LEADS, STYLE_HINTS
from ..utils import FolderLock, OutputFolder, disk_errors
from .corpus import make_example, sample_corpus
from .evaluation import hinted_teacher_score
from .tools import TOOL_ALIASES, ToolFact, run_lookup
from .users import FactEnv
from .world import Fact, FactWorld, WorldConfig

__all__ = ["PretrainConfig", "pretrain", "reevaluate", "train_tokenizer", "evaluate_lm", "auc", "file_sha256"]


@dataclass
class PretrainConfig:
    """The tiny GPT and its training run (defaults = the shipped checkpoint)."""

    seed: int = 0
    """seed of the world, the corpus, the initial weights and the batch order"""
    world: WorldConfig = field(default_factory=WorldConfig)
    """the fact world and the mix of examples"""
    vocab_size: int = 2048
    """byte-level BPE vocabulary (never produces an unknown token)"""
    tokenizer_examples: int = 30_000
    """examples the tokenizer is trained on"""
    n_layer: int = 4
    n_embd: int = 192
    n_head: int = 6
    n_inner: int = 384
    """width of the MLP inside each block: 2 x n_embd (GPT-2's default is 4 x; two thirds of a step's matrix
    products were in the MLPs)"""
    n_positions: int = 160
    """longest sequence in tokens"""
    steps: int = 1500
    batch_size: int = 44
    lr: float = 2.5e-3
    """peak learning rate (AdamW, linear warm-up then cosine to 10 %)"""
    warmup: int = 50
    weight_decay: float = 0.01
    threads: int = 2
    """torch CPU threads. Results are reproducible for a fixed count (float sums are ordered by it); the shipped
    checkpoint was trained with two, so ``claw pretrain`` with the defaults reproduces it file for file"""
    eval_every: int = 0
    """0: evaluate only at the end"""
    length_pool: int = 8
    """batches' worth of examples sorted by length together (less padding per step)"""


def train_tokenizer(texts: List[str], vocab_size: int = 2048):
    """A byte-level BPE tokenizer (GPT-2 style) trained on ``texts``; eos = ``<|endoftext|>``; the chat
    forms' markers ``<|im_start|>`` and ``<|im_end|>`` are single special tokens.

    Chinese characters and full-width punctuation are split one by one before BPE, so a token
    never spans two of them; English words are merged within words only."""
    # lazy: transformers (seconds to import) loads only when pretraining
    from transformers import PreTrainedTokenizerFast

    eos = "<|endoftext|>"
    tk = Tokenizer(models.BPE())
    # every CJK character is its own pre-token, so no merge spans two characters: on a small,
    # repetitive corpus BPE would otherwise learn "国的首都是伦敦" as ONE token, and no reward
    # could tell 伦敦 from 首都 (English merges stay inside words by the GPT-2 regex)
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[eos, *CHAT_MARKERS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=eos, eos_token=eos, unk_token=eos,
                                   pad_token=eos, additional_special_tokens=list(CHAT_MARKERS), model_max_length=1024)


def _lr_at(step: int, cfg: PretrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    p = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def _batches(world, tok, rng, n: int, pool: int):
    """Batches of ``n`` examples, forever. ``pool`` batches' worth of examples are drawn at a time,
    sorted by length and cut into batches, which come in random order: sequences in a batch have
    similar lengths, so little of each step is spent on padding."""
    while True:
        exs = [make_example(world, rng) for _ in range(n * pool)]
        # one tokenizer call per side for the whole pool (the same ids as encode_pair, 2.7x faster)
        prompts = tok([e.prompt for e in exs], add_special_tokens=False)["input_ids"]
        answers = tok([e.response for e in exs], add_special_tokens=False)["input_ids"]
        seqs = [(list(p), list(r) + [tok.eos_token_id]) for p, r in zip(prompts, answers)]
        seqs.sort(key=lambda x: len(x[0]) + len(x[1]))
        chunks = [seqs[k:k + n] for k in range(0, len(seqs), n)]
        rng.shuffle(chunks)
        for c in chunks:
            yield pack([x[0] for x in c], [x[1] for x in c], tok.pad_token_id)


def _response_nll(model, batch) -> torch.Tensor:
    """Mean negative log-likelihood per response token; the LM head runs at the positions that
    predict response tokens only (three quarters of the tokens are prompt, which needs no logits)."""
    h = model.transformer(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    rows = torch.arange(len(h)).unsqueeze(1).expand_as(batch.logit_index)[batch.response_mask]
    logits = model.lm_head(h[rows, batch.logit_index[batch.response_mask]])          # (N, V)
    return torch.nn.functional.cross_entropy(logits.float(), batch.response_ids[batch.response_mask])


def pretrain(config: Optional[PretrainConfig], out_dir, progress: bool = True, evaluate: bool = True,
             overwrite: bool = False) -> dict:
    """Generate the corpus, train the tokenizer and the model, save them to ``out_dir`` with
    ``manifest.json``; return the manifest. There is no default folder (the shipped
    ``data/tiny-gpt`` is never overwritten by accident); a folder that already holds a checkpoint is
    refused unless ``overwrite``, and one that holds files claw did not write always is
    (:class:`~claw_lib.utils.OutputFolder`: ``overwrite`` replaces only the checkpoint's own files). The
    folder is locked for the whole run; files are written to a temporary folder beside it and moved in
    one by one at the end, the manifest last (a crash half-way leaves files its manifest does not match,
    which the loader refuses)."""
    cfg = config or PretrainConfig()
    for name in ("steps", "batch_size", "vocab_size", "n_layer", "n_embd", "n_head", "n_positions", "tokenizer_examples"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be at least 1, got {getattr(cfg, name)}")
    if not (math.isfinite(cfg.lr) and cfg.lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {cfg.lr}")
    if not 0 <= cfg.seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {cfg.seed}")
    folder = OutputFolder.claim(out_dir, "pretrain", overwrite, "pretraining output", legacy=_legacy_checkpoint_files)
    _refuse_used(folder, overwrite)
    with folder.locked(overwrite):
        _refuse_used(folder, overwrite)  # again, under the lock
        return _pretrain(cfg, folder, progress, evaluate)


def _refuse_used(folder, overwrite: bool) -> None:
    if folder.used and not overwrite:
        raise ValueError(f"the pretraining output folder {folder.path} already holds results; choose a new folder or "
                         "pass --force to replace them")


def _legacy_checkpoint_files(out: Path) -> set:
    """A checkpoint's files in a folder written before markers existed: manifest.json and the files it lists."""
    try:
        files = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    if not isinstance(files, dict):
        return set()
    return {"manifest.json"} | {n for n in files if isinstance(n, str) and "/" not in n and (out / n).exists()}


def _pretrain(cfg: PretrainConfig, folder, progress: bool, evaluate: bool) -> dict:
    """Train the tiny GPT of ``cfg`` and write it with its manifest into ``folder`` (a claimed OutputFolder):
    the corpus and tokenizer, the model (seeded), the steps, then the files, written beside and moved in whole."""
    t0 = time.time()
    prev_threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        world = FactWorld(cfg.world)
        corpus = sample_corpus(world, cfg.tokenizer_examples, seed=cfg.seed)
        tok = train_tokenizer([e.prompt + e.response for e in corpus], cfg.vocab_size)
        torch.manual_seed(cfg.seed)
        model, opt = _new_model(cfg, tok)
        losses = _train_steps(model, opt, world, tok, cfg, progress)
        train_s = time.time() - t0
        tmp = _save_model(folder.path, model, tok)
        manifest = _manifest(cfg, model, world, losses, train_s)
        if evaluate:
            manifest["eval"] = evaluate_lm(model, tok, world)
        try:
            write_manifest(tmp, manifest)
            _move_in(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return manifest
    finally:
        torch.set_num_threads(prev_threads)


def _new_model(cfg: PretrainConfig, tok):
    """A freshly initialised GPT-2 of ``cfg``'s size (the caller seeds torch) and its AdamW (weight decay on the
    matrices only)."""
    # lazy: transformers (seconds to import) loads only when pretraining
    from transformers import GPT2Config, GPT2LMHeadModel

    mcfg = GPT2Config(vocab_size=len(tok), n_positions=cfg.n_positions, n_embd=cfg.n_embd, n_inner=cfg.n_inner,
                      n_layer=cfg.n_layer, n_head=cfg.n_head, activation_function="gelu_pytorch_tanh", resid_pdrop=0.0,
                      embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.eos_token_id)
    model = GPT2LMHeadModel(mcfg)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
    return model, opt


def _train_steps(model, opt, world, tok, cfg: PretrainConfig, progress: bool) -> List[float]:
    """``cfg.steps`` AdamW steps on the answer tokens (warm-up and cosine rate, gradients clipped to norm 1);
    returns the loss of every step (mean NLL per answer token, nats). The model is left in eval mode."""
    from tqdm.auto import tqdm  # lazy: tqdm.auto looks for a notebook (IPython)

    batches = _batches(world, tok, random.Random(cfg.seed + 1), cfg.batch_size, cfg.length_pool)
    losses: List[float] = []
    model.train()
    bar = tqdm(range(cfg.steps), desc="pretrain", disable=not progress)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = _lr_at(step, cfg)
        batch = next(batches)
        if batch.input_ids.shape[1] > cfg.n_positions:
            raise ValueError(f"a sequence of {batch.input_ids.shape[1]} tokens exceeds n_positions={cfg.n_positions}")
        loss = _response_nll(model, batch)                              # mean NLL per answer token
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if step % 10 == 0:
            bar.set_postfix(loss=f"{np.mean(losses[-10:]):.3f}")
    model.eval()
    return losses


def _save_model(out: Path, model, tok) -> Path:
    """The model and tokenizer written into a temporary folder beside ``out`` (returned); a failure (a full disk:
    one-line OSError, OP07) leaves no temporary folder."""
    where = out.resolve()  # "." has no name: the temporary folder goes beside the real one
    tmp = where.parent / f".{where.name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with disk_errors(tmp / "model.safetensors"):
            model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def _manifest(cfg: PretrainConfig, model, world, losses: List[float], train_s: float) -> dict:
    """What ``manifest.json`` says of a pretraining run (its file hashes are added by ``write_manifest``)."""
    return {
        "what": "claw-kit tiny GPT-2 trained on the fact world (claw_lib.pretrain)",
        "seed": cfg.seed,
        "config": asdict(cfg),
        "n_params": int(sum(p.numel() for p in model.parameters())),
        "misconception_strength": cfg.world.misconception_strength,
        "misconceptions": {k: list(v) for k, v in world.misconceptions.items()},
        "loss": {"first_10": float(np.mean(losses[:10])), "last_10": float(np.mean(losses[-10:])),
                 "last_50": float(np.mean(losses[-50:])),
                 "every_50": [round(float(np.mean(losses[k:k + 50])), 4) for k in range(0, len(losses), 50)]},
        "train_seconds": round(train_s, 1),
        "software": {"torch": torch.__version__, "python": platform.python_version(),
                     "threads": cfg.threads},
    }


def _move_in(tmp: Path, folder) -> None:
    """Move the new checkpoint's files from ``tmp`` into the (locked) output folder: recorded in its marker
    first (a name taken by a file claw did not write is refused, nothing moved), the old checkpoint's own
    files that the new one does not have removed, every file renamed in, ``manifest.json`` last. Files claw
    did not write stay where they are."""
    names = sorted(f.name for f in tmp.iterdir() if f.is_file())
    folder.register(*names)
    folder.remove_own(keep=names)
    for n in sorted(names, key=lambda n: n == "manifest.json"):
        os.replace(tmp / n, folder.path / n)


def reevaluate(out_dir, force: bool = False) -> dict:
    """Check an existing checkpoint against its manifest (a mismatch is refused:
    :class:`~claw_lib.models.loading.ModelNotAvailableError`), evaluate it again with the current
    :func:`evaluate_lm` and return the manifest with the new ``eval``. The manifest on disk is rewritten
    (whole, :func:`~claw_lib.models.loading.write_manifest`; training entries kept) only with ``force``,
    which also skips the check and writes the files' current hashes: re-hashing files that changed is
    always an explicit choice."""
    out = Path(out_dir)
    if not (out / "manifest.json").is_file():
        raise ValueError(f"{out} holds no checkpoint with a manifest.json to re-evaluate")
    if not force:
        try:
            verify_manifest(out)
        except ModelNotAvailableError as e:
            raise ModelNotAvailableError(f"{e}; or pass --force to accept the files as they are now (their hashes "
                                         "are then written into the manifest)") from None
    try:
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        cfg = manifest.get("config", {})
        world_cfg = WorldConfig(**cfg["world"]) if "world" in cfg else WorldConfig()
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"{out}/manifest.json cannot be read ({type(e).__name__}); re-create the checkpoint with "
                         f"`claw pretrain --out {out} --force`") from None
    model, tok = load_causal_lm(str(out), verify=False)  # checked above (or re-hashed on purpose)
    manifest["eval"] = evaluate_lm(model, tok, FactWorld(world_cfg))
    if force:
        with FolderLock(out):
            write_manifest(out, manifest)
    return manifest


# --------------------------------------------------------------------------- evaluation
def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties count half (Mann-Whitney U / n_pos n_neg)."""
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def _greedy_acc(model, tok, facts: List, hints: Optional[List[str]] = None, style: str = "formal", form: str = "kit"):
    prompts = [build_prompt(f.question(), f.lang, hints[k] if hints else None, form=form) for k, f in enumerate(facts)]
    gens = generate(model, tok, prompts, max_new_tokens=48, greedy=True)
    ok = [g.text.strip() == f.answer(style=style) for g, f in zip(gens, facts)]
    return ok, gens


def _gaps(model, tok, facts: List[Fact], values: List[str], lang: str, form: str = "kit") -> Dict[str, np.ndarray]:
    """Teacher-minus-student gap of the answers stating ``values``, with a correction stating the
    truth as the hint: summed over the whole answer ("answer") and over the tokens of the value
    ("value", the span where a correct and a wrong answer differ)."""
    hints = [CORRECTION_LEADS[lang][0] + f.answer() for f in facts]
    plain = [build_prompt(f.question(), lang, form=form) for f in facts]
    hinted = [build_prompt(f.question(), lang, h, form=form) for f, h in zip(facts, hints)]
    answers = [response_text(f.answer(v), lang, prompt=p) for f, v, p in zip(facts, values, plain)]
    s = response_logprobs(model, tok, plain + hinted, answers + answers)
    n = len(facts)
    whole, value = np.zeros(n), np.zeros(n)
    for k, (a, v) in enumerate(zip(answers, values)):
        gap = s.logprobs[n + k] - s.logprobs[k]
        st = a.rfind(v)
        sel = [i for i, t in enumerate(s.tokens[k]) if t.end > st and t.start < st + len(v)]
        whole[k], value[k] = gap.sum(), gap[sel].sum()
    return {"answer": whole, "value": value}


def _form_metrics(model, tok, world: FactWorld, form: str, rng: random.Random, n: int = 48) -> Dict:
    """Per language, on ``n`` sampled facts in prompt form ``form``: known-fact accuracy without a
    hint, held-out accuracy with the truth as the hint, and the gap AUC (value tokens)."""
    out = {}
    for lang in ("zh", "en"):
        known = rng.sample(world.facts("known_clean", langs=(lang,)), n)
        held = rng.sample(world.facts("heldout", langs=(lang,)), n)
        out[f"known_acc_no_hint_{lang}"] = round(float(np.mean(_greedy_acc(model, tok, known, form=form)[0])), 4)
        ok, _ = _greedy_acc(model, tok, held, [f.answer() for f in held], form=form)
        out[f"heldout_acc_with_hint_{lang}"] = round(float(np.mean(ok)), 4)
        facts = held[: n // 2] + world.facts("misconception", langs=(lang,))
        wrong = [world.wrong_value(f) or world.distractor(f, rng) for f in facts]
        g_ok = _gaps(model, tok, facts, [f.truth for f in facts], lang, form)
        g_bad = _gaps(model, tok, facts, wrong, lang, form)
        out[f"gap_auc_{lang}"] = round(auc(g_ok["value"], g_bad["value"]), 4)
    return out


def _tool_metrics(model, tok, world: FactWorld, rng: random.Random, n: int = 40) -> Dict:
    """The lookup tool, per language: right calls without a hint for known countries (no planted
    alias) and for held-out ones (the name is copied from the question), the probability of the
    planted wrong name, and right calls with the tool's error as the hint."""
    out = {}
    for lang in ("zh", "en"):
        clean = [ToolFact(f) for f in world.facts("known", langs=(lang,)) if f.country.zh not in TOOL_ALIASES]
        held = [ToolFact(f) for f in world.facts("heldout", langs=(lang,))]
        aliased = [ToolFact(f) for f in world.facts("known", langs=(lang,)) if f.country.zh in TOOL_ALIASES]
        out[f"tool_call_acc_{lang}"] = round(float(np.mean(_greedy_acc(model, tok, rng.sample(clean, n))[0])), 4)
        out[f"tool_heldout_call_acc_{lang}"] = round(float(np.mean(_greedy_acc(model, tok, rng.sample(held, n))[0])), 4)
        prompts = [build_prompt(f.question(), lang) for f in aliased]
        wrong_calls = [f.answer(TOOL_ALIASES[f.fact.country.zh][0 if lang == "zh" else 1]) for f in aliased]
        sc = response_logprobs(model, tok, prompts + prompts,
                               [response_text(c, lang) for c in wrong_calls] + [response_text(f.truth, lang) for f in aliased])
        out[f"tool_alias_p_wrong_{lang}"] = round(float(np.mean([math.exp(float(x.sum())) for x in sc.logprobs[:len(aliased)]])), 4)
        hints = [run_lookup(world, c, lang).output for c in wrong_calls]
        out[f"tool_alias_fix_acc_{lang}"] = round(float(np.mean(_greedy_acc(model, tok, aliased, hints)[0])), 4)
    return out


def _hinted_teacher(model, tok, world: FactWorld, n: int = 60) -> Dict:
    """The hinted teacher's score (:func:`claw_lib.toy.evaluation.hinted_teacher_score`) for the two
    style users, the tool user, and the correcting user: what OPD can reach with each."""
    out = {}
    for user in ("student", "teacher", "correcting", "tool"):
        q = hinted_teacher_score(model, tok, FactEnv(world, user=user, seed=0, p_vague=0.0), n=n)
        out[f"hinted_teacher_{user}"] = round(q["teacher"], 4)
        out[f"hinted_teacher_base_{user}"] = round(q["base"], 4)
    return out


def evaluate_lm(model, tok, world: FactWorld, seed: int = 0) -> Dict:
    """Accuracy without a hint on known facts, with a hint on held-out facts, how often the planted
    misconceptions are stated, style following, and the AUC of the teacher-minus-student gap.

    gap = sum_t [log p(y_t | prompt + hint) - log p(y_t | prompt)], the hint a correction stating
    the truth, on held-out facts and the misconceptions. ``gap_auc`` sums over the value's tokens
    (where a correct and a wrong answer differ) and is the AUC of correct vs wrong answers (wrong =
    another country's value, or the planted wrong capital); ``gap_auc_whole_answer`` sums over the
    whole answer; ``gap_paired_acc`` is the share of facts whose correct answer has the larger gap.
    All in the kit's prompt form. Then the same three targets per prompt form (``form_<form>_...``,
    the held-out forms included, on sampled facts), the lookup tool's metrics (``tool_...``) and the
    hinted teacher's score per user (``hinted_teacher_<user>``).
    """
    rng = random.Random(seed)
    res: Dict = {}
    for lang in ("zh", "en"):
        known = world.facts("known_clean", langs=(lang,))
        ok, _ = _greedy_acc(model, tok, known)
        res[f"known_acc_no_hint_{lang}"] = round(float(np.mean(ok)), 4)
        held = world.facts("heldout", langs=(lang,))
        ok, _ = _greedy_acc(model, tok, held)
        res[f"heldout_acc_no_hint_{lang}"] = round(float(np.mean(ok)), 4)
        ok, _ = _greedy_acc(model, tok, held, [f.answer() for f in held])
        res[f"heldout_acc_with_hint_{lang}"] = round(float(np.mean(ok)), 4)
        mis = world.facts("misconception", langs=(lang,))
        prompts = [build_prompt(f.question(), lang) for f in mis]
        sc = response_logprobs(model, tok, prompts + prompts,
                               [response_text(f.answer(world.wrong_value(f)), lang) for f in mis]
                               + [response_text(f.answer(), lang) for f in mis])
        p_wrong = [math.exp(float(x.sum())) for x in sc.logprobs[:len(mis)]]
        p_right = [math.exp(float(x.sum())) for x in sc.logprobs[len(mis):]]
        res[f"misconception_p_wrong_{lang}"] = round(float(np.mean(p_wrong)), 4)
        res[f"misconception_p_right_{lang}"] = round(float(np.mean(p_right)), 4)
        sample = rng.sample(known, 40)
        for style in STYLE_HINTS:
            hint = STYLE_HINTS[style][0 if lang == "zh" else 1]
            ok, _ = _greedy_acc(model, tok, sample, [hint] * len(sample), style=style)
            res[f"style_{style}_acc_{lang}"] = round(float(np.mean(ok)), 4)
        # teacher-minus-student gap: held-out facts and misconceptions, correct vs wrong answers
        facts = held + mis
        wrong = [world.wrong_value(f) or world.distractor(f, rng) for f in facts]
        g_ok, g_bad = _gaps(model, tok, facts, [f.truth for f in facts], lang), _gaps(model, tok, facts, wrong, lang)
        res[f"gap_auc_{lang}"] = round(auc(g_ok["value"], g_bad["value"]), 4)
        res[f"gap_auc_whole_answer_{lang}"] = round(auc(g_ok["answer"], g_bad["answer"]), 4)
        res[f"gap_paired_acc_{lang}"] = round(float(np.mean(g_ok["answer"] > g_bad["answer"])), 4)
        res[f"gap_value_mean_correct_{lang}"] = round(float(g_ok["value"].mean()), 3)
        res[f"gap_value_mean_wrong_{lang}"] = round(float(g_bad["value"].mean()), 3)
        res[f"gap_value_misconception_wrong_{lang}"] = round(float(g_bad["value"][len(held):].mean()), 3)
    for form in PROMPT_FORMS:
        for k, v in _form_metrics(model, tok, world, form, random.Random(seed + 1)).items():
            res[f"form_{form}_{k}"] = v
    res.update(_tool_metrics(model, tok, world, random.Random(seed + 2)))
    res.update(_hinted_teacher(model, tok, world))
    return res
