# `make run`: set up .venv and run the quick job; `make test`: set up .venv and run the tests.
VENV := .venv
BIN := $(VENV)/bin
PARTITION := results/partitions/digits_alpha0.5_C10_seed0.npz

.PHONY: setup run test

setup: $(VENV)/.installed

# torch 2.13.0 comes from the local CPU wheel here and from the cluster's index elsewhere;
# naming both pins in one command keeps pip from pulling a CUDA torch for torchvision.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet torch==2.13.0 torchvision==0.28.0 -e '.[test]'
	touch $@

run: setup
	$(BIN)/asyncfl data --dataset digits
	$(BIN)/asyncfl partition --dataset digits --clients 10 --alpha 0.5 --seed 0 --out $(PARTITION)
	$(BIN)/asyncfl train --dataset digits --partition $(PARTITION) --algorithm afl --clients-per-round 5 \
		--rounds 30 --local-epochs 5 --seed 0 --config config/quick-train.yaml --out results/quick/afl

test: setup
	$(BIN)/python -m pytest
