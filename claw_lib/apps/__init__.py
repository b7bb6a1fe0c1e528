"""What a person uses: the ``claw`` command line (:mod:`~claw_lib.apps.cli`: one ``_add_*`` / ``_cmd_*`` pair per
subcommand), its flags taken from the config tree (:mod:`~claw_lib.apps.flags`), the batch JSONL input and output
of align, rewards and opd (:mod:`~claw_lib.apps.batch`), the grid runner of ``claw reproduce``
(:mod:`~claw_lib.apps.grid`, above ``rl`` because it may start the TRL engine), the live system's commands
(:mod:`~claw_lib.apps.serve_cli`), ``claw show`` (:mod:`~claw_lib.apps.show_cli`), ``claw train --judge``'s LLM judge
(:mod:`~claw_lib.apps.train_judge`), the alignment explorer
(:mod:`~claw_lib.apps.explorer`) and figures (:mod:`~claw_lib.apps.viz`)."""
