"""Signals on every output token: token rewards from an alignment or a judge LM
(:mod:`~claw_lib.signals.rewards`; the evidence rules that read the alignment, :mod:`~claw_lib.signals.rules`),
their map onto the policy's action tokens (:mod:`~claw_lib.signals.mapping`), shaping
(:mod:`~claw_lib.signals.shaping`), next-state judges (:mod:`~claw_lib.signals.judges`) and OpenClaw-RL's Binary
RL, hindsight OPD and combined advantage (:mod:`~claw_lib.signals.opd`); a token-level reward model that predicts
the alignment's rewards from the output alone (:mod:`~claw_lib.signals.reward_model`, notebook 13); the reviser, where
an instruct LM rewrites the output as the correction wants it and the alignment output <-> revision gives the rewards
(:mod:`~claw_lib.signals.reviser`; its LMs, local, remote or cached, :mod:`~claw_lib.signals.reviser_lm`), and the
baselines it was measured against (:mod:`~claw_lib.signals.baselines`: last content word, lexical edit distance,
perplexity contrast with a control; notebook 10); the learned localiser, a small network that reads (question, output,
correction) and gives every output word a probability of being wrong (:mod:`~claw_lib.signals.localiser`, notebooks 10
and 13)."""
