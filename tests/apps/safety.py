"""Helpers of the safety tests (tests/apps/test_safety*.py): what a user had, what a command printed."""
import re

from .test_safety import PAIR, digest, one_line, run, small  # noqa: F401 (re-exported)

_BAR = re.compile(r"\d+%\|")
_WARNING = re.compile(r"^claw \w+: warning: ")


def message(err: str) -> str:
    """The one line a failing command printed on stderr, its progress bars (tqdm's ``\\r`` updates) and its
    warnings (``claw <command>: warning: ...``, printed before the work) left out; fails when there is a
    traceback or more than one line."""
    lines = [ln for ln in err.splitlines() if ln.strip() and not _BAR.search(ln) and not _WARNING.match(ln)]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0].strip()
