"""Shared helpers for the benchmarks: data paths, a private RAGD_HOME, a `ragd serve` process, percentiles, peak
memory."""

from __future__ import annotations

import hashlib
import json
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np

import ragd
from ragd.config import Settings
from ragd.store import embedded

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SCIFACT = DATA / "beir" / "scifact"


def scifact_docs(limit: int | None = None) -> list[dict[str, object]]:
    docs = []
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs.append({"id": rec["_id"], "title": rec["title"], "text": rec["text"]})
            if limit and len(docs) >= limit:
                break
    return docs


def chunk_texts(docs: Sequence[Mapping[str, object]]) -> list[str]:
    """The texts ragd embeds for in-memory documents (each chunk's search text, default chunk policy), in order."""
    from ragd.embed import default_token_counter
    from ragd.ingest.chunk import chunk_blocks
    from ragd.ingest.given import document_from_mapping
    from ragd.types import ChunkPolicy

    counter, policy = default_token_counter(), ChunkPolicy()
    return [c.search_text for d in docs for c in chunk_blocks(document_from_mapping(d).blocks, policy, counter)[0]]


def cached(cache: Path, what: str, texts: Sequence[str]) -> Path:
    """Where an array computed once from texts is kept in `cache`: named by what and a digest of the texts."""
    cache.mkdir(parents=True, exist_ok=True)
    return cache / f"{what}-{hashlib.sha256(chr(0).join(texts).encode('utf-8')).hexdigest()[:16]}.npy"


def embed_once(texts: list[str], what: str, cache: Path, query: bool = False) -> dict[str, np.ndarray]:
    """bge-small-en vectors of texts (as queries or documents), computed once and kept in `cache` (see `cached`),
    so a later run (or another benchmark over the same texts) reads them back."""
    from ragd.embed import OnnxEmbedder

    path = cached(cache, what, texts)
    if path.exists():
        matrix = np.load(path)
    else:
        model = OnnxEmbedder()
        t0 = time.perf_counter()
        matrix = np.stack([model.embed_query(t) for t in texts]) if query else model.embed_documents(texts)
        print(f"embedded {len(texts)} {what} once with bge-small-en: {len(texts) / (time.perf_counter() - t0):.1f}/s",
              flush=True)
        np.save(path, matrix)
    return dict(zip(texts, matrix, strict=True))


def scifact_queries() -> list[str]:
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def summary(values: list[float]) -> str:
    return f"p50 {pct(values, 50):7.2f} ms  p95 {pct(values, 95):7.2f} ms  mean {statistics.fmean(values):7.2f} ms"


@contextmanager
def private_ragd(embedder: str, keep: Path | None = None, **overrides: object) -> Iterator[ragd.Ragd]:
    """A throw-away embedded server, so benchmarks never touch a user's data; `keep` names a folder to reuse;
    `overrides` are settings."""
    with tempfile.TemporaryDirectory(prefix="ragd-bench-") as tmp:
        home = keep or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        settings = Settings(home=home, embedder=embedder, cache_ttl_s=0,  # measure the engine, not the cache
                            **overrides)  # type: ignore[arg-type]
        client = ragd.connect(settings=settings)
        try:
            yield client
        finally:
            client.close()
            embedded.stop(home / "pgdata")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(env: Mapping[str, str], *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """A `ragd serve` process on a free loopback port with this environment (and `args`), once /readyz answers
    200, and its URL; SystemExit when it does not within 120 s."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ragd.cli", "serve", "--port", str(port), *args], env=dict(env),
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit("the server did not become ready in 120 s")
