# The two commands: `make up` and `make test`. Both install what they need (uv from PyPI, then the locked
# workspace) on a machine with only Python >= 3.11 and make.
SHELL := /bin/bash
PYTHON ?= python3
UV := $(or $(shell command -v uv 2>/dev/null),$(CURDIR)/.tools/bin/uv)
LARKBOT_CONFIG ?= config/local.yaml
export LARKBOT_CONFIG
PYTEST_ARGS ?=

.PHONY: up test test-all lint format typecheck bench bench-load profile install clean k8s-rules dashboard

$(CURDIR)/.tools/bin/uv:
	$(PYTHON) -m venv $(CURDIR)/.tools
	$(CURDIR)/.tools/bin/pip install --quiet --disable-pip-version-check 'uv>=0.9,<0.14'

# Bytecode is compiled at install: with PYTHONDONTWRITEBYTECODE set (as on CI machines), every process
# would otherwise compile lark_oapi's ~10,700 modules at each import (20-30 s per service start).
install: $(UV)
	$(UV) sync --locked --all-packages --compile-bytecode

up: install
	$(UV) run --frozen larkbot up --playground --config $(LARKBOT_CONFIG)

# The suite, without the long profiles (`-m "not slow"`); `make test-all` runs everything. TEST_WORKERS
# pytest processes (pytest-xdist, one test file each at a time, each with its own embedded NATS server):
# most tests wait on the bus, the databases and child processes, so two keep a 2-core machine busy.
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
test: install
	$(UV) run --frozen pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-all: install
	$(UV) run --frozen pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: install
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .

format: install
	$(UV) run --frozen ruff format .
	$(UV) run --frozen ruff check --fix .

typecheck: install
	$(UV) run --frozen mypy libs/canonical/src libs/runtime/src libs/cli/src libs/testkit/src services/*/src

bench: install
	$(UV) run --frozen larkbot bench --json

# A sustained load on every service as processes, with the fake platforms and model: 1,000 chats for
# MINUTES (10) minutes; turn latency, consumer lag and memory over time into docs/img/load.json and
# docs/img/load.png (docs/performance.md), the services' logs and databases under data/bench-load. By
# hand: not part of `make test` (its smoke size is). BENCH_LOAD_ARGS adds options, e.g.
# --database-url postgresql+asyncpg://…/postgres (the pipeline and driver on PostgreSQL), --rate 2.
MINUTES ?= 10
BENCH_LOAD_ARGS ?=
bench-load: install
	rm -rf data/bench-load
	$(UV) run --frozen python -m larkbot.testkit.bench.load --minutes $(MINUTES) \
		--json docs/img/load.json --png docs/img/load.png --keep data/bench-load $(BENCH_LOAD_ARGS)

# Where the hot paths spend their CPU: py-spy on the turn bench's services and on the pipeline bench
# (folded stacks and a summary under data/profiles; docs/performance.md). By hand, a few minutes.
profile: install
	$(UV) run --frozen python -m larkbot.testkit.bench.profile --out data/profiles

# The PrometheusRule of the Kubernetes `monitoring` component, from deploy/prometheus/alerts.yml.
k8s-rules: install
	$(UV) run --frozen python deploy/k8s/components/monitoring/prometheusrule.py

# The Grafana dashboard (compose's file and the monitoring component's ConfigMap), from its panels.
dashboard: install
	$(UV) run --frozen python deploy/grafana/dashboard.py

clean:
	rm -rf data .pytest_cache .mypy_cache .ruff_cache
