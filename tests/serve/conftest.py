"""A live server on a free localhost port for the HTTP tests (stopped at the end)."""
import pytest

from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig


def make_server(**kw) -> LiveServer:
    """A LiveServer of the tiny GPT with a small batch (kw: ServeConfig fields, or ppo=PPOConfig(...))."""
    ppo = kw.pop("ppo", PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1))
    return LiveServer(ServeConfig(ppo=ppo, **kw), port=0, out=kw.pop("out", None) if "out" in kw else None)


@pytest.fixture(scope="module")
def server():
    srv = LiveServer(ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1)),
                     port=0).start()
    yield srv
    srv.stop()
