"""Text: word tokens with character offsets, model sub-tokens and the map between them
(:mod:`~claw_lib.text.tokens`), reading a user's correction (:mod:`~claw_lib.text.corrections`), whether output and correction share a
language (:mod:`~claw_lib.text.langs`), and
every phrase the kit's users say or its rules listen for (:mod:`~claw_lib.text.phrases`)."""
