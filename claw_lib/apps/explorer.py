"""An interactive alignment explorer for JupyterLab, and a static report (notebook 11).

``AlignmentExplorer().widget`` is an ipywidgets app: text boxes for the model output and the
correction (prefilled with the article's example), a choice of encoder, reward strategy and
match threshold, and live views: the cost-matrix heatmap with the DP path, the alignment table,
and both sentences with every token coloured (hover shows the reward). Given a reviser (``reviser=``,
:mod:`claw_lib.signals.reviser`) it shows the revision, which path gave the rewards, and the alignment output <->
revision. Where ipywidgets is not
available, :func:`explorer` falls back to the static view.

:func:`report_html` is the static renderer (deterministic HTML, no scripts, no CDN, the heatmap
embedded as a PNG) that ``claw align ... --html FILE`` writes.
"""
from __future__ import annotations

import base64
import html
import io
from typing import Optional

from ..alignment.texts import TextAlignment
from ..config import REWARD_STRATEGIES, AlignConfig, RewardConfig
from ..models.offline import E5_NAMES, MINILM_NAMES
from ..signals.reviser import batch_rewards
from .viz import alignment_html, plot_cost_matrix, reward_html

__all__ = ["AlignmentExplorer", "explorer", "report_html", "heatmap_png", "table_html"]

SEED_OUTPUT = "法国的首都是伦敦。"
SEED_CORRECTION = "你说的不对，法国的首都是巴黎，另外法国红酒也不错。"


def heatmap_png(ta: TextAlignment, dpi: int = 100) -> bytes:
    """The cost-matrix heatmap with the DP path, as PNG bytes. Drawn on a bare ``Figure`` (no pyplot), so the
    caller's backend and open figures are left alone (inline plots keep showing in a notebook)."""
    from matplotlib.figure import Figure  # lazy: matplotlib (seconds to import) loads only for a figure

    fig = Figure(figsize=(max(4, 0.6 * len(ta.correction_tokens) + 2), max(3, 0.5 * len(ta.output_tokens) + 1.5)))
    ax = fig.add_subplot()
    plot_cost_matrix(ta.cost, ta.output_tokens, ta.correction_tokens, alignment=ta.alignment, ax=ax,
                     title="cost = 1 - cos; green = match, red = replace")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def table_html(ta: TextAlignment) -> str:
    """The alignment table (op, i, output word, j, correction word, cost) as an HTML table."""
    rows = "".join(
        f"<tr><td>{r['op']}</td><td>{'' if r['i'] is None else r['i']}</td><td>{html.escape(r['output'])}</td>"
        f"<td>{'' if r['j'] is None else r['j']}</td><td>{html.escape(r['correction'])}</td><td>{r['cost']:.3f}</td></tr>"
        for r in ta.table())
    return ('<table class="claw-table" style="border-collapse:collapse;font-size:13px">'
            "<tr><th>op</th><th>i</th><th>output</th><th>j</th><th>correction</th><th>cost</th></tr>"
            f"{rows}</table>")


def _tokens_block(tr, correction: str) -> str:
    return (f'<div class="claw-tokens" data-correction="{html.escape(correction, quote=True)}">'
            f"{reward_html(tr)}</div>")


def _rewards(output: str, correction: str, strategy: str, cfg: RewardConfig, encoder, reviser):
    """The rewards a view shows, as the loops read them (:func:`claw_lib.signals.reviser.batch_rewards`): through
    the reviser when one is given (the alignment is then output <-> revision), else the rules."""
    return batch_rewards([{"output": output, "correction": correction}], strategy, cfg, encoder, reviser=reviser)[0]


def _source_html(tr) -> str:
    """Through the reviser: which path gave the rewards and the revision; else ""."""
    if "source" not in tr.info:
        return ""
    if "localiser" in tr.info:  # the learned localiser (RewardConfig.localiser "learned"): no revision, no alignment
        return f"<p class='claw-source'>source: <b>learned</b> (P(wrong) >= {tr.info['localiser']['threshold']})</p>"
    rv = tr.info["revision"]
    return (f"<p class='claw-source'>source: <b>{html.escape(tr.info['source'])}</b> "
            f"({html.escape(tr.info['reviser']['why'])}); revision: {'(none)' if rv is None else html.escape(rv)}</p>")


def report_html(output: str, correction: str, strategy: str = "binary", config: Optional[RewardConfig] = None,
                encoder=None, title: str = "claw-kit alignment", embed_png: bool = True, reviser=None) -> str:
    """A standalone HTML page: coloured sentences, token rewards, the table and (``embed_png``) the
    heatmap as an embedded PNG. Without the PNG the page is pure text, identical on every machine
    (PNG bytes depend on the installed fonts). reviser: a :class:`~claw_lib.signals.reviser.Reviser`: the page
    also shows its revision and the source, and the alignment is output <-> revision."""
    cfg = config or RewardConfig()
    tr = _rewards(output, correction, strategy, cfg, encoder, reviser)
    ta = tr.alignment
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>",
             "<body style='font-family:sans-serif;max-width:960px;margin:2em auto'>",
             f"<h2>{html.escape(title)}</h2>", *filter(None, [_source_html(tr)]), _tokens_block(tr, correction)]
    if ta is not None:
        parts += [alignment_html(ta), table_html(ta)]
        if embed_png:
            png = base64.b64encode(heatmap_png(ta)).decode()
            parts.append(f"<p><img alt='cost matrix' src='data:image/png;base64,{png}'/></p>")
    else:
        parts.append(f"<p>No alignment: {html.escape(', '.join(k for k in ('affirmation', 'vague') if tr.info.get(k)) or strategy)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


class AlignmentExplorer:
    """The ipywidgets app; ``.widget`` is the VBox to display, ``.update()`` recomputes."""

    def __init__(self, output: str = SEED_OUTPUT, correction: str = SEED_CORRECTION, encoder: str = AlignConfig.encoder,
                 strategy: str = "binary", threshold: float = AlignConfig.match_threshold, reviser=None):
        import ipywidgets as W  # lazy: ipywidgets is optional (the notebooks extra)

        self.W, self.reviser = W, reviser  # a Reviser: its revision, and the alignment output <-> revision
        lay = W.Layout(width="95%")
        self.output = W.Text(value=output, description="output", continuous_update=False, layout=lay)
        self.correction = W.Text(value=correction, description="correction", continuous_update=False, layout=lay)
        self.encoder = W.Dropdown(options=[E5_NAMES[0], MINILM_NAMES[0]], value=encoder, description="encoder")
        self.strategy = W.Dropdown(options=list(REWARD_STRATEGIES), value=strategy, description="strategy")
        self.threshold = W.FloatSlider(value=threshold, min=0.0, max=1.0, step=0.05, description="threshold",
                                       continuous_update=False)
        self.tokens = W.HTML()
        self.table = W.HTML()
        self.heatmap = W.Image(format="png")
        for w in (self.output, self.correction, self.encoder, self.strategy, self.threshold):
            w.observe(lambda change: self.update(), names="value")
        self.widget = W.VBox([self.output, self.correction, W.HBox([self.encoder, self.strategy, self.threshold]),
                              self.tokens, W.HBox([self.heatmap, self.table])])
        self.update()

    def update(self) -> None:
        cfg = RewardConfig(align=AlignConfig(encoder=self.encoder.value, match_threshold=self.threshold.value))
        tr = _rewards(self.output.value, self.correction.value, self.strategy.value, cfg, None, self.reviser)
        ta = tr.alignment
        self.tokens.value = (_source_html(tr) + _tokens_block(tr, self.correction.value)
                             + (alignment_html(ta) if ta is not None else ""))
        self.table.value = table_html(ta) if ta is not None else ""
        self.heatmap.value = heatmap_png(ta) if ta is not None else b""


def explorer(output: str = SEED_OUTPUT, correction: str = SEED_CORRECTION, **kw):
    """The interactive explorer, or (without ipywidgets) the static HTML report as an IPython object."""
    try:
        # lazy: ipywidgets is optional (the notebooks extra)
        import ipywidgets  # noqa: F401
    except ImportError:
        from IPython.display import HTML  # lazy: IPython: a notebook only

        return HTML(report_html(output, correction, kw.get("strategy", "binary"), reviser=kw.get("reviser")))
    return AlignmentExplorer(output, correction, **kw).widget
