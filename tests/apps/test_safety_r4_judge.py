"""Fourth reliability review (issue 43, ids as in ``../shared/notes/review-reliability-4.md``): a judge URL that does
not answer is refused at the start, in one line, by ``claw train`` and ``claw serve`` alike, with the check that
``claw rewards --reviser URL`` makes (:func:`claw_lib.signals.endpoint.open_endpoint`: ``GET /v1/models``). Before,
both ran: every vote failed, the training run exited 0 and the server kept reporting ``"training": "running"``."""
import functools
import http.server
import threading

import pytest

from claw_lib.apps.cli import main
from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig

from .safety import message

DEAD = "http://127.0.0.1:1"  # port 1: nothing listens


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reads the command's stderr
        pass


@pytest.fixture
def plain_http(tmp_path):
    """``python -m http.server``: it answers, but not as an OpenAI-compatible server (404 for /v1/models)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(tmp_path)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


@pytest.mark.parametrize("which", ["dead", "plain"])
def test_R4_09_train_refuses_a_judge_url_that_does_not_answer(which, plain_http, tmp_path, capsys):
    url = DEAD if which == "dead" else plain_http
    out = tmp_path / "run"
    rc = main(["train", "--judge", url, "--steps", "1", "--batch-size", "2", "--eval-size", "2", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert message(err).startswith(f"claw train: the judge endpoint {url} does not answer /v1/models")
    assert not out.exists()  # refused before the run folder is made


def test_R4_10_serve_refuses_a_judge_url_that_does_not_answer(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["serve", "--judge", DEAD, "--out", str(out), "--batch-size", "2", "--port", "0"])
    err = capsys.readouterr().err
    assert rc == 2
    assert message(err).startswith(f"claw serve: the judge endpoint {DEAD} does not answer /v1/models")
    assert not out.exists()
    # the library refuses what the command refuses, before any model loads or any record is written
    with pytest.raises(ValueError, match=r"^the judge endpoint http://127\.0\.0\.1:1 does not answer /v1/models"):
        LiveServer(ServeConfig(ppo=PPOConfig(strategy="combined", progress=False), judge=DEAD), out=out)
    assert not out.exists()
