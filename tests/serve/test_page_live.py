"""The chat page of ``claw serve`` in a real headless Chromium: what a newcomer saw missing (review of the live system).

One server (the tiny GPT, strategy combined, batches of 2) and one page, asserted in order: greedy is on by default;
the answer's end-of-text token is a labelled chip that the legend and the tooltip explain; a banner in the
conversation says when a new version goes live and on how many samples it was trained (the numbers of the server's
own ``trained`` event); the conversation survives a reload (localStorage, keyed by the session id) and goes on in
the same server session; the status panel counts requests that came without a session id and says what became of
them. Skipped, saying why, without Debian's chromium or the playwright package.
"""
import httpx
import pytest

from tests.browser import CHROMIUM, NEEDS_BROWSER, sync_playwright
from claw_lib.serve.page_driver import ANSWERS, CHROMIUM_ARGS, say
from tests.serve.test_page import CORRECTION, QUESTION

pytestmark = NEEDS_BROWSER


@pytest.fixture
def server():
    from claw_lib.config import PPOConfig
    from claw_lib.serve import LiveServer, ServeConfig

    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1))
    with LiveServer(cfg, port=0) as srv:
        yield srv


def _texts(page, selector):
    return [x.strip() for x in page.locator(selector).all_inner_texts()]


def _end_chip(page, msg):
    """The answer's end-of-text chip once its tokens are shown (the tiny GPT ends its capital answers with one)."""
    sid, turn = msg.get_attribute("data-session-id"), msg.get_attribute("data-turn")
    page.wait_for_function(
        "([sid, turn]) => document.querySelector(`[data-testid=assistant-message][data-session-id='${sid}']"
        "[data-turn='${turn}'] [data-testid=token]`) !== null", arg=[sid, turn], timeout=30_000)
    return msg.locator(".tok.special")


def test_version_banner_reload_end_chip_greedy_and_headerless_count(server):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            problems = []
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.goto(server.url + "/", timeout=60_000)
            page.wait_for_function("document.getElementById('st-policy-version').textContent.trim() === '0'",
                                   timeout=30_000)

            # greedy by default: the demo's check question gives the most likely answer
            assert page.is_checked("#greedy")
            first = say(page, QUESTION)
            assert first.get_attribute("data-greedy") == "true"

            # the end-of-text token: a chip labelled "end", explained by the legend and by the tooltip
            chip = _end_chip(page, first)
            assert chip.count() == 1, first.inner_text()
            assert chip.inner_text().strip() == "结束 end" and chip.get_attribute("data-token") == "<|endoftext|>"
            assert "endoftext" not in first.locator("[data-testid=answer]").inner_text()
            assert "end of text" in page.inner_text("#legend")
            chip.hover()
            tip = page.locator("#tooltip")
            tip.wait_for(state="visible", timeout=5_000)
            assert "the model chose to stop here" in tip.inner_text()

            # a version goes live: a banner in the conversation, with the server's numbers
            assert page.locator("[data-testid=version-live]").count() == 0
            say(page, CORRECTION)
            say(page, CORRECTION, end=True)  # two corrected answers: one batch of 2
            banner = page.locator("[data-testid=version-live][data-version='1']")
            banner.wait_for(state="visible", timeout=60_000)
            trained = httpx.get(server.url + "/v1/claw/events").json()["events"]
            event = next(e for e in trained if e["kind"] == "trained" and e["version"] == 1)
            text = banner.inner_text()
            assert f"v1 上线 live" in text and f"trained on {event['samples']} samples" in text, text
            assert event["samples"] == 2 and f"{event['end'] - event['start']:.2f} s" in text

            # the conversation survives a reload and goes on in the same session
            again = say(page, QUESTION)
            sid = page.inner_text("#session-id").strip()
            assert again.get_attribute("data-session-id") == sid and again.get_attribute("data-turn") == "0"
            users, answers = _texts(page, "[data-testid=user-message]"), _texts(page, ANSWERS + " .answer")
            page.reload()
            page.wait_for_function("document.getElementById('st-policy-version').textContent.trim() !== '–'",
                                   timeout=30_000)
            assert page.inner_text("#session-id").strip() == sid
            assert _texts(page, "[data-testid=user-message]") == users
            page.wait_for_function(f"document.querySelectorAll('{ANSWERS} .answer [data-testid=token]').length > 0",
                                   timeout=30_000)  # the restored answers read their tokens back from the server
            assert [a.replace("结束 end", "").strip() for a in _texts(page, ANSWERS + " .answer")] == \
                [a.replace("结束 end", "").strip() for a in answers]
            restored = page.locator(ANSWERS).first
            page.wait_for_function("document.querySelector('[data-testid=assistant-message]').dataset.status "
                                   "=== 'trained'", timeout=30_000)
            assert restored.get_attribute("data-trained-version") == "1"
            assert page.locator("[data-testid=session-ended]").count() == 1
            assert page.locator("[data-testid=version-live]").count() == 0  # history: no banner again
            follow = say(page, CORRECTION)
            assert follow.get_attribute("data-session-id") == sid and follow.get_attribute("data-turn") == "1"
            view = httpx.get(f"{server.url}/v1/claw/sessions/{sid}").json()
            assert view["turns"][0]["next_state"] == CORRECTION

            # requests without a session id: counted on the page, with what became of them
            assert page.inner_text("#st-no-session").strip() == "0" and page.is_hidden("#st-no-session-note")
            httpx.post(server.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": QUESTION}]},
                       timeout=60).raise_for_status()
            page.wait_for_function("document.getElementById('st-no-session').textContent.trim() === '1'",
                                   timeout=10_000)
            note = page.locator("#st-no-session-note")
            assert note.is_visible() and "side turns, never trained" in note.inner_text()
            assert "--match-sessions" in note.inner_text()
            # a server started with --match-sessions: the note says they were matched (the status faked in the page)
            real = page.evaluate("fetch('/v1/claw/status').then(r => r.json())")
            page.route("**/v1/claw/status", lambda route: route.fulfill(
                json={**real, "requests_without_session": 3, "match_sessions": True}))
            page.wait_for_function("document.getElementById('st-no-session-note').dataset.matched === 'true'",
                                   timeout=10_000)
            assert "3 request(s) came without X-Session-Id: matched to sessions" in note.inner_text()
            page.unroute("**/v1/claw/status")
            assert not problems, problems
        finally:
            browser.close()
