"""Start and stop the live server: the loops' threads and uvicorn (``claw serve``, notebook 14, the tests).

``with LiveServer(ServeConfig(), port=0) as srv:`` runs everything in background threads of this process and
stops it on leaving the block; ``srv.url`` is where it listens, ``srv.base_url`` what the ``openai`` client
takes. :func:`serve_forever` is the command's foreground form.
"""
from __future__ import annotations

import errno
import ipaddress
import signal
import socket
import sys
import threading
import time
from typing import Optional

from .config import ServeConfig

__all__ = ["LiveServer", "serve_forever"]


class LiveServer:
    """The live system behind uvicorn on ``host:port`` (port 0: a free one), writing to ``out`` (None: memory)."""

    def __init__(self, cfg: Optional[ServeConfig] = None, host: str = "127.0.0.1", port: int = 0, out=None,
                 force: bool = False):
        # lazy: serve.system loads torch; import claw_lib.serve stays torch-free (claw simulate)
        from .system import LiveSystem

        self.cfg = cfg or ServeConfig()
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in [0, 65535] (0: a free one), got {port!r}")
        self.host, self.port = host, port
        self._socket = bind_socket(host, port)  # before the model loads: a port in use is said at once (R4-07)
        try:
            self.system = LiveSystem(self.cfg, out=out, force=force)
        except BaseException:
            self._socket.close()
            raise
        self._thread: Optional[threading.Thread] = None
        self._server = None
        self.loops = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def start(self, timeout_s: float = 30.0) -> "LiveServer":
        """Start the judge and trainer loops and uvicorn; returns once the port accepts requests."""
        import uvicorn  # lazy: uvicorn and fastapi load only when a server starts

        from .routes import create_app  # lazy: as above
        from .loops import JudgeLoop, TrainerLoop  # lazy: as above

        self.loops = [JudgeLoop(self.system)] + ([TrainerLoop(self.system)] if self.cfg.train else [])
        for loop in self.loops:
            loop.start()
        config = uvicorn.Config(create_app(self.system, self.host), log_level="warning", access_log=False,
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # the caller's thread owns the signals
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, name="claw-http",
                                        daemon=True)
        self._thread.start()
        t_end = time.time() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.time() > t_end:
                self.stop()
                raise RuntimeError(f"the HTTP server on {self.host}:{self.port} did not start within {timeout_s:g} s")
            time.sleep(0.02)
        self.port = self._socket.getsockname()[1]
        return self

    def stop(self) -> None:
        """Stop uvicorn, then the loops (an update in flight finishes), then close the records and the folder."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        for loop in self.loops:
            loop.stop()
        for loop in self.loops:
            loop.join(timeout=60)
        self._socket.close()
        self.system.close()

    def wait_idle(self, timeout_s: float = 60.0, trained: bool = True) -> bool:
        """Block until nothing waits for the judge and (``trained``) fewer than a batch of scored samples wait
        for the trainer, or training stopped; False on timeout. For tests, notebooks and the simulator."""
        s = self.system
        t_end = time.time() + timeout_s
        while time.time() < t_end:
            st = s.status()
            judging = sum(t.status == "judging" for t in list(s.turns.values()))
            busy = judging or (trained and st["training"] == "running" and st["samples_scored"] >= st["batch_size"])
            if not busy:
                return True
            time.sleep(0.05)
        return False

    def __enter__(self) -> "LiveServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one), or ValueError in one line naming what is wrong:
    a host that does not resolve (``--host``) or a port in use (``--port``)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise ValueError(f"--host {host!r} is not an address of this machine ({e}); use 127.0.0.1, or 0.0.0.0 for "
                         "every address") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise ValueError(f"port {port} is in use on {host}; choose another --port, or --port 0 for a free one") \
                from None
        raise ValueError(f"cannot listen on --host {host!r} --port {port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def exposure_warning(host: str) -> Optional[str]:
    """The warning a server bound beyond this machine prints (R4-S3), or None for a loopback address."""
    try:
        loopback = all(ipaddress.ip_address(i[4][0]).is_loopback for i in socket.getaddrinfo(host, None))
    except (socket.gaierror, ValueError, UnicodeError):
        loopback = False
    if loopback:
        return None
    return (f"claw serve: warning: listening on {host}, beyond this machine: anyone who can reach the port can read "
            "every conversation and send turns that train the model (there is no authentication); use --host "
            "127.0.0.1 unless that is what you want")


def serve_forever(cfg: ServeConfig, host: str, port: int, out=None, force: bool = False) -> int:
    """``claw serve``: start, print the address (one flushed line), run until SIGINT / SIGTERM, stop cleanly."""
    srv = LiveServer(cfg, host=host, port=port, out=out, force=force).start()
    warning = exposure_warning(host)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *a: done.set())
    print(f"claw serve: listening on {srv.url} (model {srv.system.model_id}, strategy {srv.system.ppo.strategy}, "
          f"records {out or 'in memory only'})", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        srv.stop()
    return 0
