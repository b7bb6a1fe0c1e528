"""The trainer loop through real HTTP: corrections change the next answer, every answer comes from one version's
weights, a diverged update stops training and not serving."""
import copy
import time

import httpx
import numpy as np
import openai

from claw_lib.config import PPOConfig
from claw_lib.models.lm import ids_logprobs
from claw_lib.serve import LiveServer, ServeConfig

Q = [{"role": "user", "content": "土耳其的首都是哪里？"}]


def _correct(c, sid):
    a = c.chat.completions.create(model="tiny", messages=Q, extra_headers={"X-Session-Id": sid}).choices[0]
    text = a.message.content
    reply = "谢谢！" if "安卡拉" in text else "不对，土耳其的首都是安卡拉。"
    c.chat.completions.create(model="tiny", messages=Q + [{"role": "assistant", "content": text},
                                                          {"role": "user", "content": reply}],
                              extra_headers={"X-Session-Id": sid, "X-Session-Done": "true"})


def test_corrections_change_the_next_answer_and_every_answer_has_one_version(tmp_path):
    cfg = ServeConfig(ppo=PPOConfig(strategy="combined", batch_size=2, progress=False, threads=1))
    with LiveServer(cfg, port=0, out=tmp_path / "run") as srv:
        snapshots = {0: copy.deepcopy(srv.system.engine.serving.state_dict())}
        publish = srv.system.engine.publish

        def keep(version):  # the weights of every version, to check each answer against its own
            out = publish(version)
            snapshots[version] = copy.deepcopy(srv.system.engine.serving.state_dict())
            return out

        srv.system.engine.publish = keep
        c = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)
        greedy = lambda: c.chat.completions.create(model="tiny", messages=Q, temperature=0).choices[0].message.content
        assert "伊斯坦布尔" in greedy()  # the planted misconception
        t0, k = time.time(), 0
        while "安卡拉" not in greedy() and time.time() - t0 < 60:
            _correct(c, f"fix-{k}")
            srv.wait_idle(20)
            k += 1
        assert "安卡拉" in greedy(), "the greedy answer did not change within 60 s"
        st = httpx.get(srv.url + "/v1/claw/status").json()
        assert st["policy_version"] >= 1 and st["samples_trained"] >= 2
        rows = httpx.get(srv.url + "/v1/claw/metrics").json()["rows"]
        assert [r["version"] for r in rows] == list(range(1, len(rows) + 1)) and st["updates"] == len(rows)
        assert all(r["staleness_mean"] >= 0 and 0 < r["tis/weight_mean"] <= 2 for r in rows)
        assert all(r["publish/weight_delta_norm"] > 0 and r["publish/published"] == 1 for r in rows)  # full fine-tuning
        fresh = [r for r in rows if r["staleness_max"] == 0]  # served by the weights the trainer starts from
        assert fresh and all(abs(r["tis/ratio_mean"] - 1) < 1e-3 and abs(r["tis/ratio_max"] - 1) < 1e-3 for r in fresh)
        from tests.tensorboard_events import read_events  # the run folder's TensorBoard file: one point per update

        tb = dict(read_events(tmp_path / "run" / "tensorboard")["staleness_mean"])
        assert sorted(tb) == list(range(1, len(tb) + 1)) and len(tb) >= 1
        assert all(abs(tb[r["version"]] - r["staleness_mean"]) < 1e-5 for r in rows if r["version"] in tb)
        model = copy.deepcopy(srv.system.engine.serving)
        for t in list(srv.system.turns.values()):  # each answer's log-probs are those of the version it names
            model.load_state_dict(snapshots[t.policy_version])
            lp = ids_logprobs(model, [t.prompt_ids], [t.response_ids], 0)[0][0]
            assert np.allclose(lp, t.rollout_log_probs, atol=1e-4), (t.key, t.policy_version)
        print(f"greedy answer changed after {k} corrected sessions, {time.time() - t0:.1f} s")


def test_a_diverged_update_stops_training_not_serving(monkeypatch):
    import torch

    import claw_lib.rl.ppo as ppo

    real = ppo.ppo_update

    def diverging(policy, *a, **kw):  # an update that leaves a NaN weight, as a far too large rate does
        out = real(policy, *a, **kw)
        with torch.no_grad():
            next(p for p in policy.parameters() if p.requires_grad).view(-1)[0] = float("nan")
        return out

    monkeypatch.setattr(ppo, "ppo_update", diverging)
    cfg = ServeConfig(ppo=PPOConfig(strategy="binary_rl", batch_size=2, progress=False, threads=1, max_new_tokens=8))
    with LiveServer(cfg, port=0) as srv:
        c = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)
        t_end, k = time.time() + 60, 0
        while srv.system.status()["training"] == "running" and time.time() < t_end:
            _correct(c, f"div-{k}")
            srv.wait_idle(10)
            k += 1
        st = httpx.get(srv.url + "/v1/claw/status").json()
        assert st["training"] == "stopped" and "NaN" in st["stopped_reason"] and "lr" in st["stopped_reason"]
        assert st["policy_version"] == 0  # the diverged weights were never swapped in
        r = c.chat.completions.create(model="tiny", messages=Q)  # serving goes on with the last good weights
        assert r.model_extra["claw"]["policy_version"] == 0 and r.choices[0].message.content
