"""Typed settings from RAGD_ environment variables, immutable once loaded."""

from __future__ import annotations

import difflib
import logging
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from .errors import ConfigError


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _unset_if_blank(value: Any) -> Any:
    """An empty (or blank) secret is no secret: `RAGD_METRICS_TOKEN=` must not let every caller in."""
    secret = value.get_secret_value() if isinstance(value, SecretStr) else value
    return None if isinstance(secret, str) and not secret.strip() else value


# RAGD_ variables that are not settings of this process: the test suite's server, compose's database password
NOT_SETTINGS = frozenset({"RAGD_TEST_DSN", "RAGD_DB_PASSWORD"})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGD_", frozen=True, extra="ignore")

    home: Path = Field(default_factory=lambda: Path.home() / ".ragd")
    database_url: str | None = None
    # where tenant sessions log in (host, port, options); user and password are each tenant's own role (0006)
    app_database_url: str | None = None
    # how long a caller waits for a database connection before the request fails (database_unavailable, 503)
    db_timeout_s: float = Field(default=10.0, gt=0, le=600)
    # tenant sessions: a statement (and a transaction left idle) may run this long, and waits at most
    # db_lock_timeout_s for a lock, so no tenant's SQL holds a backend or a lock for long
    db_statement_timeout_s: float = Field(default=300.0, gt=0, le=86400)
    db_lock_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    # each tenant's role: sessions open at once (ragd's own tenant pools count: 4 per process), and the temporary
    # files one of its statements may write (MB; needs a superuser or SET on temp_file_limit, else not set), so no
    # tenant's SQL takes every connection or fills the disk
    tenant_connection_limit: int = Field(default=20, ge=1, le=10_000)
    tenant_temp_file_limit_mb: int = Field(default=2048, ge=1)
    embedder: str = "bge-small-en"
    tenant: str = "default"
    collection: str = "default"
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str | None = None
    embed_timeout_s: float = 30.0
    embed_max_retries: int = 4
    # 1 measured fastest here (41 docs/s vs 24 at 16) and makes each vector independent of its
    # batch neighbours: the int8 model quantises activations with one scale per batch.
    onnx_batch_size: int = 1
    onnx_threads: int = 0  # 0: one per core
    cache_ttl_s: float = 300.0  # search result cache; 0 disables it
    cache_entries: int = 1024
    # reranking (when a search asks for it): none, local, cohere:MODEL, together:MODEL or http:URL
    reranker: str = "local"
    rerank_top: int = Field(default=20, ge=1, le=50)  # candidates rescored; the rest keep the fused order
    rerank_weight: float = Field(default=0.2, ge=0.0, le=1.0)  # cross-encoder share of the blended score
    rerank_timeout_s: float = Field(default=3.0, gt=0)
    # `ragd eval` reranks with this timeout instead (a plan's figures must be the reranker's, not the fused order's
    # of the queries it gave up on under load); skipped queries are counted per plan all the same
    eval_rerank_timeout_s: float = Field(default=120.0, gt=0)
    rerank_max_tokens: int = Field(default=256, ge=32, le=512)  # per (query, passage) pair, local model
    # the local model reads a longer passage in windows of rerank_max_tokens, the best one counting (off: its head)
    rerank_windows: bool = True
    rerank_url: str | None = None  # another endpoint for cohere:/together: (a proxy, a test server)
    rerank_api_key: str | None = None
    # abstention (seed 001 section 7): the cross-encoder probability when the reranker ran, else the best RRF
    # score (k = 60) of the first candidates, from their ranks in both legs
    abstain_rerank_threshold: float = Field(default=0.15, ge=0.0, le=1.0)
    abstain_rrf_threshold: float = Field(default=0.030, ge=0.0, le=1.0)
    # answerability beyond relevance (answer/answerable.py): the evidence must hold the question's years, quoted
    # terms and names, an answer of the kind asked, this idf-weighted share of its words and this share of its
    # word pairs together (where several sources compete; else the single-source coverage); off: relevance alone
    answerable: bool = True
    answerable_min_coverage: float = Field(default=0.5, ge=0.0, le=1.0)
    answerable_min_phrases: float = Field(default=0.5, ge=0.0, le=1.0)
    answerable_single_source_coverage: float = Field(default=0.4, ge=0.0, le=1.0)
    # the answer writer: extractive (offline, the default), openai:MODEL, anthropic:MODEL or gguf:PATH
    generator: str = "extractive"
    llm_base_url: str | None = None  # default: the provider's own API (openai, anthropic)
    llm_api_key: str | None = None  # default: OPENAI_API_KEY or ANTHROPIC_API_KEY
    llm_timeout_s: float = Field(default=60.0, gt=0)  # per attempt
    llm_max_retries: int = Field(default=2, ge=0, le=10)  # on 408/409/429/5xx and transport errors
    llm_max_tokens: int = Field(default=1024, ge=16, le=32768)  # of the answer
    llm_seed: int = 0  # where the service takes one (OpenAI-compatible, gguf)
    llm_context_tokens: int = Field(default=8192, ge=1024)  # gguf: the model's context window
    # requests per API key per minute on the REST server (0: no limit); seed 002's agent-tool guardrail
    rate_limit_per_minute: int = Field(default=30, ge=0)
    # where the CLI writes the one JSON line per answered query (logger ragd.query): off, stdout or stderr
    query_log: Literal["off", "stdout", "stderr"] = "off"
    # HNSW candidates per search: hnsw_ef_search up to hnsw_ef_search_grow_from active chunks, then growing as
    # the square root of the collection's size (0: fixed). Measured (bench/scale.py, bge vectors): recall@10
    # 0.97-0.99 at 100k chunks with 100; at 1M 0.91-0.92 with 100, 0.956-0.966 with 400 (what this gives
    # there), p95 13 ms
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000)
    hnsw_ef_search_grow_from: int = Field(default=62_500, ge=0)
    exact_scan_threshold: int = Field(default=5000, ge=0)
    # BM25 postings of frequent terms kept in each process between searches (retrieve/postings.py; exact: checked
    # against the collection's counters at every search): at most this many MiB (0: off), terms of at least this
    # many postings (18 bytes each with their normalisation). At 1M chunks (bench/scale.py) 200 queries' frequent
    # terms took 368 MB: warm lexical p95 25.6 ms uncached, 15.8 within 256 MB (evicting), 10.9 within 1 GB
    lexical_cache_mb: int = Field(default=512, ge=0)
    lexical_cache_min_postings: int = Field(default=16_384, ge=1)
    # the precision a new collection's HNSW index walks at (pinned at creation): halfvec (the default: 57% of the
    # index's size, the same SciFact nDCG@10 and recall@100 with bge-small vectors, the same recall@10 at 300k; the
    # rows and every score stay float4) or vector (float4)
    vector_type: Literal["vector", "halfvec"] = "halfvec"
    # the breadth a new collection's HNSW graph is built and grown at (pgvector's ef_construction; pinned at
    # creation): how many candidates each insert weighs when it links a vector in. At 1M chunks (bench/scale.py,
    # ef_search 401) a graph built whole reads recall@10 0.957 at 64, 0.962 at 128, and 128 inserts at 0.77 of
    # 64's rate
    hnsw_ef_construction: int = Field(default=64, ge=32, le=1000)
    # an ingest run ends by compacting the collection's BM25 blocks once ingest has written this many since the last
    # compaction (a batch writes one per term it holds; 0: only `ragd compact` compacts)
    compact_after_blocks: int = Field(default=200_000, ge=0)
    max_file_bytes: int = Field(default=200 * 1024 * 1024, gt=0)
    # Office files (zip) may not unpack to more than this; workbooks may not hold, merge or span more cells
    max_unzipped_bytes: int = Field(default=200 * 1024 * 1024, gt=0)
    max_cells: int = Field(default=2_000_000, gt=0)
    # characters of text one document may hold once extracted (chunking, keywords and near-duplicate signatures
    # run in the ingesting process at about 1.6 s per million characters, so this bounds each item's share there)
    max_document_chars: int = Field(default=20_000_000, gt=0)
    # each file is extracted in a worker process, stopped past this time or memory (isolation off: in-process)
    extract_isolation: bool = True
    ingest_workers: int = Field(default=0, ge=0)  # files extracted at once (worker processes); 0: the cores available
    # with more than one worker, a PDF of this many pages or more is read by all of them at once, in page ranges
    pdf_split_pages: int = Field(default=64, ge=2)
    extract_timeout_s: float = Field(default=600.0, gt=0)
    extract_memory_mb: int = Field(default=4096, ge=128)
    # legacy .doc/.ppt (and RTF with tables) through LibreOffice: each conversion's time and address space, and
    # whether it runs in network and PID namespaces of its own where the kernel allows it (auto) or never (false).
    # Read from the environment by ragd.ingest.extract.legacy in whichever process converts.
    convert_timeout_s: float = Field(default=120.0, ge=1)
    convert_memory_mb: int = Field(default=2048, ge=1)
    convert_namespaces: Annotated[Literal["auto", "false"], BeforeValidator(_lower)] = "auto"
    # a page image drawn for a request (GET /v1/documents/{ref}/pages/{n}.png) is rendered in a worker process (when
    # extract_isolation is on), stopped past this time: no original or quote keeps a server thread busy for longer
    render_timeout_s: float = Field(default=20.0, gt=0, le=600)
    # a run whose lookups will touch a quarter or more of an index's pages (the indexes of the tables it writes:
    # LSH bands, external ids, content hashes, embedding cache, its HNSW graph...) has the server read that index
    # ahead, in order, when those hold this many pages (8 kB) or more (ragd.ingest.prefetch; needs pg_prewarm,
    # else the run reads as it goes)
    ingest_prefetch: bool = True
    ingest_prefetch_min_pages: int = Field(default=1024, ge=0)
    # whole-document MinHash similarity at or above which a new document is a near-duplicate; 1.0 disables
    near_duplicate_threshold: float = Field(default=0.9, ge=0.5, le=1.0)
    # without a terminal (--json, background, CI), long ingests and evals print a progress line this often
    progress_interval_s: float = Field(default=10.0, ge=0.0)
    # OCR of scanned pages: auto (tesseract when on PATH, else rapidocr), rapidocr or tesseract
    ocr: Annotated[Literal["auto", "rapidocr", "tesseract"], BeforeValidator(_lower)] = "auto"
    # `ragd serve`: where each request's JSON line (logger ragd.request) goes
    request_log: Literal["off", "stdout", "stderr"] = "stderr"
    debug: bool = False  # the CLI prints a traceback for an internal error
    # open mode (no API keys) on a database whose keys were all revoked: refused unless this is set
    allow_open: bool = False
    # open mode: host names a request's Host may carry besides loopback's (127.0.0.1, localhost, [::1])
    allowed_hosts: str = ""
    # GET /metrics (Prometheus): served to loopback only, unless this token is set; then to any caller that sends
    # it (Authorization: Bearer TOKEN), and only to them. Empty is unset: loopback only
    metrics_token: Annotated[SecretStr | None, BeforeValidator(_unset_if_blank)] = None

    # ingestion jobs (ragd.jobs): files a tenant may have queued or running at once (beyond: 429 / the CLI waits),
    # tries of a file's job on transient failures (a lost database, an embedder's 429/5xx), the first wait
    # between them (doubling each time), how often a worker reports it lives, and how long one may stay silent
    # before its jobs are given to another
    queue_max_files: int = Field(default=10_000, ge=1)
    job_attempts: int = Field(default=5, ge=1, le=50)
    job_retry_wait_s: float = Field(default=2.0, ge=0)
    worker_heartbeat_s: float = Field(default=10.0, gt=0)
    worker_stalled_s: float = Field(default=30.0, gt=0)
    # how often an idle worker looks for a job: workers poll, they do not LISTEN (the queue sends no notifications,
    # which any role could hear and send; migration 29)
    worker_poll_s: float = Field(default=0.5, gt=0, le=60)
    # `ragd serve` runs jobs too: auto (on the embedded server), on or off; this many at once per process
    serve_jobs: Literal["auto", "on", "off"] = "auto"
    job_concurrency: int = Field(default=1, ge=1, le=64)
    # read replicas (comma separated URLs): search and ask go to the first one that answers and whose replay
    # lags the primary by at most replica_max_lag_s; everything else, and a request with no such replica, goes
    # to the primary
    read_database_url: str | None = None
    replica_max_lag_s: float = Field(default=5.0, ge=0)
    # a client's read right after its write waits this long at most for a replica to replay the write
    read_your_writes_wait_s: float = Field(default=2.0, ge=0)

    # where original files are kept (per version, by their SHA-256): postgres (in the database), a directory
    # (an absolute path or file:// URI), an S3-compatible bucket (s3://bucket/prefix) or off (no downloads, page
    # images or `ragd reindex`)
    originals: str = "postgres"
    # RAGD_ORIGINALS=s3://...: the S3-compatible endpoint (MinIO, R2...; default AWS) and region
    s3_endpoint_url: str | None = None
    s3_region: str | None = None

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def artifacts(self) -> Path:
        return self.home / "artifacts"


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment (and overrides), a bad value reported as one ConfigError line that names
    its RAGD_ variable."""
    unknown = sorted(name for name in os.environ if name.startswith("RAGD_") and name not in NOT_SETTINGS
                     and name[5:].lower() not in Settings.model_fields)
    for name in unknown:
        known = [f"RAGD_{field.upper()}" for field in Settings.model_fields]
        close = difflib.get_close_matches(name, known, n=1)
        logging.getLogger("ragd.config").warning(
            "%s is not a ragd setting and is ignored%s", name, f" (did you mean {close[0]}?)" if close else "")
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            problems.append(f"RAGD_{field.upper()}={error.get('input')!r}: {error['msg']}")
        raise ConfigError("bad configuration: " + "; ".join(problems)) from exc
