"""Published versions through real HTTP (claw_lib/serve/versions.py, gate.py): each version a PEFT adapter folder with
its record, the last few served by name in the request's model field, an adapter that did not move not published, the
publish gate, and kill -9 (tiny GPT, PEFT LoRA rank 4)."""
import json
import os
import signal
import subprocess
import time

import httpx
import openai
import pytest
import torch

from claw_lib.config import PPOConfig
from claw_lib.serve import LiveServer, ServeConfig
from claw_lib.serve.versions import RECORD_FILE, adapter_state, delta_norms, param_delta_norm, version_name
from tests.serve.test_server_resume import CLAW, _start
from tests.serve.test_server_training import Q, _correct

LORA = ["--lora-rank", "4", "--lora-impl", "peft"]


def _cfg(**kw):
    ppo = PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1, lora_rank=4, lora_impl="peft",
                    max_new_tokens=12)
    return ServeConfig(ppo=ppo, **kw)


def _client(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)


def _greedy(c, model="tiny"):
    """(text, the version that wrote it, the answer's model field) of the greedy answer to Q."""
    r = c.chat.completions.create(model=model, messages=Q, temperature=0)
    return r.choices[0].message.content, r.model_extra["claw"]["policy_version"], r.model


def _train_to(c, wait_idle, version_now, target, prefix):
    """Corrected sessions until the server's version reaches ``target``; the greedy answer of each version while it
    is live, by version."""
    live, k = {}, 0
    while version_now() < target and k < 16:
        text, v, _ = _greedy(c)
        live[v] = text
        _correct(c, f"{prefix}-{k}")
        wait_idle()
        k += 1
    text, v, _ = _greedy(c)
    live[v] = text
    assert version_now() >= target, f"version {version_now()} after {k} corrected sessions"
    return live


def _independent_argmax(folder, prompt_ids, response_ids):
    """The greedy choice at each response position of a base tiny GPT with the adapter folder loaded by PEFT itself
    (teacher-forced on the served answer)."""
    from peft import PeftModel

    from claw_lib.models.lm import load_causal_lm

    base, _ = load_causal_lm("tiny", device="cpu")
    model = PeftModel.from_pretrained(base, str(folder)).eval()
    ids = torch.tensor([prompt_ids + response_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
    n = len(prompt_ids)
    return logits[n - 1:n - 1 + len(response_ids)].argmax(-1).tolist()


def test_each_version_is_an_adapter_folder_and_the_last_few_answer_by_name(tmp_path):
    out = tmp_path / "run"
    with LiveServer(_cfg(keep_versions=2), port=0, out=out) as srv:
        c = _client(srv.url)
        assert [m.id for m in c.models.list().data] == ["tiny", "claw-v0"]
        live = _train_to(c, lambda: srv.wait_idle(30), lambda: srv.system.engine.version, 2, "fix")
        v = srv.system.engine.version
        kept = [v - 1, v]
        listed = c.models.list().data
        assert [m.id for m in listed] == ["tiny"] + [version_name(k) for k in kept]
        assert all(m.model_extra["parent"] == "tiny" and m.model_extra["root"] == str(out / "adapters" / f"v{k}")
                   for m, k in zip(listed[1:], kept))
        assert sorted(p.name for p in (out / "adapters").iterdir()) == sorted(f"v{k}" for k in kept)  # v0.. removed
        for k in kept:  # version k answers as it did when it was live, named, batched or not
            assert _greedy(c, version_name(k)) == (live[k], k, version_name(k))
            rec = json.loads((out / "adapters" / f"v{k}" / RECORD_FILE).read_text())
            assert rec["version"] == k and rec["rank"] == 4 and rec["alpha"] == 8 and rec["base_model"] == "tiny"
            assert set(rec["libraries"]) == {"torch", "transformers", "peft", "claw_lib"}
            assert rec["samples"] == 2 and rec["samples_total"] == 2 * k and rec["strategy"] == "combined"
        assert _greedy(c)[:2] == (live[v], v)  # the base id is the live version
        with pytest.raises(openai.NotFoundError, match="claw-v0"):  # expired
            c.chat.completions.create(model="claw-v0", messages=Q)
        r = httpx.post(srv.url + "/v1/chat/completions", json={"model": "claw-v99", "messages": Q})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
        assert "'claw-v99'" in r.json()["error"]["message"] and version_name(v) in r.json()["error"]["message"]
        assert c.models.retrieve(version_name(v)).id == version_name(v)
        # the folder holds what was served: PEFT itself, loading it on a fresh base, makes the same greedy choices
        r = c.chat.completions.create(model=version_name(v - 1), messages=Q, temperature=0,
                                      extra_headers={"X-Session-Id": "old"})
        t = srv.system.turns["old#0"]
        assert t.policy_version == v - 1 and t.response_text == live[v - 1] == r.choices[0].message.content
        assert _independent_argmax(out / "adapters" / f"v{v - 1}", t.prompt_ids, t.response_ids) == t.response_ids
        vs = srv.system.versions  # the older version was decoded from the archive; the live copy kept its tensors
        same = lambda a, b: sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)
        assert same(adapter_state(vs.archive().full), vs.kept[v - 1]["state"])
        assert same(adapter_state(srv.system.engine.serving), vs.kept[v]["state"])
        assert not same(vs.kept[v - 1]["state"], vs.kept[v]["state"])
        st = srv.system.status()
        assert st["published_versions"] == [version_name(k) for k in kept] and st["last_skipped"] is None
        rows = srv.system.metrics
        assert all(r["publish/published"] == 1.0 and r["publish/adapter_delta_norm"] > 0 for r in rows)


def test_an_adapter_that_did_not_move_is_not_published(tmp_path, monkeypatch):
    import claw_lib.rl.ppo as ppo

    monkeypatch.setattr(ppo, "ppo_update", lambda *a, **kw: {})  # an update that moves nothing
    out = tmp_path / "run"
    with LiveServer(_cfg(), port=0, out=out) as srv:
        c = _client(srv.url)
        for k in range(2):
            _correct(c, f"still-{k}")
        srv.wait_idle(60)
        st = httpx.get(srv.url + "/v1/claw/status").json()
        assert st["policy_version"] == 0 and st["samples_trained"] == 2 and st["updates_skipped"] == 1
        assert st["last_skipped"] == "adapter unchanged (delta norm 0.0)"
        assert st["published_versions"] == ["claw-v0"]
        (row,) = httpx.get(srv.url + "/v1/claw/metrics").json()["rows"]
        assert row["version"] == 0 and row["publish/published"] == 0.0
        assert row["publish/adapter_delta_norm"] == 0.0 and row["publish/weight_delta_norm"] == 0.0
    assert sorted(p.name for p in (out / "adapters").iterdir()) == ["v0"]
    (logged,) = [json.loads(x) for x in (out / "trained.jsonl").read_text().splitlines()]
    assert logged["version"] == 0 and logged["skipped"].startswith("adapter unchanged")
    assert "publish/adapter_delta_norm" in (out / "metrics.csv").read_text().splitlines()[0]


def test_delta_norms_are_the_l2_norms_of_the_change():
    from claw_lib.serve.engine import Engine, _frozen

    e = Engine(_cfg())
    old = _frozen(e.trainer)
    layers = [m for m in e.trainer.modules() if hasattr(m, "lora_A") and "default" in m.lora_A]
    with torch.no_grad():
        layers[0].lora_B["default"].weight[0, 0] += 3.0
        layers[1].lora_A["default"].weight[1, 2] -= 4.0
    d = delta_norms(e.trainer, old)
    assert d["publish/adapter_delta_norm"] == pytest.approx(5.0)
    m0 = layers[0]  # B was 0: the added weight is s * dB A, whose norm is s * 3 * ||A[0]||; layer 1 has B = 0
    expect = m0.scaling["default"] * 3.0 * float(m0.lora_A["default"].weight[0].detach().norm())
    assert d["publish/weight_delta_norm"] == pytest.approx(expect, rel=1e-5)
    assert param_delta_norm(e.trainer, old) == pytest.approx(5.0)  # the trained tensors are the adapters here


def test_the_publish_gate_keeps_the_previous_version_when_the_probe_score_falls(tmp_path, monkeypatch):
    import claw_lib.rl.ppo as ppo

    def wrecking(policy, *a, **kw):  # an update that ruins the answers (a far too large step)
        with torch.no_grad():
            g = torch.Generator().manual_seed(0)
            for n, p in policy.named_parameters():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=g) * 5)
        return {}

    monkeypatch.setattr(ppo, "ppo_update", wrecking)
    gate = tmp_path / "gate.jsonl"
    gate.write_text(json.dumps({"prompt": Q[0]["content"], "expected": "伊斯坦布尔"}, ensure_ascii=False) + "\n")
    with LiveServer(_cfg(publish_gate=str(gate)), port=0, out=tmp_path / "run") as srv:
        c = _client(srv.url)
        before = _greedy(c)[0]
        assert "伊斯坦布尔" in before  # the planted misconception: the probe passes at version 0
        for k in range(2):
            _correct(c, f"g-{k}")
        srv.wait_idle(60)
        st = srv.system.status()
        assert st["policy_version"] == 0 and st["last_skipped"].startswith("publish gate")
        assert st["publish_gate"]["last"] == {"version": 0, "score_before": 1.0, "score_after": 0.0, "passed": False}
        (row,) = srv.system.metrics
        assert (row["gate/score_before"], row["gate/score_after"], row["gate/passed"]) == (1.0, 0.0, 0.0)
        assert row["publish/adapter_delta_norm"] > 0
        assert _greedy(c)[0] == before  # still version 0's answer
        e = srv.system.engine  # the trainer is back at the published version's tensors
        assert delta_norms(e.trainer, e.serving)["publish/adapter_delta_norm"] == 0.0


def test_bad_settings_are_refused_in_one_line(tmp_path):
    from claw_lib.serve.config import check_serve_config

    bad = tmp_path / "gate.jsonl"
    for text, words in (('{"prompt": "hi"}\n', "line 1 must be a JSON object"), ("\n", "holds no probes")):
        bad.write_text(text)
        with pytest.raises(ValueError, match=words):
            check_serve_config(_cfg(publish_gate=str(bad)))
    with pytest.raises(ValueError, match="keep_versions must be an integer in"):
        check_serve_config(_cfg(keep_versions=0))
    r = subprocess.run(CLAW + ["serve", "--port", "0", "--publish-gate", str(tmp_path / "none.jsonl")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--publish-gate" in r.stderr and "cannot be read" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_full_fine_tuning_says_no_adapter_is_written(server):
    st = httpx.get(server.url + "/v1/claw/status").json()
    assert st["adapter"] is None and "no adapter is written" in st["adapter_note"]
    assert st["published_versions"] == [] and st["live_version_name"] is None
    r = httpx.post(server.url + "/v1/chat/completions", json={"model": "claw-v0", "messages": Q})
    assert r.status_code == 404 and "'tiny'" in r.json()["error"]["message"]


def test_kill_9_keeps_the_published_versions_and_their_names(tmp_path):
    out = tmp_path / "run"
    proc, url = _start(out, *LORA, "--keep-versions", "2")
    try:
        c = _client(url)
        status = lambda: httpx.get(url + "/v1/claw/status").json()

        def idle():
            for _ in range(300):
                st = status()
                if st["samples_pending"] == 0 and st["samples_scored"] < st["batch_size"]:
                    return
                time.sleep(0.1)

        live = _train_to(c, idle, lambda: status()["policy_version"], 1, "k")
        names = [m.id for m in c.models.list().data]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    (out / "adapters" / "v9").mkdir()  # as a kill between an adapter and its checkpoint leaves one
    (out / "adapters" / ".v9.abc123.tmp").mkdir()  # as a kill inside the adapter's write leaves one
    proc, url = _start(out, *LORA, "--keep-versions", "2")
    try:
        c = _client(url)
        assert [m.id for m in c.models.list().data] == names
        assert not (out / "adapters" / "v9").exists() and not (out / "adapters" / ".v9.abc123.tmp").exists()
        for name in names[1:]:
            k = int(name.rsplit("v", 1)[1])
            assert _greedy(c, name)[:2] == (live[k], k)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
