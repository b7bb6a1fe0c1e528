"""Pictures and deterministic HTML for alignments (notebooks 01-02).

Everything here is static: matplotlib figures (shown as PNG in notebooks) and HTML strings
without scripts, CDN links or random ids, so notebook outputs are stable under nbval.
"""
from __future__ import annotations

import html
import importlib.util
import logging
import warnings
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..utils import check_real, finite_array

__all__ = ["use_cjk_font", "plot_cost_matrix", "alignment_html", "reward_html", "plot_rewards", "OP_COLORS"]

OP_COLORS = {"match": "#2e7d32", "replace": "#c62828", "delete": "#ef6c00", "insert": "#1565c0"}

_CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
              "Source Han Sans SC", "SimHei", "Microsoft YaHei", "PingFang SC", "Heiti SC",
              "AR PL UMing CN", "Droid Sans Fallback")


#: the CJK font that ships with the kit (PyPI package notojp-matplotlib: Noto Sans CJK, SIL Open Font
#: License; its "JP" cut holds every simplified Chinese character)
BUNDLED_CJK_FONT = "Noto Sans CJK JP"


def _register_bundled_font() -> None:
    """Add the bundled Noto Sans CJK file to matplotlib's font list (once), found without importing
    its package (importing it would change matplotlib's settings as a side effect)."""
    from matplotlib import font_manager  # lazy: matplotlib (seconds to import) loads only for a figure

    if any(f.name == BUNDLED_CJK_FONT for f in font_manager.fontManager.ttflist):
        return
    spec = importlib.util.find_spec("notojp_matplotlib")
    if spec is None or not spec.submodule_search_locations:
        return
    for f in sorted(Path(list(spec.submodule_search_locations)[0], "fonts").glob("*.otf")):
        font_manager.fontManager.addfont(str(f))


def use_cjk_font() -> Optional[str]:
    """Make matplotlib draw Chinese: put a CJK font first in its list and return its name.

    The kit ships Noto Sans CJK (:data:`BUNDLED_CJK_FONT`, from a pip package), so figures look the
    same on every machine; a system CJK font is used only when that package is missing. Without any,
    Chinese labels render as boxes; the kit's axes also carry token indices, so figures stay readable.
    """
    import matplotlib  # lazy: matplotlib (seconds to import) loads only for a figure
    from matplotlib import font_manager  # lazy: matplotlib (seconds to import) loads only for a figure

    # font fallback chatter ("findfont: ...") would make notebook outputs depend on installed fonts
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    _register_bundled_font()
    names = {f.name for f in font_manager.fontManager.ttflist}
    for f in (BUNDLED_CJK_FONT,) + _CJK_FONTS:
        if f in names:
            matplotlib.rcParams["font.sans-serif"] = [f] + [x for x in matplotlib.rcParams["font.sans-serif"] if x != f]
            matplotlib.rcParams["font.family"] = "sans-serif"
            matplotlib.rcParams["axes.unicode_minus"] = False
            return f
    warnings.filterwarnings("ignore", message="Glyph .* missing from font")
    return None


def _labels(tokens: Sequence) -> list:
    return [f"{k}:{getattr(t, 'text', t)}" for k, t in enumerate(tokens)]


def plot_cost_matrix(cost: np.ndarray, output_tokens: Sequence, correction_tokens: Sequence,
                     alignment=None, ax=None, title: str = "", annotate: bool = True, vmax: float = 1.0,
                     cbar_label: str = "cost = 1 - cos"):
    """Heatmap of an (n, m) cost matrix: rows = output tokens, columns = correction tokens; ``cbar_label`` names
    the colour bar (say so when a lexical term is blended in).

    With an ``alignment``, the substitutions are circled (green match, red replace) and the DP
    path is drawn through them. Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt  # lazy: matplotlib (seconds to import) loads only for a figure

    use_cjk_font()
    cost = np.asarray(cost)
    n, m = cost.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4, 0.6 * m + 2), max(3, 0.5 * n + 1.5)))
    im = ax.imshow(cost, cmap="viridis_r", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(m))
    ax.set_xticklabels(_labels(correction_tokens), rotation=60, ha="right")
    ax.set_yticks(range(n))
    ax.set_yticklabels(_labels(output_tokens))
    ax.set_xlabel("correction tokens (j)")
    ax.set_ylabel("output tokens (i)")
    if annotate and n * m <= 400:
        for i in range(n):
            for j in range(m):
                ax.text(j, i, f"{cost[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if cost[i, j] < 0.5 * vmax else "white")
    if alignment is not None:
        # path cells (i, j) in DP coordinates -> the token pair (i-1, j-1) they end on
        pts = [(j - 0.5, i - 0.5) for i, j in alignment.path()]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color="white", lw=1.5, alpha=0.8)
        for o in alignment.ops:
            if o.op in ("match", "replace"):
                ax.add_patch(plt.Circle((o.j, o.i), 0.42, fill=False, lw=2, color=OP_COLORS[o.op]))
    ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=cbar_label)
    ax.figure.tight_layout()
    return ax


def alignment_html(text_alignment) -> str:
    """Both sentences with every token coloured by its op (match/replace/delete/insert)."""
    ta = text_alignment
    out_op = {o.i: o for o in ta.alignment.ops if o.i is not None}
    cor_op = {o.j: o for o in ta.alignment.ops if o.j is not None}

    def row(label, text, tokens, ops):
        parts, pos = [], 0
        for k, t in enumerate(tokens):
            parts.append(html.escape(text[pos:t.start]))
            o = ops[k]
            parts.append(
                f'<span title="{o.op} cost={o.cost:.3f}" style="border-bottom:3px solid '
                f'{OP_COLORS[o.op]};padding:0 1px">{html.escape(t.text)}</span>')
            pos = t.end
        parts.append(html.escape(text[pos:]))
        return f"<div><b>{label}</b> {''.join(parts)}</div>"

    legend = " ".join(f'<span style="border-bottom:3px solid {c}">{op}</span>' for op, c in OP_COLORS.items())
    return ('<div style="font-size:15px;line-height:1.9">'
            + row("output:", ta.output, ta.output_tokens, out_op)
            + row("correction:", ta.correction, ta.correction_tokens, cor_op)
            + f'<div style="font-size:12px">{legend}</div></div>')


def _signed(r: float, decimals: int = 3) -> str:
    """"+0.500" / "-1.000", and never "-0.000" (rounding noise must not flip a printed sign)."""
    return f"{round(float(r), decimals) + 0.0:+.{decimals}f}"


def _reward_colour(r: float, vmax: float = 1.0) -> str:
    """Red for negative, green for positive, white at 0 (a fixed, deterministic palette)."""
    r = round(float(r), 3) + 0.0
    x = max(-1.0, min(1.0, r / vmax if vmax else 0.0))
    if x >= 0:
        g = int(255 - 90 * x)
        return f"#{int(255 - 200 * x):02x}{g:02x}{int(255 - 200 * x):02x}"
    return f"#ff{int(255 + 200 * x):02x}{int(255 + 200 * x):02x}"


def reward_html(token_rewards, vmax: float = 1.0, title: str = "") -> str:
    """The output with every token's background coloured by its reward (hover shows the value).

    ``token_rewards``: a :class:`~claw_lib.rewards.TokenRewards`. Deterministic HTML, no scripts.
    """
    tr = token_rewards
    check_real("vmax", vmax, lo=0.0, lo_open=True)
    rewards = finite_array("token_rewards.rewards", tr.rewards)
    parts, pos = [], 0
    for t, r in zip(tr.tokens, rewards):
        parts.append(html.escape(tr.output[pos:t.start]))
        parts.append(f'<span title="{_signed(r)}" style="background:{_reward_colour(float(r), vmax)};'
                     f'padding:1px 2px;border-radius:3px">{html.escape(t.text)}</span>')
        pos = t.end
    parts.append(html.escape(tr.output[pos:]))
    label = html.escape(title or tr.strategy)
    return (f'<div style="font-size:15px;line-height:2"><b>{label}</b>&nbsp; {"".join(parts)}'
            f' &nbsp;<span style="font-size:11px;color:#666">({" ".join(_signed(r, 2) for r in rewards)})</span></div>')


def plot_rewards(token_rewards_list, ax=None, title: str = ""):
    """Grouped bars: one group per token, one bar per :class:`TokenRewards` (same output)."""
    import matplotlib.pyplot as plt  # lazy: matplotlib (seconds to import) loads only for a figure

    use_cjk_font()
    trs = list(token_rewards_list)
    n = len(trs[0].tokens)
    if any(len(t.tokens) != n for t in trs):
        raise ValueError("all TokenRewards must be for the same output")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5, 0.9 * n + 1), 3))
    w = 0.8 / len(trs)
    for k, tr in enumerate(trs):
        ax.bar(np.arange(n) + (k - (len(trs) - 1) / 2) * w, tr.rewards, w, label=tr.strategy)
    ax.set_xticks(range(n))
    ax.set_xticklabels([t.text for t in trs[0].tokens])
    ax.axhline(0, color="black", lw=0.6)
    ax.set_ylabel("reward")
    ax.set_title(title)
    if len(trs) > 1:
        ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax
