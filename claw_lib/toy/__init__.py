"""The toy lab the tutorials run in: the bilingual fact world (:mod:`~claw_lib.toy.world`), its lookup
tool (:mod:`~claw_lib.toy.tools`), the pre-training corpus (:mod:`~claw_lib.toy.corpus`), the kit's tiny
GPT (:mod:`~claw_lib.toy.pretrain`), simulated users (:mod:`~claw_lib.toy.users`), greedy evaluation and
the hinted teacher's score (:mod:`~claw_lib.toy.evaluation`) and the labelled probe set
(:mod:`~claw_lib.toy.probe`)."""
