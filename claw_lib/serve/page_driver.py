"""Driving ``claw serve``'s chat page (``claw_lib/serve/static``) in a real browser, as a person would: the browser
to launch and its flags, typing a message, reading an answer and the live version. Used by the page's tests
(tests/serve/test_page.py, test_page_live.py) and by benchmarks/bench_page_fact.py; the page's element ids and
``data-testid`` attributes are the contract.
"""
from __future__ import annotations

import shutil
from typing import Optional

__all__ = ["CHROMIUM_ARGS", "ANSWERS", "chromium_path", "say", "answer_text", "shown_version"]

#: the flags a headless Chromium is launched with: no sandbox (containers), no GPU, nothing fetched from outside
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: the page's assistant messages, oldest first
ANSWERS = "[data-testid=assistant-message]"


def chromium_path() -> Optional[str]:
    """The first of Debian's ``chromium``, ``chromium-browser`` and ``google-chrome`` on the PATH, or None."""
    return next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)


def say(page, text: str, end: bool = False, timeout_s: float = 60.0):
    """Type ``text`` into the page and send it (``end``: **end session**, sent with X-Session-Done); the new answer's
    locator once it is shown (at most ``timeout_s`` seconds)."""
    n = page.locator(ANSWERS).count()
    page.fill("#prompt", text)
    page.click("#end-session" if end else "#send")
    page.wait_for_function(f"document.querySelectorAll('{ANSWERS}').length > {n}", timeout=timeout_s * 1000)
    return page.locator(ANSWERS).nth(n)


def answer_text(msg) -> str:
    """The answer a message shows, without the end-of-text chip (a label of the page, not text of the model)."""
    return msg.locator("[data-testid=answer]").evaluate(
        "n => { const c = n.cloneNode(true); c.querySelectorAll('.tok.special').forEach(x => x.remove());"
        " return c.textContent; }").strip()


def shown_version(page) -> int:
    """The policy version the page's status panel shows (-1 before it has one)."""
    text = page.inner_text("#st-policy-version").strip()
    return int(text) if text.isdigit() else -1
