"""Reinforcement learning: the PPO maths (:mod:`~claw_lib.rl.core`), one plan per strategy
(:mod:`~claw_lib.rl.strategies`, with what each driver can supply), the public stages of a step
(:mod:`~claw_lib.rl.ppo`) and the seam their three drivers feed them through (:mod:`~claw_lib.rl.driver`), the run
around them (:mod:`~claw_lib.rl.run`: the loop, folder, checkpoint, resume, metrics; their TensorBoard event files,
:mod:`~claw_lib.rl.events`), its fit to the machine
(:mod:`~claw_lib.rl.fit`), what a run said (:mod:`~claw_lib.rl.samples`), the ablation's settings
(:mod:`~claw_lib.rl.grids`) and the reading of a grid's results (:mod:`~claw_lib.rl.ablation`; the runner is
:mod:`claw_lib.apps.grid`)."""
