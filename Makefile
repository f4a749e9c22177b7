# Two commands matter: `make figures` (every table and figure) and `make test` (what CI runs).
# Both set up .venv from requirements.txt and materialize the dataset first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
NAMES := $(notdir $(basename $(NOTEBOOKS)))
FULL_RUNS := $(addprefix build/notebooks/,$(addsuffix .ipynb,$(NAMES)))
SMOKE_RUNS := $(addprefix build/smoke/,$(addsuffix .ipynb,$(NAMES)))
LIB := $(wildcard lib/*.py)

.PHONY: help setup data figures test unit notebooks-smoke repro bench clean
# a notebook run that fails leaves no executed notebook behind, so the next `make figures` runs it again
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(firstword $(MAKEFILE_LIST)) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

$(STAMP): requirements.txt
	@if [ ! -x $(PY) ]; then $(PYTHON_SYS) -m venv $(VENV); date +%s > $(VENV)/created_at; fi; \
	$(PY) -m pip install -q --upgrade pip; \
	$(PY) -m pip install -q -r requirements.txt; \
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null; \
	$(PY) -c "import site, os; open(site.getsitepackages()[0] + '/neusight_repro.pth', 'w').write(os.getcwd())"; \
	if [ -f $(VENV)/created_at ]; then \
		echo $$(( $$(date +%s) - $$(cat $(VENV)/created_at) )) > $(VENV)/setup_seconds; rm $(VENV)/created_at; fi; \
	touch $@

setup: $(STAMP) ## create .venv from requirements.txt (when missing or stale)

data: $(STAMP) ## materialize data/neusight/ and verify its sha256 manifest
	$(PY) -m lib.data

figures: data $(FULL_RUNS) ## run every notebook with params/full: build/notebooks/, figures/ (trained models too), README results
	$(PY) -m lib.notebooks provenance $(FULL_RUNS)
	$(PY) -m lib.report
	$(PY) -m lib.outputs

# A notebook reruns when its source, its parameters, the environment (.venv reinstalled from requirements.txt: other
# library versions can change results), an input under data/ (device specs, model configs, the paper's scaling
# table, our own measurements; not the materialized dataset) or a lib module it or the runner uses changes;
# NB_DEPS lists those modules per notebook (lib.notebook_deps), so an edit of lib reruns only the notebooks it reaches.
# Only a goal that runs notebooks reads (and so first writes) NB_DEPS.
DATA_IN := $(shell find data -path data/neusight -prune -o -type f ! -name '*.md' ! -name '.*' -print)
NB_DEPS := build/notebook-deps.mk

build/notebooks/%.ipynb: notebooks/%.ipynb params/full/%.yaml $(STAMP) $(DATA_IN) | data
	$(PY) -m lib.notebooks run $< params/full/$*.yaml $@

$(NB_DEPS): $(NOTEBOOKS) $(LIB)
	$(PYTHON_SYS) -m lib.notebook_deps $@ $(NOTEBOOKS)
ifneq ($(filter figures build/notebooks/%,$(MAKECMDGOALS)),)
include $(NB_DEPS)
endif

# Tests run on TEST_WORKERS processes (pytest-xdist; CI has 2 cores): the unit tests spread one by one, the smoke
# notebooks one notebook per worker (--dist loadfile: a notebook's cells share one kernel, in order). Every cache
# they share is written atomically (lib.paths.write_atomic), so two workers never read a half-written file.
TEST_WORKERS ?= 2

test: unit notebooks-smoke ## unit tests, then every notebook with params/smoke under nbval

unit: data
	$(PY) -m pytest -q -n $(TEST_WORKERS) tests

notebooks-smoke: data ## prepare smoke notebooks (papermill parameters) and run them under nbval
	$(PY) -m lib.notebooks prepare smoke $(NOTEBOOKS)
	cd build/smoke && NEUSIGHT_FIGURES=$(CURDIR)/build/smoke/figures ../../$(PY) -m pytest -q -p no:cacheprovider --nbval-lax --rootdir=. -n $(TEST_WORKERS) --dist loadfile $(addsuffix .ipynb,$(NAMES))

repro: data ## one minute on an idle machine: does this machine train the committed weights? (lib.repro; exit 1 if not)
	$(PY) -m lib.repro

bench: data ## measure set-up, data load, training and forecast speed: figures/tables/bench.csv
	$(PY) -m lib.bench
	$(PY) -m lib.report

clean: ## remove build/ (caches, trained predictors, executed notebooks); keeps .venv and data
	rm -rf build
