"""LoRA through PEFT (issue 36): the kit's teaching LoRA and PEFT give the same outputs on the same A, B, r and alpha;
a saved adapter is PEFT's format (PeftModel.from_pretrained loads it and gives the trained model's logits); the frozen
teacher (adapters off) is the base model exactly; a kit run with lora_impl "peft" trains and saves PEFT's adapters.
On the kit's tiny GPT (GPT-2's Conv1D layers) and a random Qwen2 (nn.Linear), the shape of a real instruct model."""
import json

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")  # PEFT's
pytest.importorskip("peft")
from peft import PeftModel  # noqa: E402

from claw_lib.config import PPOConfig  # noqa: E402
from claw_lib.models.lm import load_causal_lm  # noqa: E402
from claw_lib.models.lora import AdapterDisabled, LoRALinear, adapters_disabled, add_lora, has_lora  # noqa: E402
from claw_lib.models.peft_lora import (add_peft_lora, kit_to_peft, load_adapter, lora_config,  # noqa: E402
                                       peft_model_of, save_adapter, uses_peft)
from tests.rl.test_ppo import chat_lm_dir  # noqa: E402,F401 (the random Qwen2 fixture)

MODELS = ["tiny", "qwen2"]


def _model(which, chat_lm_dir):
    return load_causal_lm("tiny" if which == "tiny" else chat_lm_dir)


def _ids(tok):
    ids = [tok.encode(t) for t in ("法国的首都是巴黎。", "The capital of France is")]
    n = min(len(x) for x in ids)
    return torch.tensor([x[:n] for x in ids])                                  # (2, n)


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def _randomise_peft_b(model, seed=0):
    """B != 0 on every PEFT layer (as after training): adapters that change the output."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if hasattr(m, "lora_B") and "default" in getattr(m, "lora_B", {}):
                w = m.lora_B["default"].weight
                w.copy_(0.1 * torch.randn(w.shape, generator=g))


@pytest.mark.parametrize("which", MODELS)
def test_kit_lora_and_peft_agree_on_the_same_weights(which, chat_lm_dir):
    """The same A, B, r = 4, alpha = 8 in both implementations: the same logits (to float32 rounding), and the kit's
    adapters converted to PEFT's (kit_to_peft) give the kit's logits."""
    kit, tok = _model(which, chat_lm_dir)
    peft, _ = _model(which, chat_lm_dir)
    ids = _ids(tok)
    add_lora(kit, r=4, alpha=8.0, seed=0)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in kit.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.copy_(0.1 * torch.randn(m.lora_B.shape, generator=g))
    add_peft_lora(peft, r=4, alpha=8.0, seed=5)
    kit_layers = {n: m for n, m in kit.named_modules() if isinstance(m, LoRALinear)}
    with torch.no_grad():
        for n, m in kit_layers.items():
            p = peft.get_submodule(n)
            p.lora_A["default"].weight.copy_(m.lora_A)
            p.lora_B["default"].weight.copy_(m.lora_B)
    want = _logits(kit, ids)
    base, _ = _model(which, chat_lm_dir)
    assert (want - _logits(base, ids)).abs().max() > 1e-2                       # the adapters change the output
    assert torch.allclose(_logits(peft, ids), want, atol=1e-5, rtol=0)
    converted = kit_to_peft(kit)
    assert not any(isinstance(m, LoRALinear) for m in kit.modules()) and peft_model_of(kit) is converted
    assert torch.allclose(_logits(kit, ids), want, atol=1e-5, rtol=0)
    assert converted.peft_config["default"].r == 4 and converted.peft_config["default"].lora_alpha == 8.0


@pytest.mark.parametrize("which", MODELS)
def test_a_saved_adapter_loads_with_peft_model_from_pretrained(which, chat_lm_dir, tmp_path):
    model, tok = _model(which, chat_lm_dir)
    ids = _ids(tok)
    add_peft_lora(model, r=4, seed=0)
    _randomise_peft_b(model)
    want = _logits(model, ids)
    folder = save_adapter(model, tmp_path / "adapter")
    assert sorted(p.name for p in folder.iterdir() if p.suffix in (".json", ".safetensors")) == \
        ["adapter_config.json", "adapter_model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["adapter"]                 # no temporary left behind
    saved = json.loads((folder / "adapter_config.json").read_text())
    assert saved["peft_type"] == "LORA" and saved["r"] == 4 and saved["lora_alpha"] == 8.0
    base, _ = _model(which, chat_lm_dir)
    loaded = PeftModel.from_pretrained(base, str(folder))                     # the user's own call
    assert torch.equal(_logits(loaded, ids), want)
    again = load_adapter(_model(which, chat_lm_dir)[0], folder)
    assert torch.equal(_logits(again, ids), want)


@pytest.mark.parametrize("which", MODELS)
@pytest.mark.parametrize("impl", ["peft", "kit"])
def test_the_teacher_is_the_base_model_with_adapters_off(which, impl, chat_lm_dir):
    """After the adapters moved (B != 0), the adapter-disabled view gives the base model's logits exactly, and the
    adapters are back on after the block."""
    model, tok = _model(which, chat_lm_dir)
    ids = _ids(tok)
    base = _logits(_model(which, chat_lm_dir)[0], ids)
    if impl == "peft":
        add_peft_lora(model, r=4, seed=0)
        _randomise_peft_b(model)
    else:
        add_lora(model, r=4, seed=0)
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, LoRALinear):
                    m.lora_B.normal_()
    assert has_lora(model)
    adapted = _logits(model, ids)
    assert (adapted - base).abs().max() > 1e-2
    assert torch.equal(_logits(AdapterDisabled(model), ids), base)
    with adapters_disabled(model):
        assert torch.equal(_logits(model, ids), base)
    assert torch.equal(_logits(model, ids), adapted)


def test_peft_adapters_are_seeded_and_leave_the_global_random_state(chat_lm_dir):
    a, _ = load_causal_lm("tiny")
    b, _ = load_causal_lm("tiny")
    torch.manual_seed(123)
    state = torch.get_rng_state()
    add_peft_lora(a, r=2, seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    add_peft_lora(b, r=2, seed=7)
    wa = {n: p for n, p in a.named_parameters() if p.requires_grad}
    wb = {n: p for n, p in b.named_parameters() if p.requires_grad}
    assert wa.keys() == wb.keys() and all(torch.equal(wa[n], wb[n]) for n in wa)
    assert all("lora_" in n for n in wa) and len(wa) == 2 * a.claw_lora["layers"]   # only the adapters train
    assert {n for n, p in a.named_parameters() if "lora_B" in n and p.abs().sum() == 0} == \
        {n for n in wa if "lora_B" in n}                                                # B starts at 0


def test_lora_impl_auto_is_peft_for_real_models_only(chat_lm_dir):
    assert not uses_peft("auto", 1_600_000) and uses_peft("auto", 494_000_000)
    assert uses_peft("peft", 1_600_000) and not uses_peft("kit", 494_000_000)
    with pytest.raises(ValueError, match="lora_impl must be one of auto, peft, kit"):
        uses_peft("home-made", 10)
    m, _ = load_causal_lm(chat_lm_dir)
    cfg = lora_config(m, 8)
    assert sorted(cfg.target_modules) == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
    assert cfg.lora_alpha == 16.0 and cfg.lora_dropout == 0.0 and not cfg.fan_in_fan_out


def test_a_kit_run_with_peft_adapters_saves_them_in_peft_format(tmp_path):
    """claw train's loop with lora_impl "peft": only the adapters train, RUN/adapter is PEFT's format and loads onto
    the base as the trained policy (its greedy evaluation answers repeat), and a stopped run resumes from them."""
    from claw_lib.rl.run import eval_tokens, train
    from claw_lib.rl.samples import read_run
    from claw_lib.toy.evaluation import greedy_feedback
    from claw_lib.toy.envs import make_env

    cfg = PPOConfig(strategy="combined", steps=2, batch_size=4, eval_prompts=4, max_new_tokens=8, progress=False,
                    threads=1, save_every=1, lora_rank=4, lora_impl="peft", lr=1e-2)
    train(cfg, tmp_path / "a", stop_after=1)
    hist = train(cfg, tmp_path / "a")                                           # resumed from the step-1 checkpoint
    full = train(cfg, tmp_path / "b")
    assert [h["step"] for h in hist] == [0, 1, 2]
    assert [h["eval/score"] for h in hist] == [h["eval/score"] for h in full]
    ck = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False)
    assert ck["model"] and all("lora_" in n for n in ck["model"])            # the adapters only, by PEFT's names
    base, tok = load_causal_lm("tiny")
    policy = PeftModel.from_pretrained(base, str(tmp_path / "a" / "adapter")).eval()
    env = make_env(cfg.task, 10_000 + cfg.seed, tok, evaluation=True)
    tasks = env.sample(cfg.eval_prompts)
    gens, _ = greedy_feedback(policy, tok, env, tasks, eval_tokens(cfg))
    answers = [r["answer"] for r in read_run(tmp_path / "a").evals[2]]
    assert [g.text.strip() for g in gens] == answers


def test_the_trl_engine_trains_peft_adapters_and_saves_them(tmp_path, monkeypatch):
    """--engine trl with lora_impl "peft": TRL wraps the model with the kit's LoraConfig, the hinted teacher is the
    adapter-disabled model (the base's logits), and train_trl's RUN/adapter loads onto the base as the trained policy."""
    pytest.importorskip("trl")
    import claw_lib.integrations.trl as kit_trl

    made = []
    make = kit_trl.make_trainer
    monkeypatch.setattr(kit_trl, "make_trainer", lambda *a, **k: made.append(make(*a, **k)) or made[-1])
    cfg = PPOConfig(strategy="combined", steps=1, batch_size=4, eval_prompts=2, max_new_tokens=8, progress=False,
                    threads=1, lora_rank=4, lora_impl="peft", lr=1e-2)
    kit_trl.train_trl(cfg, tmp_path)
    trainer, = made
    model = trainer.accelerator.unwrap_model(trainer.model)
    assert isinstance(model, PeftModel) and model.peft_config["default"].r == 4
    base, tok = load_causal_lm("tiny")
    ids = _ids(tok)
    model.eval()
    assert torch.equal(_logits(trainer.scorer.teacher, ids), _logits(base, ids))   # the teacher: adapters off
    trained = _logits(model, ids)
    assert (trained - _logits(base, ids)).abs().max() > 1e-4                     # the update moved the adapters
    loaded = PeftModel.from_pretrained(base, str(tmp_path / "adapter"))
    assert torch.allclose(_logits(loaded, ids), trained, atol=1e-6, rtol=0)
