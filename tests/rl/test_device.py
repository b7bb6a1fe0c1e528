"""The PPO loop keeps every tensor on the policy's device, checked on a CPU-only machine.

Why a CPU test can catch a CUDA bug: on a CPU machine every tensor is on the CPU, so a batch or an
advantage tensor that the loop forgets to move (``pack(...)`` without ``.to(dev)``, ``torch.zeros(shape)``
without ``device=``, ``torch.tensor(scores)``) meets the model without complaint, and the first user with
a GPU gets "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and
cpu!". Here the policy *says* it is on ``cuda:0``: its parameters are CPU tensors of a subclass whose
``.device`` reports :data:`FAKE` (the data stay on the CPU, so the model really runs). A
:class:`torch.overrides.TorchFunctionMode` (:class:`CheckDevices`) then follows every torch call of a
``train`` step at the Python API level, as a CUDA build would:

* a tensor created with ``device=<the reported device>`` (``torch.zeros(..., device=dev)``,
  ``torch.tensor(..., device=dev)``, ``x.to(dev)``, ``torch.as_tensor(x, device=dev)``) is tagged as on
  the device, and so is every result of an op that takes a tagged tensor; ``.cpu()`` / ``.to("cpu")``
  untag;
* an op that takes a tagged tensor **and** an untagged tensor with at least one dimension raises
  :class:`DeviceMismatch` (a CUDA op would raise too; 0-dim CPU tensors are allowed, as PyTorch allows
  CPU scalars next to CUDA tensors; ``copy_`` and ``__setitem__`` copy across devices, as on CUDA);
* ``.numpy()`` of a tagged tensor raises (a CUDA tensor must go through ``.cpu()`` first).

So the batch of a rollout built on the CPU and fed to the model, or advantages built on the CPU and
multiplied with the model's log-probs, fail this test exactly where they would fail on a GPU
(:func:`test_the_check_catches_tensors_left_on_the_cpu` breaks the loop on purpose both ways).
What it cannot see: ops inside C++ (autograd's backward, the optimizer's kernels) and device choices
made from C++-level properties; the loop makes none of those. It is stricter than CUDA in one place:
a device tensor indexed with a CPU index tensor is flagged (PyTorch allows it; the loop does not do it).
"""
import copy

import pytest
import torch
from torch.overrides import TorchFunctionMode

from claw_lib.config import PPOConfig, TaskConfig

#: the device the policy reports (any non-CPU device works; CUDA is the one users have)
FAKE = torch.device("cuda", 0)


class DeviceMismatch(AssertionError):
    """A tensor on the (fake) accelerator met a CPU tensor in one op."""


class OnDevice(torch.Tensor):
    """A CPU tensor that reports :data:`FAKE` as its device (the tag :class:`CheckDevices` follows)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def device(self):
        return FAKE

    @property
    def is_cuda(self):
        return FAKE.type == "cuda"

    def __deepcopy__(self, memo):  # frozen_teacher deep-copies the policy
        with torch.no_grad():
            c = self.detach().clone().as_subclass(OnDevice)
        c.requires_grad_(self.requires_grad)
        c.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[id(self)] = c
        return c


def _is_fake(device) -> bool:
    return isinstance(device, (str, torch.device)) and torch.device(device).type == FAKE.type


def _is_cpu(device) -> bool:
    return isinstance(device, (str, torch.device)) and torch.device(device).type == "cpu"


def _tensors(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _tensors(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _tensors(y, out)
    return out


def _tag(x):
    if type(x) in (torch.Tensor, torch.nn.Parameter):
        return x.as_subclass(OnDevice)
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # torch.return_types (max, sort, ...)
        return type(x)(tuple(_tag(y) for y in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_tag(y) for y in x)
    return x


def _untag(x):
    return x.as_subclass(torch.Tensor) if isinstance(x, OnDevice) else x


#: ops that copy between devices (the value may live elsewhere, as on CUDA)
_COPIES = {torch.Tensor.copy_, torch.Tensor.__setitem__}


class CheckDevices(TorchFunctionMode):
    """Follow the fake device through every torch call; raise :class:`DeviceMismatch` where a CUDA
    build would raise (see the module docstring). ``calls`` counts the torch calls checked."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        self.calls += 1
        name = getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))
        to_device = False
        if _is_fake(kwargs.get("device")):
            kwargs["device"], to_device = "cpu", True
        if func is torch.as_tensor and len(args) >= 3 and _is_fake(args[2]):
            args, to_device = (args[0], args[1], "cpu"), True
        if func is torch.Tensor.to:
            rest = list(args[1:])
            for i, v in enumerate(rest):
                if _is_fake(v):
                    rest[i], to_device = "cpu", True
                elif _is_cpu(v) or _is_cpu(kwargs.get("device")):
                    return _untag(func(_untag(args[0]), *rest, **kwargs))
                elif isinstance(v, torch.Tensor):  # x.to(other): other's device
                    if isinstance(v, OnDevice):
                        to_device = True
                    else:
                        return _untag(func(_untag(args[0]), *rest, **kwargs))
            args = (args[0], *rest)
        if func is torch.Tensor.cpu:
            return _untag(func(*args, **kwargs))
        if func in (torch.Tensor.numpy, torch.Tensor.__array__) and isinstance(args[0], OnDevice):
            raise DeviceMismatch(f"{name}() of a tensor on {FAKE}: a CUDA tensor needs .cpu() first")
        ts = _tensors(args, []) + _tensors(kwargs, [])
        on = any(isinstance(t, OnDevice) for t in ts)
        if on and func not in _COPIES and func is not torch.Tensor.to:
            cpu = [tuple(t.shape) for t in ts if not isinstance(t, OnDevice) and t.dim() > 0]
            if cpu:
                raise DeviceMismatch(f"{name}: tensors on {FAKE} and CPU tensors of shapes {cpu} in one op")
        out = func(*args, **kwargs)
        return _tag(out) if on or to_device else out


def to_fake_device(model):
    """Make every parameter and buffer of ``model`` report :data:`FAKE` (in place; data stay on the CPU)."""
    for mod in model.modules():
        for k, p in list(mod._parameters.items()):
            if p is not None:
                t = p.detach().as_subclass(OnDevice).requires_grad_(p.requires_grad)
                t._is_param = True  # isinstance(t, nn.Parameter), as torch's custom-tensor parameters
                mod._parameters[k] = t
        for k, b in list(mod._buffers.items()):
            if b is not None:
                mod._buffers[k] = b.as_subclass(OnDevice)
    return model


@pytest.fixture
def fake_cuda(monkeypatch):
    """``train`` on a policy that reports ``cuda:0``: ``resolve_device("cuda")`` answers FAKE,
    ``load_causal_lm`` loads the tiny GPT on the CPU and moves it to FAKE, and ``module.to(FAKE)``
    does the same for any other module (the value head, the alignment encoder, loaded uncached so
    that later tests never get it); yields the mode."""
    import claw_lib.alignment.encoders as enc
    import claw_lib.models.lm as lm
    import claw_lib.utils as utils

    real_load = lm.load_causal_lm

    def load(name, device="cpu", dtype=None):
        assert _is_fake(device), f"the loop asked for the model on {device!r}, not on the configured device"
        model, tok = real_load(name, device="cpu", dtype=dtype)
        return to_fake_device(model), tok

    real_to = torch.nn.Module.to

    def module_to(self, *args, **kwargs):  # e.g. the value head: ValueHead(d).to(dev)
        dev = kwargs.get("device", args[0] if args else None)
        return to_fake_device(self) if _is_fake(dev) else real_to(self, *args, **kwargs)

    def resolve(device="cpu"):
        return FAKE if str(device).startswith("cuda") else device

    monkeypatch.setattr(lm, "load_causal_lm", load)
    monkeypatch.setattr(torch.nn.Module, "to", module_to)
    for module in (utils, enc):  # encoders bound the name at import
        monkeypatch.setattr(module, "resolve_device", resolve)
    monkeypatch.setattr(enc, "load_encoder", enc.load_encoder.__wrapped__)  # uncached: leave no fake-device encoder
    with CheckDevices() as mode:
        yield mode


def _cfg(**kw):
    base = dict(device="cuda", steps=1, batch_size=4, max_new_tokens=8, eval_prompts=4, progress=False, threads=1,
                task=TaskConfig(user="correcting", misconception_share=1.0))
    base.update(kw)
    return PPOConfig(**base)


@pytest.mark.parametrize("strategy,advantage", [("combined", "direct"), ("opd_kl", "direct"), ("perplexity", "direct"), ("binary", "direct"),
                                                ("binary_rl", "grpo"), ("opd", "gae")])
def test_one_training_step_keeps_every_tensor_on_the_policys_device(fake_cuda, strategy, advantage):
    """One ``train`` step (rollout, signals, advantages, the update with a KL term, the greedy
    evaluation) on a policy that reports ``cuda:0``: no op mixes devices. The cases cover the hinted
    teacher's log-probs (combined), distillation on the teacher's batch (opd_kl), the alignment
    encoder (binary, its device taken from the policy), the perplexity judge, and the "grpo" and "gae"
    advantages (the value head)."""
    from claw_lib.config import LossConfig
    from claw_lib.rl.run import train

    cfg = _cfg(strategy=strategy, advantage=advantage, loss=LossConfig(kl_coef=0.1))
    hist = train(cfg)
    assert [h["step"] for h in hist] == [0, 1]
    assert fake_cuda.calls > 1000  # the check really saw the loop's torch calls


def _batch_left_on_the_cpu(monkeypatch):
    from claw_lib.models.lm import Batch

    monkeypatch.setattr(Batch, "to", lambda self, device: self)


def _advantages_built_on_the_cpu(monkeypatch):
    import claw_lib.rl.ppo as ppo

    real = ppo.compute_advantages

    def on_cpu(*args, **kwargs):
        adv = real(*args, **kwargs)
        adv.advantages = adv.advantages.cpu()
        return adv

    monkeypatch.setattr(ppo, "compute_advantages", on_cpu)


@pytest.mark.parametrize("break_it", [_batch_left_on_the_cpu, _advantages_built_on_the_cpu])
def test_the_check_catches_tensors_left_on_the_cpu(fake_cuda, monkeypatch, break_it):
    """The same step with the rollout's batch left on the CPU (``Batch.to`` broken), or with the
    advantages on the CPU, fails with the error a GPU would give: the check is not vacuous."""
    from claw_lib.rl.run import train

    break_it(monkeypatch)
    with pytest.raises(DeviceMismatch, match="CPU tensors"):
        train(_cfg(strategy="combined"))


def test_the_check_follows_pytorchs_rules():
    """Mixing raises, except 0-dim CPU scalars and cross-device copies; .numpy() needs .cpu()."""
    with CheckDevices():
        x = torch.ones(3, device=FAKE)
        assert x.device == FAKE and (x * torch.tensor(2.0)).device == FAKE   # CPU scalar: allowed
        with pytest.raises(DeviceMismatch):
            x + torch.ones(3)
        y = torch.zeros(2, 3, device=FAKE)
        y[0, :3] = torch.arange(3.0)                                          # copy from the CPU: allowed
        assert y.device == FAKE and torch.equal(y.cpu()[0], torch.arange(3.0))
        assert type(y.cpu()) is torch.Tensor and (y.cpu() + torch.ones(3)).shape == (2, 3)
        with pytest.raises(DeviceMismatch, match="numpy"):
            y.numpy()
        assert torch.as_tensor([1, 2], device=FAKE).device == FAKE
        assert torch.ones(2).to(y).device == FAKE and torch.ones(2).to(FAKE).device == FAKE
