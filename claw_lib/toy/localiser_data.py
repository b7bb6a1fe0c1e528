"""Training pairs for the learned localiser (:mod:`claw_lib.signals.localiser`), labelled by construction.

Every pair is a probe-set row (``id``, ``lang``, ``kind``, ``style``, ``question``, ``output``, ``correction``,
``rejected``: the character spans of the wrong words the correction addresses, ``unaddressed``: a wrong claim it
leaves alone). An output is one to five true sentences from one source (the kit's own fact bank :data:`BANK`, the
toy fact world, the real-world facts of :mod:`claw_lib.toy.real_tasks`), and one or two of them carry a planted
error whose characters are known: a wrong value, a wrong date, a wrong unit, or two values swapped. The user's reply
is drawn from :data:`STYLES`: the probe sets' styles (restate, restate_one, quote_reject, value_only, reason, swap,
one_word, aside, confirm) and more (a question that corrects, a correction followed by an unrelated question, thanks
followed by an unrelated question, several claims at once), each with several paraphrases in Chinese and English.

Nothing here reads a probe set: the texts are the kit's own templates. Short generic sentences can coincide with a
probe row ("The capital of Italy is Rome."), so the trainer decontaminates (``exclude``: the probe sets' dev and test
texts, :func:`claw_lib.toy.localiser_fit.training_data`), and ``tests/toy/test_localiser_data.py`` checks that no
test-split output or correction of any probe set appears in what it trains on.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from .real_tasks import real_facts
from .world import FactWorld

__all__ = ["STYLES", "ERROR_KINDS", "BANK", "Statement", "training_pairs", "normalised"]

#: the reply styles :func:`training_pairs` draws (the probe sets' and more)
STYLES = ("restate", "restate_one", "quote_reject", "value_only", "reason", "swap", "one_word", "aside", "question",
          "then_question", "confirm", "confirm_question", "multi")
#: the planted errors
ERROR_KINDS = ("value", "date", "unit", "swap")
#: styles whose reply corrects nothing
NO_ERROR_STYLES = ("confirm", "confirm_question")


@dataclass(frozen=True)
class Statement:
    """One true sentence with a slot: ``text`` holds ``{v}`` where the value stands; ``truth`` the value,
    ``wrong`` plausible wrong values; kind "value" | "date" | "unit" (the slot is a unit word); ``attr``: what the
    value is ("首都", "the capital": the reason and question templates name it)."""

    lang: str
    text: str
    truth: str
    wrong: Tuple[str, ...]
    kind: str = "value"
    attr: str = ""
    ask: str = ""
    """the question this sentence answers ("" : none of its own)"""

    def say(self, value: Optional[str] = None) -> Tuple[str, Tuple[int, int]]:
        """The sentence with ``value`` (default the truth) and the value's character span in it."""
        v = self.truth if value is None else value
        s = self.text.index("{v}")
        return self.text.replace("{v}", v), (s, s + len(v))


def _b(kind, zh, zt, zw, en, et, ew, za="", ea=""):
    return (Statement("zh", zh, zt, tuple(zw), kind, za), Statement("en", en, et, tuple(ew), kind, ea))


#: the kit's own fact bank: topics of two to five bilingual statements (written for this generator)
BANK: Dict[str, Tuple[str, str, List[Tuple[Statement, Statement]]]] = {
    "danube": ("多瑙河流经哪些地方？", "What do you know about the Danube?", [
        _b("value", "多瑙河发源于{v}的黑林山。", "德国", ["瑞士", "奥地利"], "The Danube rises in the Black Forest of {v}.",
           "Germany", ["Switzerland", "Austria"], "发源地", "the source"),
        _b("value", "它最终注入{v}。", "黑海", ["地中海", "北海"], "It finally flows into the {v}.", "Black Sea",
           ["Mediterranean", "North Sea"], "入海口", "the mouth"),
        _b("unit", "多瑙河全长约2850{v}。", "公里", ["英里", "米"], "The river is about 2,850 {v} long.", "kilometres",
           ["miles", "metres"], "长度单位", "the unit"),
        _b("value", "维也纳和{v}都在多瑙河畔。", "布达佩斯", ["布拉格", "华沙"], "Vienna and {v} both lie on its banks.",
           "Budapest", ["Prague", "Warsaw"], "沿岸城市", "the city")]),
    "everest": ("珠穆朗玛峰有多高？", "How high is Mount Everest?", [
        _b("value", "珠穆朗玛峰海拔约{v}米。", "8849", ["8611", "7556", "9120"], "Mount Everest stands about {v} metres high.",
           "8,849", ["8,611", "7,556", "9,120"], "海拔", "the height"),
        _b("value", "它位于中国和{v}的边境上。", "尼泊尔", ["印度", "不丹"], "It sits on the border of China and {v}.",
           "Nepal", ["India", "Bhutan"], "邻国", "the neighbour"),
        _b("date", "人类在{v}年首次登顶。", "1953", ["1963", "1938", "1975"], "Climbers first reached the top in {v}.",
           "1953", ["1963", "1938", "1975"], "年份", "the year"),
        _b("value", "登顶的两人是希拉里和{v}。", "丹增·诺尔盖", ["乔治·马洛里"],
           "The first two on the summit were Hillary and {v}.", "Tenzing Norgay", ["George Mallory"], "登山者",
           "the climber")]),
    "water": ("水有哪些基本性质？", "What are some basic facts about water?", [
        _b("value", "在标准大气压下，纯水在{v}摄氏度沸腾。", "100", ["90", "120", "80"],
           "At sea level pure water boils at {v} degrees Celsius.", "100", ["90", "120", "80"], "沸点", "the boiling point"),
        _b("value", "水在{v}摄氏度时结冰。", "0", ["4", "-10"], "It freezes at {v} degrees Celsius.", "0", ["4", "-10"],
           "冰点", "the freezing point"),
        _b("value", "水分子由两个氢原子和一个{v}原子组成。", "氧", ["氮", "碳"],
           "A water molecule has two hydrogen atoms and one {v} atom.", "oxygen", ["nitrogen", "carbon"], "元素",
           "the element"),
        _b("value", "水的密度在{v}摄氏度时最大。", "4", ["0", "10"], "Water is densest at {v} degrees Celsius.", "4",
           ["0", "10"], "温度", "the temperature")]),
    "piano": ("钢琴是谁发明的？", "Who invented the piano?", [
        _b("value", "钢琴由意大利人{v}发明。", "克里斯托福里", ["斯特拉迪瓦里", "维瓦尔第"],
           "The piano was invented by the Italian {v}.", "Bartolomeo Cristofori", ["Antonio Stradivari", "Antonio Vivaldi"],
           "发明者", "the inventor"),
        _b("date", "它大约出现在{v}年前后。", "1700", ["1800", "1600", "1750"], "It appeared around the year {v}.", "1700",
           ["1800", "1600", "1750"], "年份", "the year"),
        _b("value", "现代钢琴一般有{v}个琴键。", "88", ["76", "96", "64"], "A modern piano usually has {v} keys.", "88",
           ["76", "96", "64"], "琴键数", "the number of keys"),
        _b("value", "钢琴属于{v}乐器。", "键盘", ["管", "打击"], "It belongs to the {v} instruments.", "keyboard",
           ["wind", "string"], "类别", "the family")]),
    "sun": ("太阳离我们有多远？", "How far away is the Sun?", [
        _b("unit", "太阳到地球的平均距离约为1.5亿{v}。", "公里", ["英里", "米"],
           "The Sun is on average about 150 million {v} from Earth.", "kilometres", ["miles", "metres"], "单位", "the unit"),
        _b("value", "阳光大约需要{v}分钟才能到达地球。", "8", ["3", "20", "45"],
           "Sunlight takes about {v} minutes to reach us.", "8", ["3", "20", "45"], "时间", "the time"),
        _b("value", "太阳主要由氢和{v}组成。", "氦", ["氧", "铁"], "The Sun is made mostly of hydrogen and {v}.", "helium",
           ["oxygen", "iron"], "成分", "the component"),
        _b("value", "太阳是一颗{v}。", "恒星", ["行星", "卫星"], "The Sun is a {v}.", "star", ["planet", "moon"], "类型",
           "the type")]),
    "shakespeare": ("莎士比亚是谁？", "Who was Shakespeare?", [
        _b("value", "莎士比亚是{v}剧作家。", "英国", ["法国", "德国"], "Shakespeare was an {v} playwright.", "English",
           ["French", "German"], "国籍", "the nationality"),
        _b("date", "他出生于{v}年。", "1564", ["1546", "1616", "1665"], "He was born in {v}.", "1564",
           ["1546", "1616", "1665"], "出生年份", "the year of birth"),
        _b("value", "《哈姆雷特》是他的{v}作品。", "悲剧", ["喜剧", "史诗"], "Hamlet is one of his {v}.", "tragedies",
           ["comedies", "epics"], "体裁", "the genre"),
        _b("value", "他的故乡是斯特拉特福，位于{v}河畔。", "埃文", ["泰晤士", "塞纳"],
           "His home town, Stratford, lies on the River {v}.", "Avon", ["Thames", "Severn"], "河流", "the river")]),
    "marathon": ("马拉松有多长？", "How long is a marathon?", [
        _b("value", "马拉松的标准距离是{v}公里。", "42.195", ["40", "21.0975", "45"],
           "A marathon is {v} kilometres long.", "42.195", ["40", "21.0975", "45"], "距离", "the distance"),
        _b("unit", "半程马拉松约21{v}。", "公里", ["英里", "米"], "A half marathon is about 21 {v}.", "kilometres",
           ["miles", "metres"], "单位", "the unit"),
        _b("value", "这项运动源于古代{v}的传说。", "希腊", ["罗马", "埃及"], "The race goes back to a legend of ancient {v}.",
           "Greece", ["Rome", "Egypt"], "起源", "the origin"),
        _b("date", "第一届现代奥运会马拉松在{v}年举行。", "1896", ["1900", "1924", "1869"],
           "The first Olympic marathon was run in {v}.", "1896", ["1900", "1924", "1869"], "年份", "the year")]),
    "bees": ("蜜蜂是怎样生活的？", "How do honey bees live?", [
        _b("value", "一个蜂群通常只有一只{v}。", "蜂王", ["雄蜂", "工蜂"], "A colony usually has a single {v}.", "queen",
           ["drone", "worker"], "角色", "the role"),
        _b("value", "蜜蜂有{v}条腿。", "六", ["八", "四"], "A bee has {v} legs.", "six", ["eight", "four"], "腿的数量",
           "the number of legs"),
        _b("value", "工蜂都是{v}蜂。", "雌", ["雄"], "Worker bees are all {v}.", "female", ["male"], "性别", "the sex"),
        _b("value", "蜂巢的巢房是{v}边形的。", "六", ["五", "八"], "The cells of a comb have {v} sides.", "six",
           ["five", "eight"], "边数", "the number of sides")]),
    "internet": ("互联网是怎么来的？", "Where did the internet come from?", [
        _b("value", "互联网起源于美国的{v}。", "阿帕网", ["以太网", "万维网"], "The internet grew out of the American {v}.",
           "ARPANET", ["Ethernet", "Usenet"], "前身", "the forerunner"),
        _b("date", "万维网由伯纳斯-李在{v}年提出。", "1989", ["1979", "1995", "1969"],
           "Tim Berners-Lee proposed the World Wide Web in {v}.", "1989", ["1979", "1995", "1969"], "年份", "the year"),
        _b("value", "他当时在{v}工作。", "欧洲核子研究中心", ["麻省理工学院", "贝尔实验室"], "He was working at {v} then.",
           "CERN", ["MIT", "Bell Labs"], "机构", "the lab"),
        _b("value", "网页通常用{v}语言编写。", "HTML", ["SQL", "C++"], "Web pages are usually written in {v}.", "HTML",
           ["SQL", "C++"], "语言", "the language")]),
    "python": ("Python是什么样的语言？", "What kind of language is Python?", [
        _b("value", "Python由{v}创建。", "吉多·范罗苏姆", ["丹尼斯·里奇", "林纳斯·托瓦兹"], "Python was created by {v}.",
           "Guido van Rossum", ["Dennis Ritchie", "Linus Torvalds"], "作者", "the author"),
        _b("date", "它的第一个版本发布于{v}年。", "1991", ["1981", "2001", "1995"], "Its first version came out in {v}.",
           "1991", ["1981", "2001", "1995"], "年份", "the year"),
        _b("value", "Python的列表索引从{v}开始。", "0", ["1", "-1"], "List indices in Python start at {v}.", "0",
           ["1", "-1"], "起始值", "the first index"),
        _b("value", "在Python中，len函数返回对象的{v}。", "长度", ["类型", "地址"], "In Python, len returns the {v} of an object.",
           "length", ["type", "address"], "返回值", "the result")]),
    "heart": ("人的心脏是怎样工作的？", "How does the human heart work?", [
        _b("value", "人的心脏一共有{v}个腔室。", "四", ["三", "两"], "The human heart has {v} chambers.", "four",
           ["three", "two"], "腔室数", "the number of chambers"),
        _b("value", "动脉把血液从心脏{v}。", "运出", ["运回"], "Arteries carry blood {v} the heart.", "away from",
           ["back to"], "方向", "the direction"),
        _b("value", "成年人静息心率约为每分钟{v}次。", "70", ["30", "150", "120"],
           "An adult's resting heart rate is about {v} beats a minute.", "70", ["30", "150", "120"], "心率",
           "the heart rate"),
        _b("value", "血液中运输氧气的是{v}。", "红细胞", ["白细胞", "血小板"], "Oxygen in the blood is carried by {v}.",
           "red blood cells", ["white blood cells", "platelets"], "载体", "the carrier")]),
    "greatlakes": ("北美五大湖中哪个最大？", "Which of the Great Lakes is the largest?", [
        _b("value", "五大湖中面积最大的是{v}。", "苏必利尔湖", ["密歇根湖", "伊利湖"], "The largest of the Great Lakes is Lake {v}.",
           "Superior", ["Michigan", "Erie"], "最大的湖", "the largest"),
        _b("value", "只有{v}完全位于美国境内。", "密歇根湖", ["休伦湖", "安大略湖"], "Only Lake {v} lies wholly in the United States.",
           "Michigan", ["Huron", "Ontario"], "湖", "the lake"),
        _b("value", "尼亚加拉瀑布位于伊利湖和{v}之间。", "安大略湖", ["休伦湖", "苏必利尔湖"],
           "Niagara Falls lies between Lake Erie and Lake {v}.", "Ontario", ["Huron", "Superior"], "湖", "the lake"),
        _b("unit", "苏必利尔湖最深处约400{v}。", "米", ["英尺", "公里"], "Lake Superior is about 400 {v} deep at most.",
           "metres", ["feet", "kilometres"], "单位", "the unit")]),
    "chess": ("国际象棋有哪些基本规则？", "What are the basic rules of chess?", [
        _b("value", "棋盘有{v}个格子。", "64", ["81", "100", "49"], "The board has {v} squares.", "64", ["81", "100", "49"],
           "格子数", "the number of squares"),
        _b("value", "每方开局有{v}个兵。", "八", ["六", "十"], "Each side starts with {v} pawns.", "eight", ["six", "ten"],
           "兵的数量", "the number of pawns"),
        _b("value", "{v}方先走。", "白", ["黑"], "{v} always moves first.", "White", ["Black"], "先手", "the first mover"),
        _b("value", "马走{v}字形。", "日", ["田", "十"], "The knight moves in an {v} shape.", "L", ["X", "T"], "走法",
           "the move")]),
    "silk": ("丝绸之路是什么？", "What was the Silk Road?", [
        _b("value", "丝绸之路的东端起点是{v}。", "长安", ["洛阳", "南京"], "The Silk Road began in the east at {v}.",
           "Chang'an", ["Nanjing", "Kaifeng"], "起点", "the starting point"),
        _b("value", "张骞出使西域是在{v}朝。", "汉", ["唐", "宋"], "Zhang Qian travelled west under the {v} dynasty.", "Han",
           ["Tang", "Song"], "朝代", "the dynasty"),
        _b("value", "这条路线向西一直通到{v}。", "地中海", ["大西洋", "波罗的海"], "The routes reached west as far as the {v}.",
           "Mediterranean", ["Atlantic", "Baltic"], "终点", "the end"),
        _b("unit", "整条商路绵延约7000{v}。", "公里", ["英里", "米"], "The network stretched some 7,000 {v}.", "kilometres",
           ["miles", "metres"], "单位", "the unit")]),
    "light": ("光的速度是多少？", "How fast is light?", [
        _b("unit", "光在真空中的速度约为每秒30万{v}。", "公里", ["米", "英里"],
           "Light travels about 300,000 {v} per second in a vacuum.", "kilometres", ["metres", "miles"], "单位", "the unit"),
        _b("value", "光在水中比在真空中{v}。", "慢", ["快"], "Light is {v} in water than in a vacuum.", "slower", ["faster"],
           "快慢", "the speed"),
        _b("value", "白光经过棱镜会分成{v}种颜色。", "七", ["五", "三"], "A prism splits white light into {v} colours.",
           "seven", ["five", "three"], "颜色数", "the number of colours"),
        _b("value", "光速的符号通常写作{v}。", "c", ["v", "k"], "The speed of light is written {v}.", "c", ["v", "k"],
           "符号", "the symbol")]),
    "bamboo": ("熊猫吃什么？", "What do pandas eat?", [
        _b("value", "大熊猫主要吃{v}。", "竹子", ["树叶", "水果"], "Giant pandas eat mostly {v}.", "bamboo", ["leaves", "fruit"],
           "食物", "the food"),
        _b("value", "野生大熊猫生活在中国的{v}。", "四川", ["云南", "西藏"], "Wild pandas live in the Chinese province of {v}.",
           "Sichuan", ["Yunnan", "Tibet"], "省份", "the province"),
        _b("value", "它们每天要吃大约{v}公斤食物。", "12", ["3", "40"], "They eat about {v} kilograms of food a day.", "12",
           ["3", "40"], "数量", "the amount"),
        _b("value", "大熊猫属于{v}科。", "熊", ["猫", "浣熊"], "The giant panda belongs to the {v} family.", "bear",
           ["cat", "raccoon"], "科", "the family")]),
}


# --------------------------------------------------------------------------- sources
def _bank_topics(lang: str) -> List[Tuple[str, List[Statement]]]:
    """(question, statements) of every topic of :data:`BANK` in ``lang``."""
    k = 0 if lang == "zh" else 1
    return [(v[k], [replace(pair[k], ask=_ask(pair[k])) for pair in v[2]]) for v in BANK.values()]


def _ask(st: Statement) -> str:
    """The question a bank sentence answers: the sentence with its value asked for ("...约{v}米。" -> "...约多少米？")."""
    digit = st.truth.replace(",", "").replace(".", "").isdigit()
    if st.lang == "zh":
        return st.text.replace("{v}", "多少" if digit else "什么").rstrip("。") + "？"
    return st.text.replace("{v}", "how many" if digit else "what").rstrip(".") + "?"


def _real_statements(lang: str) -> List[Statement]:
    """The real-world facts (capitals, dates, units, arithmetic) as statements; wrong values: the fact's common wrong
    answers and other facts' truths of the same kind."""
    facts = [f for f in real_facts() if f.lang == lang]
    out = []
    for f in facts:
        if f.truth not in f.sentence:
            continue
        others = [g.truth for g in facts if g.kind == f.kind and g.truth != f.truth]
        kind = "date" if f.kind == "date" else "value"
        out.append(Statement(lang, f.sentence.replace(f.truth, "{v}", 1), f.truth, tuple(f.wrong) + tuple(others[:6]),
                             kind, "答案" if lang == "zh" else "the answer", f.question()))
    return out


def _world_statements(lang: str, rng: random.Random) -> List[Statement]:
    """The toy fact world's facts (invented countries) as statements; wrong values from its distractors."""
    world = FactWorld()
    out = []
    for f in world.facts("known", langs=(lang,)):
        text = f.answer()
        if text.count(f.truth) != 1:
            continue
        wrong = tuple(sorted({world.distractor(f, rng) for _ in range(4)}))
        out.append(Statement(lang, text.replace(f.truth, "{v}"), f.truth, wrong, "value",
                             {"capital": "首都", "colour": "颜色", "animal": "动物", "provinces": "省份数"}.get(
                                 f.relation, "") if lang == "zh" else f"the {f.relation}", f.question()))
    return out


def _sources(lang: str, rng: random.Random) -> Dict[str, List[Tuple[str, List[Statement]]]]:
    """Per source, its topics: (question, statements in order). A real-world or world fact is a topic of its own
    question; several of them make a longer output (a multi-part answer)."""
    qs = {f.sentence: f.question() for f in real_facts() if f.lang == lang}
    real = [(qs.get(s.text.replace("{v}", s.truth), ""), [s]) for s in _real_statements(lang)]
    world = FactWorld()
    wq = {f.answer(): f.question() for f in world.facts("known", langs=(lang,))}
    return {"bank": _bank_topics(lang), "real": real,
            "world": [(wq.get(s.text.replace("{v}", s.truth), ""), [s]) for s in _world_statements(lang, rng)]}


# --------------------------------------------------------------------------- the replies
_R = {
    "zh": {
        "lead": ("不对，", "错了，", "", "不是这样的，", "嗯，不太对，", "有个地方错了："),
        "restate": ("{L}{S}",),
        "quote_reject": ("{W}不对，是{T}。", "不是{W}，是{T}。", "你说的{W}错了，应该是{T}。", "{W}？不对吧，{T}才对。",
                         "{W}是错的，{A}是{T}。", "{W}这个说法有问题，实际上是{T}。"),
        "value_only": ("{A}是{T}。", "应该是{T}。", "是{T}才对。", "{T}才对。", "其实是{T}。", "{A}应该是{T}吧。",
                       "{V}没错，不过{A}是{T}。", "前面都对，{A}是{T}。", "{NT}。"),
        "one_word": ("{T}。", "{T}！", "{T}啦。", "是{T}。", "{T}"),
        "reason": ("{A}是{T}，{WHY}", "{WHY}{A}是{T}，不是{W}。", "应该是{T}，{WHY}", "{W}说不通，{WHY}{A}明明是{T}。",
                   "{V}是对的，但{A}应该是{T}，{WHY}"),
        "why": ("我刚查过资料。", "课本上写得很清楚。", "这个我很确定，老师讲过。", "百科上也是这么写的。", "因为{W}是另一回事。",
                "要知道，{X}", "{X}"),
        "swap": ("{W1}和{W2}说反了。", "你把{W1}和{W2}弄混了。", "{W1}和{W2}搞反了吧。", "两个弄反了：应该是{T1}和{T2}。",
                 "顺序反了，{W2}在前，{W1}在后。"),
        "aside": ("{C}{ASIDE}", "{ASIDE}不过{C}"),
        "asides": ("我上个月刚去过那里。", "我儿子最近也在学这个。", "今天天气真好。", "对了，我明天要出差。", "哈哈，我以前也记错过。",
                   "我上周跑了{N}公里。", "我家离这儿{N}公里。", "我{N}岁的时候就知道这个。", "我们班有{N}个人。", "{X}"),
        "question": ("不是{T}吗？", "难道不是{T}吗？", "{W}？我记得是{T}吧？", "确定是{W}吗？应该是{T}吧？", "{A}不是{T}吗？"),
        "then_question": ("{C}谢谢，顺便问下，{Q}？", "{C}另外，{Q}？", "{C}对了，{Q}？", "{C}那{QX}"),
        "questions": ("明天会下雨吗", "你能推荐一本书吗", "Python怎么读文件", "晚饭吃什么好", "这个周末有什么电影"),
        "confirm": ("对，谢谢！", "明白了，谢谢。", "好的，很清楚。", "说得好。", "没错。", "懂了，谢谢你的解释。",
                    "没错，而且{X}", "对，{X}", "是的。另外，{X}", "对，{V}没错。", "嗯，{V}，我也记得是这样。"),
        "confirm_question": ("谢谢！那{Q}？", "懂了。顺便问一下，{Q}？", "好的。{Q}？", "明白了，那{V}呢？", "谢谢！{V}也是这样吗？",
                             "对，那{A}呢？", "谢谢！那{QX}", "明白了。{QX}", "好的，懂了。顺便问下，{QX}"),
        "multi": ("{C1}还有，{C2}", "两处错了：{A1}是{T1}，{A2}是{T2}。", "{W1}应该是{T1}，{W2}应该是{T2}。",
                  "不是{W1}，是{T1}；也不是{W2}，是{T2}。"),
        "short": ("{T}才对。", "应该是{T}。", "是{T}，不是{W}。"),
    },
    "en": {
        "lead": ("No, ", "That's wrong. ", "", "Not quite. ", "Hmm, ", "Actually, "),
        "restate": ("{L}{S}",),
        "quote_reject": ("{W} is wrong, it's {T}.", "Not {W}, it's {T}.", "You said {W}, but it's {T}.",
                         "{W}? No, {T}.", "It isn't {W}. {A} is {T}.", "{W} can't be right; it's {T}."),
        "value_only": ("{A} is {T}.", "It should be {T}.", "It's {T}, actually.", "Actually {T}.", "{T} is right.",
                       "I think {A} is {T}.", "{V} is right, but {A} is {T}.", "The rest is fine, but {A} is {T}.",
                       "{NT}!"),
        "one_word": ("{T}.", "{T}!", "{T}, I believe.", "Just {T}.", "{T}"),
        "reason": ("{A} is {T}; {WHY}", "{WHY} {A} is {T}, not {W}.", "It should be {T}, {WHY}",
                   "{W} makes no sense: {WHY} {A} is {T}.", "{V} is right, but {A} should be {T}: {WHY}"),
        "why": ("I just looked it up.", "the textbook says so.", "my teacher told us that.", "every encyclopedia says so.",
                "{W} is something else.", "remember: {X}", "{X}"),
        "swap": ("You swapped {W1} and {W2}.", "You mixed up {W1} and {W2}.", "{W1} and {W2} are the wrong way round.",
                 "Those two are switched: it's {T1} and {T2}.", "You have {W1} and {W2} reversed."),
        "aside": ("{C} {ASIDE}", "{ASIDE} But {C}"),
        "asides": ("I was there last month.", "My son is learning this at school.", "Lovely weather today.",
                   "By the way, I'm travelling tomorrow.", "Ha, I used to get this wrong too.", "I ran {N} km last week.",
                   "My flat is {N} metres from the station.", "I learned this when I was {N}.",
                   "There are {N} people in my class.", "{X}"),
        "question": ("Isn't it {T}?", "Wasn't it {T}?", "{W}? I thought it was {T}?", "Are you sure about {W}? Isn't it {T}?",
                     "Isn't {A} {T}?"),
        "then_question": ("{C} Thanks. By the way, {Q}?", "{C} Also, {Q}?", "{C} Oh, and {Q}?", "{C} And {QX}"),
        "questions": ("will it rain tomorrow", "can you recommend a book", "how do I read a file in Python",
                      "what should I cook tonight", "what films are on this weekend"),
        "confirm": ("Right, thanks!", "Got it, thank you.", "Makes sense.", "Great answer.", "Correct.",
                    "Thanks, that is clear now.", "Right, and {X}", "Yes. Also, {X}", "Exactly. {X}", "Yes, {V} is right.",
                    "Right, {V}. I remembered that too."),
        "confirm_question": ("Thanks! And {Q}?", "Got it. By the way, {Q}?", "OK. {Q}?", "Got it, and what about {V}?",
                             "Thanks! Is {V} the same?", "Right. And what about {A}?", "Thanks! {QX}", "Cool. {QX}",
                             "Nice, thank you. By the way, {QX}"),
        "multi": ("{C1} Also, {C2}", "Two mistakes: {A1} is {T1}, and {A2} is {T2}.", "{W1} should be {T1} and {W2} should be {T2}.",
                  "Not {W1} but {T1}, and not {W2} but {T2}."),
        "short": ("It's {T}.", "{T} is right.", "It's {T}, not {W}."),
    },
}


@dataclass
class _Err:
    """A planted error: the statement's index in the output, the wrong value said, the truth, the statement."""

    k: int
    wrong: str
    truth: str
    st: Statement


def _fill(t: str, lang: str, rng: random.Random, **kw) -> str:
    """``t`` with its slots filled: {WHY}, {ASIDE}, {Q} drawn from the language's lists, {N} a number, the others
    from ``kw`` (W wrong value, T truth, A attribute, L lead-in, S true sentence, X a true sentence the output does
    not say, V a value the output says rightly)."""
    R = _R[lang]
    if "{WHY}" in t:
        t = t.replace("{WHY}", rng.choice(R["why"]))
    if "{ASIDE}" in t:
        t = t.replace("{ASIDE}", rng.choice(R["asides"]))
    if "{Q}" in t:
        t = t.replace("{Q}", rng.choice(R["questions"]))
    if "{N}" in t:
        t = t.replace("{N}", str(rng.choice((3, 5, 12, 20, 45, 100, 250, 1200))))
    for k, v in kw.items():
        t = t.replace("{" + k + "}", v)
    return t[0].upper() + t[1:] if lang == "en" and t else t


def _one(style: str, e: _Err, lang: str, rng: random.Random, ctx: Dict[str, str]) -> str:
    """The reply to one error in ``style``; ctx: the slots X and V (see :func:`_fill`)."""
    R = _R[lang]
    attr = e.st.attr or ("答案" if lang == "zh" else "the answer")
    lead, said = rng.choice(R["lead"]), e.st.say()[0]
    kw = {**ctx, "W": e.wrong, "T": e.truth, "A": attr, "L": lead, "S": _after_lead(said) if lead.endswith(", ") else said,
          "NT": _with_number(e.st, e.truth)}
    if style in ("aside", "then_question"):
        inner = _one(rng.choice(("value_only", "quote_reject", "restate", "one_word")), e, lang, rng, ctx)
        return _fill(rng.choice(R[style]), lang, rng, **{**ctx, "C": inner})
    return _fill(rng.choice(R[style]), lang, rng, **kw)


def _with_number(st: Statement, value: str) -> str:
    """``value`` with the number the sentence says right before it ("2,850 kilometres", "8849米"), or alone."""
    m = re.search(r"([\d.,]+(?:\s?(?:million|万|亿))?\s?)$", st.text[:st.text.index("{v}")])
    return (m.group(1) if m else "") + value


def _after_lead(sentence: str) -> str:
    """A sentence as it reads after a lead-in ("No, the capital ..."): an English article or pronoun lower-cased."""
    first = sentence.split(" ", 1)[0]
    return sentence[0].lower() + sentence[1:] if first in ("The", "There", "It", "A", "An", "In", "At", "He", "Its") \
        else sentence


def _reply(style: str, errs: List[_Err], lang: str, rng: random.Random, ctx: Dict[str, str]) -> Tuple[str, int]:
    """(the reply, how many of ``errs`` it addresses: the first ones)."""
    R = _R[lang]
    if style in NO_ERROR_STYLES:
        return _fill(rng.choice(R[style]), lang, rng, **ctx), 0
    if style == "swap":
        a, b = errs[0], errs[1]
        return _fill(rng.choice(R["swap"]), lang, rng, W1=a.wrong, W2=b.wrong, T1=a.truth, T2=b.truth), 2
    if style == "restate":
        sep = "" if lang == "zh" else " "
        lead = rng.choice(R["lead"])
        said = sep.join(e.st.say()[0] for e in errs)
        return _fill(lead, lang, rng) + (_after_lead(said) if lead.endswith(", ") else said), len(errs)
    if style == "multi" and len(errs) >= 2:
        a, b = errs[0], errs[1]
        t = rng.choice(R["multi"])
        one = [_fill(rng.choice(R["short"]), lang, rng, W=e.wrong, T=e.truth) for e in (a, b)]
        return _fill(t, lang, rng, C1=one[0], C2=one[1], W1=a.wrong, W2=b.wrong, T1=a.truth, T2=b.truth,
                     A1=a.st.attr or "it", A2=b.st.attr or "it"), 2
    return _one("restate" if style == "restate_one" else style, errs[0], lang, rng, ctx), 1


def _swappable(sts: Sequence[Statement]) -> List[Tuple[int, int]]:
    digit = [s.truth.replace(",", "").replace(".", "").isdigit() for s in sts]
    return [(i, j) for i in range(len(sts)) for j in range(i + 1, len(sts))
            if sts[i].kind != "unit" and sts[j].kind != "unit" and digit[i] == digit[j] and sts[i].truth != sts[j].truth
            and sts[i].truth not in sts[j].truth and sts[j].truth not in sts[i].truth]


def _plant(sts: List[Statement], style: str, rng: random.Random) -> List[_Err]:
    """The errors of an output of ``sts`` for a reply in ``style``: none, a swap, or one or two wrong values."""
    if style in NO_ERROR_STYLES:
        return []
    pairs = _swappable(sts)
    if style == "swap" or (style in ("restate", "multi") and pairs and rng.random() < 0.3):
        if not pairs:
            return []
        i, j = rng.choice(pairs)
        return [_Err(i, sts[j].truth, sts[i].truth, sts[i]), _Err(j, sts[i].truth, sts[j].truth, sts[j])]
    n_err = 2 if len(sts) >= 2 and (style == "multi" or rng.random() < 0.2) else 1
    ks = sorted(rng.sample(range(len(sts)), n_err))
    rng.shuffle(ks)  # the first error is the one a one-error reply addresses
    return [_Err(k, rng.choice([w for w in sts[k].wrong if w != sts[k].truth]), sts[k].truth, sts[k]) for k in ks]


def _render(sts: List[Statement], errs: List[_Err], lang: str) -> Tuple[str, Dict[int, Tuple[int, int]]]:
    """The output text, and the character span of each erroneous statement's value."""
    said = {e.k: e.wrong for e in errs}
    sep = "" if lang == "zh" else " "
    text, spans = "", {}
    for k, st in enumerate(sts):
        s, (a, b) = st.say(said.get(k))
        if text:
            text += sep
        if k in said:
            spans[k] = (len(text) + a, len(text) + b)
        text += s
    return text, spans


def _pick(src: List[Tuple[str, List[Statement]]], source: str, rng: random.Random) -> Tuple[str, List[Statement]]:
    """A question and one to five statements: a bank topic's (in order), or one to four independent facts."""
    if source == "bank":
        q, sts = rng.choice(src)
        n = rng.randint(1, len(sts))
        start = rng.randint(0, len(sts) - n)
        return q, sts[start:start + n]
    picked = rng.sample(src, rng.choice((1, 1, 2, 2, 3, 4)))
    return picked[0][0], [st for _, group in picked for st in group]


def _context(pool: Dict[str, list], sts: List[Statement], errs: List[_Err], rng: random.Random) -> Dict[str, str]:
    """The slots a reply may use besides the error: X, a true sentence of the bank the output does not say (an
    elaboration, a reason, an aside) and QX, the question it answers (a follow-up question); V, a value the output
    says rightly (else the attribute); A, an attribute."""
    others = [st for _, group in pool["bank"] for st in group if st not in sts]
    wrong = {e.k for e in errs}
    right = [st for k, st in enumerate(sts) if k not in wrong]
    pick = rng.choice(right or sts)
    other = rng.choice(others)
    return {"X": other.say()[0], "V": pick.truth if right else (pick.attr or pick.truth), "A": pick.attr or pick.truth,
            "QX": _ask(other)}


def normalised(text: str) -> str:
    """``text`` case-folded with its white space collapsed (how :func:`training_pairs` compares texts)."""
    return " ".join(text.split()).casefold()


def training_pairs(n: int, seed: int = 0, styles: Sequence[str] = STYLES, langs: Sequence[str] = ("zh", "en"),
                   sources: Sequence[str] = ("bank", "bank", "real", "world"),
                   exclude: Tuple[Sequence[str], Sequence[str]] = ((), ())) -> List[dict]:
    """``n`` labelled pairs in the probe-set format (module docstring), deterministic from ``seed``. styles: the
    reply styles drawn (uniformly); sources: drawn uniformly (repeat one to weight it). exclude: (outputs,
    corrections) that must not appear (decontamination: a pair whose output contains one of the outputs, or whose
    correction is one of the corrections, compared :func:`normalised`, is drawn again)."""
    unknown = sorted(set(styles) - set(STYLES))
    if unknown or not styles:
        raise ValueError(f"styles must be a non-empty subset of {STYLES}, got {list(styles)}")
    rng = random.Random(seed)
    pools = {lang: _sources(lang, random.Random(seed)) for lang in langs}
    bad_out, bad_corr = [normalised(t) for t in exclude[0]], {normalised(t) for t in exclude[1]}
    rows = []
    while len(rows) < n:
        lang, style, source = rng.choice(list(langs)), rng.choice(list(styles)), rng.choice(list(sources))
        if style not in NO_ERROR_STYLES and rng.random() < 0.12 and set(NO_ERROR_STYLES) & set(styles):
            style = rng.choice([x for x in NO_ERROR_STYLES if x in styles])  # a no-error reply about a quarter of the time
        question, sts = _pick(pools[lang][source], source, rng)
        if style in ("swap", "multi") and len(sts) < 2:
            continue
        errs = _plant(sts, style, rng)
        if not errs and style not in NO_ERROR_STYLES:
            continue
        if errs and errs[0].st.ask and rng.random() < 0.7:  # most questions ask for what the answer got wrong
            question = errs[0].st.ask
        if rng.random() < 0.25:  # some pairs come without their question (probe set v2 has none)
            question = ""
        output, spans = _render(sts, errs, lang)
        correction, addressed = _reply(style, errs, lang, rng, _context(pools[lang], sts, errs, rng))
        if normalised(correction) in bad_corr or any(x in normalised(output) for x in bad_out):
            continue
        kind = "no_error" if not errs else "swap" if style == "swap" or (
            len(errs) == 2 and errs[0].wrong == errs[1].truth) else errs[0].st.kind
        rows.append({"id": f"loc-{seed}-{len(rows)}", "lang": lang, "kind": kind, "style": style, "source": source,
                     "question": question, "output": output, "correction": correction,
                     "rejected": [list(spans[e.k]) for e in errs[:addressed]],
                     "unaddressed": [list(spans[e.k]) for e in errs[addressed:]]})
    return rows
