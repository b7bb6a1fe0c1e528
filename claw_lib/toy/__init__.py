"""The toy lab the tutorials run in: what an environment is (:mod:`~claw_lib.toy.env`: Task, Feedback, the Env
protocol), the bilingual fact world (:mod:`~claw_lib.toy.world`), its lookup
tool (:mod:`~claw_lib.toy.tools`), the pre-training corpus (:mod:`~claw_lib.toy.corpus`), the kit's tiny
GPT (:mod:`~claw_lib.toy.pretrain`), simulated users (:mod:`~claw_lib.toy.users`), the multi-step tool task
(:mod:`~claw_lib.toy.chains`), real-world questions (:mod:`~claw_lib.toy.real_tasks`), the personal-agent experiment's
GSM8K problems (:mod:`~claw_lib.toy.gsm8k`), homework personas (:mod:`~claw_lib.toy.homework`) and ceiling
(:mod:`~claw_lib.toy.homework_eval`), greedy evaluation and
the hinted teacher's score (:mod:`~claw_lib.toy.evaluation`), the labelled probe set
(:mod:`~claw_lib.toy.probe`), the learned localiser's training pairs and its training (:mod:`~claw_lib.toy.localiser_data`,
:mod:`~claw_lib.toy.localiser_fit`) and, at the top, the factory :func:`~claw_lib.toy.envs.make_env`."""
