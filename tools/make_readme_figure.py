"""Draw docs/alignment.png, the README's picture: the article's example aligned by the kit."""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from claw_lib import align_texts  # noqa: E402
from claw_lib.apps.viz import plot_cost_matrix  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ta = align_texts("法国的首都是伦敦。", "不对，法国的首都是巴黎。")
    fig, ax = plt.subplots(figsize=(7, 4.6))
    plot_cost_matrix(ta.cost, ta.output_tokens, ta.correction_tokens, alignment=ta.alignment, ax=ax,
                     title="法国的首都是伦敦。 vs 不对，法国的首都是巴黎。\nDP path: green = match, red = replace (伦敦 -> 巴黎)")
    fig.savefig(ROOT / "docs" / "alignment.png", dpi=110)
    print("wrote docs/alignment.png")
