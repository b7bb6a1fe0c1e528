"""Train with the TRL engine in several processes and print a digest of the parameters per process.

After an update every DDP process must hold the same weights (gradients are averaged before each
optimizer step); tests/integrations/test_trl.py launches this script in two CPU processes and compares
the digests. On CPU, launch through ``--multi_gpu`` (accelerate then runs torchrun, and picks gloo
because there is no CUDA); ``--cpu`` starts a single process::

    OMP_NUM_THREADS=1 accelerate launch --multi_gpu --num_processes 2 --num_machines 1 \\
        --mixed_precision no --dynamo_backend no --main_process_port 29511 \\
        tools/trl_ddp_check.py --strategy combined --steps 1

Each process prints one line ``CLAW_TRL_DDP {json}`` with its rank, the number of processes, the
backend, the parameter digests before and after training, and (rank 0) the kit's metrics rows.
"""
import argparse
import hashlib
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # TRL pings the hub at init otherwise
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def param_digest(model) -> str:
    """sha256 over every parameter's bytes, in name order (the first 16 hex digits)."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strategy", default="combined")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=12)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()

    import torch
    import torch.distributed as dist

    from claw_lib.config import PPOConfig
    from claw_lib.integrations.trl import make_trainer

    cfg = PPOConfig(strategy=a.strategy, steps=a.steps, batch_size=a.batch_size, max_new_tokens=a.max_new_tokens,
                    lr=a.lr, device=a.device, eval_prompts=4, threads=int(os.environ.get("OMP_NUM_THREADS", "1")),
                    progress=False)
    trainer = make_trainer(cfg)
    before = param_digest(trainer.model)
    trainer.train()
    acc = trainer.accelerator
    line = {"rank": acc.process_index, "world": acc.num_processes,
            "backend": acc.state.backend, "distributed": dist.is_initialized(), "device": str(acc.device),
            "before": before, "after": param_digest(trainer.model), "torch": torch.__version__}
    if acc.is_main_process:
        line["history"] = trainer.history
    for rank in range(acc.num_processes):  # one rank at a time: lines written together interleave in a pipe
        if rank == acc.process_index:
            print("CLAW_TRL_DDP " + json.dumps(line), flush=True)
        acc.wait_for_everyone()


if __name__ == "__main__":
    main()
