"""Prompts: the plain format, the chat template, the hint marker, where an answer starts."""
import pytest

from claw_lib.prompts import HINT_MARKER, append_hint, build_prompt, teacher_prompt


def test_teacher_prompt_with_and_without_chat_template(tmp_path):
    p = teacher_prompt("法国的首都是哪里？", "不对，法国的首都是巴黎。", "zh")
    assert p == "问：法国的首都是哪里？" + HINT_MARKER + "不对，法国的首都是巴黎。\n答："
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}]
    out = append_hint(msgs, "the hint")
    assert out[3]["content"] == "Q2" + HINT_MARKER + "the hint" and msgs[3]["content"] == "Q2"
    assert out[1]["content"] == "Q1"

    class Tok:
        chat_template = "x"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return "|".join(f"<{m['role']}>{m['content']}" for m in messages) + ("|<assistant>" if add_generation_prompt else "")

    text = teacher_prompt("", "the hint", tokenizer=Tok(), messages=msgs)
    assert text.endswith("<user>Q2" + HINT_MARKER + "the hint|<assistant>")
    # no user message: the last message of any role takes the hint (upstream's rule)
    assert append_hint([{"role": "system", "content": "x"}], "h") == [{"role": "system", "content": "x" + HINT_MARKER + "h"}]


def test_prompt_formats():
    p = build_prompt("法国的首都是哪里？", "zh", "不对，法国的首都是巴黎。")
    assert p == "问：法国的首都是哪里？" + HINT_MARKER + "不对，法国的首都是巴黎。\n答："
    assert build_prompt("What is the capital of France?", "en") == "Q: What is the capital of France?\nA:"
    assert "（用户纠正：" in build_prompt("q", "zh", "h", inline=True)
