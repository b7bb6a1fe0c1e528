"""What a person uses: the ``claw`` command line (:mod:`~claw_lib.apps.cli`), the alignment explorer
(:mod:`~claw_lib.apps.explorer`) and figures (:mod:`~claw_lib.apps.viz`)."""
