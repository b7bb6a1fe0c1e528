"""Other training engines driven by the kit's signals (docs/trl.md).

::

    integrations/
    └── trl.py       TRL's GRPOTrainer with the kit's per-token advantages: ClawGRPOTrainer,
                     grpo_config, make_trainer, train_trl (multi-GPU / multi-node through accelerate,
                     vLLM generation, PEFT)

Each module here imports its engine (``trl``, ``accelerate``) at its top and nothing else in
``claw_lib`` imports it, so the kit works without these packages: ``import claw_lib`` never needs
them, ``import claw_lib.integrations.trl`` raises a clear ImportError when they are missing. The
engines reuse the kit's stages (:mod:`claw_lib.rl.ppo`: ``Rollout``, ``compute_signals``,
``compute_advantages``) rather than re-implementing a signal, so their advantages are the kit's by
construction and their metrics have the same names and definitions.
"""
