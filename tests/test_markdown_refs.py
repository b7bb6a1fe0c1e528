"""Every file path, config attribute and claw_lib name quoted in the kit's Markdown pages and the notebooks' markdown
resolves: a learner who copies `PPOConfig.omissions` or `results/probe_v2.md` gets an error, so the page must not say
it (review-teaching-3 §2 items 17 and 19)."""
import dataclasses
import importlib
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: every Markdown page of the kit (the READMEs, CONTRIBUTING, docs, the tests' map, every report under results/ and
#: benchmarks/) and every notebook
PAGES = [ROOT / "README.md", ROOT / "README.zh-CN.md", ROOT / "CONTRIBUTING.md", ROOT / "tests" / "README.md"] + \
    sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "results").rglob("*.md")) + \
    sorted((ROOT / "benchmarks").rglob("*.md")) + sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
SPAN = re.compile(r"`([^`\n]+)`")
#: the kit's own top-level folders: a path that starts with one of them is the kit's (upstream's paths are not checked)
TOP = ("results/", "data/", "docs/", "tools/", "tests/", "claw_lib/", "notebooks/", "benchmarks/")
PATH = re.compile(r"^(?:\.\./)?(?:%s)[\w./*+-]*$" % "|".join(re.escape(t) for t in TOP))
CONFIGS = ("PPOConfig", "TaskConfig", "LossConfig", "OPDConfig", "RewardConfig", "AlignConfig")
CONFIG_ATTR = re.compile(r"^(%s)(?:\(\))?((?:\.[A-Za-z_]\w*)+)(?:\s*(?::[^=]+)?=.*|\s*:.*)?$" % "|".join(CONFIGS))
#: an override key as config.override takes it: "opd.w_rl_negative", "loss.distill" (before an "=")
OVERRIDE = re.compile(r"^((?:task|loss|reward|opd)(?:\.[a-z_]\w*)+)\s*=\s*\S.*$")
MODULE = re.compile(r"^(claw_lib(?:\.[A-Za-z_]\w*)+)$")
#: paths that are not the kit's files, each with its reason
NOT_THE_KITS = {"docs/paper_index.md": "a file of maoumao34-design/OpenClaw-RL (docs/openclaw_v2.md's source P)",
                "docs/paper_reproduction_scope.md": "the same third-party repository",
                "docs/features/lora.md": "a page of vLLM's documentation (docs/serve.md)",
                "results/gpu.md": "written by tools/gpu_check.py on a GPU, which it has not run on (README says so)"}
#: docs/openclaw_v2.md's plans as first written name proposals, and say so in the bullet's title
PLAN = re.compile(r"^- \*\*Plan as first written\*\*.*?(?=^- \*\*|^#|\Z)", re.M | re.S)


#: a Markdown link's target, and a kit path written in plain prose (outside backticks and links)
LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE = re.compile(r"(?<![\w/.\-`])((?:\.\./)?(?:%s)[\w./*+-]*[\w*])" % "|".join(re.escape(t) for t in TOP))


def texts(path: Path):
    """The prose of a page: a Markdown file without its plans as first written, or a notebook's markdown cells; code
    blocks are commands, checked by running them."""
    if path.suffix == ".md":
        raw = [PLAN.sub("", path.read_text(encoding="utf-8"))]
    else:
        raw = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
    return [re.sub(r"```.*?```", "", text, flags=re.S) for text in raw]


def spans(path: Path):
    for text in texts(path):
        yield from (m.group(1).strip() for m in SPAN.finditer(text))


def bad_links(page: Path):
    """Link targets (relative to the page) and plain-prose kit paths that do not exist."""
    bad = []
    for text in texts(page):
        for m in LINK.finditer(text):
            ref = m.group(1)
            if not ref.startswith(("http://", "https://", "#", "mailto:")) and \
                    not (page.parent / ref.split("#")[0]).exists():
                bad.append(ref)
        prose = LINK.sub("]", re.sub(r"`[^`]*`", "", text))
        bad += [ref for ref in (m.group(1) for m in BARE.finditer(prose))
                if ref not in NOT_THE_KITS and not path_ok(page, ref)]
    return bad


def path_ok(page: Path, ref: str) -> bool:
    base = page.parent if ref.startswith("../") else ROOT
    ref = ref.split("#")[0]
    if any(ch in ref for ch in "*+"):  # a pattern: one match is enough
        return any(base.glob(ref.rstrip("/")))
    return (base / ref).exists()


def config_ok(name: str, chain: str) -> bool:
    cfg = importlib.import_module("claw_lib.config")
    obj = getattr(cfg, name)()
    for part in chain.strip(".").split("."):
        if dataclasses.is_dataclass(obj) and part in {f.name for f in dataclasses.fields(obj)}:
            obj = getattr(obj, part)
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            return False
    return True


def module_ok(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def bad_refs(page: Path):
    bad = []
    for ref in spans(page):
        if PATH.match(ref):
            if ref not in NOT_THE_KITS and not path_ok(page, ref):
                bad.append(ref)
        elif (m := CONFIG_ATTR.match(ref)):
            if not config_ok(m.group(1), m.group(2)):
                bad.append(ref)
        elif (m := OVERRIDE.match(ref)):
            if not config_ok("PPOConfig", "." + m.group(1)):
                bad.append(ref)
        elif MODULE.match(ref):
            if not module_ok(ref):
                bad.append(ref)
    return bad


def test_the_checker_catches_what_the_review_found(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("`PPOConfig.omissions` `PPOConfig().reward.omissions` `results/probe_v2.md` `results/probe_sets.md` "
                    "`opd.w_rl_negative=0` `opd.no_such=1` `claw_lib.rl.ablation.until_stable` `claw_lib.rl.nothing`",
                    encoding="utf-8")
    assert bad_refs(page) == ["PPOConfig.omissions", "results/probe_v2.md", "opd.no_such=1", "claw_lib.rl.nothing"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_quoted_path_and_attribute_resolves(page):
    assert not bad_refs(page), (page.name, bad_refs(page))


def test_the_link_checker_catches_dead_links(tmp_path):
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir()
    (tmp_path / "docs" / "here.md").write_text("x", encoding="utf-8")
    page.write_text("[ok](here.md) [dead](../docs/nothing.md) [web](https://example.org) see results/probe_v2.md and "
                    "`results/in_backticks_is_checked_elsewhere.md`", encoding="utf-8")
    assert bad_links(page) == ["../docs/nothing.md", "results/probe_v2.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_and_plain_path_resolves(page):
    assert not bad_links(page), (page.name, bad_links(page))
