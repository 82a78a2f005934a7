# `make run`: set up .venv and run the quick pipeline; `make test`: set up .venv and run the tests.
VENV := .venv
BIN := $(VENV)/bin
QUICK := --configfile .test/config/quick.yaml
# Rules call `python -m asyncfl`: the project's environment comes first.
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: setup run test test-unit fuzz

setup: $(VENV)/.installed

# The torch and torchvision pins, from pyproject.toml (their one place): torch comes from the local CPU
# wheel here and from the cluster's index elsewhere; naming both pins in one command keeps pip from
# pulling a CUDA torch for torchvision.
TORCH_PINS := $(shell grep -oE '"torch(vision)?==[0-9.]+"' pyproject.toml | tr -d '"')

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_PINS) -e '.[workflow,test]'
	touch $@

# One shell, so it can say what it does before the install and time setup and pipeline apart. The report
# is written aside and moved in whole: a full disk leaves no truncated report.html.
run:
	@echo "make run: (1) set up .venv and install asyncfl (the first time: pip, 1 to 3 min), (2) the quick pipeline (.test/config/quick.yaml), (3) its report"
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory setup || exit $$?; \
	setup=$$(( $$(date +%s) - start )); \
	$(BIN)/python -m asyncfl.bench.quick_estimate; \
	begin=$$(date +%s); \
	$(BIN)/snakemake $(QUICK) --cores 2 || exit $$?; \
	pipeline=$$(( $$(date +%s) - begin )); \
	mkdir -p results/reports; \
	$(BIN)/snakemake $(QUICK) --report results/reports/.quick.partial.html || exit $$?; \
	mv results/reports/.quick.partial.html results/reports/quick.html; \
	echo "took: setup $$setup s, pipeline $$pipeline s, report $$(( $$(date +%s) - begin - pipeline )) s"; \
	echo "figures: results/figures/*/ (PNG and PDF)"; \
	echo "report:  results/reports/quick.html"; \
	echo "archive: results/archive/quick/ (asyncfl-results.tar.gz, SHA256SUMS, provenance.json, .zenodo.json)"

# Every test, each file on one of four worker processes on two cores (docs/development.md "Test tiers"):
# the three SLURM files, which mostly wait on the cluster, beside the others. One torch thread a process: torch's
# threads spin while they wait, and three processes of two threads on two cores ran the suite several times slower.
test: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 4 --dist loadfile --no-loadscope-reorder

# The inner loop: the package's in-process unit tests only (no processes, Snakemake or SLURM).
test-unit: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist loadfile -m "not subprocess and not workflow and not slurm"

# The generated-input layer's longer search: ASYNCFL_FUZZ random examples a surface (default 2000), not
# CI's fixed ones; a find becomes a case in tests/test_generated_inputs.py (docs/development.md).
fuzz: setup
	ASYNCFL_FUZZ=$${ASYNCFL_FUZZ:-2000} OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 tests/test_generated_inputs.py -k generated
