"""The plain-torch BERT and tokenizer (claw_lib.models.bert) equal transformers' BertModel and AutoTokenizer on the
kit's encoder folders: same ids, offsets and special-token masks, hidden states of every layer within 1e-5."""
import pytest
import torch

from claw_lib.models.bert import is_plain_bert_folder, load_plain_bert
from claw_lib.models.offline import resolve_encoder_path

TEXTS = ["法国的首都是伦敦。", "No, the capital of France is Paris.", "", "a", "Paris 是法国的 capital 👍🏽", "  spaces  ",
         "\t\n", "HNO2 和 2.718", "x " * 40]


@pytest.fixture(scope="module", params=["e5", "minilm"])
def pair(request):
    from transformers import AutoModel, AutoTokenizer

    path = resolve_encoder_path(request.param)
    assert is_plain_bert_folder(path)
    model, tok = load_plain_bert(path)
    return (model, tok), (AutoModel.from_pretrained(str(path)).eval(), AutoTokenizer.from_pretrained(str(path)))


def test_tokenizer_equals_autotokenizer(pair):
    (_, tok), (_, ref) = pair
    assert (tok.pad_token_id, tok.unk_token_id, tok.model_max_length) == (ref.pad_token_id, ref.unk_token_id,
                                                                            ref.model_max_length)
    for text in TEXTS:
        for special in (True, False):
            a = tok(text, add_special_tokens=special, return_offsets_mapping=True, return_special_tokens_mask=True)
            b = ref(text, add_special_tokens=special, return_offsets_mapping=True, return_special_tokens_mask=True)
            assert a["input_ids"] == list(b["input_ids"]), text
            assert a["offset_mapping"] == [tuple(o) for o in b["offset_mapping"]], text
            assert a["special_tokens_mask"] == list(b["special_tokens_mask"]), text
            assert tok.convert_ids_to_tokens(a["input_ids"]) == ref.convert_ids_to_tokens(b["input_ids"])


def test_hidden_states_equal_bertmodel_on_a_padded_batch(pair):
    (model, tok), (ref, _) = pair
    ids = [tok(t)["input_ids"] for t in TEXTS]
    L = max(map(len, ids))
    x = torch.tensor([r + [tok.pad_token_id] * (L - len(r)) for r in ids])
    att = torch.tensor([[1] * len(r) + [0] * (L - len(r)) for r in ids])
    with torch.no_grad():
        ours = model(input_ids=x, attention_mask=att, output_hidden_states=True)
        theirs = ref(input_ids=x, attention_mask=att, output_hidden_states=True)
    assert len(ours.hidden_states) == len(theirs.hidden_states) == model.config.num_hidden_layers + 1
    real = att.bool()
    for a, b in zip(ours.hidden_states, theirs.hidden_states):
        assert (a - b)[real].abs().max() < 1e-5
    assert torch.equal(ours.last_hidden_state, ours.hidden_states[-1])


def test_a_folder_that_is_not_a_bert_folder_is_not_taken(tmp_path):
    assert not is_plain_bert_folder(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_text("{}")
    assert not is_plain_bert_folder(tmp_path)
