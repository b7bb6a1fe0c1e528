"""Evaluation: the hinted teacher is what OPD distils towards."""


def test_hinted_teacher_is_what_opd_distils_towards():
    """With the teacher user's hint in context the shipped tiny GPT answers as that user wants (the
    premise of OPD on this task), although without it it rarely does; the user's RNG is restored."""
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.toy.evaluation import hinted_teacher_score
    from claw_lib.toy.users import FactEnv

    model, tok = load_causal_lm("tiny")
    env = FactEnv(user="teacher", seed=0, p_vague=0.5)
    state = env.user.rng.getstate()
    q = hinted_teacher_score(model, tok, env, n=16)
    assert env.user.rng.getstate() == state
    assert q["n"] == 16 and 0 < q["n_hinted"] < 16  # vague complaints give no hint
    assert q["base"] < 0.5 and q["teacher"] >= 0.9
