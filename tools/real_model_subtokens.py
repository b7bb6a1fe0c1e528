"""A real model's sub-tokens, recorded for readers without the model (issue 36; notebook 12b, docs/real_model.md).

Loads only the tokenizer (about a second) and writes results/real_model/subtokens.json: the byte-level BPE pieces of
a wrong answer in Chinese and in English with each id's character span (:func:`claw_lib.text.tokens.subtoken_spans`),
a character that takes two byte ids, the chat template's prompt with its added tokens (``<|im_start|>`` is one id but
not among ``all_special_ids``; ``<|im_end|>`` is both), the response mask of the
packed prompt + response + eos (:func:`claw_lib.models.lm.pack`), and word rewards (-1 on the wrong word, +0.5 on
the others) on the ids in the three modes (:func:`claw_lib.signals.mapping.policy_token_rewards`)::

    .venv/bin/python tools/real_model_subtokens.py --model /work/models/qwen05
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "results" / "real_model" / "subtokens.json"
CASES = [("法国的首都是哪里？", "法国的首都是伦敦。", "伦敦", "zh"),
         ("What is the capital of France?", "The capital of France is London.", "London", "en"),
         ("龘是什么意思？", "龘的意思是龙飞的样子。", "龘", "zh")]


def record(tok, question: str, answer: str, wrong: str, lang: str) -> dict:
    """One answer's ids, pieces, spans, response mask and word rewards in the three modes."""
    from claw_lib.models.lm import encode, pack
    from claw_lib.prompts import build_prompt, response_text
    from claw_lib.signals.mapping import policy_token_rewards
    from claw_lib.signals.rewards import TokenRewards
    from claw_lib.text.tokens import subtoken_spans, tokenize

    prompt = build_prompt(question, lang, tokenizer=tok)
    p_ids = encode(tok, prompt)
    ids = encode(tok, response_text(answer, lang, tok, prompt=prompt)) + [tok.eos_token_id]
    words = tokenize(answer)
    r = np.array([-1.0 if w.text.strip() == wrong else 0.5 for w in words])
    tr = TokenRewards(answer, "binary", words, r, r < 0, None, {})
    b = pack([p_ids], [ids], tok.pad_token_id)
    return {"question": question, "answer": answer, "wrong": wrong, "prompt": prompt, "prompt_ids": len(p_ids),
            "prompt_added": [tok.convert_ids_to_tokens(i) for i in p_ids if i in tok.added_tokens_decoder],
            "prompt_special": [tok.convert_ids_to_tokens(i) for i in p_ids if i in set(tok.all_special_ids)],
            "ids": ids, "pieces": tok.convert_ids_to_tokens(ids),
            "spans": [[s.start, s.end, s.text] for s in subtoken_spans(tok, ids)],
            "response_mask": b.response_mask[0].tolist(), "words": [w.text for w in words], "word_rewards": r.tolist(),
            **{m: policy_token_rewards(tr, tok, ids, m).round(4).tolist() for m in ("first", "spread", "split")}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="/work/models/qwen05")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.model)
    out = {"tokenizer": type(tok).__name__, "vocab": len(tok), "cases": [record(tok, *c) for c in CASES]}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    for c in out["cases"]:
        print(c["pieces"], c["spans"], c["spread"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
