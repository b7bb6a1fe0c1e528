"""Every result page under results/ says what it does not establish, and where a later run changed its reading it
carries a dated "Corrections" section; the closing sections are the ones its generator writes, so that a page written
again keeps them (a grid's ablation.md is recomputed here from its CSV; other pages hold their script's text)."""
import re
from pathlib import Path

import pytest

from claw_lib.utils import LIMITS_HEADING, limits_section
from tests.tool_module import load_tool

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "results").rglob("*.md"))
#: the pages whose reading a later run changed, each with at least one dated correction
CORRECTED = ["results/ablation.md", "results/table3/ablation.md", "results/table3_extra/ablation.md",
             "results/step8/ablation.md", "results/engines/ablation.md", "results/serve/sessions_to_stable.md",
             "results/probe_sets.md"]
#: page -> (script folder, script name, the constant(s) holding its closing section)
GENERATED = {
    "results/bench_align.md": ("benchmarks", "bench_align", "LIMITS"),
    "results/bench_lengths.md": ("benchmarks", "bench_lengths", "LIMITS"),
    "results/bench_ppo.md": ("benchmarks", "bench_ppo", "LIMITS"),
    "results/bench_rewards.md": ("benchmarks", "bench_rewards", "LIMITS"),
    "results/bench_threads.md": ("benchmarks", "bench_threads", "LIMITS"),
    "results/real_model/bench_step.md": ("benchmarks", "bench_real_step", "LIMITS"),
    "results/serve/bench_serve.md": ("benchmarks", "bench_serve", "LIMITS"),
    "results/probe_sets.md": ("tools", "probe_report", "LIMITS"),
    "results/probe_localiser.md": ("tools", "probe_localiser", "LIMITS"),
    "results/real_model/judge.md": ("tools", "real_model_judge", "LIMITS['openclaw']"),
    "results/real_model/judge_plain/judge.md": ("tools", "real_model_judge", "LIMITS['plain']"),
    "results/real_model/signal_controls.md": ("tools", "real_model_signal", "LIMITS"),
    "results/serve/sessions_to_stable.md": ("tools", "serve_grid", "LIMITS"),
    "results/real_model/train_runs.md": ("tools", "real_model_train", "LIMITS['train_runs']"),
    "results/real_model/learning.md": ("tools", "real_model_train", "LIMITS['learning']"),
    "results/real_model/learning_pilots.md": ("tools", "real_model_train", "LIMITS['learning_pilots']"),
    "results/real_model/learning_reference.md": ("tools", "real_model_train", "LIMITS['learning_reference']"),
    "results/personal_agent/report.md": ("tools", "personal_agent", "LIMITS"),
    "results/serve/live_fact_qwen05.md": ("benchmarks", "bench_live_fact", "LIMITS"),
    "results/serve/live_fact_qwen05_split.md": ("benchmarks", "bench_live_fact", "LIMITS"),
    "results/serve/live_fact_qwen05_gate.md": ("benchmarks", "bench_live_fact", "LIMITS"),
    "results/serve/live_fact_qwen05_split_lr3e-5.md": ("benchmarks", "bench_live_fact", "LIMITS"),
    "results/serve/live_fact_qwen05_anchor.md": ("benchmarks", "bench_live_fact", "LIMITS"),
    "results/serve/live_fact_qwen05_noanchor.md": ("benchmarks", "bench_live_fact", "LIMITS"),
    "results/serve/page_fact_qwen05.md": ("benchmarks", "bench_page_fact", "LIMITS"),
    "results/serve/live_fact_qwen05_anchor_runs.md": ("benchmarks", "bench_live_fact", "TABLE_LIMITS"),
    "results/serve/batch_flips_qwen05.md": ("benchmarks", "bench_batch_flips", "LIMITS"),
    "results/serve/bench_anchor_step_qwen05.md": ("benchmarks", "bench_anchor_step", "LIMITS"),
}


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_result_page_says_what_it_does_not_establish(page):
    text = page.read_text(encoding="utf-8")
    assert re.search(r"^(## )?What this does not establish", text, re.M), f"{_rel(page)} has no such section"


def test_corrections_are_dated_and_where_a_reading_changed():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        if "## Corrections" not in text:
            assert _rel(page) not in CORRECTED, _rel(page)
            continue
        body = text.split("## Corrections", 1)[1].strip().split("\n## ")[0]
        bullets = [ln for ln in body.splitlines() if ln.startswith("- ")]
        assert bullets and all(re.match(r"- 20\d\d-[01]\d-[0-3]\d: \S", b) for b in bullets), (_rel(page), bullets)
    for name in CORRECTED:
        assert "## Corrections" in (ROOT / name).read_text(encoding="utf-8"), name


def test_every_page_is_known_to_a_generator():
    grids = {_rel(p.parent / "ablation.md") for p in (ROOT / "results").rglob("ablation.csv")}
    by_hand_paragraph = {"results/serve/kill_sweep.md", "results/serve/bench_serve_batching.md",
                         "results/serve/bench_serve_batching_qwen05.md",
                         "results/serve/bench_serve_batching_qwen05_160.md",
                         "results/serve/bench_serve_batching_qwen05_amx.md"}
    assert {_rel(p) for p in PAGES} == grids | set(GENERATED) | by_hand_paragraph


@pytest.mark.parametrize("folder", sorted(p.parent for p in (ROOT / "results").rglob("ablation.csv")), ids=_rel)
def test_a_grid_report_is_what_rewriting_it_gives(folder):
    """ablation.md equals report_text of its CSV (tools/rewrite_reports.py writes exactly this), closing sections
    included, so `claw reproduce` and a rewrite keep them."""
    from claw_lib.rl.ablation import load_results, report_text

    assert (folder / "ablation.md").read_text(encoding="utf-8") == report_text(load_results(folder)[0], folder.name)


@pytest.mark.parametrize("page", sorted(GENERATED), ids=str)
def test_a_page_holds_its_generators_closing_section(page):
    folder, name, const = GENERATED[page]
    mod = load_tool(name, folder)
    limits = eval(const, vars(mod))  # noqa: S307 - a constant's name from the table above
    corrections = getattr(mod, "LIMITS_CORRECTIONS", ()) if const == "LIMITS" else ()
    section = limits_section(limits, corrections)
    text = (ROOT / page).read_text(encoding="utf-8")
    assert text.rstrip("\n").endswith(section), page
    assert text.count(LIMITS_HEADING) == 1, page


def test_the_section_is_formatted_once():
    text = limits_section(["a", "b"], [("2026-12-07", "c")])
    assert text == f"{LIMITS_HEADING}\n\n- a\n- b\n\n## Corrections\n\n- 2026-12-07: c"
    with pytest.raises(ValueError):
        limits_section([])
