"""The static report and the explorer's views (the real-browser test is tests/apps/test_browser.py)."""
import pytest

from claw_lib.alignment.texts import align_texts
from claw_lib.apps.explorer import SEED_CORRECTION, SEED_OUTPUT, heatmap_png, report_html, table_html


def test_report_is_standalone_and_deterministic(e5):
    a = report_html(SEED_OUTPUT, SEED_CORRECTION, "binary", encoder=e5)
    assert a == report_html(SEED_OUTPUT, SEED_CORRECTION, "binary", encoder=e5)
    assert "<script" not in a and "http" not in a.replace("http-equiv", "")
    assert "data:image/png;base64," in a and "伦敦" in a and "巴黎" in a


def test_table_and_heatmap(e5):
    ta = align_texts(SEED_OUTPUT, "不对，法国的首都是巴黎。", encoder=e5)
    t = table_html(ta)
    assert t.count("<tr>") == len(ta.alignment.ops) + 1 and "<td>replace</td>" in t
    png = heatmap_png(ta)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == heatmap_png(ta)


def test_explorer_widget_updates(e5):
    pytest.importorskip("ipywidgets")
    from claw_lib.apps.explorer import AlignmentExplorer

    ex = AlignmentExplorer()
    before = ex.tokens.value
    ex.correction.value = "不对，法国的首都是柏林。"
    assert ex.tokens.value != before and "柏林" in ex.tokens.value
