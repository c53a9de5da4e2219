PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RAGD_HOME ?= $(CURDIR)/.ragd-demo
export RAGD_HOME

.PHONY: demo test setup bench lint clean

$(BIN)/ragd: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/ragd

setup: $(BIN)/ragd

## Ingest the bundled sample documents, ask a question, print ranked results with sources.
demo: setup
	$(BIN)/ragd ingest samples/ --collection demo --tags demo
	$(BIN)/ragd search "How many days of parental leave do employees in Germany get?" --collection demo --k 5

## The whole test suite against a real embedded PostgreSQL.
test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/ingest_throughput.py
	$(BIN)/python bench/search_latency.py

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src

clean:
	rm -rf $(VENV) .ragd-demo
