"""The toy lab the tutorials run in: the bilingual fact world (:mod:`~claw_lib.toy.world`), its
pre-training corpus (:mod:`~claw_lib.toy.corpus`), the kit's tiny GPT (:mod:`~claw_lib.toy.pretrain`),
simulated users (:mod:`~claw_lib.toy.users`) and the labelled probe set (:mod:`~claw_lib.toy.probe`)."""
