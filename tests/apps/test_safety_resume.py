"""Promise 6: a resumed run is the run it resumes, and the advice after Ctrl-C is true.

Float sums are ordered by the number of CPU threads, so a run records the thread count it used (``threads: 0``
is resolved when it starts and written into config.json) and a resume reuses it whatever the machine's load is
then; ``claw train --threads N`` fixes it up front. A Ctrl-C before the first checkpoint says so and advises
``--force``, which the next command then accepts. Each test names the review ids it covers.
"""
import json

import pytest
import torch

import claw_lib.utils as utils
from claw_lib.rl.run import train

from .safety import message, run, small


@pytest.fixture(autouse=True)
def keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def strip_timings(hist):
    # timings and the process's peak memory so far are machine- and order-dependent, not the run's numbers
    return [{k: v for k, v in h.items() if not k.startswith(("timing/", "memory/"))} for h in hist]


def test_a_run_records_the_thread_count_it_used_R05(tmp_path, capsys, monkeypatch):
    """R05: `threads 0` (the free cores) is resolved at the start and recorded, so the count that ordered the float
    sums is known; `--threads` fixes it on the command line, whatever the free cores are."""
    monkeypatch.setattr(utils, "free_cpus", lambda: 1)
    train(small(save_every=1), tmp_path / "a")
    assert json.loads((tmp_path / "a" / "config.json").read_text())["threads"] == 1
    monkeypatch.setattr(utils, "free_cpus", lambda: 2)
    rc, _, _ = run(["train", "--steps", "1", "--batch-size", "2", "--threads", "1", "--out", str(tmp_path / "b")], capsys)
    assert rc == 0 and json.loads((tmp_path / "b" / "config.json").read_text())["threads"] == 1


def test_a_resume_reuses_the_thread_count_of_the_run_R06(tmp_path, monkeypatch):
    """R06: a run started with 1 free core and resumed when 2 are free still runs on 1 thread, and equals the
    uninterrupted run; asking for another count explicitly is refused (the numbers would differ at float level).
    (One thread at the start, not two: two threads on a busy 2-core machine are several times slower.)"""
    cfg = small(steps=3, save_every=1)
    monkeypatch.setattr(utils, "free_cpus", lambda: 1)
    full = train(cfg, tmp_path / "full")
    train(cfg, tmp_path / "part", stop_after=1)
    used = []
    real = utils.set_threads
    monkeypatch.setattr(utils, "free_cpus", lambda: 2)  # the machine got quieter
    monkeypatch.setattr(utils, "set_threads", lambda n=0: used.append(n) or real(n))
    resumed = train(cfg, tmp_path / "part")
    assert used == [1] and torch.get_num_threads() == 1 and strip_timings(resumed) == strip_timings(full)
    with pytest.raises(ValueError, match=r"threads 1 \(saved\) vs 2"):
        train(small(steps=4, save_every=1, threads=2), tmp_path / "part")


def test_ctrl_c_before_the_first_checkpoint_advises_force_R04(tmp_path, capsys, monkeypatch):
    """R04: Ctrl-C before the first checkpoint (save_every 4) says there is no checkpoint yet and to run again with
    --force (not "run the same command to resume", which was then refused); the same command says the same; --force
    starts over."""
    import claw_lib.rl.ppo as ppo

    real, calls = ppo.rollout, []

    def ctrl_c_at_step_2(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(ppo, "rollout", ctrl_c_at_step_2)
    d = tmp_path / "r"
    args = ["train", "--steps", "6", "--batch-size", "2", "--out", str(d)]
    rc, _, err = run(args, capsys)
    line = message(err)
    assert rc == 130 and "no checkpoint yet" in line and "--force" in line and "to resume)" not in line
    monkeypatch.setattr(ppo, "rollout", real)
    rc, _, err = run(args, capsys)
    assert rc == 2 and "no checkpoint yet" in message(err) and "--force" in err
    rc, _, _ = run(args[:2] + ["2"] + args[3:] + ["--force"], capsys)
    assert rc == 0 and len((d / "metrics.jsonl").read_text().splitlines()) == 3
