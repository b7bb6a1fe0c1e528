"""Causal LM helpers: packing, log-probs against a direct computation and the model's loss, sampling."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from claw_lib.models.lm import encode_pair, generate, load_causal_lm, logprobs_from_batch, pack, response_logprobs
from claw_lib.models.loading import ModelNotAvailableError


@pytest.fixture(scope="module")
def random_lm(tmp_path_factory):
    """A randomly initialised tiny GPT-2 saved in the HF layout, loaded through the kit's loader."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from claw_lib.toy.corpus import sample_corpus
    from claw_lib.toy.pretrain import train_tokenizer
    from claw_lib.toy.world import FactWorld

    d = tmp_path_factory.mktemp("random-gpt")
    tok = train_tokenizer([e.prompt + e.response for e in sample_corpus(FactWorld(), 500)], 400)
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=2, n_head=2))
    m.save_pretrained(d)
    tok.save_pretrained(d)
    return load_causal_lm(str(d))


def test_pack_shapes_and_masks():
    b = pack([[1, 2, 3], [4]], [[5, 6], [7, 8, 9]], pad_id=0)
    assert b.input_ids.tolist() == [[1, 2, 3, 5, 6], [4, 7, 8, 9, 0]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
    assert b.response_mask.tolist() == [[True, True, False], [True, True, True]]
    assert b.logit_index.tolist() == [[2, 3, 0], [0, 1, 2]]
    with pytest.raises(ValueError, match="empty"):
        pack([[]], [[1]], 0)


def test_logprobs_match_direct_computation_and_model_loss(random_lm):
    model, tok = random_lm
    prompts = ["问：法国的首都是哪里？\n答：", "Q: What is the capital of France?\nA:"]
    responses = ["法国的首都是巴黎。", " The capital of France is Paris."]
    scores = response_logprobs(model, tok, prompts, responses)
    for p, r, lp in zip(prompts, responses, scores.logprobs):
        pid, rid, offs = encode_pair(tok, p, r)
        assert len(lp) == len(rid) == len(offs)
        ids = torch.tensor([pid + rid])
        with torch.no_grad():
            logits = model(ids).logits[0]
            direct = F.log_softmax(logits[len(pid) - 1:-1], -1).gather(-1, torch.tensor(rid)[:, None])[:, 0]
            labels = ids.clone()
            labels[0, :len(pid)] = -100
            loss = model(ids, labels=labels).loss
        assert np.allclose(lp, direct.numpy(), atol=1e-5)
        assert np.isclose(-lp.mean(), float(loss), atol=1e-5)


def test_batched_equals_one_by_one(random_lm):
    model, tok = random_lm
    prompts = ["问：a\n答：", "Q: a much longer prompt with many more tokens in it\nA:", "x"]
    responses = ["巴黎。", " Paris", " 👍🏽 ok"]
    batched = response_logprobs(model, tok, prompts, responses, batch_size=3)
    for k in range(3):
        single = response_logprobs(model, tok, [prompts[k]], [responses[k]])
        assert np.allclose(batched.logprobs[k], single.logprobs[0], atol=1e-5)


def test_offsets_cover_response(random_lm):
    _, tok = random_lm
    r = "法国的首都是巴黎。 ok 👍🏽"
    _, rid, offs = encode_pair(tok, "p", r)
    assert len(rid) == len(offs)
    assert all(0 <= t.start <= t.end <= len(r) for t in offs)
    assert tok.decode(rid) == r


def test_logprobs_have_gradients(random_lm):
    model, tok = random_lm
    p, r, _ = encode_pair(tok, "问：x\n答：", "巴黎。")
    lp = logprobs_from_batch(model, pack([p], [r], tok.pad_token_id))
    lp.sum().backward()
    assert any(q.grad is not None and q.grad.abs().sum() > 0 for q in model.parameters())
    model.zero_grad(set_to_none=True)


def test_logprobs_with_entropy_and_topk_from_one_forward(random_lm):
    """topk=k adds the k most likely ids per response position and their full-vocabulary log-probs (temperature
    applied), most likely first, after the entropy when both are asked; the log-probs themselves are unchanged."""
    import torch

    model, tok = random_lm
    p, r, _ = encode_pair(tok, "问：x\n答：", "巴黎。")
    batch = pack([p, p], [r, r[:2]], tok.pad_token_id)
    with torch.no_grad():
        plain = logprobs_from_batch(model, batch, temperature=0.7)
        lp, ent, (ids, top) = logprobs_from_batch(model, batch, temperature=0.7, with_entropy=True, topk=3)
        full = torch.log_softmax(model(input_ids=batch.input_ids).logits.float() / 0.7, -1)
    assert torch.equal(lp, plain) and ent.shape == lp.shape and ids.shape == top.shape == lp.shape + (3,)
    for b in range(2):
        for t, pos in enumerate(batch.logit_index[b].tolist()):
            want_lp, want_ids = full[b, pos].topk(3)
            assert torch.equal(ids[b, t], want_ids) and torch.allclose(top[b, t], want_lp, atol=1e-5)


def test_generate_is_reproducible(random_lm):
    model, tok = random_lm
    a = generate(model, tok, ["问：x\n答：", "Q: y\nA:"], max_new_tokens=8, seed=3)
    b = generate(model, tok, ["问：x\n答：", "Q: y\nA:"], max_new_tokens=8, seed=3)
    assert [g.ids for g in a] == [g.ids for g in b]
    assert all(len(g.ids) <= 8 for g in a)


def test_missing_models_are_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(ModelNotAvailableError, match="never downloads"):
        load_causal_lm("Qwen/Qwen2.5-0.5B-Instruct-not-here")
    import claw_lib.models.lm as lm

    monkeypatch.setattr(lm, "TINY_LM_DIR", tmp_path / "nothing")
    with pytest.raises(ModelNotAvailableError, match="claw pretrain"):
        load_causal_lm("tiny")


def test_generation_stops_on_every_end_token(random_lm):
    """The stop ids are the tokenizer's eos and every eos the generation config lists; a response ends at the
    first of them (greedy: cut the unconstrained answer at its second token)."""
    from claw_lib.models.lm import stop_token_ids

    model, tok = random_lm
    p = ["问：法国的首都是哪里？\n答："]
    free = generate(model, tok, p, max_new_tokens=6, greedy=True)[0]
    eos = tok.eos_token_id
    saved = model.generation_config.eos_token_id
    other = next(t for t in free.ids[1:] if t != eos)
    try:
        model.generation_config.eos_token_id = eos
        assert stop_token_ids(model, tok) == [eos]
        model.generation_config.eos_token_id = [eos, other]
        assert stop_token_ids(model, tok) == [eos, other]
        cut = generate(model, tok, p, max_new_tokens=6, greedy=True)[0]
    finally:
        model.generation_config.eos_token_id = saved
    k = free.ids.index(other)
    assert cut.ids == free.ids[:k + 1] and cut.finished and other not in tok.encode(cut.text)


def test_dtypes_and_peak_memory():
    from claw_lib.models.lm import bf16_supported, peak_memory_gib, resolve_dtype

    assert resolve_dtype("auto", "cpu", "tiny") == torch.float32 and resolve_dtype(None, "cpu", "tiny") == torch.float32
    assert resolve_dtype("auto", "cpu", "/a/qwen") == (torch.bfloat16 if bf16_supported("cpu") else torch.float32)
    assert resolve_dtype("bfloat16") == torch.bfloat16 and resolve_dtype(torch.float16) == torch.float16
    with pytest.raises(ValueError, match="dtype must be one of"):
        resolve_dtype("int4")
    import resource

    assert peak_memory_gib("cpu") == pytest.approx(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, rel=0.05)


def _random_batch(V, seed=0):
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(0, V, (n,), generator=g).tolist() for n in (5, 17, 9, 30)]
    responses = [torch.randint(0, V, (n,), generator=g).tolist() for n in (12, 3, 25, 40)]
    return pack(prompts, responses, 0)


@pytest.mark.parametrize("wrap", ["plain", "peft"])
def test_response_logits_are_the_full_forward_at_the_response_positions(random_lm, wrap):
    """The output layer on the response positions only (no (B, L, V) logits) gives the full forward's logits and
    last hidden state there, exactly; inside a PEFT wrapper too, and with gradients."""
    import copy

    from claw_lib.models.lm import plain_head, response_logits
    from claw_lib.ops import gather_positions
    model = copy.deepcopy(random_lm[0])
    if wrap == "peft":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
    assert plain_head(model) is not None
    b = _random_batch(model.config.vocab_size)
    out = model(input_ids=b.input_ids, attention_mask=b.attention_mask, output_hidden_states=True)
    logits, hidden = response_logits(model, b, hidden=True)
    assert logits.shape == (4, 40, model.config.vocab_size) and hidden.shape == (4, 40, model.config.n_embd)
    assert torch.equal(logits, gather_positions(out.logits, b.logit_index))
    assert torch.equal(hidden, gather_positions(out.hidden_states[-1], b.logit_index))
    assert logits.requires_grad
    assert response_logits(model, b)[1] is None


def test_response_logits_fall_back_to_the_full_forward(random_lm):
    """A model outside PLAIN_HEADS (its head may scale or cap) and a wrapper that is no module take the full forward."""
    import copy

    from claw_lib.models.lm import plain_head, response_logits
    from claw_lib.models.lora import AdapterDisabled
    from claw_lib.ops import gather_positions
    model = copy.deepcopy(random_lm[0])
    b = _random_batch(model.config.vocab_size, seed=1)
    with torch.no_grad():
        want = gather_positions(model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits, b.logit_index)
        assert plain_head(AdapterDisabled(model)) is None
        assert torch.equal(response_logits(AdapterDisabled(model), b)[0], want)
        model.config.model_type = "gemma2"  # soft-capped logits: not lm_head(h)
        assert plain_head(model) is None
        assert torch.equal(response_logits(model, b)[0], want)


def test_ids_logprobs_scores_fewer_rows_where_the_logits_would_not_fit(random_lm, monkeypatch):
    """LOGITS_PER_PASS caps rows x tokens x vocabulary per pass; the log-probs are the same one row at a time."""
    from claw_lib.models import lm
    model = random_lm[0]
    g = torch.Generator().manual_seed(2)
    V = model.config.vocab_size
    prompts = [torch.randint(0, V, (n,), generator=g).tolist() for n in (4, 9, 6)]
    responses = [torch.randint(0, V, (n,), generator=g).tolist() for n in (7, 2, 11)]
    whole = lm.ids_logprobs(model, prompts, responses, 0)[0]
    passes = []
    real = lm.logprobs_from_batch
    monkeypatch.setattr(lm, "logprobs_from_batch", lambda m, b, **k: passes.append(len(b.input_ids)) or real(m, b, **k))
    monkeypatch.setattr(lm, "LOGITS_PER_PASS", 11 * V)  # one row of the longest response
    parts = lm.ids_logprobs(model, prompts, responses, 0)[0]
    assert passes == [1, 1, 1]
    for a, b in zip(whole, parts):
        assert a.shape == b.shape and np.allclose(a, b, atol=1e-5)


def test_logprobs_in_parts_equal_the_whole_batch(random_lm):
    """The trainer's pi_old recompute a few rows at a time (--micro-batch): the whole batch's log-probs."""
    from claw_lib.models.lm import logprobs_in_parts
    model = random_lm[0]
    b = _random_batch(model.config.vocab_size, seed=3)
    with torch.no_grad():
        whole = logprobs_from_batch(model, b, temperature=0.7)
        for rows in (None, 1, 3, 4, 9):
            got = logprobs_in_parts(model, b, rows, temperature=0.7)
            assert got.shape == whole.shape and torch.allclose(got, whole, atol=1e-5)


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_response_logits_of_real_model_families(family):
    """The families real runs use (random weights, a few kilobytes): the response-position logits and last hidden
    state are the full forward's, bit for bit, with padding on either side of a row."""
    import transformers

    from claw_lib.models.lm import plain_head, response_logits
    from claw_lib.ops import gather_positions
    cls, cfg = {"qwen2": ("Qwen2ForCausalLM", "Qwen2Config"), "llama": ("LlamaForCausalLM", "LlamaConfig")}[family]
    torch.manual_seed(0)
    model = getattr(transformers, cls)(getattr(transformers, cfg)(
        vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=True)).eval()
    assert plain_head(model) is not None
    b = pack([[1, 2, 3], [4, 5, 6, 7, 8, 9]], [[10, 11, 12, 13], [14]], 0)
    with torch.no_grad():
        out = model(input_ids=b.input_ids, attention_mask=b.attention_mask, output_hidden_states=True)
        logits, hidden = response_logits(model, b, hidden=True)
    assert torch.equal(logits, gather_positions(out.logits, b.logit_index))
    assert torch.equal(hidden, gather_positions(out.hidden_states[-1], b.logit_index))
