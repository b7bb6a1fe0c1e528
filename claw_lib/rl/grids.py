"""The ablation's settings and grids, and the paper's numbers they are read against (notebooks 09a-09c).

A :class:`Setting` is a named set of :class:`~claw_lib.config.PPOConfig` overrides (who asks what,
and how the strategies are configured there) plus the strategies that run in it; a grid names the
settings, seeds and steps of one ``claw reproduce`` run. Nothing here imports torch, so the command
line lists the choices at once.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

from ..config import PPO_STRATEGIES as STRATEGIES
from ..config import PPOConfig, override

__all__ = ["PAPER", "PAPER_SETTINGS", "DIGEST_INTERACTIONS", "ORDERING", "Setting", "SETTINGS", "QUICK", "FULL", "TABLE3", "TABLE3_EXTRA", "ENGINES", "STEP8", "V2", "CHAIN", "HINTS", "JOINT", "TA", "GRIDS",
           "GRID_HELP", "TARGET", "STRATEGIES"]

#: OpenClaw-RL, personal-agent track (Qwen3-4B, score 0..1): method -> (after 8 steps, after 16 steps)
PAPER = {"base": (0.17, 0.17), "binary_rl": (0.25, 0.23), "opd": (0.25, 0.72), "combined": (0.76, 0.81)}

#: the settings that stand for the paper's Table 3 (the teacher user with sparse hints: the paper's users give a hint
#: only now and then); the paper's numbers are shown next to these alone, since the paper ran no other
PAPER_SETTINGS = ("teacher-vague",)
#: the OpenClaw-RL digest: interactions until the style preference holds, with the combined method
DIGEST_INTERACTIONS = {"student": 36, "teacher": 24}

#: the eval score a grid's runs are measured against (the ``steps_to_target`` and ``steps_to_stable`` columns;
#: every committed grid's)
TARGET = 0.9

#: the paper's Table 3 ordering, as pairs (better or equal, worse)
ORDERING = (("combined", "opd"), ("opd", "binary_rl"))

OPENCLAW = ("binary_rl", "opd", "combined", "opd_kl")


class Setting(NamedTuple):
    """One row group of the ablation: PPOConfig overrides by dotted name (who asks what, and how),
    and the strategies that run there (None: all of STRATEGIES)."""

    config: Tuple[Tuple[str, Any], ...]
    strategies: Optional[Tuple[str, ...]] = None

    def runs(self, strategy: str) -> bool:
        return self.strategies is None or strategy in self.strategies

    def apply(self, cfg: PPOConfig) -> PPOConfig:
        """``cfg`` with this setting's overrides."""
        return override(cfg, dict(self.config))


def _setting(user: str, strategies: Optional[Tuple[str, ...]] = None, **changes) -> Setting:
    """A setting for ``user``; keyword names use "__" for the dots ("opd__w_rl_negative")."""
    return Setting((("task.user", user),) + tuple((k.replace("__", "."), v) for k, v in changes.items()), strategies)


#: ablation settings by name. "correcting-pair" is the seed's token-level vs sentence-level A/B: two
#: capitals per question, both planted misconceptions, so an answer often has one right and one wrong
#: part, and a sentence-level reward punishes the right part with the wrong one. "teacher-vague" and
#: "student-vague": half of the user's complaints say nothing specific (-1 for Binary RL, no hint for
#: OPD), as the paper's users, whose hints are sparse. "...-rl-pos": Combined with the Binary RL term
#: on satisfied (+1) turns only (``w_rl_negative=0``), the component ablation of notebook 09a.
#: "teacher-sparse": nine complaints in ten vague (the step-8 grid).
#: "tool-chain" / "tool-chain-prm": episodes of 2-4 lookups with one outcome (:mod:`claw_lib.toy.chains`), each step
#: rewarded with the outcome alone or with the outcome plus the judge's vote on its next state (the process reward).
#: "...-topk": OPD as distillation with top-K reverse KL instead of forward KL. "...-v2": OPD and Combined as the
#: paper's second version trains them (``loss.distill="topk_clipped"``: a clipped surrogate over the student's top 4
#: ids, the teacher's gap clipped to +-1, eps_high 0.28, as its launcher; opd_kl is v2's OPD-only, combined its
#: hybrid, :func:`claw_lib.rl.ppo.v2_hybrid`). "joint-v2": v2's joint optimisation, one policy for the teacher user
#: (capitals) and the student user (flag colours) (:class:`claw_lib.toy.users.JointEnv`), with GRPO (binary_rl),
#: OPD-only and the hybrid; "ta-v2": the TA persona (:class:`claw_lib.toy.users.TAUser`) alone, with the same three;
#: "student-colour-v2" is the student persona alone on its questions (the teacher persona
#: alone is "teacher-v2", and table3's "teacher" for binary_rl). "...-v2-overlap" / "...-v2-shortest": the hybrid with three hint
#: candidates per turn (the whole hint, the correction alone, the preference alone), chosen by top-k overlap (v2's
#: sequence-optimal rule) or the shortest; "longest" among them is v1's hint, i.e. the "...-v2" hybrid itself. "tool": the next state is the
#: lookup tool's output (a result, or an error whose text is the hint), half of the questions about countries
#: the model calls by a planted wrong name. "teacher-vague-token-mean" and
#: "teacher-vague-clip2": the kit's earlier choices (loss averaged over all tokens; OPD advantage clipped to
#: +-2) against upstream's defaults (a mean per response, then over responses; no clip), paired by seed.
SETTINGS = {
    "correcting": _setting("correcting"),
    "teacher": _setting("teacher"),
    "student": _setting("student"),
    "correcting-pair": _setting("correcting", ("sentence", "binary", "continuous"), task__questions="pair",
                                task__misconception_share=1.0),
    "teacher-vague": _setting("teacher", OPENCLAW, task__p_vague=0.5),
    "teacher-sparse": _setting("teacher", ("binary_rl", "opd", "combined"), task__p_vague=0.9),
    "student-vague": _setting("student", OPENCLAW, task__p_vague=0.5),
    "teacher-rl-pos": _setting("teacher", ("combined",), opd__w_rl_negative=0.0),
    "teacher-vague-rl-pos": _setting("teacher", ("combined",), task__p_vague=0.5, opd__w_rl_negative=0.0),
    "teacher-vague-token-mean": _setting("teacher", ("binary_rl", "opd", "combined"), task__p_vague=0.5,
                                         loss__loss_agg="token_mean"),
    "teacher-vague-clip2": _setting("teacher", ("opd", "combined"), task__p_vague=0.5, opd__clip=2.0),
    "tool": _setting("tool", ("binary_rl", "opd", "combined")),
    "teacher-topk": _setting("teacher", ("opd_kl",), loss__distill="topk_reverse_kl"),
    "teacher-vague-topk": _setting("teacher", ("opd_kl",), task__p_vague=0.5, loss__distill="topk_reverse_kl"),
    "tool-chain": _setting("tool-chain", ("binary_rl",), task__chain_reward="outcome"),
    "tool-chain-prm": _setting("tool-chain", ("binary_rl",), task__chain_reward="outcome+prm"),
    **{f"{u}-v2": _setting(u.split("-")[0], ("opd_kl", "combined"), **({"task__p_vague": 0.5} if u.endswith("vague") else {}),
                           loss__distill="topk_clipped", loss__clipped_k=4, loss__clipped_gap=1.0, loss__eps_high=0.28)
       for u in ("teacher", "teacher-vague", "student")},
    **{f"{u}-v2-{sel}": _setting(u.split("-")[0], ("combined",), **({"task__p_vague": 0.5} if u.endswith("vague") else {}),
                                 loss__distill="topk_clipped", loss__clipped_k=4, loss__clipped_gap=1.0,
                                 loss__eps_high=0.28, opd__hint_candidates=3, opd__hint_selection=sel)
       for u in ("teacher-vague", "student") for sel in ("overlap", "shortest")},
    **{name: _setting(user, ("binary_rl", "opd_kl", "combined"), loss__distill="topk_clipped", loss__clipped_k=4,
                      loss__clipped_gap=1.0, loss__eps_high=0.28, **extra)
       for name, user, extra in (("joint-v2", "joint", {}), ("student-colour-v2", "student", {"task__relations": ("colour",)}),
                                 ("ta-v2", "ta", {}))},
}

QUICK = dict(steps=16, seeds=(0, 1, 2), users=("correcting", "teacher", "correcting-pair", "tool"), batch_size=16,
             eval_every=2)
FULL = dict(steps=48, seeds=(0, 1, 2, 3, 4), users=("correcting", "teacher", "student", "correcting-pair"),
            batch_size=16, eval_every=2)
#: the paper's Table 3 with enough seeds to read an ordering: the four OpenClaw-RL strategies on the
#: teacher user, with a hint in every complaint and with half of the complaints vague (sparse hints),
#: and Combined without its -1 broadcast in both
TABLE3 = dict(steps=16, seeds=tuple(range(10)),
              users=("teacher", "teacher-vague", "teacher-rl-pos", "teacher-vague-rl-pos", "teacher-vague-token-mean",
                     "teacher-vague-clip2"),
              batch_size=16, eval_every=2, strategies=OPENCLAW)
#: the same on the student user and the tool user, and OPD distilled with top-K reverse KL on the teacher
TABLE3_EXTRA = dict(TABLE3, users=("student", "student-vague", "tool", "teacher-topk", "teacher-vague-topk"))
#: the kit's loop and TRL's GRPOTrainer on the same settings (teacher user, sparse hints), paired by seed
ENGINES = dict(steps=16, seeds=tuple(range(5)), users=("teacher-vague",), batch_size=16, eval_every=2,
               strategies=("binary_rl", "opd", "combined"), engines=("kit", "trl"))
#: the paper's step-8 pattern (OPD no better than Binary RL after 8 steps, "slow early" because its samples are
#: filtered): the teacher user with hints sparser still, nine complaints in ten vague
STEP8 = dict(TABLE3, users=("teacher-sparse",), strategies=("binary_rl", "opd", "combined"))
#: OPD-only and the hybrid as the paper's second version trains them (the clipped top-k loss), on the settings of
#: table3 and table3-extra they are paired with by seed: the teacher user with dense and sparse hints, the student
V2 = dict(TABLE3, users=("teacher-v2", "teacher-vague-v2", "student-v2"), strategies=("opd_kl", "combined"))
#: outcome-only vs outcome + per-step process reward on the multi-step tool task (the digest's 0.17 -> 0.30), paired
#: by seed; ``batch_size`` counts episodes (about 3 steps each)
CHAIN = dict(TABLE3, users=("tool-chain", "tool-chain-prm"), strategies=("binary_rl",))
#: v2's hint selection (its Table 4): the hybrid with three candidates chosen by overlap or the shortest, paired by
#: seed with the v2 grid's hybrid (the longest candidate, v1's rule)
HINTS = dict(TABLE3, users=("teacher-vague-v2-overlap", "teacher-vague-v2-shortest", "student-v2-overlap",
                            "student-v2-shortest"), strategies=("combined",))
#: v2's joint vs separate optimisation: the two personas training one policy, and the student persona alone (the
#: teacher persona alone: the v2 grid and table3), paired by seed
JOINT = dict(TABLE3, users=("joint-v2", "student-colour-v2"), strategies=("binary_rl", "opd_kl", "combined"))
#: the third persona of the paper's second version, the TA, alone (separate optimisation), paired by seed with the
#: teacher and student personas of the v2 and joint grids
TA = dict(TABLE3, users=("ta-v2",), strategies=("binary_rl", "opd_kl", "combined"))
GRIDS = {"quick": QUICK, "full": FULL, "table3": TABLE3, "table3-extra": TABLE3_EXTRA, "engines": ENGINES,
         "step8": STEP8, "v2": V2, "chain": CHAIN, "hints": HINTS, "joint": JOINT, "ta": TA}
#: one line per grid (``claw reproduce --help``)
GRID_HELP = {
    "quick": "4 settings x their strategies x 3 seeds x 16 steps",
    "full": "48 steps, 5 seeds",
    "table3": "the paper's 4 strategies on the teacher, hints dense and sparse, 10 seeds",
    "table3-extra": "the same on the student and the tool user, and OPD distilled with top-K reverse KL",
    "engines": "the kit's loop and TRL's",
    "step8": "nine complaints in ten vague",
    "v2": "OPD-only and the hybrid as the paper's second version trains them (clipped top-k loss), 10 seeds",
    "chain": "outcome-only vs outcome + per-step process reward on episodes of 2-4 tool calls, 10 seeds",
    "hints": "the v2 hybrid with three hint candidates chosen by top-k overlap or the shortest, 10 seeds",
    "joint": "the teacher and student users training one policy (v2's joint optimisation) and the student alone, "
             "10 seeds",
    "ta": "the TA persona alone, 10 seeds",
}
