"""Whether a run fits its model and its machine, checked once the model is loaded and before anything is written:
the longest prompt plus ``max_new_tokens`` within the model's positions (MX01, MX03, ET13), a step's
memory within what is free (TC10: ``--user tool-chain`` counts episodes of 2-4 calls, so a batch of 4096 is about
12,000 sequences), and the top-k settings within the vocabulary (C07, C11). A refusal is a
:class:`claw_lib.config.SettingError` naming the setting, which the command line turns into its flag.
"""
from __future__ import annotations

from typing import Optional

from ..config import PPOConfig, SettingError

#: bytes one token of a step holds in memory, in float32 numbers per vocabulary entry and per layer x width: the
#: logits and their log-softmax and gradient (4 V), the activations kept for the backward pass (8 L H). Fitted
#: to the tiny GPT (V 2048, L 4, H 192): a tool-chain step measured 0.86 GiB at 64 episodes and 2.08 GiB at 256
#: (28,000 tokens more: 47 KB a token); this gives 57 KB, a slight over-estimate.
LOGIT_COPIES, ACTIVATION_COPIES = 4, 8


def free_memory_bytes(device: str) -> Optional[int]:
    """Memory free for this run on ``device``: the GPU's free memory, or the machine's MemAvailable
    (/proc/meminfo; None where there is none)."""
    if str(device).startswith("cuda"):
        import torch  # lazy: rl.fit stays torch-free: a refused run loads nothing

        try:  # a device that cannot report its free memory (the tests' stand-in for a GPU) is not checked
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        except (AssertionError, RuntimeError, AttributeError):
            return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def step_bytes(n_tokens: int, model) -> int:
    """About the memory a step over ``n_tokens`` tokens (prompts and responses of every sequence) needs."""
    c = model.config
    vocab = model.get_input_embeddings().num_embeddings
    layers = getattr(c, "n_layer", None) or getattr(c, "num_hidden_layers", 1)
    width = getattr(c, "n_embd", None) or getattr(c, "hidden_size", 1)
    return 4 * n_tokens * (LOGIT_COPIES * vocab + ACTIVATION_COPIES * layers * width)


def eval_tokens(cfg: PPOConfig) -> int:
    """Longest greedy answer in evaluation: EVAL_MAX_NEW_TOKENS (40), or the rollout's cap when longer."""
    from ..toy.evaluation import EVAL_MAX_NEW_TOKENS  # lazy: toy.evaluation imports torch (models.lm)

    return max(EVAL_MAX_NEW_TOKENS, cfg.max_new_tokens)


def check_fits(cfg: PPOConfig, model, tokenizer, tasks, step_tasks, device: str, engine: str = "kit") -> None:
    """Refuse (:class:`SettingError`, one line) a run that cannot work on ``model``: ``tasks`` (the evaluation's)
    and ``step_tasks`` (one training step's) are :class:`~claw_lib.toy.users.Task` lists whose prompts are
    measured. Nothing else is done, so a refused run leaves nothing behind."""
    from ..models.lm import max_positions  # lazy: models.lm imports torch
    prompts = [getattr(t, "prompt", "") for t in list(tasks) + list(step_tasks)]
    lengths = [len(x) for x in tokenizer(prompts)["input_ids"]] if prompts else []  # one batched call
    longest = max(lengths, default=0)
    positions = max_positions(model)
    new = max(cfg.max_new_tokens, eval_tokens(cfg)) if engine == "kit" else cfg.max_new_tokens
    if positions is not None and longest + new > positions:
        raise SettingError(
            f"max_new_tokens {cfg.max_new_tokens} does not fit the model: the longest prompt ({longest} tokens) plus "
            f"{new} new tokens needs {longest + new} positions and the model has {positions}; use max_new_tokens "
            f"<= {max(positions - longest, 0)}" + (f" (the evaluation generates at least {eval_tokens(cfg)})"
                                                    if new > cfg.max_new_tokens else ""), ("max_new_tokens",))
    _check_topk(cfg, model)
    _check_memory(cfg, model, step_tasks, [n + cfg.max_new_tokens for n in lengths[len(tasks):]], device)


def _check_topk(cfg: PPOConfig, model) -> None:
    vocab = model.get_input_embeddings().num_embeddings
    used = {"opd.selection_k": cfg.opd.hint_selection == "overlap" and cfg.opd.hint_candidates > 1,
            "loss.clipped_k": cfg.loss.distill == "topk_clipped"}
    for name, on in used.items():
        k = cfg.opd.selection_k if name == "opd.selection_k" else cfg.loss.clipped_k
        if on and k > vocab:
            raise SettingError(f"{name} {k} exceeds the model's vocabulary of {vocab} ids; use {name} <= {vocab}",
                               (name,))


def _check_memory(cfg: PPOConfig, model, step_tasks, seq_tokens, device: str) -> None:
    free = free_memory_bytes(device)
    need = step_bytes(sum(seq_tokens), model)
    if free is None or need <= free:
        return
    per = need / max(cfg.batch_size, 1)
    unit = "episodes" if cfg.task.user == "tool-chain" else "prompts"
    raise SettingError(
        f"batch_size {cfg.batch_size} needs about {need / 2**30:.1f} GiB for one step ({len(step_tasks)} sequences "
        f"of {cfg.batch_size} {unit}, {sum(seq_tokens)} tokens) and {free / 2**30:.1f} GiB are free on {device}; use "
        f"batch_size <= {max(int(free // per), 1)}", ("batch_size",))
