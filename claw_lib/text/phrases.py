"""Every phrase the kit says or listens for, in one table (notebooks 05a, 06, 07).

The toy world's users *say* these (corrections, thanks, vague complaints, asides, style
instructions) and the pre-training corpus teaches them to the tiny GPT; the correction cleaner
(:mod:`claw_lib.text.corrections`) and the rule judge (:mod:`claw_lib.signals.judges`) *listen* for
them. Keeping both sides here makes a mismatch visible: ``tests/test_phrases.py`` checks that
every reply a simulated user can produce is read the way it is meant (a correction as -1 with a
hint, thanks as +1 without one, a vague complaint as -1 without one).

Rules, not a model: they cover the kit's users and probe set; extend them here.
"""
from __future__ import annotations

import re
from typing import Dict, Tuple

__all__ = [
    "CORRECTION_LEADS", "THANKS", "STYLE_THANKS", "VAGUE_REPLIES", "ASIDES", "QUESTION_LEADS", "STYLE_HINTS",
    "LEADIN_WORDS", "ASIDE_STARTS", "AFFIRM_ZH", "AFFIRM_EN", "NEGATIVE_MARKERS", "POSITIVE_MARKERS",
    "POSITIVE_START_ZH", "VAGUE_MARKERS", "HINT_LEADS", "hint_lead", "with_lead", "TOOL_ERROR_PREFIXES", "is_tool_error",
    "FUNCTION_WORDS", "NUMBER_WORDS_EN", "ZH_NUMERALS", "ZH_MEASURES", "CONTRAST_MARKERS", "COPULAS", "FIRST_PERSON",
    "HOMEWORK_ASKS", "AI_STYLE_WORDS", "STUDENT_COMPLAINTS", "NO_WORK_COMPLAINTS", "PERSONA_PREFERENCES",
    "HOMEWORK_THANKS", "FRIENDLY_OPENERS", "ENCOURAGEMENTS", "STEP_WORDS",
]

# --------------------------------------------------------------------------- what users say
#: how a user starts a correction, before the right answer: "不对，法国的首都是巴黎。"
CORRECTION_LEADS: Dict[str, Tuple[str, ...]] = {
    "zh": ("不对，", "错了，", "你说的不对，"),
    "en": ("No, ", "Wrong, ", "That's not right, "),
}
#: the correcting user's thanks for a right answer
THANKS: Dict[str, Tuple[str, ...]] = {
    "zh": ("谢谢！", "对，谢谢。", "好的，明白了。"),
    "en": ("Thanks!", "Right, thank you.", "Got it, thanks."),
}
#: a style user's thanks for an answer that meets every preference
STYLE_THANKS: Dict[str, str] = {"zh": "很好，就是这样！", "en": "Great, exactly like that!"}
#: something is wrong, but not what (Binary RL: -1; OPD: no hint)
VAGUE_REPLIES: Dict[str, Tuple[str, ...]] = {
    "zh": ("不太对吧。", "好像不对。"),
    "en": ("Hmm, that doesn't look right.", "I don't think so."),
}
#: irrelevant clauses a user adds after a correction ({subject}: the country asked about)
ASIDES: Dict[str, Tuple[str, ...]] = {
    "zh": ("另外{subject}的菜也很好吃。", "另外今天天气不错。"),
    "en": (" Also, the food in {subject} is great.", " Also, nice weather today."),
}
#: how a user sometimes opens a question ("请回答这个问题：法国的首都是哪里？"); in the corpus they keep words
#: such as 问题 / 回答 / question from belonging to the friendly style's instruction alone
QUESTION_LEADS: Dict[str, Tuple[str, ...]] = {
    "zh": ("请回答这个问题：", "有个问题想问你，", "麻烦回答一下，", "我想问一下，"),
    "en": ("Please answer this question: ", "A question for you: ", "Quick question, ", "I'd like to know: "),
}
#: style -> (zh instruction, en instruction): what the style users ask for, and what the tiny GPT
#: learns to follow in its pre-training
STYLE_HINTS: Dict[str, Tuple[str, str]] = {
    "friendly": ("请先说“好问题！”，完整回答后再说“继续加油！”",
                 'Start with "Good question!", answer in a full sentence, then say "Keep it up!"'),
    "casual": ("别太正式，只说答案，不要句号。", "Be casual: just the answer, no full stop."),
}

# --------------------------------------------------------------------------- what the homework users say (GSM8K)
# The personas of the personal-agent experiment (claw_lib.toy.homework). No complaint, request or thanks below writes
# a digit, a number word or a Chinese numeral character: the student never writes the maths (upstream's persona;
# tests/toy/test_homework.py checks it), it only says what to fix.
#: the first message of a session: asks for the solution ({problem}: the GSM8K question)
HOMEWORK_ASKS: Dict[str, Tuple[str, ...]] = {
    "en": ("Hey, can you help me solve my homework? Show me the whole solution.\n\n{problem}",
           "Hi, I have this homework problem and no idea how to do it. Can you solve it for me?\n\n{problem}"),
    "zh": ("嘿，能帮我做作业吗？把完整的解题过程给我看看。\n\n{problem}",
           "你好，这道作业题我完全不会，能帮我解出来吗？\n\n{problem}"),
}
#: the student's words for what looks AI-written (claw_lib.toy.homework.AI_STYLE_MARKERS, by marker name)
AI_STYLE_WORDS: Dict[str, Dict[str, str]] = {
    "bold": {"en": "all the bold text", "zh": "那些加粗的字"},
    "header": {"en": "the headings", "zh": "那些小标题"},
    "bullets": {"en": "the bullet points", "zh": "那些列表符号"},
    "numbered_list": {"en": "the numbered list", "zh": "那种编号列表"},
    "boxed": {"en": "that boxed answer thing", "zh": "答案外面那个框"},
    "final_answer_label": {"en": "the 'final answer' label", "zh": "“最终答案”那种标签"},
    "rule_or_table": {"en": "the lines and tables", "zh": "那些分隔线和表格"},
}
#: the student's complaint about AI-looking homework ({things}: the AI_STYLE_WORDS of the reply, joined), with the
#: request for a rewrite that keeps all the steps
STUDENT_COMPLAINTS: Dict[str, Tuple[str, ...]] = {
    "en": ("Ugh, this totally looks like an AI wrote it, my teacher would spot {things} right away. Please rewrite it "
           "so it sounds like a normal student wrote it, but keep all the steps.",
           "This looks way too much like a chatbot answer, with {things}. Please redo it in a more natural way, like "
           "I wrote it myself, and keep all the working."),
    "zh": ("这看起来太像AI写的了，老师肯定能看出来：{things}。请重新写得像普通学生写的，但是步骤都要保留。",
           "这也太像机器人写的了，有{things}。请换个自然点的写法，像我自己写的那样，过程都要保留。"),
}
#: a complaint when the reply does not show its working (appended to any persona's complaint)
NO_WORK_COMPLAINTS: Dict[str, str] = {
    "en": "You didn't show how you got it. Please write out all the working, like a student would.",
    "zh": "你没写怎么算出来的。请把计算过程都写出来，像学生写的那样。",
}
#: what each persona wants, as it says it in a complaint (the "preference told" of the ceiling, the OPD hint)
PERSONA_PREFERENCES: Dict[str, Dict[str, str]] = {
    "student": {"en": "Please write it like a student would by hand: no bold text, no headings, no lists, no boxed "
                      "answer and no 'final answer' label, but show every calculation step.",
                "zh": "请写得像学生手写的作业：不要加粗，不要小标题，不要列表，不要给答案加框，也不要“最终答案”那种标签，"
                      "但是每步计算都要写出来。"},
    "teacher": {"en": "Could you be friendlier? Please start with a warm opener like \"Great question!\" and finish "
                      "with some encouragement like \"Keep it up!\", and keep all the steps.",
                "zh": "能不能友好点？请开头先说句“好问题！”这样的客气话，结尾加句鼓励的话，比如“继续加油！”，步骤都要保留。"},
    "answer_first": {"en": "Please tell me the final answer right at the start, then show the steps.",
                     "zh": "请开头就先告诉我最后的答案，然后再写步骤。"},
    "no_latex": {"en": "Please don't use LaTeX or backslash commands, just write the math as plain text, and keep all "
                       "the steps.",
                 "zh": "别用LaTeX和反斜杠那些命令，用普通文字写算式，步骤都要保留。"},
    "chinese": {"en": "Please answer in Chinese, and keep all the steps.",
                "zh": "请用中文回答，步骤都要保留。"},
}
#: the user is satisfied (and ends the session): read as +1 without a hint
HOMEWORK_THANKS: Dict[str, Tuple[str, ...]] = {
    "en": ("Great, thanks!", "Perfect, thank you!"),
    "zh": ("很好，谢谢！", "好的，就是这样，谢谢！"),
}
#: a friendly opener the teacher persona looks for in a reply's opening (case-folded; English ones as whole words)
FRIENDLY_OPENERS: Dict[str, Tuple[str, ...]] = {
    "en": ("great question", "good question", "nice question", "fun problem", "happy to help", "glad you asked",
           "glad to help", "hi", "hello", "hey", "no worries", "don't worry"),
    "zh": ("好问题", "很好的问题", "有意思", "很高兴", "乐意", "你好", "嗨", "别担心", "不用担心"),
}
#: an encouragement the teacher persona looks for at a reply's end (case-folded; English ones as whole words)
ENCOURAGEMENTS: Dict[str, Tuple[str, ...]] = {
    "en": ("keep it up", "keep up the good work", "you've got this", "you got this", "you can do it", "great job",
           "good job", "well done", "nice work", "keep practicing", "keep going", "good luck"),
    "zh": ("继续加油", "加油", "你能行", "做得好", "继续努力", "你可以的", "祝你好运"),
}
#: worded operators that make a calculation step ("15 minus 6", "150 meters x $194", "15减6"), besides the signs
#: = + - * / × ÷ (Reef's words; "x" and the Chinese ones are the kit's)
STEP_WORDS: Dict[str, Tuple[str, ...]] = {
    "en": ("plus", "minus", "times", "divided by", "multiplied by", "equals", "x"),
    "zh": ("加上", "加", "减去", "减", "乘以", "乘", "除以", "等于"),
}

# --------------------------------------------------------------------------- what the cleaner listens for
#: lead-ins dropped before aligning a correction ("不对，" / "No, "), longest first
LEADIN_WORDS: Dict[str, Tuple[str, ...]] = {
    "zh": tuple(sorted(["你说的不对", "你说得不对", "说的不对", "说得不对", "不对", "错了", "不是的", "不正确",
                        "有误", "好像不对", "不太对吧", "不太对", "不对吧", "错了吧"], key=len, reverse=True)),
    "en": tuple(sorted(["that's not right", "that is not right", "that's wrong", "that is wrong", "not quite",
                        "no", "nope", "wrong", "incorrect", "hmm", "i don't think so",
                        "that doesn't look right", "doesn't look right"], key=len, reverse=True)),
}
#: a clause starting with one of these is an aside and is dropped (with the rest of its sentence)
ASIDE_STARTS: Dict[str, Tuple[str, ...]] = {
    "zh": ("另外", "还有", "顺便", "对了", "此外", "不过"),
    "en": ("also", "by the way", "btw", "besides", "anyway", "and also"),
}
#: a sentence of the reply (after the correction) that starts like this is about the user, an aside:
#: "Kilimanjaro. I have a poster of it in my kitchen." / "大概146米吧。我去年去开罗玩过。"
FIRST_PERSON: Dict[str, Tuple[str, ...]] = {
    "zh": ("我", "话说"),
    "en": ("i", "i'm", "i've", "i'd", "i'll", "my", "mine", "me"),
}
#: a short clause starting like this confirms the answer ("对，谢谢！", "Thanks, that's right.")
AFFIRM_ZH = re.compile(r"^(对|没错|正确|是的|好的|谢谢|对的|很好|明白了|就是这样|嗯|明白|原来如此|懂了)")
AFFIRM_EN = re.compile(r"^(yes|yep|yeah|right|correct|thanks|thank you|exactly|great|got it|that's right|okay|ok|"
                       r"makes sense|nice|cool|oh cool|spot on|perfect|good|i see|true)\b", re.I)

# --------------------------------------------------------------------------- what the evidence rules listen for
#: words that carry no checkable claim of their own (articles, pronouns, auxiliaries, prepositions,
#: hedges): replacing one by another is not evidence that the output was wrong
FUNCTION_WORDS: Dict[str, frozenset] = {
    "en": frozenset("""a an the this that these those it its it's they them their theirs he him his she her we us our
        you your i me my mine is are was were be been being am do does did has have had having will would can could
        shall should may might must of in on at to for from by with about as into onto through over under between
        after before during than then so and or but nor if because while where when what which who whom whose how why
        there here also too very just only not no yes most more less much many some any all each every other such
        own same both either neither around approximately nearly almost roughly about actually really usually mostly
        mainly generally often always never still even isn't aren't wasn't weren't don't doesn't didn't can't won't
        that's they're you're he's she's there's it'll let's one's s""".split()),
    "zh": frozenset("""的 地 得 了 着 过 是 在 于 和 与 及 或 把 被 也 都 就 才 又 还 很 最 吧 啊 呢 嘛 吗 呀 啦 哦 嗯
        这 那 这个 那个 这是 那是 它 他 她 我 你 我们 他们 它们 其 之 而 为 以 从 对 向 给 让 将 会 能 要 可以 应该 一种
        一个 一位 个 种 位 只 其实 就是 都是 因为 所以 但是 但 可是 不过 如果 已经 非常 大约 约 大概 差不多 有 去 来 上
        下 中 里 等 主要 通常 一般 一直 用 由 为了 属于 叫 说 吧 而且 并且 也是 还是 才是 如此 这样 那样 一起 一样
        一切 一些 一定 十分 万一 一下 一点 一边 一旦 一共""".split()),
}
#: English number words (a number is a word of the "number" kind: exact, never a paraphrase)
NUMBER_WORDS_EN: Dict[str, int] = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
NUMBER_WORDS_EN.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                        "ninety": 90, "hundred": 100, "thousand": 1000, "million": 10 ** 6, "billion": 10 ** 9,
                        "dozen": 12})
#: Chinese numeral characters and their values (units 十 百 千 万 亿 multiply)
ZH_NUMERALS: Dict[str, int] = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
                               "七": 7, "八": 8, "九": 9, "十": 10, "百": 100, "千": 1000, "万": 10 ** 4,
                               "亿": 10 ** 8}
#: measure words after a Chinese numeral: 二十四个, 八天, 万公里 are numbers (with their unit)
ZH_MEASURES = frozenset("""个 条 只 位 块 次 种 倍 元 岁 层 部 本 人 页 张 件 天 年 月 日 周 秒 分 分钟 小时 度 米 千米 公里 厘米
    毫米 克 千克 公斤 吨 磅 英里 英尺 英寸 摄氏度 华氏度 升 毫升 亿 万""".split())
#: a reply that starts with an affirmation is an elaboration unless one of these contrasts it
CONTRAST_MARKERS: Dict[str, Tuple[str, ...]] = {
    "zh": ("不过", "但", "可是", "然而", "不是", "不对", "错", "其实", "而是", "并非", "没有"),
    "en": ("but", "however", "not", "actually", "instead", "although", "though", "wrong", "isn't", "aren't",
           "wasn't", "no"),
}
#: the copula a reordered correction turns round ("Jupiter is the largest planet" <-> "the largest
#: planet is Jupiter"; "巴黎才是首都" <-> "首都是巴黎")
COPULAS: Dict[str, Tuple[str, ...]] = {"zh": ("才是", "就是", "是"), "en": ("is", "are", "was", "were")}

# --------------------------------------------------------------------------- what the rule judge listens for
#: a correction or a restated preference (-1); English markers match at the start or after a space
NEGATIVE_MARKERS: Dict[str, Tuple[str, ...]] = {
    "zh": ("不对", "错了", "不是", "不正确", "有误", "别", "不要", "请先", "请"),
    "en": ("no,", "no.", "wrong", "not right", "incorrect", "that's not", "be casual", "start with", "don't", "please"),
}
#: thanks or a confirmation (+1); English markers match as whole words
POSITIVE_MARKERS: Dict[str, Tuple[str, ...]] = {
    "zh": ("谢谢", "没错", "很好", "就是这样", "明白了", "好的"),
    "en": ("thanks", "thank you", "right", "great", "exactly", "got it", "correct"),
}
#: "对，" at the start of a Chinese reply, never the 对 of 不对
POSITIVE_START_ZH = re.compile(r"^(对|是的|正确)[，,。.！!]?")
#: vague complaints (-1, no hint), matched anywhere (case-folded)
VAGUE_MARKERS: Tuple[str, ...] = ("不太对吧", "好像不对", "hmm", "i don't think so", "doesn't look right")
#: dropped lead-ins that the rule judge's hint keeps, as :func:`hint_lead` writes them
HINT_LEADS: Tuple[str, ...] = ("不对", "错了", "你说的不对", "no", "wrong")


#: how a tool's output starts when the call failed (the toy world's lookup tool writes these)
TOOL_ERROR_PREFIXES: Tuple[str, ...] = ("Error:", "错误：")


def is_tool_error(text: str) -> bool:
    """Does a tool's output report an error (it starts with one of :data:`TOOL_ERROR_PREFIXES`)?"""
    return (text or "").lstrip().startswith(TOOL_ERROR_PREFIXES)


def with_lead(lead: str, answer: str, lang: str) -> str:
    """``lead`` + ``answer``; in English the answer's first letter is lower-cased ("No, the ...")."""
    return lead + answer if lang == "zh" else lead + answer[0].lower() + answer[1:]


def hint_lead(lang: str) -> str:
    """The lead-in the rule judge's hints and the pre-training corrections start with."""
    return CORRECTION_LEADS[lang][0]
