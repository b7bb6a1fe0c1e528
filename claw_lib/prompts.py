"""Prompts: what the policy (the student) sees, what the hinted teacher sees, and where an answer
starts (notebooks 05a and 06).

One place for three rules that every stage must apply the same way:

* **the hint marker** -- OpenClaw-RL appends a hint to the last user message as
  ``"\\n\\n[user's hint / instruction]\\n" + hint`` (:data:`HINT_MARKER`, :func:`append_hint`);
* **the prompt format** -- with a tokenizer that has a chat template, the user message goes through
  it (a plain form other than the kit's is kept inside the user turn: :func:`user_message`); otherwise
  the kit's plain format ``"问：...\\n答："`` / ``"Q: ...\\nA:"`` (:func:`build_prompt`);
* **the answer's first character** -- after the plain English prompt ``"A:"`` an answer starts with a
  space; after a Chinese prompt or a chat template it does not (:func:`response_text`). Scoring an
  answer without that space gives every log-prob of the first token a different context.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from .text.corrections import guess_lang

__all__ = ["HINT_MARKER", "append_hint", "build_prompt", "teacher_prompt", "response_text", "has_chat_template",
           "message_text", "template_messages", "PROMPT_FORMS", "TRAINED_FORMS", "HELD_OUT_FORMS", "parse_prompt",
           "CHAT_MARKERS", "user_message", "TEMPLATE_FORMS"]

#: OpenClaw-RL appends hints to the last user message as "\n\n[user's hint / instruction]\n" + hint.
HINT_MARKER = "\n\n[user's hint / instruction]\n"


def has_chat_template(tokenizer) -> bool:
    """True when ``tokenizer`` formats prompts with a chat template (a real instruct model)."""
    return tokenizer is not None and bool(getattr(tokenizer, "chat_template", None))


def message_text(content) -> str:
    """A message's content as text: a string as it is; a list of parts -> the "text" of its text parts
    joined by single spaces (images and other parts dropped); None -> ""."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def append_hint(messages: List[dict], hint: str) -> List[dict]:
    """A copy of chat ``messages`` with ``hint`` appended to the last user message (OpenClaw-RL's rule).

    The target is the last message whose role is "user", or the last message of any role when there
    is none; its content becomes text (:func:`message_text`) and then
    ``(text + HINT_MARKER + hint.strip()).strip()``. An empty conversation becomes one user message
    holding the marker (without its leading blank line) and the hint. Other messages are unchanged.
    """
    out = [dict(m) for m in messages]
    if not out:
        return [{"role": "user", "content": HINT_MARKER.lstrip("\n") + hint}]
    target = next((m for m in reversed(out) if m.get("role") == "user"), out[-1])
    target["content"] = (message_text(target.get("content")) + HINT_MARKER + hint.strip()).strip()
    return out


def template_messages(messages: List[dict]) -> List[dict]:
    """Messages as a chat template expects them: role "developer" becomes "system", content becomes
    text (:func:`message_text`). Applied after :func:`append_hint`, as upstream does."""
    return [{**m, "role": "system" if m.get("role") == "developer" else m.get("role"),
             "content": message_text(m.get("content"))} for m in messages]


#: Surface forms of a single-turn prompt without a tokenizer's chat template: form -> (zh, en) text
#: around the user's message {q}, ending where the answer starts. "kit" is what every stage of the kit
#: uses; the tiny GPT is pre-trained on all of TRAINED_FORMS, and HELD_OUT_FORMS never appear in its
#: corpus: they measure whether it understands a wrapper it has not seen (notebook 05a).
PROMPT_FORMS = {
    "kit": ("问：{q}\n答：", "Q: {q}\nA:"),
    "bare": ("{q}\n", "{q}\n"),
    "inline": ("问：{q}答：", "Q: {q} A:"),
    "chat": ("<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n",) * 2,
    "chat_system": ("<|im_start|>system\n你是一个乐于助人的助手。<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n"
                    "<|im_start|>assistant\n",
                    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n"
                    "<|im_start|>assistant\n"),
    "roles": ("用户：{q}\n助手：", "User: {q}\nAssistant:"),
    "qa_words": ("问题：{q}\n回答：", "Question: {q}\nAnswer:"),
    "human_ai": ("人类：{q}\n机器人：", "Human: {q}\nAI:"),
}
TRAINED_FORMS = ("kit", "bare", "inline", "chat", "chat_system", "roles")
HELD_OUT_FORMS = ("qa_words", "human_ai")
#: the chat forms' markers (special tokens of the tiny GPT's tokenizer)
CHAT_MARKERS = ("<|im_start|>", "<|im_end|>")
#: forms that, with a tokenizer's chat template, mean "the bare question in the user turn": the kit's default
#: and the chat forms (the template is the model's own chat format)
TEMPLATE_FORMS = ("kit", "chat", "chat_system")


def user_message(question: str, lang: str, form: str = "kit") -> str:
    """What the user turn of a chat template holds for ``question`` asked in ``form``: the bare question for
    :data:`TEMPLATE_FORMS`, otherwise the form's text around it, without the trailing whitespace ("inline":
    "问：法国的首都是哪里？答："), so a chosen form is never silently dropped for a chat model."""
    if form not in PROMPT_FORMS:
        raise ValueError(f"prompt form must be one of {sorted(PROMPT_FORMS)}, got {form!r}")
    if form in TEMPLATE_FORMS:
        return question
    return PROMPT_FORMS[form][0 if lang == "zh" else 1].replace("{q}", question).strip()


def build_prompt(question: str, lang: str, hint: Optional[str] = None, inline: bool = False,
                 tokenizer=None, form: str = "kit") -> str:
    """The prompt the policy sees (``hint=None``) or the teacher sees (with a hint).

    The hint is appended to the user message with :func:`append_hint`; ``inline=True`` writes it as
    a natural parenthetical correction instead (a pre-training variant). With a ``tokenizer`` that
    has a chat template the user message (:func:`user_message`: the bare question for the kit's form and
    the chat forms, else the form's text) goes through it; otherwise ``form`` (:data:`PROMPT_FORMS`),
    by default the kit's plain format "问：...\n答：" / "Q: ...\nA:".
    """
    chat = has_chat_template(tokenizer)
    messages = [{"role": "user", "content": user_message(question, lang, form) if chat else question}]
    if hint and inline:
        messages[0]["content"] += f"（用户纠正：{hint}）" if lang == "zh" else f" (User correction: {hint})"
    elif hint:
        messages = append_hint(messages, hint)
    if chat:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if form not in PROMPT_FORMS:
        raise ValueError(f"prompt form must be one of {sorted(PROMPT_FORMS)}, got {form!r}")
    return PROMPT_FORMS[form][0 if lang == "zh" else 1].replace("{q}", messages[0]["content"])


def parse_prompt(text: str) -> Optional[Tuple[str, str, str]]:
    """Recognise a prompt someone typed in one of :data:`PROMPT_FORMS` (the bare form aside):
    (form, lang, question) or None. "问：法国的首都是哪里？答：" -> ("inline", "zh", "法国的首都是哪里？")."""
    t = text.strip()
    for form, pair in sorted(PROMPT_FORMS.items(), key=lambda kv: -len(kv[1][0])):
        if form == "bare":
            continue
        for lang, tmpl in zip(("zh", "en"), pair):
            head, tail = tmpl.strip().split("{q}")
            if t.startswith(head) and t.endswith(tail) and len(t) > len(head) + len(tail):
                q = t[len(head):len(t) - len(tail)].strip()
                return form, (guess_lang(q) if pair[0] == pair[1] else lang), q
    return None


def teacher_prompt(question: str, hint: str, lang: str = "zh", tokenizer=None,
                   messages: Optional[List[dict]] = None, form: str = "kit") -> str:
    """The teacher's prompt text: the student's prompt with the hint appended to the last user
    message. With ``messages`` (a whole conversation) the tokenizer's chat template formats them;
    otherwise :func:`build_prompt` of the single ``question`` in ``form``."""
    if messages is not None:
        if not has_chat_template(tokenizer):
            raise ValueError("messages need a tokenizer with a chat template")
        return tokenizer.apply_chat_template(template_messages(append_hint(messages, hint)), tokenize=False,
                                             add_generation_prompt=True)
    return build_prompt(question, lang, hint, tokenizer=tokenizer, form=form)


def response_text(answer: str, lang: str, tokenizer=None, prompt: Optional[str] = None) -> str:
    """The continuation of a prompt that states ``answer``. An English answer starts with a space
    when the prompt ends with a visible character ("A:", "?"), not after a newline (a chat template,
    the bare form); a Chinese answer never does, nor one that already starts with whitespace or is
    empty. Without ``prompt``: the kit's form, or a chat template when ``tokenizer`` has one."""
    if lang == "zh" or not answer or answer[0].isspace():
        return answer
    if prompt is None:
        ends_in_space = has_chat_template(tokenizer)
    else:
        ends_in_space = not prompt or prompt[-1].isspace()
    return answer if ends_in_space else " " + answer
