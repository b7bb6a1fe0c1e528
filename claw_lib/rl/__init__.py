"""Reinforcement learning: the PPO maths (:mod:`~claw_lib.rl.core`), the loop in public stages
(:mod:`~claw_lib.rl.ppo`), the ablation's settings
(:mod:`~claw_lib.rl.grids`) and runner (:mod:`~claw_lib.rl.ablation`)."""
