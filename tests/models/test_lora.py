"""The kit's LoRA: the formula against a direct computation, a fresh adapter is the base model exactly, the
adapter-disabled view is the base after training, only the adapters train."""
import pytest
import torch
from torch import nn

from claw_lib.models.lora import (
    AdapterDisabled,
    LoRALinear,
    adapters_disabled,
    add_lora,
    count_parameters,
    has_lora,
    trainable_state_dict,
)


def _conv1d(n_in, n_out):
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(1)
    c = Conv1D(n_out, n_in)
    nn.init.normal_(c.bias)
    return c


@pytest.mark.parametrize("kind", ["linear", "conv1d"])
def test_lora_linear_is_the_formula(kind):
    torch.manual_seed(0)
    base = nn.Linear(6, 5) if kind == "linear" else _conv1d(6, 5)
    W = base.weight.detach() if kind == "linear" else base.weight.detach().T   # (out, in)
    x = torch.randn(3, 4, 6)
    lora = LoRALinear(base, r=2, alpha=8.0)
    assert torch.equal(lora(x), base(x))                                       # B = 0: the base exactly
    with torch.no_grad():
        lora.lora_B.normal_()
    want = x @ W.T + base.bias.detach() + (8.0 / 2) * (x @ lora.lora_A.detach().T) @ lora.lora_B.detach().T
    assert torch.allclose(lora(x), want, atol=1e-5)
    lora.enabled = False
    assert torch.equal(lora(x), base(x))


def test_lora_keeps_float32_adapters_on_a_bfloat16_base():
    torch.manual_seed(0)
    base = nn.Linear(8, 8).to(torch.bfloat16)
    lora = LoRALinear(base, r=4, alpha=8.0)
    assert lora.lora_A.dtype == lora.lora_B.dtype == torch.float32
    y = lora(torch.randn(2, 8, dtype=torch.bfloat16))
    assert y.dtype == torch.bfloat16


def _tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=2, n_head=2)).eval()  # no dropout


def test_add_lora_freezes_the_base_and_counts_adapters():
    m = _tiny_gpt2()
    n_before = count_parameters(m)
    ids = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        before = m(ids).logits
    add_lora(m, r=3)
    assert has_lora(m) and m.claw_lora == {"r": 3, "alpha": 6.0, "layers": 8}
    # per block: c_attn (16 -> 48), attn c_proj (16 -> 16), c_fc (16 -> 64), mlp c_proj (64 -> 16); r (in + out) each
    per_block = 3 * ((16 + 48) + (16 + 16) + (16 + 64) + (64 + 16))
    assert count_parameters(m, trainable=True) == 2 * per_block
    assert count_parameters(m) == n_before + 2 * per_block
    assert set(trainable_state_dict(m)) == {n for n, _ in m.named_parameters() if "lora_" in n}
    with torch.no_grad():
        assert torch.equal(m(ids).logits, before)                              # fresh adapters: the base model


def test_adapter_disabled_view_is_the_initial_model_after_training():
    m = _tiny_gpt2()
    ids = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        initial = m(ids).logits.clone()
    add_lora(m, r=2)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-1)
    for _ in range(3):
        loss = m(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    teacher = AdapterDisabled(m)
    with torch.no_grad():
        moved = m(ids).logits
        assert not torch.allclose(moved, initial, atol=1e-3)                   # the policy moved
        assert torch.allclose(teacher(input_ids=ids).logits, initial, atol=1e-6)   # the teacher did not
        assert torch.equal(m(ids).logits, moved)                               # adapters back on after the call
        with adapters_disabled(m):
            assert torch.allclose(m(ids).logits, initial, atol=1e-6)
    assert teacher.config is m.config and next(teacher.parameters()) is next(m.parameters())


def test_add_lora_refuses_a_model_without_target_layers():
    with pytest.raises(ValueError, match="no linear layer"):
        add_lora(nn.Sequential(nn.Linear(2, 2)), r=1)
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(nn.Linear(2, 2), r=0, alpha=1.0)


def test_count_parameters_counts_tied_weights_once():
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=1, n_head=2))
    assert m.lm_head.weight is m.transformer.wte.weight
    blocks = sum(p.numel() for p in m.transformer.h.parameters()) + sum(p.numel() for p in m.transformer.ln_f.parameters())
    assert count_parameters(m) == 50 * 16 + 32 * 16 + blocks                 # the tied head adds nothing
