"""claw-kit: token-level supervision for LLM reinforcement learning.

The pipeline, one module per stage (the notebook that introduces each is in brackets):

* :mod:`claw_lib.tokens`   words and sub-tokens with character offsets          [01]
* :mod:`claw_lib.encoders` contextual word embeddings (offline e5 / MiniLM / HF)  [01]
* :mod:`claw_lib.costs`    cost matrix 1 - cos, with an optional lexical blend    [01]
* :mod:`claw_lib.align`    DP alignment with a recorded backtrace (op, i, j, cost) [02]
* :mod:`claw_lib.semantic` text in, alignment out                                 [02]
* :mod:`claw_lib.viz`      heatmaps and deterministic HTML                        [01-02]
* :mod:`claw_lib.world`    the bilingual fact world, prompts with hints           [05a]
* :mod:`claw_lib.lm`       causal LMs: loading, per-token log-probs, sampling     [05a]
* :mod:`claw_lib.pretrain` the kit's tiny GPT (``claw pretrain``) and its evaluation [05a]
* :mod:`claw_lib.users`    simulated users (correcting, student, teacher), FactEnv [05a]
"""
from .align import AlignOp, Alignment, align, align_reference
from .costs import cost_matrix, cosine_cost, lexical_cost, text_cost
from .semantic import AlignConfig, TextAlignment, align_texts
from .tokens import Token, tokenize
from .utils import seed_everything

__version__ = "0.1.0"

__all__ = [
    "AlignOp", "Alignment", "align", "align_reference", "cost_matrix", "cosine_cost",
    "lexical_cost", "text_cost", "AlignConfig", "TextAlignment", "align_texts", "Token",
    "tokenize", "seed_everything", "__version__",
]
