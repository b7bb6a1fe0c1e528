"""Figures and deterministic HTML: same input, same bytes; colours and signs as documented."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from claw_lib.alignment.dp import align  # noqa: E402
from claw_lib.apps.viz import (  # noqa: E402
    OP_COLORS,
    _reward_colour,
    _signed,
    alignment_html,
    plot_cost_matrix,
    plot_rewards,
    reward_html,
)
from claw_lib.signals.rewards import TokenRewards  # noqa: E402
from claw_lib.text.tokens import tokenize  # noqa: E402


def _tr(rewards, text="法国的首都是伦敦。", strategy="binary"):
    toks = tokenize(text)
    return TokenRewards(text, strategy, toks, np.asarray(rewards, float), np.asarray(rewards) < 0)


def test_signs_never_print_minus_zero():
    assert _signed(-1e-9) == "+0.000" and _signed(-0.5) == "-0.500" and _signed(0.25, 2) == "+0.25"


def test_reward_colours_red_white_green():
    assert _reward_colour(0.0) == "#ffffff"
    assert _reward_colour(1.0) == "#37a537" and _reward_colour(-1.0) == "#ff3737"
    assert _reward_colour(-5.0) == _reward_colour(-1.0)  # clipped at vmax


def test_reward_html_is_deterministic_and_escapes():
    tr = _tr([0.5, 0.5, 0.5, 0.5, -1.0, 0.5])
    a, b = reward_html(tr), reward_html(tr)
    assert a == b and 'title="-1.000"' in a and "<script" not in a
    h = reward_html(_tr([0.0] * 4, "<b> x"))  # tokens <, b, >, x
    assert ">&lt;</span>" in h and ">&gt;</span>" in h and "<b> x" not in h


def test_alignment_html_colours_each_op():
    from claw_lib.alignment.texts import TextAlignment

    out, cor = tokenize("a b"), tokenize("a c d")
    cost = np.array([[0.0, 1.0, 1.0], [1.0, 0.9, 1.0]])
    ta = TextAlignment("a b", "a c d", out, cor, cost, align(cost, 0.5, 0.5, 0.3))
    h = alignment_html(ta)
    for op in {o.op for o in ta.alignment.ops}:
        assert f'title="{op} cost=' in h and OP_COLORS[op] in h


def test_plots_label_tokens_and_draw_the_path():
    cost = np.array([[0.0, 0.8], [0.9, 0.1]])
    al = align(cost, 0.5, 0.5, 0.3)
    ax = plot_cost_matrix(cost, ["法国", "伦敦"], ["法国", "巴黎"], alignment=al)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0:法国", "1:伦敦"]
    assert len(ax.patches) == 2  # one circle per substitution
    ax = plot_rewards([_tr([0.5] * 6), _tr([-1.0] * 6, strategy="continuous")])
    assert len(ax.patches) == 12 and ax.get_legend() is not None


def test_chinese_labels_are_drawn_with_a_font_that_has_the_glyphs():
    """The bundled Noto Sans CJK is chosen, and every character of a Chinese label maps to a glyph in
    the font matplotlib actually uses for it (no boxes)."""
    import matplotlib.pyplot as plt
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    from claw_lib.apps.viz import BUNDLED_CJK_FONT, use_cjk_font

    assert use_cjk_font() == BUNDLED_CJK_FONT
    fig, ax = plt.subplots()
    label = ax.set_title("法国的首都是巴黎，不是伦敦")
    fig.canvas.draw()
    path = font_manager.findfont(label.get_fontproperties(), fallback_to_default=False)
    font = FT2Font(path)
    missing = [ch for ch in label.get_text() if font.get_char_index(ord(ch)) == 0]
    assert "Noto" in font.family_name and not missing, (path, missing)
    plt.close(fig)
