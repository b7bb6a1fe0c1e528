"""Concurrent sessions decoded together vs one at a time. Measured, not a timed test.

    python benchmarks/bench_serve_batching.py [--concurrency 1 4 16] [--requests 6] [--max-tokens 32]
                                              [--repeats 2] [--seed 0] [--formats full int8] [--model PATH]
                                              [--json results/serve/bench_serve_batching.json]
                                              [--out results/serve/bench_serve_batching.md]

Servers of the tiny GPT (or ``--model``, a local Hugging Face folder: the real-model run) in this process (``claw_lib.serve.LiveServer``, training off: serving only), the same
clients against each, in the same run: **batched** (``ServeConfig.max_batch`` 16, continuous batching) and
**one at a time** (``max_batch`` 1, the baseline: the engine decodes one sequence, the others wait); with
``--formats``, both again for each serving copy (``ServeConfig.serving_format``). For each concurrency C, C client
threads (in a separate process) each send ``--requests`` chat completions one after another (raw httpx, side
turns, temperature 1 with a fixed seed per request, so the servers write the same answers). Reported: tokens/s
(completion tokens of all requests / wall time), p50 and p95 of the client's wall time per request, and p50 over
the lone request's p50 (concurrency 1 of the same server kind). Server kinds alternate, ``--repeats`` times.

``benchmarks/bench_serve.py`` is the other serving benchmark: latency with training on vs off.
"""
import argparse
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUESTIONS = ["土耳其的首都是哪里？", "What is the capital of France?", "日本的首都是哪里？", "德国的首都是哪里？",
             "What is the capital of Italy?", "英国的首都是哪里？"]


def word_problems() -> list:
    """The questions of a real-model run: the kit's six invented GSM8K-shaped problems (``data/gsm8k/sample.jsonl``),
    whose worked answers run past any ``--max-tokens`` (a capital question's answer ends after a few tokens)."""
    path = Path(__file__).resolve().parents[1] / "data" / "gsm8k" / "sample.jsonl"
    return [json.loads(x)["question"] for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def clients(url: str, concurrency: int, requests: int, max_tokens: int, seed: int, real: bool = False) -> dict:
    """``concurrency`` client threads in a separate process (as real clients are: they do not share the server's
    interpreter), each sending ``requests`` completions in a row: latencies (s), tokens, wall (s)."""
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--client", url, str(concurrency), str(requests), str(max_tokens),
                          str(seed), "real" if real else "tiny"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the clients failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def client_process(url: str, concurrency: int, requests: int, max_tokens: int, seed: int, real: bool = False) -> dict:
    """The clients' side of :func:`clients` (this script run with ``--client``)."""
    import httpx

    questions = word_problems() if real else QUESTIONS
    lat, tokens, errors = [], [], []

    def session(k: int) -> None:
        with httpx.Client(timeout=1800) as c:
            for j in range(requests):
                body = {"messages": [{"role": "user", "content": questions[(k + j) % len(questions)]}],
                        "temperature": 1.0, "max_tokens": max_tokens, "seed": seed * 10_007 + k * 101 + j}
                t0 = time.perf_counter()
                r = c.post(url + "/v1/chat/completions", json=body)
                lat.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    errors.append(r.text[:200])
                else:
                    tokens.append(r.json()["usage"]["completion_tokens"])

    threads = [threading.Thread(target=session, args=(k,)) for k in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, the first: {errors[0]}")
    return {"latency_s": lat, "tokens": int(sum(tokens)), "wall_s": wall}


def run_kind(max_batch: int, fmt: str, a, threads: int, prefix: bool = True) -> dict:
    """One server with ``max_batch`` decoding from its ``fmt`` serving copy, with the prefix cache (``prefix``: the
    default budget) or without; every concurrency once (after a warm-up); returns the rows by concurrency."""
    from claw_lib.config import PPOConfig
    from claw_lib.serve import LiveServer, ServeConfig

    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", seed=a.seed, progress=False, threads=threads, model=a.model,
                                    device="cpu", dtype=a.dtype),
                      train=False, max_batch=max_batch, max_tokens_limit=max(a.max_tokens, 1), serving_format=fmt,
                      **({} if prefix else {"prefix_cache_tokens": 0}))
    out = {}
    with LiveServer(cfg, port=0) as srv:
        real = a.model != "tiny"
        clients(srv.url, 2, 1 if real else 2, a.max_tokens, a.seed + 999, real)  # warm-up, not counted
        for c in a.concurrency:
            r = clients(srv.url, c, a.requests, a.max_tokens, a.seed, real)
            out[c] = r
            print(f"{fmt}, max_batch {max_batch:>2}, prefix cache {'on' if prefix else 'off'}, {c:>2} sessions: "
                  f"{r['tokens'] / r['wall_s']:.0f} tokens/s, p50 "
                  f"{np.percentile(r['latency_s'], 50) * 1e3:.0f} ms", flush=True)
    return out


def in_child(max_batch: int, fmt: str, a, threads: int, prefix: bool = True) -> dict:
    """:func:`run_kind` in a child process, so that a real model's copies are gone before the next server loads its
    own (in one process a 0.5B run grew to 22 GB by its fourth server and was killed for memory)."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run_kind, (max_batch, fmt, a, threads, prefix))


def engine_only(a, threads: int) -> dict:
    """The same sessions without HTTP or a client process: threads of this process calling ``Engine.answer`` of a
    batched server directly; p50 (ms) by concurrency (where the rest of the served latency goes)."""
    from claw_lib.config import PPOConfig
    from claw_lib.serve import LiveServer, ServeConfig
    from claw_lib.serve.sampling import SamplingParams

    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", seed=a.seed, progress=False, threads=threads, model=a.model,
                                    device="cpu", dtype=a.dtype),
                      train=False, max_tokens_limit=max(a.max_tokens, 1))
    out = {}
    with LiveServer(cfg, port=0) as srv:
        eng = srv.system.engine
        tasks = [eng.task([{"role": "user", "content": q}]) for q in QUESTIONS]

        def session(k: int, lat: list) -> None:
            for j in range(a.requests):
                t0 = time.perf_counter()
                eng.answer(tasks[(k + j) % len(tasks)], 1.0, a.max_tokens, 0,
                           SamplingParams(temperature=1.0, max_tokens=a.max_tokens, seed=a.seed * 10_007 + k * 101 + j))
                lat.append(time.perf_counter() - t0)

        for c in a.concurrency:
            lat: list = []
            threads_ = [threading.Thread(target=session, args=(k, lat)) for k in range(c)]
            for t in threads_:
                t.start()
            for t in threads_:
                t.join()
            out[c] = float(np.percentile(lat, 50)) * 1e3
    return out


def summary(runs: list, concurrency) -> list:
    """One row per (kind, concurrency): requests, tokens/s, p50, p95 (ms), p50 over the lone p50, pooled over
    the repeats."""
    rows = []
    for kind in dict.fromkeys(r["kind"] for r in runs):
        mine = [r for r in runs if r["kind"] == kind]
        lone = None
        for c in concurrency:
            lat = [x for r in mine for x in r["by_c"][c]["latency_s"]]
            tok = sum(r["by_c"][c]["tokens"] for r in mine)
            wall = sum(r["by_c"][c]["wall_s"] for r in mine)
            p50 = float(np.percentile(lat, 50))
            lone = p50 if c == concurrency[0] else lone
            rows.append({"kind": kind, "concurrency": c, "requests": len(lat), "tokens_per_s": tok / wall,
                         "p50_ms": p50 * 1e3, "p95_ms": float(np.percentile(lat, 95)) * 1e3,
                         "p50_over_lone": p50 / lone})
    return rows


def report(rows: list, a, threads: int, engine: dict) -> str:
    from claw_lib.models.lm import bf16_supported, resolve_dtype

    dtype = str(resolve_dtype(a.dtype, "cpu", a.model)).replace("torch.", "")
    load = f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"
    lines = ["# claw serve: concurrent sessions decoded together vs one at a time", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared with other work; 1-minute load {load} "
             f"at the end), torch {threads} thread(s), Python {platform.python_version()}. Model {model_name(a)}, "
             f"training off, "
             f"weights {dtype} (the CPU computes bfloat16 natively: {'yes' if bf16_supported('cpu') else 'no'}), "
             f"{a.requests} requests per session, max_tokens {a.max_tokens}, temperature 1 with a fixed seed per "
             f"request, {a.repeats} repeat(s) of each server kind (alternating). Written by "
             "`benchmarks/bench_serve_batching.py`; see its docstring.", "",
             "| server | sessions | requests | tokens/s | p50 ms | p95 ms | p50 / lone p50 |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['concurrency']} | {r['requests']} | {r['tokens_per_s']:.0f} | "
                     f"{r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p50_over_lone']:.2f} |")
    top = max(a.concurrency)
    b, o = (next(r for r in rows if r["kind"].startswith(k) and r["concurrency"] == top)
            for k in ("batched", "one at a time"))
    lines += ["", f"At {top} sessions ({a.formats[0]} serving copy), batched vs one at a time: "
              f"{b['tokens_per_s'] / o['tokens_per_s']:.2f}x the tokens/s, p50 {b['p50_ms'] / o['p50_ms']:.2f}x; "
              f"batched p50 is {b['p50_over_lone']:.2f}x a lone request's (the target: at most 3x)."]
    cold = next((r for r in rows if r["kind"].endswith("no prefix cache") and r["concurrency"] == top), None)
    if cold is not None:
        lines += ["", f"Without the prefix cache (every prompt prefilled in full), batched p50 at {top} sessions is "
                  f"{cold['p50_over_lone']:.2f}x a lone request's. The sessions ask {len(QUESTIONS)} questions in turn"
                  " (a real model: the kit's word problems), so with the cache every prompt after the first of each is "
                  "read from it; a stream of questions never asked before shares only the prompt's template, and lies "
                  "between the two rows."]
    base = next((r for r in rows if r["kind"] == "one at a time" and r["concurrency"] == top), None)
    for fmt in (f for f in a.formats if f != "full"):
        fast = next(r for r in rows if r["kind"] == f"batched, {fmt}" and r["concurrency"] == top)
        if base is not None:
            lines += ["", f"At {top} sessions, batched from the {fmt} copy vs one at a time from the {dtype} "
                      f"weights: {fast['tokens_per_s'] / base['tokens_per_s']:.2f}x the tokens/s (the real-model "
                      "target: at least 8x at 8 sessions)."]
    lo = min(a.concurrency)
    if not engine:
        return "\n".join(lines + ["", NOT_ESTABLISHED_REAL if a.model != "tiny" else NOT_ESTABLISHED])
    lines += ["", "The engine alone (threads of the server's process calling `Engine.answer`, no HTTP, no client "
              "process), batched, full serving copy: p50 " + ", ".join(f"{engine[c]:.1f} ms at {c}" for c in
                                                                     a.concurrency)
              + f"; {top} sessions {engine[top] / engine[lo]:.2f}x the lone p50."]
    lines += ["", NOT_ESTABLISHED]
    return "\n".join(lines)


#: what a run of this benchmark does not establish (printed under its tables)
NOT_ESTABLISHED = ("What this does not establish: anything about a real model (the tiny GPT's layers are `Conv1D`, so "
                   "int8 quantises only its output layer, and a 0.5B model is bound by reading its weights, not by the "
                   "per-row cost seen here); a quiet machine (the clients, HTTP and decoding shared two cores); more "
                   "than this run's ratios (runs of the same code on this machine gave 16-session ratios up to 1.1 "
                   "apart: docs/serve.md lists them).")


#: the same for a run of a real model
NOT_ESTABLISHED_REAL = ("What this does not establish: a quiet machine (the clients, HTTP and decoding shared two loaded "
                        "cores); more than one run's ratios; that the int8 copy answers as well as the full-precision "
                        "one (its greedy answers can differ from the full-precision ones).")


def model_name(a) -> str:
    """The model a report names: "the tiny GPT", or the folder's name."""
    return "the tiny GPT" if a.model == "tiny" else Path(a.model).name


def server_kinds(a) -> list:
    """(name, max_batch, serving format, prefix cache on) of each server the run compares: batched and one at a time
    for each format, with the prefix cache as ``--prefix-cache`` says ("both": batched also without it)."""
    kinds = []
    for fmt in a.formats:
        tail = "" if fmt == "full" else ", " + fmt
        on = a.prefix_cache != "off"
        kinds += [(f"batched{tail}", 16, fmt, on), (f"one at a time{tail}", 1, fmt, on)]
        if a.prefix_cache == "both":
            kinds.append((f"batched{tail}, no prefix cache", 16, fmt, False))
    return kinds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--requests", type=int, default=6, help="requests per session (client thread)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--formats", nargs="+", default=["full"], choices=["full", "bf16", "int8"],
                    help="serving copies to compare (ServeConfig.serving_format; default: full)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: the free cores)")
    ap.add_argument("--prefix-cache", choices=["on", "off", "both"], default="both",
                    help="serve with the prefix cache (ServeConfig.prefix_cache_tokens), without it, or both (the batched "
                         "server also without it; default)")
    ap.add_argument("--model", default="tiny", help="the tiny GPT (default) or a local Hugging Face folder")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "auto"],
                    help="the model's (and the full serving copy's) dtype; float32 by default, the baseline the "
                         "ratios are read against (\"auto\" is bfloat16 on a CPU with AVX512-BF16 / AMX)")
    ap.add_argument("--json", type=Path, default=None, help="also write every latency and the summary as JSON")
    from claw_lib.utils import add_report_args, atomic_write, check_new_file, publish_report, report_path, \
        set_threads

    add_report_args(ap, "the Markdown report")
    a = ap.parse_args(argv)
    if min(a.concurrency + [a.requests, a.max_tokens, a.repeats]) < 1:
        raise ValueError("--concurrency, --requests, --max-tokens and --repeats must be >= 1")
    out = report_path(a)
    if a.json is not None:
        check_new_file(a.json, a.force)
    threads = set_threads(a.threads)
    runs = []
    for k in range(a.repeats):
        for kind, max_batch, fmt, prefix in server_kinds(a)[::1 if k % 2 == 0 else -1]:
            runs.append({"kind": kind, "max_batch": max_batch, "format": fmt, "prefix_cache": prefix,
                         "by_c": in_child(max_batch, fmt, a, threads, prefix) if a.model != "tiny"
                         else run_kind(max_batch, fmt, a, threads, prefix)})
    rows = summary(runs, a.concurrency)
    engine = engine_only(a, threads) if a.model == "tiny" else {}  # the engine-alone view: the tiny GPT's only
    text = report(rows, a, threads, engine)
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(a.json, replace=a.force) as f:
            json.dump({"settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
                       "summary": rows, "engine_only_p50_ms": engine, "runs": runs}, f, indent=1)
    publish_report(text, out, a.force)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client"]:
        u, c, r, m, sd, kind = sys.argv[2:8]
        print(json.dumps(client_process(u, int(c), int(r), int(m), int(sd), kind == "real")))
        raise SystemExit(0)
    from claw_lib.utils import script_main

    raise SystemExit(script_main(main))
