"""Token rewards against their formulas; one finite reward per word whatever the input (hypothesis)."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claw_lib.config import RewardConfig
from claw_lib.signals.rewards import ARTICLE_RULES, fuse_rewards, token_rewards
from claw_lib.text import claims, corrections, tokens
from claw_lib.text.corrections import clean_correction, negated_spans

SEED_OUT, SEED_COR = "法国的首都是伦敦。", "不对，法国的首都是巴黎。"


def words(tr):
    return {t.text: float(r) for t, r in zip(tr.tokens, tr.rewards)}


def test_binary_seed_example(e5):
    tr = token_rewards(SEED_OUT, SEED_COR, "binary", encoder=e5)
    assert tr.rewards.tolist() == [0.5, 0.5, 0.5, 0.5, -1.0, 0.5]
    assert tr.rejected.tolist() == [False] * 4 + [True, False]


def test_continuous_is_the_formula_on_recorded_costs(e5):
    cfg = RewardConfig()
    tr = token_rewards("法国的首都是马赛。", SEED_COR, "continuous", cfg, encoder=e5)
    C = tr.alignment.cost
    for o in tr.alignment.alignment.ops:
        if o.op in ("match", "replace"):
            assert tr.rewards[o.i] == pytest.approx(np.clip(cfg.a - cfg.b * C[o.i, o.j], cfg.lo, cfg.hi))
        elif o.op == "delete":
            assert tr.rewards[o.i] == cfg.lo
    assert tr.rewards.min() == tr.rewards[4] < 0 and (tr.rewards >= cfg.lo).all() and (tr.rewards <= cfg.hi).all()


def test_negation_rejects_the_repeated_entity(e5):
    for out, cor, bad in [("他昨天去了北京。", "不是北京，他昨天去了上海。", "北京"),
                          ("He went to Berlin yesterday.", "Not Berlin, he went to Rome yesterday.", "Berlin"),
                          ("鲸鱼是鱼。", "是哺乳动物，不是鱼。", "鱼"),
                          ("Egypt is in Asia.", "Egypt is in Africa, not Asia.", "Asia")]:
        tr = token_rewards(out, cor, "binary", encoder=e5)
        assert words(tr)[bad] == -1.0, (out, words(tr))
        assert bad in tr.info["negated"]
    # without the rule, Asia would be matched with the correction's repeated Asia
    off = token_rewards("Egypt is in Asia.", "Egypt is in Africa, not Asia.", "binary",
                        RewardConfig(negation=False), encoder=e5)
    assert words(off)["Asia"] > 0


def test_cleaning_noisy_corrections(e5):
    cc = clean_correction("你说的不对，巴黎才是首都，另外法国红酒也不错。")
    assert cc.text == "巴黎才是首都。" and not cc.affirmation
    assert clean_correction("No, it is Paris. Also, French wine is great.").text == "it is Paris."
    noisy = token_rewards(SEED_OUT, "你说的不对，法国的首都是巴黎，另外法国红酒也不错。", "binary", encoder=e5)
    assert words(noisy)["伦敦"] == -1.0 and words(noisy)["法国"] == 0.5
    assert [s for s in negated_spans("in Asia, not Africa")] == [(13, 19)]


def test_omissions_are_charged_only_when_asked(e5):
    """An output that stops early matches every word it says; with ``omissions`` the word said in
    place of the left-out words is rejected (binary), and the sentence-level control fails too."""
    cor = "不对，法国的首都是巴黎，澳大利亚的首都是堪培拉。"
    short = "法国的首都是巴黎。"
    off = token_rewards(short, cor, "binary", encoder=e5)
    assert (off.rewards == 0.5).all()  # the article's rule: insertions attach to nothing
    on = token_rewards(short, cor, "binary", RewardConfig(omissions=True), encoder=e5)
    assert on.info["omitted_before"] == ["。"] and words(on)["。"] == -1.0 and words(on)["巴黎"] == 0.5
    assert (token_rewards(short, cor, "sentence", RewardConfig(omissions=True), encoder=e5).rewards == -1.0).all()
    # a missing full stop is not an omission; a complete answer has none
    assert not token_rewards("法国的首都是巴黎", "不对，法国的首都是巴黎。", "binary", RewardConfig(omissions=True),
                             encoder=e5).info["omitted_before"]
    full = token_rewards("法国的首都是伦敦，澳大利亚的首都是堪培拉。", cor, "binary", RewardConfig(omissions=True), encoder=e5)
    assert full.info["omitted_before"] == [] and words(full)["伦敦"] == -1.0 and words(full)["堪培拉"] == 0.5
    cut = token_rewards("法国的首都是巴黎，澳大利亚的首都是堪。", cor, "continuous", RewardConfig(omissions=True), encoder=e5)
    assert cut.info["omitted_before"] == ["。"] and words(cut)["。"] == -1.0 and words(cut)["巴黎"] > 0


def test_affirmation_and_vague_replies(e5):
    ok = token_rewards("法国的首都是巴黎。", "对，谢谢！", "binary", encoder=e5)
    assert ok.info.get("affirmation") and (ok.rewards == 0.5).all()
    vague = token_rewards(SEED_OUT, "不太对吧。", "continuous", encoder=e5)
    assert vague.info.get("vague") and (vague.rewards == 0).all()


def test_sentence_level_spreads_one_scalar(e5):
    tr = token_rewards(SEED_OUT, SEED_COR, "sentence", encoder=e5)
    assert (tr.rewards == -1.0).all()
    assert (token_rewards("法国的首都是巴黎。", SEED_COR, "sentence", encoder=e5).rewards == 0.5).all()


def test_absence_is_not_contradiction(e5):
    """A word the correction does not mention is not wrong (issue 16); the article's rule, still
    reachable with ARTICLE_RULES, punished every word it did not repeat."""
    out, cor = "The Eiffel Tower is located in Rome.", "No, it's in Paris."
    tr = token_rewards(out, cor, "binary", encoder=e5)
    w = words(tr)
    assert w["Rome"] == -1.0 and tr.rejected.tolist() == [t.text == "Rome" for t in tr.tokens]
    assert all(w[x] == 0.0 for x in ("The", "Eiffel", "Tower", "located"))   # absent: no signal
    assert tr.info["evidence"][tr.tokens.index(next(t for t in tr.tokens if t.text == "Rome"))] == "exact"
    old = words(token_rewards(out, cor, "binary", RewardConfig(**ARTICLE_RULES), encoder=e5))
    assert all(old[x] == -1.0 for x in ("The", "Eiffel", "Tower", "located", "Rome"))
    cont = token_rewards(out, cor, "continuous", encoder=e5)
    assert cont.rewards.min() == words(cont)["Rome"] < 0 and (np.delete(cont.rewards, 6) >= 0).all()


def test_exactness_of_numbers_codes_and_names(e5):
    """Near-identical strings that differ in meaning: the cost calls them a match, exactness does not."""
    for out, cor, bad in [("The answer is 2.178.", "No, the answer is 2.718.", "2.178"),
                          ("The acid is HNO2.", "No, the acid is HNO3.", "HNO2"),
                          ("He was born in 1880 in Paris.", "He was born in 1881, and in Lyon.", "1880")]:
        tr = token_rewards(out, cor, "binary", encoder=e5)
        assert words(tr)[bad] == -1.0 and (np.array([r for t, r in zip(tr.tokens, tr.rewards) if t.text != bad
                                                      and t.text != "Paris"]) >= 0).all(), words(tr)
    loose = token_rewards("The answer is 2.178.", "No, the answer is 2.718.", "binary", RewardConfig(exact=False),
                          encoder=e5)
    assert words(loose)["2.178"] == 0.5  # the old failure: passed as a match
    # a name is exact as a whole: every part of "J. R. R. Tolkien" is rejected, and in continuous they
    # carry the reward of the part that was contradicted
    tr = token_rewards("The book was written by J. R. R. Tolkien.", "No, it was written by J. K. Rowling.",
                       "continuous", encoder=e5)
    name = [r for t, r in zip(tr.tokens, tr.rewards) if 24 <= t.start < 40]
    assert len(name) == 7 and len(set(name)) == 1 and name[0] < 0
    assert (np.array([r for t, r in zip(tr.tokens, tr.rewards) if not 24 <= t.start < 40]) >= 0).all()


def test_reordered_corrections(e5):
    """The issue's cleaning example: "巴黎才是首都" restates part of the output in another order; the
    output's correct subject is not punished, the wrong capital is."""
    tr = token_rewards(SEED_OUT, "你说的不对，巴黎才是首都，另外法国红酒也不错。", "binary", encoder=e5)
    assert words(tr)["伦敦"] == -1.0 and words(tr)["法国"] == 0.0 and words(tr)["首都"] == 0.5
    assert tr.info["aligned_correction"] == "首都才是巴黎。"
    tr = token_rewards("The largest planet is Saturn.", "Jupiter is the largest planet.", "binary", encoder=e5)
    assert [t.text for t, r in zip(tr.tokens, tr.rewards) if r < 0] == ["Saturn"] and words(tr)["planet"] == 0.5
    # turned round in a clause of its own: the names the correction brings are alternatives to the output's
    out, cor = "The book was written by Charles Dickens in London.", "Jane Austen wrote it."
    tr = token_rewards(out, cor, "binary", encoder=e5)
    assert words(tr)["Charles"] == words(tr)["Dickens"] == -1.0 and words(tr)["London"] == 0.0
    off = token_rewards(out, cor, "binary", RewardConfig(alternatives="none"), encoder=e5)
    assert words(off)["Charles"] == words(off)["Dickens"] == 0.0


def test_neutral_band_reads_cheap_replacements_as_paraphrase(e5):
    out, cor = "Mount Everest is the tallest mountain in Africa.", "Mount Everest is the highest mountain in Asia."
    default = token_rewards(out, cor, "binary", encoder=e5)
    assert words(default)["tallest"] == -1.0 and words(default)["Africa"] == -1.0  # band off by default
    band = token_rewards(out, cor, "binary", RewardConfig(neutral_band=0.5), encoder=e5)
    k = [t.text for t in band.tokens].index("tallest")
    assert band.rewards[k] == 0.0 and band.info["evidence"][k] == "paraphrase"
    assert band.alignment.alignment.op_for_output()[k].cost <= 0.5 and words(band)["Africa"] == -1.0


def test_every_copy_of_a_contradicted_word_is_rejected(e5):
    for s in ("binary", "continuous"):
        tr = token_rewards("法国的首都是伦敦伦敦。", SEED_COR, s, encoder=e5)
        assert [t.text for t, r in zip(tr.tokens, tr.rewards) if r < 0] == ["伦敦", "伦敦"]


def test_elaboration_contradicts_nothing(e5):
    out, cor = "Water boils at 100 degrees Celsius.", "Right, and at high altitude it boils at a lower temperature."
    assert (token_rewards(out, cor, "binary", encoder=e5).rewards >= 0).all()
    assert (token_rewards(out, cor, "binary", RewardConfig(elaboration=False), encoder=e5).rewards < 0).any()


def test_keep_context_and_rewrite_fallback_options(e5):
    out, cor = "The Eiffel Tower is located in Rome.", "No, it's in Paris."
    ctx = token_rewards(out, cor, "binary", RewardConfig(keep_context=True), encoder=e5)
    assert words(ctx)["Eiffel"] == 0.5 and words(ctx)["Rome"] == -1.0
    out, cor = "苹果只有红色的，只在北方种植。", "苹果有很多颜色，红的、黄的、绿的都有，南方也有种植。"
    plain = token_rewards(out, cor, "binary", encoder=e5)
    low = token_rewards(out, cor, "binary", RewardConfig(rewrite_share=0.5, rewrite_scale=0.1), encoder=e5)
    assert low.info.get("rewrite") and not plain.info.get("rewrite")
    assert np.allclose(low.rewards, 0.1 * plain.rewards) and (low.rewards < 0).any()


def test_omissions_and_the_correcting_user_in_ppo(e5):
    """What PPO gets (``RewardConfig(omissions=True)``): the wrong capital negative, the rest positive,
    asides dropped, a left-out word charged."""
    cfg = RewardConfig(omissions=True)
    for out, cor, bad in [(SEED_OUT, "不对，法国的首都是巴黎。", "伦敦"), (SEED_OUT, "错了，法国的首都是巴黎。另外今天天气不错。", "伦敦"),
                          ("The capital of France is London.", "No, the capital of France is Paris. Also, nice weather today.",
                           "London")]:
        for s in ("binary", "continuous"):
            tr = token_rewards(out, cor, s, cfg, encoder=e5)
            assert [t.text for t, r in zip(tr.tokens, tr.rewards) if r < 0] == [bad]
            assert (tr.rewards[[t.text != bad for t in tr.tokens]] > 0).all()
    cut = token_rewards("The capital of France is", "No, the capital of France is Paris.", "binary", cfg, encoder=e5)
    assert cut.info["omitted_before"] == ["is"] and words(cut)["is"] == -1.0


TEXT = st.text(alphabet=st.sampled_from(list("法国的首都是伦敦巴黎。，不对 abcParisLondon.!?👍🏽12\t")), max_size=24) | st.text(max_size=12)


OPTIONS = st.sampled_from([{}, ARTICLE_RULES, {"omissions": True}, {"neutral_band": 0.5, "keep_context": True},
                            {"alternatives": "all", "rewrite_share": 0.5, "elaboration": False}, {"exact": False}])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT, TEXT, st.sampled_from(["binary", "continuous", "sentence"]), OPTIONS)
def test_one_finite_reward_per_token_whatever_the_input(e5, output, correction, strategy, options):
    tr = token_rewards(output, correction, strategy, RewardConfig(**options), encoder=e5)
    assert len(tr.rewards) == len(tr.tokens) == len(tr.rejected)
    assert np.all(np.isfinite(tr.rewards))
    last = 0
    for t in tr.tokens:
        assert output[t.start:t.end] == t.text and t.start >= last
        last = t.end
    assert json.loads(json.dumps(tr.to_dict(), ensure_ascii=False))["strategy"] == strategy


def test_perplexity_rewards_find_the_wrong_city(tiny):
    tr = token_rewards(SEED_OUT, SEED_COR, "perplexity", judge=tiny, question="法国的首都是哪里？")
    w = words(tr)
    assert min(w, key=w.get) == "伦敦" and w["伦敦"] < -0.5
    assert abs(w["法国"]) < 0.3 and abs(w["首都"]) < 0.3  # the contrast cancels what both contexts predict
    raw = token_rewards(SEED_OUT, SEED_COR, "perplexity", RewardConfig(contrast=False), judge=tiny,
                        question="法国的首都是哪里？")
    assert min(words(raw), key=words(raw).get) == "伦敦" and words(raw)["伦敦"] < 0
    en = token_rewards("The capital of France is London.", "No, the capital of France is Paris.", "perplexity",
                       judge=tiny, question="What is the capital of France?")
    assert min(words(en), key=words(en).get) == "London"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT, TEXT)
def test_perplexity_one_reward_per_token(tiny, output, correction):
    tr = token_rewards(output, correction, "perplexity", judge=tiny)
    assert len(tr.rewards) == len(tr.tokens) and np.all(np.isfinite(tr.rewards))


def test_fuse_rewards():
    rb, rp = np.array([0.5, -1.0, 0.5]), np.array([0.2, -2.0, 0.0])
    f = fuse_rewards({"binary": rb, "perplexity": rp}, {"binary": 1.0, "perplexity": 0.5})
    assert np.allclose(f, rb / 1.0 + 0.5 * rp / 2.0)
    z = fuse_rewards({"a": rb}, normalise="zscore")
    assert np.isclose(z.mean(), 0) and np.isclose(z.std(), 1)
    with pytest.raises(ValueError, match="disagree"):
        fuse_rewards({"a": rb, "b": rp[:2]})


# --------------------------------------------------------------------------- long outputs (issue 23)
def negative(tr):
    return [t.text for t, r in zip(tr.tokens, tr.rewards) if r < 0]


@pytest.mark.parametrize("output, correction, question, wrong", [
    # the example: the correction quotes the wrong value to reject it, and the right sentence stays alone
    ("光速约每秒三十万公里。声音在空气中约每秒一千五百米。", "声音在空气里大约每秒340米，你说的一千五百米是水里的速度。", None,
     ["一千五百米"]),
    ("A right angle has 90 degrees. A straight angle has 360 degrees.", "It's 180, not 360.", None, ["360"]),
    # a terse correction answers the question: the sentence that answers it, not a subject every sentence repeats
    ("The capital of Scotland is Glasgow. Scotland is part of the United Kingdom.", "Edinburgh.",
     "What is the capital of Scotland?", ["Glasgow"]),
    ("人体最大的器官是肝脏。成年人的皮肤总面积约有两平方米。", "皮肤。", "人体最大的器官是什么？", ["肝脏"]),
    ("The square root of 144 is 11. You can check it because 12 times 12 is 144.", "12.",
     "What is the square root of 144?", ["11"]),
    # a concession is not a confirmation
    ("The capital of Australia is Sydney. It has about 26 million people.",
     "Sydney is the biggest city, but the capital is Canberra.", "What is the capital of Australia?", ["Sydney"]),
    # swaps and polarity
    ("计算机关机以后，内存里的数据会保留，硬盘里的数据会丢失。所以文件要保存到硬盘上。", "内存和硬盘说反了。", None, ["内存", "硬盘"]),
    ("Penguins are birds. They can fly short distances.", "They can't.", None, ["can"]),
])
def test_long_outputs_localise_the_correction(e5, output, correction, question, wrong):
    tr = token_rewards(output, correction, "binary", encoder=e5, question=question)
    assert negative(tr) == wrong, (negative(tr), tr.info)
    off = token_rewards(output, correction, "binary", RewardConfig(**ARTICLE_RULES), encoder=e5, question=question)
    assert len(off.rewards) == len(tr.rewards)


def test_other_sentences_stay_neutral(e5):
    """A correction that restates one sentence says nothing about the others: no negative reward there, and the
    info names the sentence it addressed."""
    out = "Mount Everest is 8,849 meters high. It lies on the border of Nepal and India. Many climbers try it."
    tr = token_rewards(out, "It lies on the border of Nepal and China.", "binary", encoder=e5)
    assert negative(tr) == ["India"] and tr.info["addressed_sentences"] == [1]
    first = [r for t, r in zip(tr.tokens, tr.rewards) if t.start < out.index("It lies")]
    assert min(first) >= 0


def test_the_questions_words_are_its_premise(e5):
    """A word the question says is never the target of an alternative ("巴西" against "巴西利亚"), unless the
    correction rejects it outright; without the question (or with premise=False) it can be."""
    out, cor, q = "巴西的首都是里约热内卢。巴西是南美洲面积最大的国家。", "巴西利亚。", "巴西的首都是哪里？"
    assert negative(token_rewards(out, cor, "binary", encoder=e5, question=q)) == ["里约热内卢"]
    assert "巴西" in negative(token_rewards(out, cor, "binary", RewardConfig(premise=False), encoder=e5, question=q))


def test_one_sentence_outputs_are_unchanged_by_the_local_rules(e5):
    """The locality rules act on outputs of several sentences only (probe set v2's numbers do not move)."""
    for out, cor in [(SEED_OUT, SEED_COR), ("The Harry Potter books were written by J. R. R. Tolkien.",
                                            "No, the Harry Potter books were written by J. K. Rowling.")]:
        a = token_rewards(out, cor, "binary", encoder=e5)
        b = token_rewards(out, cor, "binary", RewardConfig(local=False), encoder=e5)
        assert a.rewards.tolist() == b.rewards.tolist() and "addressed_sentences" not in a.info


LONG = st.lists(st.sampled_from(["法国的首都是伦敦。", "它有六千万人口。", "The capital is London. ", "It has 60 million "
                                 "people. ", "不对", "Paris.", "", "👍🏽", "1,240 minutes. "]), max_size=5).map("".join)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LONG, LONG, st.one_of(st.none(), LONG), st.sampled_from(["binary", "continuous"]))
def test_one_finite_reward_per_token_for_long_outputs(e5, output, correction, question, strategy):
    tr = token_rewards(output, correction, strategy, encoder=e5, question=question)
    assert len(tr.rewards) == len(tr.tokens) and np.all(np.isfinite(tr.rewards))
    assert set(tr.info.get("addressed_sentences", [])) <= set(range(max(1, len(tr.tokens))))


def test_a_judge_fills_only_the_words_the_rules_leave_silent(e5, tiny):
    """judge_weight: a word with evidence keeps the rules' reward; a word the rules leave at 0 ("absent") gets
    judge_weight x the judge's perplexity reward (the formula, word by word); weight 0 changes nothing."""
    out, cor, q = "法国的首都是伦敦。它在塞纳河畔。", "巴黎。", "法国的首都是哪里？"
    rule = token_rewards(out, cor, "binary", encoder=e5, question=q)
    judged = token_rewards(out, cor, "perplexity", judge=tiny, question=q)
    cfg = RewardConfig(judge_weight=0.5)
    both = token_rewards(out, cor, "binary", cfg, encoder=e5, judge=tiny, question=q)
    silent = [w == "absent" for w in rule.info["evidence"]]
    assert any(silent) and not all(silent)
    for s, r, j, b in zip(silent, rule.rewards, judged.rewards, both.rewards):
        assert b == pytest.approx(np.clip(0.5 * j, cfg.lo, cfg.hi) if s else r)
    assert both.info["judge_filled"] == [t.text for t, s in zip(rule.tokens, silent) if s]
    zero = token_rewards(out, cor, "binary", encoder=e5, judge=tiny, question=q)
    assert zero.rewards.tolist() == rule.rewards.tolist()


@pytest.mark.parametrize("output,correction", [
    ("法国的首都是伦敦。", "不对，巴黎才是首都。"),  # the copula turned round: a second alignment
    ("Auckland is the capital of New Zealand.", "Auckland is the biggest city, but the capital is Wellington."),
    ("水在100度沸腾，冰在10度融化。", "冰是在0度融化的，\"不是10度\"。"),  # a negation, read by two rules
    ("The CPU has 8 GB of memory and 256 GB of disk.", "You've got memory and disk mixed up."),  # a swap
])
def test_a_pair_tokenizes_and_splits_each_of_its_texts_once(e5, monkeypatch, output, correction):
    """A correction on its way to its rewards is tokenized and split once (issue 44): the cleaner, the aligner and
    the rules ask for the same texts (the output, the cleaned correction, its copula turned round, its clauses), and
    each distinct text reaches the tokenizer, the clause splitter and the negation reader once."""
    seen = {"tokens": [], "clauses": [], "negated": []}
    for mod, name, key in ((tokens, "_split", "tokens"), (claims, "_clauses", "clauses"),
                           (corrections, "_negated", "negated")):
        fn = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda text, fn=fn, key=key: seen[key].append(text) or fn(text))
    for strategy in ("binary", "continuous", "sentence"):
        for v in seen.values():
            v.clear()
        token_rewards(output, correction, strategy, encoder=e5, question="What does it say?")
        for key, texts in seen.items():
            assert len(texts) == len(set(texts)), (key, sorted(t for t in set(texts) if texts.count(t) > 1))
        assert output in seen["tokens"] and clean_correction(correction).text in seen["tokens"]
