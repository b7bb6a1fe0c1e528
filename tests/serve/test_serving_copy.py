"""The copy of the weights that decodes (ServeConfig.serving_format): built from the full-precision serving copy,
close to it, rebuilt at each weight swap, and what the recorded log-probs come from."""
import numpy as np
import pytest
import torch

from claw_lib.config import PPOConfig
from claw_lib.models.lm import ids_logprobs
from claw_lib.serve import ServeConfig
from claw_lib.serve.config import check_serve_config
from claw_lib.serve.engine import Engine
from claw_lib.serve.serving_copy import serving_copy

FORMATS = ["bf16", "int8"]
MSGS = [{"role": "user", "content": "土耳其的首都是哪里？"}]


def engine(fmt):
    return Engine(check_serve_config(ServeConfig(ppo=PPOConfig(strategy="combined", progress=False, threads=1),
                                                 serving_format=fmt)))


def test_full_is_the_serving_copy_itself():
    e = engine("full")
    assert e.batcher.model is e.serving and serving_copy(e.serving, "full") is e.serving


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_fast_copy_is_close_rebuilt_at_each_swap_and_records_its_own_log_probs(fmt):
    e = engine(fmt)
    fast = e.batcher.model
    assert fast is not e.serving and next(e.serving.parameters()).dtype == torch.float32
    x = torch.tensor([[5, 17, 80, 3, 9]])
    with torch.no_grad():
        full, got = e.serving(input_ids=x).logits, fast(input_ids=x).logits.float()
    assert (got - full).abs().max() < 0.25 * full.abs().max()  # close, not equal
    served = e.answer(e.task(MSGS), 0.0, 12, 0)
    own = ids_logprobs(fast, [served.prompt_ids], [served.response_ids], 0)[0][0]
    assert np.allclose(own, served.rollout_log_probs, atol=2e-2)  # the fast copy's log-probs are the ones recorded
    with torch.no_grad():  # a new version: the trainer's weights move, the fast copy is rebuilt from them
        for p in e.trainer.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    e.publish(1)
    assert e.batcher.model is not fast and e.version == 1
    with torch.no_grad():
        full, got = e.serving(input_ids=x).logits, e.batcher.model(input_ids=x).logits.float()
        old = fast(input_ids=x).logits.float()
    assert (got - full).abs().max() < (old - full).abs().max()


def test_an_unknown_format_is_refused_by_name():
    with pytest.raises(ValueError, match="serving_format must be one of"):
        check_serve_config(ServeConfig(serving_format="fp8"))


def test_int8_is_a_cpu_format():
    with pytest.raises(ValueError, match="int8.*CPU format"):
        check_serve_config(ServeConfig(serving_format="int8", ppo=PPOConfig(device="cuda")))


def test_int8_quantises_every_linear_layer_and_nothing_else():
    lin = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    q = serving_copy(lin, "int8")
    kinds = [type(m).__name__ for m in q]
    assert kinds == ["Linear", "ReLU", "Linear"] and all("quantized" in type(m).__module__ for m in (q[0], q[2]))
    assert type(lin[0]) is torch.nn.Linear  # the full-precision module is left as it was
    x = torch.randn(3, 8)
    assert (q(x) - lin(x)).abs().max() < 0.05 * lin(x).abs().max() + 1e-2


def test_int8_keeps_peft_lora_adapters_in_full_precision_and_answers_the_same():
    """A PEFT LoRA model's int8 copy: the base layers quantised, the adapters' own Linear layers kept (PEFT reads
    their weight's dtype); its output stays close to the full-precision model's, adapters included."""
    from claw_lib.models.peft_lora import add_adapters
    from claw_lib.serve.serving_copy import base_linears

    from claw_lib.models.lm import load_causal_lm

    m, _ = load_causal_lm("tiny", device="cpu")
    add_adapters(m, 4, impl="peft", seed=0)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "lora_B" in name:
                p.add_(0.1 * torch.randn_like(p))
    names = base_linears(m)
    assert names and not any("lora_" in n for n in names)
    q = serving_copy(m, "int8")
    x = torch.tensor([[5, 17, 80, 3, 9]])
    with torch.no_grad():
        full, got = m(input_ids=x).logits, q(input_ids=x).logits
    assert (got - full).abs().max() < 0.25 * full.abs().max()


def test_adapters_share_one_set_of_base_weights():
    """With LoRA adapters the teacher, the serving copy, its int8 copy and the archive's copy hold the trainer's base
    weights themselves (nothing writes them) and their own adapters; the teacher is the initial model exactly; a
    swap moves the serving adapters and nothing else. Without adapters every copy has its own weights."""
    from claw_lib.models.lm import load_causal_lm
    from claw_lib.serve.versions import Archive
    e = Engine(check_serve_config(ServeConfig(ppo=PPOConfig(strategy="combined", progress=False, threads=1,
                                                            lora_rank=4), serving_format="int8")))
    base = {n: p for n, p in e.trainer.named_parameters() if not p.requires_grad}
    lora = {n: p for n, p in e.trainer.named_parameters() if p.requires_grad}
    assert base and lora and set(e.shared) == {id(p) for p in base.values()}
    for m in (e.teacher, e.serving, Archive(e).full):
        own = dict(m.named_parameters())
        assert all(own[n] is p for n, p in base.items()) and all(own[n] is not p for n, p in lora.items())
    assert any(p is e.trainer.get_input_embeddings().weight for p in e.batcher.model.parameters())  # int8 copy
    x = torch.tensor([[5, 17, 80, 3, 9]])
    initial = load_causal_lm(e.ppo.model)[0]
    with torch.no_grad():
        assert torch.equal(e.teacher(input_ids=x).logits, initial(input_ids=x).logits)
        before = {n: p.clone() for n, p in base.items()}
        for p in lora.values():
            p.add_(0.05)
        e.publish(1)
        served = dict(e.serving.named_parameters())
        assert all(torch.equal(served[n], p) for n, p in lora.items())
        assert all(torch.equal(before[n], p) for n, p in base.items())
        assert torch.equal(e.teacher(input_ids=x).logits, initial(input_ids=x).logits)
    full = Engine(check_serve_config(ServeConfig(ppo=PPOConfig(strategy="combined", progress=False, threads=1,
                                                               lora_rank=0))))
    assert full.shared == {} and not any(p is q for p, q in zip(full.trainer.parameters(), full.teacher.parameters()))


def test_int8_of_a_bfloat16_model_answers_and_leaves_the_training_weights_alone():
    """``--dtype auto`` picks bfloat16 on a CPU with AMX; the int8 kernels take float32 activations, so the int8 copy
    is made from a float32 copy (a 500 on every request before). The bfloat16 weights it came from, adapters and
    base alike, are not converted in place; a swap rebuilds it the same way."""
    e = Engine(check_serve_config(ServeConfig(ppo=PPOConfig(strategy="combined", progress=False, threads=1,
                                                            lora_rank=4, dtype="bfloat16"), serving_format="int8")))
    assert {p.dtype for p in e.trainer.parameters() if not p.requires_grad} == {torch.bfloat16}  # the base
    before = {n: p.clone() for n, p in e.serving.named_parameters()}
    dtypes = {n: p.dtype for n, p in e.serving.named_parameters()}
    served = e.answer(e.task(MSGS), 0.0, 12, 0)
    assert served.response_ids and len(served.rollout_log_probs) == len(served.response_ids)
    assert np.isfinite(served.rollout_log_probs).all()
    assert {n: p.dtype for n, p in e.serving.named_parameters()} == dtypes
    assert all(torch.equal(before[n], p) for n, p in e.serving.named_parameters())
    e.publish(1)
    assert e.answer(e.task(MSGS), 0.0, 12, 0).response_ids
