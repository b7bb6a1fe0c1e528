"""Word rewards onto the policy's action tokens: one per id, special tokens, lengths."""
import pytest

from claw_lib.signals.mapping import check_lengths, policy_token_rewards
from claw_lib.signals.rewards import token_rewards
from claw_lib.text.tokens import subtoken_spans

SEED_OUT, SEED_COR = "法国的首都是伦敦。", "不对，法国的首都是巴黎。"


def test_policy_token_rewards_and_lengths(e5, tiny):
    _, tok = tiny
    tr = token_rewards(SEED_OUT, SEED_COR, "binary", encoder=e5)
    ids = tok(SEED_OUT, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    first = policy_token_rewards(tr, tok, ids, "first")
    spread = policy_token_rewards(tr, tok, ids, "spread")
    assert len(first) == len(spread) == len(ids)
    spans = subtoken_spans(tok, ids)
    assert [s.text for s in spans[:-1]] == list("法国的首都是伦敦。") and spans[-1].start == spans[-1].end
    assert spread.tolist() == [0.5] * 6 + [-1.0, -1.0, 0.5, 0.0]
    assert first.tolist() == [0.5, 0.0, 0.5, 0.5, 0.0, 0.5, -1.0, 0.0, 0.5, 0.0]
    with pytest.raises(ValueError, match="3 rewards for 4 response tokens"):
        check_lengths([0, 0, 0], [1, 2, 3, 4])
    with pytest.raises(ValueError, match="decode to"):
        policy_token_rewards(tr, tok, tok("别的", add_special_tokens=False)["input_ids"])
