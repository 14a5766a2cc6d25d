# Two commands matter: `make run` (the app) and `make test` (everything CI checks).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export XDG_RUNTIME_DIR ?= /tmp/runtime-$(shell id -u)

.PHONY: setup run test bench lint conformance-baseline screenshots clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	@bash scripts/setup.sh
	@touch $(STAMP)

run: setup
	@bash scripts/run.sh $(MODEL)

test: setup
	@mkdir -p $(XDG_RUNTIME_DIR) && chmod 700 $(XDG_RUNTIME_DIR)
	$(VENV)/bin/ruff check engine workbench tests scripts
	$(VENV)/bin/lint-imports
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider
	bash scripts/check_wheel.sh $(PY)

bench: setup
	$(PY) -m engine bench --zoo --backend cpu --compare onnxruntime --repeat 20

conformance-baseline: setup
	$(PY) scripts/update_baselines.py

screenshots: setup
	$(PY) scripts/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache .cache
