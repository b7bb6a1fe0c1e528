"""Alignment: contextual word embeddings (:mod:`~claw_lib.alignment.encoders`), the cost matrix
(:mod:`~claw_lib.alignment.costs`), the DP alignment with its recorded backtrace
(:mod:`~claw_lib.alignment.dp`), and text in, alignment out (:mod:`~claw_lib.alignment.texts`)."""
