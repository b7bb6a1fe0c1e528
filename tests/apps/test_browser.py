"""The explorer in a real Chromium through JupyterLab (skipped, saying why, without a browser)."""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, NEEDS_BROWSER, sync_playwright

ROOT = Path(__file__).resolve().parents[2]


pytestmark = NEEDS_BROWSER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    shutil.copy(ROOT / "notebooks" / "11_alignment_explorer.ipynb", tmp_path / "explorer.ipynb")
    port = _free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
         f"--ServerApp.root_dir={tmp_path}", "--allow-root", "--LabApp.news_url=None",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(url + "/lab", timeout=2)
            break
        except Exception:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 60 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_explorer_updates_in_a_real_browser(lab, tmp_path):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(lab + "/lab/tree/explorer.ipynb", timeout=120_000)
        page.wait_for_selector(".jp-Notebook", timeout=120_000)
        page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=120_000)  # the kernel is up
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_text("Run All Cells", exact=True).click()
        tokens = page.locator(".widget-html .claw-tokens").first
        tokens.wait_for(timeout=180_000)
        before = tokens.inner_html()
        # text_content, not inner_text: after "Run All Cells" JupyterLab scrolls to the last cell, and a cell out of
        # view is not laid out (content-visibility), so its inner_text is empty although its DOM holds the tokens
        assert "伦敦" in tokens.text_content()
        box = page.locator(".widget-text", has_text="correction").locator("input")
        box.fill("对，谢谢！")
        box.press("Enter")
        page.wait_for_function(
            "() => { const e = document.querySelector('.widget-html .claw-tokens');"
            " return e && e.getAttribute('data-correction') === '对，谢谢！'; }", timeout=120_000)
        after = tokens.inner_html()
        assert after != before
        assert 'title="-1.000"' in before and 'title="-1.000"' not in after  # 伦敦 no longer punished
        news = page.get_by_role("button", name="No", exact=True)  # JupyterLab's "notify about news?" toast
        if news.count():
            news.first.click()
        shot = tmp_path / "explorer.png"
        page.locator(".jp-OutputArea-output").first.screenshot(path=str(shot))
        if os.environ.get("CLAW_SAVE_SCREENSHOT"):
            box.fill("你说的不对，法国的首都是巴黎，另外法国红酒也不错。")
            box.press("Enter")
            page.wait_for_function(
                "() => { const e = document.querySelector('.widget-html .claw-tokens');"
                " return e && e.getAttribute('data-correction').startsWith('你说的'); }", timeout=120_000)
            page.wait_for_timeout(1500)
            page.locator(".jp-OutputArea-output").first.screenshot(path=str(ROOT / "docs" / "explorer.png"))
        browser.close()
