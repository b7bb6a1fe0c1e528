"""How long one long pair takes: ``token_rewards`` (binary, e5 layer 8) on an output and a correction of N words
each, for growing N, split into embedding, lexical cost, the rest of the cost matrix and DP, and the rewards;
the lexical cost also the old way (a ``Counter`` intersection per cell, :func:`lexical_cost_reference`) up to the
size where it is still measurable. This is what sets ``AlignConfig.max_words`` (issue 24: a 19,997-character pair
within the old limit of 20,000 characters ran past 180 s).

    python benchmarks/bench_lengths.py [--words 250 500 1000 2000] [--blob-chars 2000 4000] [--threads 0]
                                       [--out results/bench_lengths.md]

The texts are fact-world answers run together (Chinese and English apart), the correction the same answers with
every fourth value changed, so the alignment has real work to do; and texts without a word break (letters and digits,
one character changed), which cost the encoder the most per character and set ``AlignConfig.max_chars``. Ratios within one run are the claim; wall times
depend on the machine and its load (the 1-minute load average is printed), so the total is also given in CPU
seconds of this process (with one torch thread, about the wall time on a quiet machine).
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import time


def long_pair(n_words: int, lang: str, seed: int = 0):
    """An output and a correction of about ``n_words`` word tokens each, in ``lang``."""
    from claw_lib.text.tokens import tokenize
    from claw_lib.toy.world import FactWorld

    rng = random.Random(seed)
    world = FactWorld()
    facts = world.facts("known", langs=(lang,))
    out, cor = [], []
    while len(tokenize(" ".join(out))) < n_words:
        f = rng.choice(facts)
        out.append(f.answer())
        wrong = world.wrong_value(f) or world.distractor(f, rng)
        cor.append(f.answer(wrong) if len(out) % 4 == 0 else f.answer())
    sep = "" if lang == "zh" else " "
    return sep.join(out), sep.join(cor)


def blob_pair(n_chars: int, seed: int = 0):
    """A text of ``n_chars`` letters and digits without a word break (a hash, base64, a URL), and its correction
    with one character changed: one word, the encoder's worst case per character."""
    rng = random.Random(seed)
    o = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n_chars))
    return o, o[: n_chars // 2] + "x" + o[n_chars // 2 + 1:]


#: what this page does not establish (the closing section: claw_lib.utils.limits_section)
LIMITS = [
    'the time on a quiet or faster machine: one run on 2 shared cores (the load average above), wall times above CPU times',
    "the rewards' quality on long texts: one synthetic pair per length is timed here; the long probe set (results/probe_sets.md) measures what the rewards find",
]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--words", type=int, nargs="+", default=[250, 500, 1000, 2000])
    ap.add_argument("--blob-chars", type=int, nargs="+", default=[2000, 4000], help="sizes of texts without spaces")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: the free cores)")
    ap.add_argument("--reference-up-to", type=int, default=1000, help="time the old lexical cost up to this size")
    from claw_lib.utils import add_report_args, limits_section, publish_report, report_path, set_threads

    add_report_args(ap, "the Markdown table")
    a = ap.parse_args(argv)
    out = report_path(a)
    import warnings

    from claw_lib.alignment.costs import cosine_cost, lexical_cost, lexical_cost_reference
    from claw_lib.alignment.dp import align
    from claw_lib.alignment.encoders import load_encoder
    from claw_lib.config import AlignConfig, RewardConfig
    from claw_lib.signals.rewards import token_rewards
    from claw_lib.text.tokens import tokenize

    warnings.simplefilter("ignore")  # the windowing notes of long texts
    threads = set_threads(a.threads)
    enc = load_encoder("e5")
    big = AlignConfig(max_chars=10_000_000, max_words=1_000_000)
    cfg = RewardConfig(align=big)
    token_rewards(*long_pair(20, "en"), "binary", cfg, encoder=enc)  # warm-up (jieba, caches)
    rows = []
    cases = [(lang, n, *long_pair(n, lang)) for lang in ("en", "zh") for n in a.words]
    cases += [("no spaces", n, *blob_pair(n)) for n in a.blob_chars]
    for lang, n, o, c in cases:
        wa, wb = tokenize(o, big.max_chars), tokenize(c, big.max_chars)
        enc._cache.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        token_rewards(o, c, "binary", cfg, encoder=enc)
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        enc._cache.clear()
        t = time.perf_counter()
        E, F = enc.embed_words(o, wa).vectors, enc.embed_words(c, wb).vectors
        t_embed = time.perf_counter() - t
        t = time.perf_counter()
        L = lexical_cost(wa, wb)
        t_lex = time.perf_counter() - t
        t = time.perf_counter()
        C = 0.7 * cosine_cost(E, F) + 0.3 * L
        align(C, big.insert_cost, big.delete_cost, big.match_threshold)
        t_dp = time.perf_counter() - t
        t_ref = None
        if n <= a.reference_up_to:
            t = time.perf_counter()
            lexical_cost_reference(wa, wb)
            t_ref = time.perf_counter() - t
        rows.append((lang, n, len(wa), len(wb), len(o), len(c), total, cpu, t_embed, t_lex, t_dp, t_ref))
        print(rows[-1], flush=True)
    load = os.getloadavg()[0]
    lines = [f"One long pair through `token_rewards` (binary, e5 layer 8), {threads} torch thread(s), {platform.machine()}, "
             f"load average {load:.2f} at the end; one run.", "",
             "| lang | words (output / correction) | characters | total s | total CPU s | embedding s | lexical cost s | "
             "cosine + DP s | old lexical cost s | old / new lexical |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for lang, n, na, nb, ca, cb, total, cpu, te, tl, td, tr in rows:
        ratio = f"{tr / tl:.0f}x" if tr else ""
        lines.append(f"| {lang} | {na} / {nb} | {ca} / {cb} | {total:.2f} | {cpu:.2f} | {te:.2f} | {tl:.3f} | {td:.2f} | "
                     f"{'' if tr is None else f'{tr:.2f}'} | {ratio} |")
    publish_report("\n".join(lines + ["", limits_section(LIMITS)]), out, a.force)


if __name__ == "__main__":
    from claw_lib.utils import script_main

    raise SystemExit(script_main(main))
