"""Tensor helpers against the plain formulas (TRL's semantics)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from claw_lib.ops import entropy_from_logits, masked_mean, masked_var, masked_whiten, selective_log_softmax


def test_selective_log_softmax_equals_log_softmax_gather():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, dtype=torch.float64) * 4
    idx = torch.randint(0, 11, (3, 5))
    ref = torch.gather(F.log_softmax(logits, -1), -1, idx.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(selective_log_softmax(logits, idx), ref, atol=1e-12)
    got16 = selective_log_softmax(logits.to(torch.bfloat16), idx)
    assert torch.allclose(got16, ref.float(), atol=0.1)


def test_entropy_formula():
    torch.manual_seed(1)
    logits = torch.randn(4, 7)
    p = logits.softmax(-1)
    assert torch.allclose(entropy_from_logits(logits), -(p * p.log()).sum(-1), atol=1e-6)
    assert torch.allclose(entropy_from_logits(torch.zeros(2, 8)), torch.full((2,), np.log(8.0)), atol=1e-6)


def test_masked_helpers_against_plain_formulas():
    torch.manual_seed(0)
    x = torch.randn(4, 7, dtype=torch.float64)
    mask = torch.rand(4, 7) > 0.4
    sel = x[mask]
    assert torch.isclose(masked_mean(x, mask), sel.mean())
    assert torch.isclose(masked_var(x, mask), sel.var(unbiased=True))
    assert torch.isclose(masked_var(x, mask, unbiased=False), sel.var(unbiased=False))
    w = masked_whiten(x, mask)
    assert torch.allclose(w[mask], (sel - sel.mean()) / torch.sqrt(sel.var() + 1e-8))
    w2 = masked_whiten(x, mask, shift_mean=False)
    assert torch.allclose(w2[mask], w[mask] + sel.mean())
    assert torch.allclose(masked_mean(x, mask, dim=1), torch.stack([x[b][mask[b]].mean() for b in range(4)]))
    with pytest.raises(ValueError, match="one element"):
        masked_var(x, torch.zeros_like(mask).index_fill_(1, torch.tensor([0]), True)[:1])
