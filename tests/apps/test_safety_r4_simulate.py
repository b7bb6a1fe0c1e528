"""Fourth reliability review (issue 43, ids as in ``../shared/notes/review-reliability-4.md``): ``claw simulate``
rides out a server restart and says so when it gives up."""
import threading
import time

import pytest

from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig
from claw_lib.serve import simulate as sim

Q = [{"role": "user", "content": "法国的首都是哪里？"}]


def _cfg() -> ServeConfig:
    return ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, max_new_tokens=8))


def test_R4_24_simulate_retries_long_enough_to_cover_a_restart(tmp_path):
    """k9: the retries waited 0.5+1+2+4+8 = 15.5 s while a restart took 10.4-14.5 s to listen, so simulate stopped
    at the third of four kill -9s. Now: a budget of 90 s, and a main turn retried across the restart is recorded
    once (the restarted server answers it from its records)."""
    assert sim.RETRY_BUDGET_S >= 60
    out = tmp_path / "run"
    a = LiveServer(_cfg(), port=0, out=out).start()
    port = a.port
    driver = sim._Driver(a.url, None, 60, None, None)
    try:
        text, claw, _ = driver.chat(Q, "rs-1", "main", False, "session 0")
        a.stop()
        holder = {}
        starter = threading.Timer(3.0, lambda: holder.setdefault("b", LiveServer(_cfg(), port=port, out=out).start()))
        starter.start()
        t0 = time.perf_counter()
        again, claw2, _ = driver.chat(Q, "rs-1", "main", False, "session 0")  # the client's retry of a lost answer
        starter.join()
        assert time.perf_counter() - t0 >= 2.5 and again == text and claw2["turn"] == claw["turn"] == 0
        b = holder["b"]
        assert [t.key for t in b.system.turns.values()] == ["rs-1#0"]
        b.stop()
    finally:
        driver.close()


def test_R4_24_simulate_says_when_it_gives_up():
    srv = LiveServer(_cfg(), port=0).start()
    driver = sim._Driver(srv.url, None, 60, None, None)
    srv.stop()
    driver.retry_budget_s = 1.0
    try:
        with pytest.raises(ValueError, match=r"lost the server at http://127.0.0.1:\d+ in session 3: gave up after "
                                             r"retrying for \d+ s"):
            driver.chat(Q, "gone", "main", False, "session 3")
    finally:
        driver.close()
