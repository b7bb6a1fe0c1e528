"""Reinforcement learning: the PPO maths (:mod:`~claw_lib.rl.core`), one plan per strategy
(:mod:`~claw_lib.rl.strategies`), the public stages of a step (:mod:`~claw_lib.rl.ppo`), the run around them
(:mod:`~claw_lib.rl.run`: the loop, folder, checkpoint, resume, metrics) and its fit to the machine
(:mod:`~claw_lib.rl.fit`), the ablation's settings (:mod:`~claw_lib.rl.grids`) and runner
(:mod:`~claw_lib.rl.ablation`)."""
