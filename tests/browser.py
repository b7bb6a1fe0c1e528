"""Where the page tests find a real browser: Debian's chromium and the playwright package, or a skip saying why.

Shared by tests/apps/test_browser.py (the explorer in JupyterLab) and tests/serve/test_page.py (the chat page).
"""
import pytest

from claw_lib.serve.page_driver import chromium_path

CHROMIUM = chromium_path()

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover
    sync_playwright = None

NEEDS_BROWSER = [
    pytest.mark.skipif(CHROMIUM is None, reason="no browser: install Debian's chromium (apt-get install chromium) to run it"),
    pytest.mark.skipif(sync_playwright is None, reason="the Python package playwright is not installed (pip install playwright)"),
]
