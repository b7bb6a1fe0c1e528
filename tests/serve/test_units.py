"""The live server's pure parts against written-out cases: the next-state rule, the records, the truncated
importance weights."""
import json
import math

import pytest
import torch

from claw_lib.serve.loops import tis_weights
from claw_lib.serve.records import JsonlLog
from claw_lib.serve.sessions import SessionBook, SessionFinishedError, turn_key


def test_next_state_rule_over_a_session():
    book = SessionBook()
    assert book.open_turn("s", turn_key("s", 0), False, 0.0) == (None, None)  # first turn: nothing completed
    assert book.open_turn("s", turn_key("s", 1), False, 1.0) == ("s#0", None)  # turn 1's message is turn 0's next state
    assert book.open_turn("s", turn_key("s", 2), True, 2.0) == ("s#1", "s#2")  # done: the last turn gets none
    assert book.is_done("s") and book.turns("s") == ["s#0", "s#1", "s#2"]
    with pytest.raises(SessionFinishedError, match="finished"):
        book.open_turn("s", turn_key("s", 3), False, 3.0)
    assert book.turns("other") is None


def test_sessions_do_not_mix_and_silent_ones_expire():
    book = SessionBook()
    book.open_turn("a", "a#0", False, 0.0)
    book.open_turn("b", "b#0", False, 5.0)
    assert book.expire(now=8.0, timeout_s=4.0) == ["a#0"]  # a silent for 8 s, b for 3 s
    assert book.open_turn("a", "a#1", False, 9.0) == (None, None)  # a goes on; its expired turn gets no next state
    assert book.open_turn("b", "b#1", False, 9.0) == ("b#0", None)
    assert book.open_count() == 2


def test_jsonl_log_drops_a_torn_last_line(tmp_path):
    log = JsonlLog(tmp_path / "x.jsonl")
    log.append({"a": 1, "text": "法国"})
    log.append({"a": 2})
    log.close()
    with open(tmp_path / "x.jsonl", "ab") as f:
        f.write(b'{"a": 3, "tor')  # a write killed half-way
    assert [r["a"] for r in JsonlLog(tmp_path / "x.jsonl").read()] == [1, 2]
    log = JsonlLog(tmp_path / "x.jsonl")
    log.append({"a": 4})  # starts on a fresh line: the torn tail was cut off
    assert [r["a"] for r in log.read()] == [1, 2, 4]
    assert json.loads((tmp_path / "x.jsonl").read_text(encoding="utf-8").splitlines()[0])["text"] == "法国"


def test_jsonl_log_refuses_a_foreign_line(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(ValueError, match="line 2"):
        JsonlLog(tmp_path / "x.jsonl").read()


def test_tis_weights_match_the_formula():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, -3.0, 0.0]])
    served = torch.tensor([[-1.5, -1.0, -0.5], [-2.0, -3.0, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    w, m = tis_weights(old, served, mask, cap=2.0)
    expect = [[min(math.exp(0.5), 2), min(math.exp(-1.0), 2), 1.0], [min(math.exp(1.9), 2), 1.0, 1.0]]
    assert torch.allclose(w, torch.tensor(expect))
    assert m["tis/clipped_share"] == pytest.approx(1 / 5)  # exp(1.9) > 2 only
    diffs = [0.5, 1.0, 0.0, 1.9, 0.0]
    assert m["tis/rollout_logprob_abs_diff"] == pytest.approx(sum(diffs) / 5)
    ratios = [math.exp(0.5), math.exp(-1.0), 1.0, math.exp(1.9), 1.0]  # exp(old - served) on the mask, untruncated
    assert m["tis/ratio_mean"] == pytest.approx(sum(ratios) / 5) and m["tis/ratio_max"] == pytest.approx(max(ratios))
    w0, _ = tis_weights(old, served, mask, cap=0.0)
    assert torch.equal(w0, torch.ones_like(old))  # cap 0: off


def test_the_server_refuses_the_training_loops_judge_setting():
    """ppo.opd.judge (claw train --judge) is not the server's judge: a config that sets it is refused by name,
    never silently ignored (the server's own is ServeConfig.judge, claw serve --judge)."""
    from dataclasses import replace

    from claw_lib.serve.config import ServeConfig, default_ppo, check_serve_config

    ppo = default_ppo()
    check_serve_config(ServeConfig(ppo=ppo))
    with pytest.raises(ValueError, match=r"ppo\.opd\.judge.*ServeConfig\.judge"):
        check_serve_config(ServeConfig(ppo=replace(ppo, opd=replace(ppo.opd, judge="http://127.0.0.1:9/v1"))))
