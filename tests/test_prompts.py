"""Prompts: the plain format, the chat template, the hint marker, where an answer starts."""

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


def test_every_form_holds_the_question_and_the_hint():
    from claw_lib.prompts import HELD_OUT_FORMS, PROMPT_FORMS, TRAINED_FORMS, parse_prompt

    assert set(TRAINED_FORMS) | set(HELD_OUT_FORMS) == set(PROMPT_FORMS) and not set(TRAINED_FORMS) & set(HELD_OUT_FORMS)
    for form in PROMPT_FORMS:
        for lang, q in (("zh", "法国的首都是哪里？"), ("en", "What is the capital of France?")):
            p = build_prompt(q, lang, "Paris.", form=form)
            assert q + HINT_MARKER + "Paris." in p
            if form != "bare":  # a prompt typed in a known form is recognised, question and language included
                assert parse_prompt(build_prompt(q, lang, form=form)) == (form, lang, q)
    assert parse_prompt("问：法国的首都是哪里？答：") == ("inline", "zh", "法国的首都是哪里？")
    assert parse_prompt("just a question") is None


def test_where_an_answer_starts():
    from claw_lib.prompts import response_text

    for form, space in (("kit", True), ("inline", True), ("qa_words", True), ("bare", False), ("chat", False)):
        p = build_prompt("What is the capital of France?", "en", form=form)
        assert response_text("Paris.", "en", prompt=p) == (" Paris." if space else "Paris."), form
        assert response_text("巴黎。", "zh", prompt=build_prompt("法国的首都是哪里？", "zh", form=form)) == "巴黎。"
    assert response_text("Paris.", "en") == " Paris." and response_text("", "en") == "" and response_text(" x", "en") == " x"


def test_a_chosen_form_is_kept_inside_a_chat_template():
    """With a chat template the kit's form and the chat forms put the bare question in the user turn; any other
    form's text goes inside it (the review found "问：…答：" silently dropped), the hint after it."""
    from claw_lib.prompts import user_message

    class Tok:
        chat_template = "x"

        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    q = "法国的首都是哪里？"
    for form in ("kit", "chat", "chat_system"):
        assert build_prompt(q, "zh", tokenizer=Tok(), form=form) == f"<user>{q}<assistant>"
    assert build_prompt(q, "zh", tokenizer=Tok(), form="inline") == "<user>问：法国的首都是哪里？答：<assistant>"
    assert build_prompt("What?", "en", tokenizer=Tok(), form="roles") == "<user>User: What?\nAssistant:<assistant>"
    assert teacher_prompt(q, "巴黎。", "zh", tokenizer=Tok(), form="inline") == \
        "<user>问：法国的首都是哪里？答：" + HINT_MARKER + "巴黎。<assistant>"
    assert user_message("q", "en", "bare") == "q"
