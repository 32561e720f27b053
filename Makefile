# One venv for everything; `make run` and `make test` are the README's first two commands.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# the suite's parts (tests/conftest.py's PARTS): `make test-lib`, ...; ARGS="..." passes more to pytest
PARTS := lib native cli broker fault spark

.PHONY: setup run lint test test-pure $(addprefix test-,$(PARTS)) bench vendor clean

setup: $(STAMP)

# pip install -e . builds the C extension in place (rocketstore._native); without a compiler it warns and the
# package runs in pure Python. Editing a .c file re-runs this.
$(STAMP): pyproject.toml requirements-test.txt setup.py $(wildcard src/native/*.[ch] src/native/*/*.[ch])
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

run: setup
	$(PY) examples/mainjob.py --store work/store --messages 300000

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(PY) -m pytest

# the whole suite on the pure Python engine (the reference, and the fallback without a compiler); one part of it:
# `make test-pure ARGS="--part lib"`
test-pure: setup
	ROCKETSTORE_PURE=1 $(PY) -m pytest $(ARGS)

$(addprefix test-,$(PARTS)): setup
	$(PY) -m pytest --part $(@:test-%=%) $(ARGS)

bench: setup
	$(PY) bench/bench_store.py

# the console's JavaScript and CSS (htmx, uPlot) from the npm registry, as pinned by its package-lock.json, copied
# into the package (src/rocketstore/console/static, committed: an install needs no npm); needs node and npm
CONSOLE_ASSETS := src/rocketstore/console/assets
vendor:
	cd $(CONSOLE_ASSETS) && npm ci --no-audit --no-fund --silent
	cp $(CONSOLE_ASSETS)/node_modules/htmx.org/dist/htmx.min.js src/rocketstore/console/static/htmx.min.js
	cp $(CONSOLE_ASSETS)/node_modules/uplot/dist/uPlot.iife.min.js src/rocketstore/console/static/uPlot.iife.min.js
	cp $(CONSOLE_ASSETS)/node_modules/uplot/dist/uPlot.min.css src/rocketstore/console/static/uPlot.min.css

clean:
	rm -rf work build dist src/*.egg-info
