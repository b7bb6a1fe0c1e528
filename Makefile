# claw-kit: two commands for a newcomer
#   make lab    set everything up in ./.venv and open the tutorials in JupyterLab
#   make test   set everything up and run all tests, notebooks included (pytest --nbval)
#
# Knobs: PYTHON=python3.11  TORCH=torch==2.13.0  TORCH_PIP_ARGS="--index-url <a torch wheel index>"

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
TORCH_PIP_ARGS ?=
STAMP := $(VENV)/.claw-installed

.PHONY: setup lab test bench notebooks clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)" $(TORCH_PIP_ARGS)
	$(BIN)/python -m pip install --quiet -e ".[notebooks,dev]"
	$(BIN)/claw setup
	touch $(STAMP)

# root (containers) must say so explicitly to Jupyter
LAB_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: setup
	$(BIN)/jupyter lab notebooks/ $(LAB_ROOT_FLAG)

test: setup
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python benchmarks/bench_align.py

# re-execute every notebook in place (after a change to claw_lib), then `make test`
notebooks: setup
	$(BIN)/python tools/run_notebooks.py

clean:
	rm -rf $(VENV) build *.egg-info
