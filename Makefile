# bosun: two commands for a new user, `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test system-packages lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,forecast,rl,batch,explain,federation,workload]'
	touch $(STAMP)

## run: install into .venv and run the main job: schedule the example manifests, then
## replay a synthetic workload in the digital twin under three placement policies, with a
## fault schedule and the energy model, and write the comparison report to out/twin/report.html
run: $(STAMP)
	$(BIN)/bosun schedule --nodes examples/nodes.yaml --pods examples/pods.yaml \
		--config examples/scheduler-config.yaml --explain
	$(BIN)/bosun simulate --trace synthetic --policy fgd,bestfit,leastallocated \
		--faults examples/faults.yaml --energy examples/power.yaml --report out/twin

## system-packages: the programs the tests use (Chromium, Prometheus, etcd, openssl, curl, xz);
## as root, apt-get installs the missing ones; otherwise it stops with the command to run
system-packages:
	@scripts/system-packages.sh

## test: lint, type-check and run the test suite (slow tests excluded)
test: $(STAMP) system-packages
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/pytest -m "not slow"

## bench: print the benchmark tables (the data ones need BOSUN_DATA_DIR or ../shared/data)
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_scheduling.py
	$(BIN)/python benchmarks/bench_fgd.py
	$(BIN)/python benchmarks/bench_twin.py
	$(BIN)/python benchmarks/bench_fragmentation.py
	$(BIN)/python benchmarks/bench_forecast.py
	$(BIN)/python benchmarks/bench_load_aware.py
	$(BIN)/python benchmarks/bench_rl_env.py
	$(BIN)/python benchmarks/bench_rl.py
	$(BIN)/python benchmarks/bench_live.py
	$(BIN)/python benchmarks/bench_twin_part2.py
	$(BIN)/python benchmarks/bench_colocation.py
	$(BIN)/python benchmarks/bench_colocation_nab.py
	$(BIN)/python benchmarks/bench_federation.py
	$(BIN)/python benchmarks/bench_batch.py
	$(BIN)/python benchmarks/bench_explain.py
	$(BIN)/python benchmarks/bench_workload.py
	$(BIN)/python benchmarks/bench_twin_scale.py --cases 1k,5k,openb

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
