"""Real sub-tokens (issue 36): a byte-level BPE like Qwen's (several characters in one token, one character over
several byte tokens), a chat template's tokens and the response mask, and word rewards mapped onto the policy's
ids in the three modes (first / spread / split).

CI builds a tiny byte-level BPE with the ``tokenizers`` library (the library Qwen's tokenizer is made with) and a
ChatML template; the same checks run on Qwen's own tokenizer when ``CLAW_REAL_MODEL`` names its folder (the
tokenizer alone loads in about a second)."""
import os

import numpy as np
import pytest

from claw_lib.text.tokens import map_subtokens_to_words, subtoken_spans, tokenize, words_to_subtokens

CORPUS = ["法国的首都是巴黎。", "德国的首都是柏林。", "日本的首都是东京。", "中国的首都是北京。",
          "The capital of France is Paris.", "The capital of Germany is Berlin."]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
RESPONSE = "法国的首都是伦敦。"     # 伦 and 敦 never occur in the corpus: each is 3 UTF-8 bytes, in byte tokens
#: the wrong answer's character that each tokenizer writes in byte tokens: 伦 (tiny BPE), 龘 (Qwen: two byte ids)
TEXTS = {"tiny_byte_bpe": RESPONSE, "_qwen": "法国的首都是龘城。"}


def tiny_byte_bpe():
    """A byte-level BPE trained on CORPUS (300 ids), with ChatML's special tokens and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(CORPUS * 20, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=["<|im_start|>"])
    tok.chat_template = CHATML
    return tok


def _qwen():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(os.environ["CLAW_REAL_MODEL"])


TOKENIZERS = [pytest.param(tiny_byte_bpe, id="tiny-byte-bpe"),
              pytest.param(_qwen, id="qwen", marks=[pytest.mark.real_model, pytest.mark.skipif(
                  not os.environ.get("CLAW_REAL_MODEL"), reason="set CLAW_REAL_MODEL to a Qwen folder")])]


def _byte_split_char(tok, text):
    """A character of ``text`` that the tokenizer spreads over two or more ids, each of which alone decodes to no
    whole character (a byte piece), with those ids' positions."""
    ids = tok.encode(text, add_special_tokens=False)
    for k, t in enumerate(ids):
        if "\ufffd" in tok.decode([t]):
            run = [k]
            while run[-1] + 1 < len(ids) and "\ufffd" in tok.decode(ids[run[0]:run[-1] + 2]):
                run.append(run[-1] + 1)
            run.append(run[-1] + 1)  # the id that completes the character
            return ids, run
    return ids, None


@pytest.mark.parametrize("make", TOKENIZERS)
def test_byte_tokens_get_their_characters_span(make):
    """Several characters in one token (首都 / 都是 or 法国) and one character over several byte tokens: each byte id
    gets the whole character's span, and the spans tile the text."""
    tok, text = make(), TEXTS[make.__name__]
    ids, run = _byte_split_char(tok, text)
    assert run is not None and len(run) >= 2
    spans = subtoken_spans(tok, ids)
    c = {(spans[k].start, spans[k].end) for k in run}
    (s0, e0), = c                                                       # one span, shared by the byte ids ...
    assert e0 - s0 == 1                                                 # ... of one character
    assert any(s.end - s.start >= 2 for s in spans)                     # a token of several characters
    assert tok.decode(ids) == text and spans[-1].end == len(text)
    tiles = [(s.start, s.end) for k, s in enumerate(spans) if k == 0 or (s.start, s.end) != (spans[k - 1].start,
                                                                                            spans[k - 1].end)]
    assert all(a[1] == b[0] for a, b in zip(tiles, tiles[1:])) and tiles[0][0] == 0


@pytest.mark.parametrize("make", TOKENIZERS)
def test_word_rewards_onto_byte_tokens_first_spread_split(make):
    """Word rewards (jieba words) onto sub-tokens, checked against a brute force over the character spans: each id
    belongs to the word it overlaps most; "first" puts the word's value on its first id only, "spread" on all its
    ids, "split" shares it (sums per word agree). A word inside a token of several words owns no id (Qwen's 都是
    covers 首都 and 是): its value reaches no id in any mode."""
    tok, text = make(), TEXTS[make.__name__]
    ids, run = _byte_split_char(tok, text)
    words, subs = tokenize(text), subtoken_spans(tok, ids)
    c = subs[run[0]].start                                                 # the byte-split character
    vals = np.array([-1.0 if w.start <= c < w.end else 0.5 for w in words])    # the wrong word: -1
    assert (vals == -1.0).sum() == 1
    mapping = map_subtokens_to_words(words, subs)
    owner = [max(range(len(words)), key=lambda j: min(words[j].end, s.end) - max(words[j].start, s.start))
             for s in subs]                                                  # brute force: the most-overlapped word
    assert mapping.tolist() == owner
    first, spread, split = (words_to_subtokens(vals, mapping, m) for m in ("first", "spread", "split"))
    for j, v in enumerate(vals):
        mine = [k for k, w in enumerate(owner) if w == j]
        if not mine:  # the word lies inside a token of several words (都是, 国的首都是): it owns no id, its value is lost
            assert any(min(words[j].end, s.end) > max(words[j].start, s.start) and owner[k] != j
                       for k, s in enumerate(subs))
            continue
        assert spread[mine].tolist() == [v] * len(mine)
        assert first[mine].tolist() == [v] + [0.0] * (len(mine) - 1)
        assert split[mine].sum() == pytest.approx(v) and np.allclose(split[mine], v / len(mine))
    bad = [k for k, w in enumerate(owner) if vals[w] == -1.0]
    assert set(run) <= set(bad) and all(spread[k] == -1.0 for k in bad)   # every byte id of the wrong word
    assert first[bad].tolist() == [-1.0] + [0.0] * (len(bad) - 1)


@pytest.mark.parametrize("make", TOKENIZERS)
def test_chat_template_tokens_and_response_mask(make):
    """The prompt through the chat template holds <|im_start|> ... assistant; packed with the response and eos, the
    response mask is True on exactly the response ids (eos included) and each response id is predicted by the logit
    one position before it; the policy's rewards give eos the special value."""
    from claw_lib.models.lm import encode, pack
    from claw_lib.prompts import build_prompt, response_text
    from claw_lib.signals.mapping import policy_token_rewards
    from claw_lib.signals.rewards import TokenRewards

    tok = make()
    prompt = build_prompt("法国的首都是哪里？", "zh", tokenizer=tok)
    assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
    p_ids = encode(tok, prompt)
    start = tok.convert_tokens_to_ids("<|im_start|>")
    assert p_ids.count(start) == prompt.count("<|im_start|>") >= 2          # a special token is one id
    r_ids = encode(tok, response_text(RESPONSE, "zh", tok, prompt=prompt)) + [tok.eos_token_id]
    b = pack([p_ids, p_ids[:5]], [r_ids, r_ids[:2]], tok.pad_token_id)
    assert b.response_mask[0].tolist() == [True] * len(r_ids)
    assert b.response_mask[1].tolist() == [True, True] + [False] * (len(r_ids) - 2)
    assert (b.input_ids[0, b.logit_index[0] + 1] == b.response_ids[0]).all()
    assert b.logit_index[0, 0] == len(p_ids) - 1
    words = tokenize(RESPONSE)
    tr = TokenRewards(RESPONSE, "binary", words, np.array([-1.0 if w.text == "伦敦" else 0.5 for w in words]),
                      np.array([w.text == "伦敦" for w in words]), None, {})
    out = policy_token_rewards(tr, tok, r_ids, "spread", special_value=0.0)
    inside = [k for k, t in enumerate(subtoken_spans(tok, r_ids[:-1])) if t.start >= 6 and t.end <= 8]  # 伦敦
    assert len(out) == len(r_ids) and out[-1] == 0.0 and np.flatnonzero(out == -1.0).tolist() == inside != []
