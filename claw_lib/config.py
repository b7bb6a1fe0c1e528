"""Every setting of the kit, in one tree of dataclasses (one source of defaults for the library,
the ``claw`` command line and the ablation settings).

::

    PPOConfig                      a training run (claw train, notebooks 08-10)
    ├── task:   TaskConfig         who asks what (the toy world's user and questions)
    ├── loss:   LossConfig         clipped surrogate, KL, value and distillation terms
    ├── reward: RewardConfig       alignment / perplexity token rewards (notebooks 03, 04, 05b, 07)
    │   └── align: AlignConfig     encoder, lexical blend, gap costs, match threshold (01-02)
    └── opd:    OPDConfig          OpenClaw-RL's Binary RL, hindsight OPD, combined (06)

Each field has a docstring: what it means, its unit, and where its default comes from. Change a
setting with :func:`override` (``override(cfg, {"opd.w_rl_negative": 0.0})``), which returns a new
config and refuses unknown names. This module imports nothing heavy (no torch), so the command
line can build its ``--help`` from it in a blink.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from .prompts import PROMPT_FORMS

__all__ = ["SUBTOKEN_MODES", "AlignConfig", "RewardConfig", "OPDConfig", "TaskConfig", "LossConfig", "PPOConfig", "override",
           "flatten", "from_dict", "field_docs", "PPO_STRATEGIES", "REWARD_STRATEGIES", "USERS", "ADVANTAGES", "DISTILL_LOSSES",
           "LOSS_AGGREGATIONS", "UPSTREAM_LOSS", "KIT_LOSS", "validate", "LIMITS", "WORLDS", "DTYPES", "PER_MODEL",
           "SMALL_MODEL_PARAMS", "model_defaults", "recommended_lr", "lr_warning", "resolve_for_model", "SettingError",
           "CHOICES", "KL_ESTIMATORS", "QUESTION_KINDS", "TEACHERS", "CHAIN_REWARDS", "HINT_SELECTIONS", "ALTERNATIVES",
           "HINT_PROMPTS", "ENGINES", "CONTRASTS", "ALIGNMENT_STRATEGIES", "ReviserConfig", "REVISER_SCOPES", "REVISER_MODELS",
           "REVISER_COMBINES", "HOMEWORK_PERSONAS", "GSM8K_SPLITS",
           "CEILING_CONDITIONS", "DECODINGS", "LOCALISERS"]


class SettingError(ValueError):
    """A setting that does not fit the run (too many new tokens for the model's positions, a batch beyond the
    machine's memory, a float16 run that overflows); ``settings``: the dotted names of the settings to change,
    which the command line turns into its flags."""

    settings: Tuple[str, ...] = ()

    def __init__(self, message: str, settings=()):
        super().__init__(message)
        if settings:
            self.settings = tuple(settings)

#: token-reward strategies of :func:`claw_lib.signals.rewards.token_rewards`
REWARD_STRATEGIES = ("binary", "continuous", "perplexity", "sentence")
#: the token-reward strategies that read an alignment (the encoder's); perplexity reads a judge LM instead
ALIGNMENT_STRATEGIES = ("binary", "continuous", "sentence")
#: what the PPO loop can train on: the alignment rewards and OpenClaw-RL's signals
PPO_STRATEGIES = ("sentence", "binary", "continuous", "perplexity", "binary_rl", "opd", "opd_kl", "combined")
#: the toy world's simulated users (:mod:`claw_lib.toy.users`); "tool" asks for calls of the lookup tool,
#: "tool-chain" for episodes of 2-4 calls with one outcome (:mod:`claw_lib.toy.chains`), "joint" for the teacher
#: and the student user training one policy together (:class:`claw_lib.toy.users.JointEnv`)
USERS = ("correcting", "student", "teacher", "ta", "tool", "tool-chain", "joint")
#: how per-token signals become advantages in the PPO loop
ADVANTAGES = ("direct", "whiten", "reward_to_go", "grpo", "gae")
#: how a word's reward reaches the policy's sub-tokens (:func:`claw_lib.text.tokens.words_to_subtokens`)
SUBTOKEN_MODES = ("spread", "first", "split")
#: the divergences of ``opd_kl`` (OPD as distillation)
DISTILL_LOSSES = ("forward_kl", "topk_reverse_kl", "topk_clipped")
#: where the questions come from: the toy fact world (the tiny GPT's) or real-world questions with short
#: checkable answers (:mod:`claw_lib.toy.real_tasks`, for a real instruct model)
WORLDS = ("fact", "real")
#: what the evaluation of the real-world questions asks (:func:`claw_lib.toy.real_tasks.env_splits`)
EVAL_SPLITS = ("eval", "dev", "heldout")
#: the users of the GSM8K homework stream (:mod:`claw_lib.toy.homework`): upstream's lazy student (homework that does
#: not look AI-written), the friendly teacher, the final answer first, no LaTeX, the answer in Chinese
HOMEWORK_PERSONAS = ("student", "teacher", "answer_first", "no_latex", "chinese")
#: the kit's GSM8K problem sets (``data/gsm8k/split.json``, :mod:`claw_lib.toy.gsm8k`): upstream's 36-session stream,
#: Reef's 72-session stream (its first 36 are upstream's), the dev problems for choosing, the held-out problems
GSM8K_SPLITS = ("stream", "stream_72", "dev", "heldout")
#: the personal-agent ceiling's conditions (:mod:`claw_lib.toy.homework_eval`): the model as it is, told the preference
#: in a system prompt, and OPD's hinted teacher (the user's hint appended to the request, as OPD scores it)
CEILING_CONDITIONS = ("untrained", "prompted", "hinted")
#: how the ceiling decodes: greedy, or sampled at temperature 1 (what the live policy serves)
DECODINGS = ("greedy", "sampled")
#: model dtypes (``PPOConfig.dtype``; "auto": :func:`claw_lib.models.lm.resolve_dtype`)
DTYPES = ("auto", "float32", "bfloat16", "float16")
#: whose LoRA a run's adapters are (PPOConfig.lora_impl; claw_lib.models.peft_lora)
LORA_IMPLS = ("auto", "peft", "kit")
#: the KL-to-reference estimators (``LossConfig.kl_estimator``, :func:`claw_lib.ops.kl_estimate`)
KL_ESTIMATORS = ("k1", "k3", "low_var_kl")
#: one capital a question or two (``TaskConfig.questions``)
QUESTION_KINDS = ("single", "pair")
#: the OPD teacher: a frozen copy of the initial policy or the live policy (``OPDConfig.teacher``)
TEACHERS = ("frozen", "live")
#: what a judge setting names (:func:`judge_kind`): the rule judge, an OpenAI-compatible URL, a local instruct model
JUDGE_KINDS = ("rule", "url", "model")
#: a tool chain's per-step reward (``TaskConfig.chain_reward``, :func:`claw_lib.toy.chains.chain_rewards`)
CHAIN_REWARDS = ("outcome", "outcome+prm")
#: which hint candidate becomes the hint (``OPDConfig.hint_selection``)
HINT_SELECTIONS = ("longest", "shortest", "overlap")
#: how an LLM judge is asked for a hint (``OPDConfig.hint_prompt``, :mod:`claw_lib.signals.judges`)
HINT_PROMPTS = ("openclaw", "plain")
#: what counts as an alternative the correction brings (``RewardConfig.alternatives``)
ALTERNATIVES = ("none", "exact", "all")
#: the OPD gap's control (``OPDConfig.contrast``): none, or the teacher that read an unrelated follow-up
CONTRASTS = ("none", "unrelated")
#: the two training engines (``claw train --engine``, a grid's ``engines``): the kit's loop and TRL's GRPOTrainer
ENGINES = ("kit", "trl")
#: what the reviser rewrites (``RewardConfig.reviser.scope``): the sentences the correction addresses, or the output
REVISER_SCOPES = ("sentence", "output")
#: which LM revises, besides a model name / folder or an OpenAI-compatible URL (``RewardConfig.reviser.model``)
REVISER_MODELS = ("auto", "none", "base")
#: how the revision's reading and the rules' combine (``RewardConfig.reviser.combine``)
REVISER_COMBINES = ("revision", "rules_first", "union")
#: who finds the wrong words of a pair (``RewardConfig.localiser``): the rules (and the reviser where
#: ``reviser.model`` gives one), the reviser (required), or the learned localiser (claw_lib.signals.localiser)
LOCALISERS = ("rules", "reviser", "learned")


@dataclass
class AlignConfig:
    """Settings of :func:`claw_lib.alignment.texts.align_texts`; the defaults are the kit's
    recommended ones, chosen on the probe set's article-style pairs (notebook 02)."""

    encoder: str = "e5"
    """encoder alias ("e5", "minilm") or Hugging Face name/path; default: the offline multilingual e5"""
    layer: Optional[int] = None
    """hidden layer the word vectors come from (None: the encoder's default, 8 of 12 for e5, where
    margins are largest; shared notes)"""
    lexical_weight: float = 0.3
    """weight in [0, 1] of the character-bigram cost blended into 1 - cos (guards against [UNK])"""
    insert_cost: float = 0.5
    """DP cost of a correction word left unpaired (cost units, 1 - cos scale)"""
    delete_cost: float = 0.5
    """DP cost of an output word left unpaired (cost units)"""
    match_threshold: float = 0.3
    """a substitution with cost <= this is a "match", otherwise a "replace\""""
    contextual: bool = True
    """False: embed every word alone (the article's baseline, notebook 01)"""
    max_chars: int = 4_000
    """longest text accepted, in characters (longer ones are refused with an error naming ``--max-chars``;
    raise it on purpose). A text of 4,000 characters without a word break costs 4.9 s of CPU per pair on the
    2-core dev machine (``benchmarks/bench_lengths.py``, ``results/bench_lengths.md``; the old default:
    docs/settings_history.md)"""
    max_words: int = 500
    """most word tokens a text may have (more are refused with an error naming ``--max-words``; raise it on
    purpose): a pair of 500 words each costs 2.7-3.6 s of CPU (1,000: 4-5 s; 2,000: 9-11 s), and the cost
    matrix and the DP grow with words x words (``results/bench_lengths.md``)"""
    device: str = "cpu"
    """"cpu", "cuda", "cuda:N" or "auto" (the encoder's device)"""


@dataclass
class ReviserConfig:
    """The reviser stage (:mod:`claw_lib.signals.reviser`): an instruct LM reads the correction and rewrites
    the output as the user wants it; the alignment output <-> revision gives the binary / continuous / sentence
    rewards, the rules (:mod:`claw_lib.signals.rules`) where the LM gives nothing usable. Defaults chosen on the dev
    splits of ``data/probe_v2.jsonl`` and ``data/probe_long.jsonl`` with Qwen2.5-Coder-0.5B-Instruct
    (``results/probe_sets.md``, notebook 10)."""

    model: str = "auto"
    """which LM revises: "auto" (training a model with a chat template over 50M parameters: its frozen base, adapters
    off; the tiny GPT: none; ``claw rewards``: none, or the --judge model when that is an instruct LM), "none" (the
    rules alone), "base" (a training run's frozen base policy), a Hugging Face name / folder of an instruct model, or
    an OpenAI-compatible URL (``http://host:port``)"""
    remote_model: str = ""
    """a URL reviser: the model name to ask for (empty: the first one the endpoint lists)"""
    scope: str = "sentence"
    """what the LM rewrites: "sentence" (in a long output, each sentence the rules find the correction addresses,
    the rest copied as it is; a one-sentence output whole) or "output" (the whole output at once)"""
    gate: float = 0.0
    """ask the LM first whether the reply corrects anything: P(yes) below this means nothing to correct (no negative
    word); 0: not asked. Default 0, chosen on dev: Qwen2.5-Coder-0.5B-Instruct's P(yes) is higher on the replies that
    correct nothing (0.39-0.50) than on the others (median 0.35 / 0.40 on v2 / the long set), and a gate of 0.4 drops
    v2's recall to 0.02"""
    questions: bool = True
    """a reply that only asks something (it ends with a question mark: "明白了，那右心室呢？") corrects nothing: no word
    negative, the LM not asked (the live server's rule for a next state, :func:`claw_lib.signals.judges.
    _new_question`). Default on, chosen on dev: on the real-output set's dev split the 9 such replies all follow
    correct answers and the rules put a negative word in 3 of them; v2 and the long set's dev splits have none"""
    samples: int = 0
    """sampled candidates per text besides the greedy one"""
    temperature: float = 0.7
    """sampling temperature of those candidates"""
    min_similarity: float = 0.7
    """a candidate must be at least this similar to the text it revises (difflib ratio of the characters). On dev
    0.6, 0.7 and 0.8 tie (criterion 0.6990, 0.6993, 0.6994; one row moves it by about 0.001), 0.9 is worse (0.6958);
    a tie keeps this default, the issue's own reading of "usable" (at least 70 % similar); 0.8 would refuse a
    two-character fix of a nine-character sentence (法国的首都是伦敦 -> 巴黎: ratio 0.78)"""
    edit_weight: float = 1.0
    """a candidate's score: agreement with the correction - edit_weight x (1 - similarity); the best valid one wins"""
    retry: bool = True
    """a second prompt for the pairs without a valid candidate, before the fallback to the rules"""
    combine: str = "rules_first"
    """where the LM gave a revision: "revision" (its reading alone), "rules_first" (the rules' reading where they find a
    contradiction, the revision's where they find none), "union" (the lower reward of both on every word: negative
    where either reads it as wrong); elsewhere the rules. Default chosen on dev with Qwen2.5-Coder-0.5B-Instruct (the
    mean of hit, precision and recall over the dev splits of v2, the long set and the real-output set, at
    min_similarity 0.7: rules_first 0.699, union 0.690, revision 0.683, the rules alone 0.690; the reviser alone is
    better on v2, worse on the long set, ``results/probe_sets.md``)"""
    max_new_tokens: int = 256
    """at most this many tokens per revision (fewer for short texts: 1.5 x the text's tokens + 16)"""
    batch_size: int = 8
    """prompts per LM call"""
    seed: int = 0
    """seed of the sampled candidates"""


@dataclass
class RewardConfig:
    """Constants of the token-reward strategies (defaults: the article's values, and the kit's
    alignment)."""

    match: float = 0.5
    """reward of a matched word (binary, sentence); the article's value"""
    reject: float = -1.0
    """reward of a replaced, deleted or negated word (binary, sentence); the article's value"""
    a: float = 0.5
    """continuous: reward = a - b * cost, clipped to [lo, hi]; a = the match reward"""
    b: float = 2.0
    """continuous: reward per unit of alignment cost (cost 0.75 reaches lo = -1)"""
    lo: float = -1.0
    """continuous: lowest reward (delete and negated words get it); same range as binary"""
    hi: float = 0.5
    """continuous: highest reward"""
    ppl_scale: float = 5.0
    """perplexity: nats of log-prob gap that map to a reward of 1"""
    contrast: bool = True
    """perplexity: subtract log p without the correction (cancels words that are merely rare)"""
    clean: bool = True
    """clean the correction first (drop lead-ins and asides, detect affirmations)"""
    negation: bool = True
    """reject output words matching words the correction negates ("不是北京")"""
    omissions: bool = False
    """charge omissions: a run of inserted correction words (what the output left out; punctuation
    aside) rejects the output word produced in its place, the next one (or the last one when the
    output stopped early). Off in the tutorials (the article's insertions attach to nothing); on in
    PPO (``PPOConfig.reward``), where a policy otherwise learns to stop early: "The capital."
    matches every word it says (measured on the two-part questions, notebook 09b)"""
    evidence: bool = True
    """"absence is not contradiction" (docs/settings_history.md): a word gets a negative reward only with evidence
    that the correction contradicts it: an explicit negation, a number / code / name that differs
    (``exact``), or a replacement by a content word of a compatible kind (number for number; not a
    function word) whose cost is above the neutral band and at most ``unrelated_cost``. A word the
    correction does not speak to (deleted, paired with a word of another kind or an unrelated one)
    gets ``absent``; a word it repeats anywhere is confirmed. False: the article's rule (replace and
    delete -> reject). Defaults of this and the fields below: chosen on the dev split of
    ``data/probe_v2.jsonl`` (most of the 24 targets met: hit >= 0.9, precision >= 0.8, recall >= 0.85
    per language and per style, binary and continuous; then the mean of the three). Dev binary hit /
    precision / recall: every rule off (``signals.rewards.ARTICLE_RULES``) 0.43 / 0.28 / 0.78, all
    defaults 0.84 / 0.87 / 0.84, only this one off 0.54 / 0.33 / 0.92 (notebook 10)"""
    absent: float = 0.0
    """reward of a word the correction does not speak to (evidence rules, neutral band); 0: no signal"""
    neutral_band: float = 0.0
    """a replacement of content words with cost <= this reads "same meaning, other words" and gets
    ``absent`` (it acts only above ``align.match_threshold``); 0: off. Default off, chosen on dev:
    paraphrases (tallest / highest 0.33, kind / type 0.42) and contradictions (faster / slower 0.35,
    west / east 0.37, 蓝色 / 红色 0.45) cost the same; 0.4: 0.84 / 0.88 / 0.83, 0.5: 0.86 / 0.91 /
    0.80 (recall below its target, fewer targets met)"""
    unrelated_cost: float = 0.65
    """evidence rules: a pair of content words costlier than this is unrelated (the alignment had
    nothing better to pair) and no evidence; also the limit for alternatives. Default chosen on dev
    from 0.6-0.8: 0.65 (0.6: 0.84 / 0.89 / 0.82; 0.7: 0.80 / 0.81 / 0.83)"""
    exact: bool = True
    """numbers, dates, formulas, codes and names must be equal (:func:`claw_lib.text.corrections.value_key`):
    a mismatch ("1946" / "1945", "HNO2" / "HNO3", "2.178" / "2.718") is a contradiction even when the
    cost calls it a match, equal values match even when it does not ("八" / "8"); a name or code is
    exact as a whole ("J. R. R. Tolkien"). Default on, chosen on dev (off: 0.64 / 0.81 / 0.57)"""
    alternatives: str = "exact"
    """evidence rules: a number / code / name the correction brings anywhere (reordered, or in a
    clause of its own: "Only 50.", "Jane Austen wrote it.") contradicts the output's differing one:
    "exact"; "all": content words too, when mutually closest; "none": only the alignment's pairs.
    Default "exact", chosen on dev ("all": 0.82 / 0.81 / 0.88, fewer targets met; "none": 0.80 /
    0.85 / 0.77)"""
    reorder: bool = True
    """also align the correction with its copula turned round ("Jupiter is the largest planet" ->
    "the largest planet is Jupiter", "巴黎才是首都" -> "首都才是巴黎"), equal words anchored, and keep
    the alignment that pairs more equal words. Default on, chosen on dev (off: 0.81 / 0.84 / 0.81)"""
    keep_context: bool = False
    """the correction restates only part of the output ("No, it's in Paris."): output words before
    the first and after the last word it speaks to are kept context and get the match reward (hi in
    continuous) instead of ``absent``. Default off: on dev it changes one tie (0.85 / 0.87 / 0.84)
    and in PPO it would reward words the user never saw fit to repeat"""
    elaboration: bool = True
    """evidence rules: a reply that starts with an affirmation and contrasts nothing ("Yes, and it is
    also the largest city.") elaborates: only a negation or a differing number / code / name
    contradicts. Default on (no dev row changes either way; it guards the no-error rows)"""
    rewrite_share: float = 0.0
    """fallback for a correction that rewrites everything: when it confirms less than this share of
    the output's content words and brings at least as many new content words as the output has, every
    reward is multiplied by ``rewrite_scale`` (low confidence, near zero; ``info["rewrite"]``). 0: off.
    Default off, chosen on dev: at 0.25 it flags four free-style partial corrections and one v1
    negation, not the one rewrite on dev; with ``rewrite_scale`` 0: 0.82 / 0.88 / 0.81"""
    rewrite_scale: float = 0.1
    """the factor of the rewrite fallback (signs are kept)"""
    judge_weight: float = 0.0
    """binary / continuous with a judge LM given (``token_rewards(..., judge=(model, tokenizer))``): a word the
    rules find no evidence for (``absent``) gets ``judge_weight`` x the judge's perplexity reward (with the
    question in both contexts), clipped to [lo, hi]; a word with evidence keeps the rules' reward. 0: off.
    Default off: with the kit's tiny GPT as the judge it lowers precision on the long set's dev split (it
    knows only its own world; notebook 10); a real instruct model is the judge this is meant for"""
    local: bool = True
    """long outputs: a correction speaks to the sentence(s) it addresses
    (:func:`claw_lib.signals.rewards.addressed_sentences`: each clause of the correction picks the output
    sentence that shares its words, or holds a word it rejects); contradictions elsewhere are not looked
    for, those words stay ``absent``. One-sentence outputs are unchanged. Default chosen on the dev split of
    ``data/probe_long.jsonl`` (notebook 10)"""
    question_weight: float = 0.5
    """local: weight of the question (when given) in choosing the addressed sentence: a terse correction
    ("88个。") most likely speaks to the sentence that answers the question; 0: the question is not used"""
    terse_question: float = 2.0
    """local: the weight of the question's share for a terse clause (``question_weight`` for the others)"""
    terse_words: int = 2
    """local: a clause of the correction with at most this many content words ("88个。", "Swiss franc.")
    answers the question (when given): it addresses the sentence that says most of the question's words"""
    restated_words: int = 2
    """local: in a long output, the alignment's replacement of one content word by another is evidence only
    in a sentence that shares at least this many content words with a clause of the correction (a restated
    sentence); numbers, codes and names that differ, and the words a correction rejects outright, are
    evidence anywhere in the addressed sentences"""
    premise: bool = True
    """a word the question says (when given) is its premise, not the output's claim: it is never the target
    of an alternative or a replacement ("Edinburgh." against "The capital of Scotland is Glasgow." with the
    question "What is the capital of Scotland?" contradicts Glasgow, not Scotland)"""
    quotes: bool = True
    """mentioned is not affirmed: a word the correction names in order to reject it ("十五万公里不对", "Bach
    didn't write it, Vivaldi did", "1913 is ten years too late", "你说的一千五百米...") is contradicted, not
    confirmed by the repetition (:func:`claw_lib.text.claims.quoted_spans`); a clause the user concedes before
    a "but" ("Auckland is the biggest city, but the capital is Wellington") confirms nothing"""
    polarity: bool = True
    """the correction denies a modal the output affirms ("不能。" / "声音也能传播" -> 能), or affirms what the
    output negates ("Even." / "is not an even number" -> not) (:func:`claw_lib.text.claims.polarity_flips`)"""
    swaps: bool = True
    """"内存和硬盘说反了" / "Earth and Mars are the wrong way round": both named values are contradicted where
    the output says them (:func:`claw_lib.text.claims.swap_items`)"""
    align: AlignConfig = field(default_factory=AlignConfig)
    """encoder, layer, lexical weight, gap costs, threshold"""
    reviser: ReviserConfig = field(default_factory=ReviserConfig)
    """the reviser stage (binary / continuous / sentence): which LM reads the correction, and how"""
    localiser: str = "rules"
    """who finds the wrong words (binary / continuous / sentence): "rules" (the evidence rules, through the reviser
    where ``reviser.model`` gives one: the kit as before), "reviser" (the same, but a run without a reviser LM is
    refused) or "learned" (the localiser trained on generated pairs, ``data/localiser.pt``,
    :mod:`claw_lib.signals.localiser`; no reviser LM is loaded). Default "rules", chosen on the probe sets' dev
    splits (the mean of hit rate, precision and recall over v2, long and real dev: rules 0.69, learned 0.65;
    results/probe_sets.md, section "The learned localiser"; on test the learned one is ahead)"""


@dataclass
class OPDConfig:
    """Switches of the OPD / Binary RL / combined signal (defaults: OpenClaw-RL's public code)."""

    clip: Optional[float] = None
    """clip the OPD advantage to +-clip, in nats; None: no clip (the public snapshot has none; the kit's old 2.0 is
    the grid setting "teacher-vague-clip2", notebook 09a)"""
    kappa: float = 1.0
    """scale of the OPD term (1 upstream; the cloud port's convention is 0.02)"""
    w_rl: float = 1.0
    """weight of the Binary RL score in the combined advantage (upstream: 1)"""
    w_opd: float = 1.0
    """weight of the OPD term in the combined advantage (upstream: 1)"""
    w_rl_negative: Optional[float] = None
    """weight of the Binary RL score on turns judged -1 (None: w_rl, as OpenClaw-RL). 0 keeps the +1
    broadcast on satisfied turns only: a -1 broadcast also pushes down the good tokens of a half-right
    answer (notebook 09a, section 2); a -1 turn without a hint then gives no sample"""
    m: int = 1
    """judge votes per turn: an LLM judge samples m times (``opd.judge`` in training, the live server's ``--judge``;
    upstream's Binary RL script: 3); the toy world's rule judge is deterministic, so its m votes are one vote
    repeated"""
    min_hint_chars: int = 10
    """a hint must be longer than this many characters to count (upstream: 10)"""
    hint_candidates: int = 1
    """hint candidates per turn (the paper's second version: 3); the rule judge then also offers the reply's
    correction alone and its stated preference alone, where it holds both (RuleJudge(phrasings=...))"""
    hint_selection: str = "longest"
    """which candidate becomes the hint: "longest" (v1), "shortest" (candidate 0 of v2's list) or "overlap"
    (v2's sequence-optimal choice: the candidate whose hinted teacher's top ``selection_k`` tokens share most
    with the student's, summed over the response; ties to the shorter)"""
    selection_k: int = 4
    """k of the "overlap" selection (the v2 launcher: 4)"""
    teacher: str = "frozen"
    """"frozen": a copy of the initial policy (the public code); "live": the current policy without
    gradient (the paper's wording)"""
    contrast: str = "none"
    """"none" (upstream) or "unrelated": subtract the gap of a control teacher that read an unrelated follow-up
    instead of the hint (A = log pi_T - log pi_control; the style drift any extra user text causes,
    results/real_model/signal_controls.md)"""
    skip_first: int = 0
    """the OPD term is 0 on the first k response tokens (a chat teacher's style drift sits there); 0: none"""
    center: bool = False
    """subtract each response's mean OPD gap (over the tokens kept); False: upstream"""
    teacher_temperature: Optional[float] = None
    """temperature of the teacher's log-probs: None (default) the rollout's sampling temperature, as the kit
    did so far; 1.0 as upstream's teacher server scores"""
    judge: str = "rule"
    """who reads the next state in training (Binary RL's votes, OPD's hints): "rule" (the toy world's rule judge,
    default), a local instruct model (name or path: it samples ``m`` votes with OpenClaw-RL's prompts) or an
    OpenAI-compatible endpoint's http(s):// URL (claw_lib.apps.train_judge); a vote that fails counts in
    ``judge/failed_share``, never stops the run. The live server has its own (ServeConfig.judge)"""
    judge_model: str = ""
    """the model name asked for at a judge URL (empty: the first model its /v1/models lists); a URL judge only"""
    hint_prompt: str = "openclaw"
    """how an LLM judge (a model or a URL) is asked for a hint: "openclaw" (OpenClaw-RL's prompt: a \\boxed{1} or
    \\boxed{-1} decision and the hint between [HINT_START] and [HINT_END]) or "plain" (one question a small
    instruct model answers in its own words: what should the answer have done, or NONE; no format to follow).
    Qwen2.5-0.5B gave no usable hint in OpenClaw-RL's format (results/real_model/judge.md)"""


@dataclass
class TaskConfig:
    """Who asks what in the toy world (:class:`claw_lib.toy.users.FactEnv`)."""

    user: str = "correcting"
    """"correcting", "student", "teacher", "ta" (the paper's second version's TA persona, scaled down), "tool"
    (:mod:`claw_lib.toy.users`) or "tool-chain" (episodes of 2-4
    lookups with one outcome, :mod:`claw_lib.toy.chains`; strategy "binary_rl"; ``batch_size`` counts episodes) or
    "joint" (the teacher user on capitals and the student user on flag colours, one policy for both:
    :class:`~claw_lib.toy.users.JointEnv`; ``relations`` is then the personas')"""
    chain_reward: str = "outcome+prm"
    """"tool-chain": each step's reward, the episode's outcome o (+1 every call right, else -1) alone ("outcome") or
    plus the judge's vote on the step's next state ("outcome+prm", OpenClaw-RL's R_j = o + p_j)"""
    questions: str = "single"
    """"single" or "pair" (two capitals per question, correcting user only: the token vs sentence A/B)"""
    relations: Tuple[str, ...] = ("capital",)
    """relations asked about ("capital", "colour", "animal", "provinces")"""
    misconception_share: float = 0.5
    """share in [0, 1] of questions (of countries, with pair questions) drawn from the planted
    misconceptions, so that the correcting user has something to correct"""
    p_vague: Optional[float] = None
    """share in [0, 1] of unsatisfied replies without a hint (None: the user's default, 0.1 for the
    correcting user, 0 for the style users); makes OPD samples sparse"""
    prompt_form: str = "kit"
    """the prompts' surface form (claw_lib.prompts.PROMPT_FORMS). With a tokenizer's chat template, "kit" and the
    chat forms put the bare question in the user turn; another form's text goes inside the user turn"""
    world: str = "fact"
    """"fact": the toy fact world (the tiny GPT's); "real": real-world questions with short checkable answers in
    zh and en (capitals, dates, units, arithmetic; claw_lib.toy.real_tasks), for a real instruct model, whose
    users are "correcting", "student" and "teacher\""""
    eval_split: str = "eval"
    """task.world "real": which questions the evaluation asks: "eval" (as before: ``eval_prompts`` drawn at random
    from the held-out quarter), "dev" (each question of the dev quarter once; training leaves that quarter out: for
    choosing settings) or "heldout" (each held-out question once: for the report)"""


#: OpenClaw-RL's run scripts, per strategy: upper clip (None: no ratio, a distillation loss) and loss
#: aggregation. The kit's alignment strategies are not upstream's; they keep the kit's (0.28, token mean).
UPSTREAM_LOSS = {"binary_rl": (0.28, "sample_mean"), "opd": (0.2, "sample_mean"), "combined": (0.28, "sample_mean"),
                 "opd_kl": (None, "sample_mean")}
KIT_LOSS = (0.28, "token_mean")
#: how per-token losses become one number (:func:`claw_lib.rl.core.aggregate_loss`)
LOSS_AGGREGATIONS = ("sample_mean", "token_mean")


@dataclass
class LossConfig:
    """The terms of the PPO update (defaults: OpenClaw-RL's run scripts where they exist)."""

    eps: float = 0.2
    """lower clip of the probability ratio, 1 - eps (upstream: 0.2)"""
    eps_high: Optional[float] = None
    """upper clip of the probability ratio, 1 + eps_high; None: per strategy as the upstream scripts
    (0.2 for opd, 0.28 for binary_rl and combined; 0.28 for the kit's alignment strategies)"""
    loss_agg: Optional[str] = None
    """"sample_mean" (each response's token mean, then the mean over responses; a response with every
    token masked still counts) or "token_mean" (the mean over all masked tokens); None: sample_mean for
    binary_rl, opd, combined and opd_kl (upstream's scripts), token_mean for the alignment strategies"""
    kl_coef: float = 0.0
    """weight of the KL-to-reference loss term (0 in every upstream script)"""
    kl_estimator: str = "low_var_kl"
    """"k1", "k3" or "low_var_kl" (k3 clamped to [-10, 10] per token, upstream's)"""
    max_grad_norm: float = 1.0
    """gradient clipping (L2 norm over all trained parameters)"""
    vf_coef: float = 0.5
    """weight of the value loss (advantage "gae" only)"""
    distill: str = "forward_kl"
    """opd_kl: "forward_kl" (KL(teacher || student) over the vocabulary), "topk_reverse_kl"
    (KL(student || teacher) over the teacher's top ``distill_topk`` ids plus a tail bin) or "topk_clipped" (the
    paper's second version: a clipped surrogate over the old student's top ``clipped_k`` ids with the teacher's
    gap clipped to +-``clipped_gap``, :func:`claw_lib.signals.opd.clipped_topk_opd`; its launcher also sets
    ``eps_high`` 0.28)"""
    distill_topk: int = 50
    """K of the top-K reverse KL (upstream: 50)"""
    clipped_k: int = 4
    """k of "topk_clipped": the old student's k most likely ids at each position (the v2 launcher: 4)"""
    clipped_gap: float = 1.0
    """"topk_clipped": the teacher-minus-student gap is clipped to +-this, in nats (the v2 launcher: 1; 0: no clip)"""

    def for_strategy(self, strategy: str) -> "LossConfig":
        """This config with ``eps_high`` and ``loss_agg`` resolved for ``strategy`` (None -> the
        per-strategy default of :data:`UPSTREAM_LOSS`, or :data:`KIT_LOSS`)."""
        eps_high, agg = UPSTREAM_LOSS.get(strategy, KIT_LOSS)
        return dataclasses.replace(self, eps_high=self.eps_high if self.eps_high is not None else (eps_high or self.eps),
                                   loss_agg=self.loss_agg or agg)


@dataclass
class PPOConfig:
    """One training run; the defaults run on a laptop CPU in well under a second per step."""

    strategy: str = "combined"
    """the per-token signal: one of PPO_STRATEGIES"""
    model: str = "tiny"
    """policy: "tiny" (the kit's checkpoint) or a Hugging Face causal LM name/path"""
    device: str = "auto"
    """"cpu", "cuda", "cuda:N" or "auto" (default: CUDA when torch sees a GPU, else the CPU; the run's tensors
    follow the policy's device, tests/rl/test_device.py)"""
    seed: int = 0
    """seed of the prompts, the sampling and the initial value head"""
    steps: int = 16
    """PPO steps (one batch of prompts each)"""
    batch_size: int = 16
    """prompts per step (one response each)"""
    max_new_tokens: Optional[int] = None
    """longest sampled response, in tokens; None: per model (32 for the tiny GPT and models up to 50M parameters,
    48 for larger ones: an instruct model's full sentence plus a style's opener and closing)"""
    temperature: float = 1.0
    """sampling temperature of the rollout"""
    lr: Optional[float] = None
    """AdamW learning rate (no weight decay); None: per model (recommended_lr: 3e-4 for the tiny GPT and models up
    to 50M parameters; 1e-6 x sqrt(5e8 / parameters), at most 1e-6, to fully fine-tune a larger one; 20x that for
    adapters, so 2e-5 for a 0.5B model with LoRA). A rate over 10x the recommended one is warned about: 3e-4 took
    Qwen2.5-0.5B-Instruct's eval score from 0.425 to 0.000 in one step"""
    dtype: str = "auto"
    """the model's dtype: "float32", "bfloat16", "float16" or "auto" (float32 for the tiny GPT, otherwise
    bfloat16 where the device computes in it natively: a recent GPU, a CPU with AVX512-BF16 / AMX)"""
    lora_rank: Optional[int] = None
    """rank of the LoRA adapters trained instead of the whole model (claw_lib.models.lora; 0: full fine-tuning);
    None: per model (0 for models up to 50M parameters, 16 for larger ones: the base stays frozen and is also the
    frozen teacher, so no copy of the weights is held and AdamW keeps state for the adapters only)"""
    lora_impl: str = "auto"
    """whose LoRA the adapters are: "peft" (PEFT's; the run writes them in PEFT's format to RUN/adapter, which
    PeftModel.from_pretrained, TRL and a vLLM server load), "kit" (claw_lib.models.lora, the teaching version: the
    same outputs on the same weights) or "auto" (PEFT for models over 50M parameters, the kit's for the tiny GPT)"""
    epochs: int = 1
    """passes over each batch"""
    minibatches: int = 1
    """minibatches per pass"""
    micro_batch: Optional[int] = None
    """score at most this many rows at a time and add up their gradients before each optimizer step (the same step
    to rounding, with a part's memory: a 0.5B model's update of four 700-token samples needs over 20 GB at once);
    None: a minibatch at a time"""
    advantage: str = "direct"
    """"direct" (the per-token signal is the advantage: OpenClaw's no-baseline broadcast), "whiten" (the
    signal whitened over the batch's tokens), "reward_to_go" (each token's signal plus the discounted ones
    after it), "grpo" (the user's score minus the batch mean) or "gae" (a value head, GAE, whitened);
    notebook 08 compares them"""
    subtokens: str = "spread"
    """alignment and perplexity strategies: how a word's reward reaches its sub-tokens: "spread" (every
    sub-token gets it), "first" (the first sub-token only, the rest 0: the article's advice) or "split"
    (divided equally); notebook 08 compares them in training"""
    gamma: float = 1.0
    """discount of "reward_to_go" and "gae"""
    lam: float = 0.95
    """GAE lambda"""
    eval_prompts: Optional[int] = None
    """greedy evaluation prompts (a fixed set per seed); None: per model (40 for models up to 50M parameters, 32
    for larger ones)"""
    eval_every: int = 1
    """evaluate every N steps (and after the last); 0: only before the first"""
    save_every: int = 4
    """checkpoint every N steps when writing to a folder (0: never)"""
    threads: int = 0
    """torch CPU threads; 0: the cores free when the run starts (claw_lib.utils.free_cpus; two threads on a
    busy 2-core machine are several times slower than one, and results agree to 1e-8 either way)"""
    progress: bool = True
    """show a progress bar"""
    task: TaskConfig = field(default_factory=TaskConfig)
    """the toy world's user and questions"""
    loss: LossConfig = field(default_factory=LossConfig)
    """the terms of the update"""
    reward: RewardConfig = field(default_factory=lambda: RewardConfig(omissions=True))
    """alignment / perplexity rewards; omissions charged (a policy otherwise learns to stop early)"""
    opd: OPDConfig = field(default_factory=OPDConfig)
    """OpenClaw-RL's signals (no clip of the OPD advantage, as the public snapshot)"""

    def __post_init__(self):
        check_number("lora_rank", self.lora_rank)  # before it is compared with 0 (C03)
        if self.model == "tiny":  # the kit's own model: its per-model settings are known without loading it
            for name, value in model_defaults(TINY_PARAMS, self.lora_rank).items():
                if getattr(self, name) is None:
                    setattr(self, name, value)


# --------------------------------------------------------------------------- settings per model
#: settings of a PPOConfig whose default (None) comes from the model's size (:func:`model_defaults`)
PER_MODEL = ("lr", "max_new_tokens", "eval_prompts", "lora_rank")
#: models up to this many parameters get the tiny GPT's settings (full fine-tuning at 3e-4, ...)
SMALL_MODEL_PARAMS = 50_000_000
#: the tiny GPT's parameter count (about 1.6M; any number under SMALL_MODEL_PARAMS gives the same settings)
TINY_PARAMS = 1_600_000


def recommended_lr(n_params: int, adapter: bool = False) -> float:
    """The AdamW learning rate the kit uses for a model of ``n_params`` parameters: 3e-4 up to
    :data:`SMALL_MODEL_PARAMS` (the tiny GPT's, x10 with adapters); above, ``1e-6 * sqrt(5e8 / n_params)``
    capped at 1e-6 to fine-tune every weight (1e-6 for 0.5B, as docs/trl.md's Qwen example; 2.7e-7 for 7B),
    and 20x that for LoRA adapters (2e-5 for 0.5B)."""
    if n_params <= SMALL_MODEL_PARAMS:
        return 3e-3 if adapter else 3e-4
    full = 1e-6 * min(1.0, (5e8 / n_params) ** 0.5)
    return float(f"{(20 * full if adapter else full):.2g}")  # two digits: 8.9e-07, 1.8e-05


def model_defaults(n_params: int, lora_rank: Optional[int] = None) -> Dict[str, Any]:
    """The per-model settings (:data:`PER_MODEL`) for a model of ``n_params`` parameters, with the LoRA rank
    given or its default (0 up to :data:`SMALL_MODEL_PARAMS`, else 16). The tiny GPT:
    ``{"lr": 3e-4, "max_new_tokens": 32, "eval_prompts": 40, "lora_rank": 0}``."""
    small = n_params <= SMALL_MODEL_PARAMS
    rank = lora_rank if lora_rank is not None else (0 if small else 16)
    return {"lr": recommended_lr(n_params, adapter=rank > 0), "max_new_tokens": 32 if small else 48,
            "eval_prompts": 40 if small else 32, "lora_rank": rank}


def lr_warning(lr: float, n_params: int, lora_rank: int) -> Optional[str]:
    """One line when ``lr`` is more than 10x :func:`recommended_lr` for the model, else None."""
    rec = recommended_lr(n_params, adapter=lora_rank > 0)
    if lr <= 10 * rec:
        return None
    how = f"LoRA rank {lora_rank}" if lora_rank else "full fine-tuning"
    return (f"lr {lr:g} is {lr / rec:.0f}x the {rec:.2g} recommended for {how} of a {n_params / 1e6:.0f}M-parameter "
            "model; an update this large can wreck it (3e-4 took Qwen2.5-0.5B-Instruct's eval score from 0.425 to "
            "0.000 in one step); leave --lr out for the per-model default")


def resolve_for_model(cfg: "PPOConfig", n_params: int) -> "PPOConfig":
    """``cfg`` with every per-model setting left at None (:data:`PER_MODEL`) filled in for a model of
    ``n_params`` parameters (:func:`model_defaults`); settings given are kept."""
    values = model_defaults(n_params, cfg.lora_rank)
    return dataclasses.replace(cfg, **{k: v for k, v in values.items() if getattr(cfg, k) is None})


# --------------------------------------------------------------------------- helpers
def from_dict(d: Dict) -> PPOConfig:
    """A PPOConfig from its ``asdict`` form (a run's config.json); unknown fields raise TypeError."""
    top = {k: v for k, v in d.items() if k not in ("task", "loss", "reward", "opd")}
    reward = {**d["reward"], "align": AlignConfig(**d["reward"]["align"]),
              "reviser": ReviserConfig(**d["reward"].get("reviser", {}))}  # a run from before the reviser has none
    task = {**d["task"], "relations": tuple(d["task"]["relations"])}
    return PPOConfig(**top, task=TaskConfig(**task), loss=LossConfig(**d["loss"]), reward=RewardConfig(**reward),
                     opd=OPDConfig(**d["opd"]))


def override(cfg, changes: Mapping[str, Any]):
    """A copy of the dataclass ``cfg`` with ``changes`` applied; keys are field names, dotted for
    nested configs ("loss.kl_coef", "reward.align.layer"). Unknown names raise ValueError."""
    nested: Dict[str, Dict[str, Any]] = {}
    flat: Dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(cfg)}
    for key, value in changes.items():
        head, _, rest = key.partition(".")
        if head not in names:
            raise ValueError(f"{type(cfg).__name__} has no setting {head!r} (in {key!r}); "
                             f"settings: {', '.join(sorted(names))}")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            flat[head] = value
    for head, sub in nested.items():
        flat[head] = override(flat.get(head, getattr(cfg, head)), sub)
    return dataclasses.replace(cfg, **flat)


def flatten(cfg, prefix: str = "") -> Dict[str, Any]:
    """``{"strategy": ..., "loss.kl_coef": ..., ...}``: every leaf setting by its dotted name."""
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            out.update(flatten(v, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = v
    return out


@functools.lru_cache(maxsize=None)
def field_docs(cls) -> Dict[str, str]:
    """The docstring under each field of the dataclass ``cls`` (for ``--help`` texts)."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body
    docs = {}
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr) \
                and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
            docs[a.target.id] = " ".join(b.value.value.split())
    return docs


# --------------------------------------------------------------------------- validation
#: numeric settings and their allowed ranges: dotted name -> (low, high, low inclusive, high inclusive);
#: None: no bound. Every value must also be finite. Checked by :func:`validate` before any work.
#: Every size has an upper bound (a batch of 5,000,000 prompts is refused at once, not run for an hour), and so
#: have the learning rate and the loss weights (1e10 or 1e300 turn the weights into NaN in one update):
#: the bounds are far above any value the kit's runs use (a GPU run with a real model included).
LIMITS: Dict[str, Tuple[Optional[float], Optional[float], bool, bool]] = {
    "steps": (1, 100_000, True, True), "batch_size": (1, 4096, True, True), "max_new_tokens": (1, 8192, True, True),
    "epochs": (1, 100, True, True), "minibatches": (1, 4096, True, True), "micro_batch": (1, 4096, True, True),
    "eval_prompts": (1, 10_000, True, True),
    "loss.distill_topk": (1, 1_000_000, True, True), "loss.clipped_k": (1, 1_000_000, True, True),
    "loss.clipped_gap": (0, 100, True, True), "opd.m": (1, 100, True, True),
    "opd.hint_candidates": (1, 3, True, True), "opd.selection_k": (1, 1_000_000, True, True),
    "seed": (0, 2**32 - 1, True, True),
    **{n: (0, 100_000, True, True) for n in ("save_every", "eval_every", "opd.min_hint_chars")},
    "threads": (0, 1024, True, True),
    **{n: (0, 100, True, True) for n in ("loss.kl_coef", "loss.vf_coef", "opd.kappa", "opd.w_rl", "opd.w_opd",
                                        "opd.w_rl_negative")},
    "loss.eps_high": (0, None, True, False),  # a huge value switches the upper clip off (allowed on purpose)
    "reward.ppl_scale": (0, None, False, False),  # a scale of 0 nats divides by zero (R10)
    "lr": (0, 1, False, True),
    **{n: (0, None, False, False) for n in ("temperature", "loss.max_grad_norm", "opd.clip", "opd.teacher_temperature")},
    "opd.skip_first": (0, 100_000, True, True),
    "reward.align.max_chars": (0, 10_000_000, False, True), "reward.align.max_words": (0, 1_000_000, False, True),
    **{n: (0, 1, True, True) for n in ("gamma", "lam", "task.misconception_share", "task.p_vague",
                                       "reward.align.lexical_weight")},
    "loss.eps": (0, 1, False, False), "lora_rank": (0, 4096, True, True),
    "reward.align.insert_cost": (0, None, True, False), "reward.align.delete_cost": (0, None, True, False),
    "reward.align.match_threshold": (0, None, True, False), "reward.question_weight": (0, 100, True, True),
    "reward.restated_words": (0, 1000, True, True), "reward.terse_words": (0, 1000, True, True),
    "reward.terse_question": (0, 100, True, True), "reward.judge_weight": (0, 100, True, True),
    "reward.reviser.gate": (0, 1, True, True), "reward.reviser.samples": (0, 64, True, True),
    "reward.reviser.temperature": (0, None, False, False), "reward.reviser.min_similarity": (0, 1, True, True),
    "reward.reviser.edit_weight": (0, 100, True, True), "reward.reviser.max_new_tokens": (1, 8192, True, True),
    "reward.reviser.batch_size": (1, 4096, True, True), "reward.reviser.seed": (0, 2**32 - 1, True, True),
}


#: numeric settings that count something: an integer (2.5 steps or True prompts are refused, C01-C03)
INTEGERS = frozenset({"steps", "batch_size", "max_new_tokens", "epochs", "minibatches", "micro_batch", "eval_prompts",
                      "loss.distill_topk", "loss.clipped_k", "opd.m", "opd.hint_candidates", "opd.selection_k", "seed",
                      "save_every", "eval_every", "opd.min_hint_chars", "opd.skip_first", "threads", "lora_rank",
                      "reward.align.max_chars", "reward.align.max_words", "reward.align.layer", "reward.restated_words",
                      "reward.terse_words", "reward.reviser.samples", "reward.reviser.max_new_tokens",
                      "reward.reviser.batch_size", "reward.reviser.seed"})
#: the fact world's relations (claw_lib.toy.world.RELATIONS; tests/apps/test_safety_r3_library.py checks they agree)
FACT_RELATIONS = ("capital", "colour", "animal", "provinces")


#: every enumerated setting of PPOConfig by its dotted name -> its choices, the one list that :func:`validate` and
#: the command line (``choices=`` of every flag, claw_lib.apps.flags) read; ``task.prompt_form`` is
#: :data:`claw_lib.prompts.PROMPT_FORMS`
CHOICES: Dict[str, Tuple] = {
    "strategy": PPO_STRATEGIES, "task.user": USERS, "advantage": ADVANTAGES, "loss.distill": DISTILL_LOSSES,
    "subtokens": SUBTOKEN_MODES, "loss.loss_agg": (None,) + LOSS_AGGREGATIONS, "loss.kl_estimator": KL_ESTIMATORS,
    "task.questions": QUESTION_KINDS, "opd.teacher": TEACHERS, "task.world": WORLDS, "dtype": DTYPES, "task.eval_split": EVAL_SPLITS,
    "task.chain_reward": CHAIN_REWARDS, "opd.hint_selection": HINT_SELECTIONS, "opd.contrast": CONTRASTS,
    "opd.hint_prompt": HINT_PROMPTS,
    "reward.alternatives": ALTERNATIVES, "lora_impl": LORA_IMPLS, "reward.reviser.scope": REVISER_SCOPES,
    "reward.reviser.combine": REVISER_COMBINES, "reward.localiser": LOCALISERS,
    # the personal-agent experiment's choices (the GSM8K stream's persona and problem set), not PPOConfig settings:
    # validate() skips them; the commands that take them read their choices from here
    "homework.persona": HOMEWORK_PERSONAS, "homework.split": GSM8K_SPLITS,
}


def check_number(name: str, value) -> None:
    """Refuse a value of the numeric setting ``name`` that is not a number (TypeError: a bool, a string), or not
    an integer where the setting counts something (ValueError, :data:`INTEGERS`); None passes (a default)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if name in INTEGERS and not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")


def validate(cfg, prefix: str = "") -> None:
    """Raise ValueError naming the first setting of ``cfg`` (a PPOConfig or any config of the tree)
    that is not a finite number in its range (:data:`LIMITS`), not an integer where it counts something,
    not one of its choices, or that contradicts another (``reward.lo`` above ``reward.hi``, a task's option that
    the task ignores); TypeError for a value of the wrong type (a bool or a string for a number)."""
    flat = flatten(cfg)
    for name, value in flat.items():
        full = prefix + name
        if full in LIMITS or full in INTEGERS:
            check_number(full, value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value):
            raise ValueError(f"{full} must be a finite number, got {value}")
        lim = LIMITS.get(full)
        if lim is None:
            continue
        lo, hi, lo_in, hi_in = lim
        if (lo is not None and (value < lo or (value == lo and not lo_in))) or \
                (hi is not None and (value > hi or (value == hi and not hi_in))):
            rng = f"{'[' if lo_in else '('}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{']' if hi_in else ')'}"
            raise ValueError(f"{full} must be in {rng}, got {value}")
    choices = {**CHOICES, "task.prompt_form": tuple(PROMPT_FORMS)}
    for name, allowed in choices.items():
        key = name[len(prefix):] if name.startswith(prefix) else None  # a sub-config: its own (unprefixed) names
        if key in flat and flat[key] not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {flat[key]!r}")
    if flat.get("task.user") == "tool-chain" and flat.get("strategy") not in (None, "binary_rl"):
        raise ValueError(f"task.user 'tool-chain' trains with strategy 'binary_rl' (its reward: task.chain_reward), "
                         f"got {flat['strategy']!r}")
    if flat.get("task.world") == "real" and (flat["task.user"] in ("tool", "tool-chain", "joint")
                                             or flat["task.questions"] == "pair"):
        raise ValueError("task.world 'real' has the users 'correcting', 'student' and 'teacher' and single questions, "
                         f"got user {flat['task.user']!r} with {flat['task.questions']!r} questions")
    if flat.get("task.eval_split", "eval") != "eval" and flat.get("task.world") != "real":
        raise ValueError(f"task.eval_split {flat['task.eval_split']!r} chooses among the real-world questions (task.world "
                         f"'real'), got task.world {flat.get('task.world')!r}")
    if "minibatches" in flat and flat["minibatches"] > flat["batch_size"]:
        raise ValueError(f"minibatches ({flat['minibatches']}) must not exceed batch_size ({flat['batch_size']})")
    _validate_together({(prefix + k): v for k, v in flat.items()})


def _validate_together(flat: Dict[str, Any]) -> None:
    """The checks between settings (names in full, dotted from PPOConfig): each refusal names the setting."""
    lo, hi = flat.get("reward.lo"), flat.get("reward.hi")
    if lo is not None and hi is not None and lo > hi:  # R03: clipping to [1, -1] inverts every reward
        raise ValueError(f"reward.lo ({lo}) must not exceed reward.hi ({hi})")
    user, questions = flat.get("task.user"), flat.get("task.questions")
    if questions == "pair" and user not in (None, "correcting"):  # TC04, J02: asked by the correcting user only
        raise ValueError(f"task.questions 'pair' (two capitals a question) is asked by task.user 'correcting' only, "
                         f"got {user!r}")
    if user == "tool-chain" and flat.get("task.p_vague") is not None:  # TC05: a tool's output is never vague
        raise ValueError("task.p_vague means nothing for task.user 'tool-chain' (its next states are tool outputs, "
                         f"never vague replies), got {flat['task.p_vague']}; leave it out")
    _validate_judge(flat)
    reviser, strategy = flat.get("reward.reviser.model", "auto"), flat.get("strategy")
    if reviser not in ("auto", "none") and strategy is not None and strategy not in ALIGNMENT_STRATEGIES:  # R4-16
        raise ValueError(f"reward.reviser.model {reviser!r} revises the output for the alignment strategies "
                         f"{ALIGNMENT_STRATEGIES}; strategy {strategy!r} reads no revision, so it would be ignored: "
                         "leave it out")
    rel = flat.get("task.relations")
    if rel is not None and flat.get("task.world", "fact") == "fact":  # C04
        if isinstance(rel, str) or not rel or any(r not in FACT_RELATIONS for r in rel):
            raise ValueError(f"task.relations must be a non-empty tuple of {FACT_RELATIONS}, got {rel!r}")


def is_url(spec) -> bool:
    """Whether a model setting (a judge, a reviser) names an OpenAI-compatible endpoint (``http://`` or ``https://``)
    rather than a local model."""
    return isinstance(spec, str) and spec.strip().startswith(("http://", "https://"))


def judge_kind(spec, setting: str = "opd.judge") -> str:
    """What a judge setting (``opd.judge``, ``claw serve --judge``) names, one of :data:`JUDGE_KINDS`: "rule" (the
    toy world's rule judge), "url" (an OpenAI-compatible endpoint) or "model" (a local instruct model: a Hugging Face
    name or folder). The one reading of the setting: the judge factory
    (:func:`claw_lib.signals.judges.make_judge`), the validators and ``claw train`` ask it. An empty one or a
    non-string: ValueError naming ``setting``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"{setting} must be 'rule', a local model (name or path) or an http(s):// URL, got {spec!r}")
    return "rule" if spec.strip() == "rule" else "url" if is_url(spec) else "model"


def _validate_judge(flat: Dict[str, Any]) -> None:
    """opd.judge: a non-empty name, path or URL, read by the strategies a judge scores (not the token rewards);
    opd.judge_model only with a URL judge."""
    judge, model = flat.get("opd.judge", "rule"), flat.get("opd.judge_model", "")
    kind = judge_kind(judge)
    if not isinstance(model, str):
        raise TypeError(f"opd.judge_model must be a string, got {model!r}")
    if model.strip() and kind != "url":
        raise ValueError(f"opd.judge_model names the model asked for at a judge URL; opd.judge {judge!r} is not a URL")
    if kind != "rule" and flat.get("strategy") in REWARD_STRATEGIES:
        raise ValueError(f"opd.judge {judge!r} reads the next state for binary_rl, opd, opd_kl and combined; strategy "
                         f"{flat['strategy']!r} takes its rewards from the alignment or the perplexity judge")
