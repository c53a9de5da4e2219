"""Conformance: check an installation against golden data pinned per spec version (seed 000, section 5).

The golden file (`golden-v1.json`, beside the corpus it describes) holds, for a fixed corpus:

- each document's chunks: index, id, sha256 of the content, token count. **Bit-identical** on every machine:
  extraction of these text formats, chunking, the tokenizer and the ids are pure functions;
- the vectors of fixed probe texts: the hashing embedder's within 1e-6 per component (float rounding of the
  final normalisation); the int8 ONNX model's within cosine 0.99 (its kernels differ by CPU);
- for fixed queries, the top-k chunk ids of each plan with their scores. A result conforms when every score is
  within the plan's tolerance of the golden one and the order holds wherever two golden scores differ by more
  than that tolerance (inside a tie, any order; ties are broken by (doc_id, chunk_index) on one machine, but a
  score that moves by a rounding step may cross a tie on another).

It also checks that ingesting the same corpus again changes nothing (every document `unchanged`).
The corpus goes into tenant `conformance`, one collection per embedder, so the ids are the same everywhere.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import Collection, Ragd
from ..errors import ConfigError, RagdError
from ..ids import sha256_text
from ..ingest.bounds import Limits
from ..ingest.extract import ExtractOptions
from ..ingest.read import extract_path
from ..store import queries
from ..types import ExtractedDocument

SPEC_VERSION = "1"
TENANT = "conformance"
K = 5
PLANS = ("lexical", "vector", "rrf", "weighted")
EMBEDDERS = ("hash", "bge-small-en")
QUERIES = (
    "how many weeks of parental leave",
    "hotel limit in London",
    "which incident took the login service down",
    "password rules",
    "what to do with a lost laptop",
    "vegan lunch in the cafeteria",
    "notice period when leaving",
    "carry over unused holiday days",
)
PROBES = ("parental leave in Germany", "Incident | Date | Severity", "Passwords are rotated every 90 days.")
# Score tolerance per embedder and plan. BM25 and the hashing embedder are exact up to float rounding. The int8
# model's cosines may move by up to 0.02 on another CPU; that moves an RRF score by at most about two rank steps
# (1/(60+r) - 1/(62+r) < 0.001) and a min-max normalised weighted score by a few hundredths.
EXACT = 1e-5
TOLERANCE = {"hash": dict.fromkeys(PLANS, EXACT),
             "bge-small-en": {"lexical": EXACT, "vector": 0.02, "rrf": 0.001, "weighted": 0.05}}
MIN_COSINE = {"hash": 1 - 1e-9, "bge-small-en": 0.99}


@dataclass
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class Report:
    spec_version: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"spec_version": self.spec_version, "passed": self.passed,
                "checks": [dataclasses.asdict(c) for c in self.checks]}


def _package() -> Any:
    return resources.files("ragd.conformance")


def corpus() -> list[ExtractedDocument]:
    """The fixed corpus, extracted, with ids that do not depend on where ragd is installed."""
    docs: list[ExtractedDocument] = []
    limits = Limits(max_file_bytes=1 << 20, max_unzipped_bytes=1 << 20, max_cells=10_000, timeout_s=60,
                    memory_mb=1024)
    folder = _package().joinpath("corpus")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        with resources.as_file(entry) as path:
            for doc in extract_path(Path(path), limits, ExtractOptions()):
                if isinstance(doc, Exception):
                    raise RagdError(f"conformance corpus file {entry.name} could not be read: {doc}")
                record = doc.external_id if entry.name.endswith(".jsonl") else ""
                external_id = f"{entry.name}#{record}" if record else entry.name
                docs.append(dataclasses.replace(doc, external_id=external_id,
                                                source_uri=f"conformance:{external_id}"))
    return docs


def snapshot(client: Ragd, embedder: str) -> dict[str, Any]:
    """What the golden file pins for one embedder, computed by this installation."""
    col = _collection(client, embedder)
    docs = corpus()
    first = col.ingest(documents=docs)
    if first.failed:
        raise RagdError(f"conformance corpus failed to ingest: {first.failed[0].reason}")
    again = col.ingest(documents=docs)
    chunks: dict[str, list[list[Any]]] = {}
    with col.store.tenant(TENANT) as conn:
        rows = conn.execute(queries.ACTIVE_CHUNKS, {"collection_id": col.collection_id}).fetchall()
    for external_id, index, chunk_id, content, tokens in rows:
        chunks.setdefault(external_id, []).append([index, chunk_id, sha256_text(content), tokens])
    searches = {plan: {q: [[str(h.chunk_id), round(h.score, 7)] for h in col.search(q, k=K, fusion=plan)]
                       for q in QUERIES} for plan in PLANS}
    vectors = [[round(float(x), 7) for x in v] for v in col.embedder.embed_documents(list(PROBES))]
    return {"embed_model": col.embed_model, "chunks": chunks, "search": searches, "vectors": vectors,
            "reingest_unchanged": again.count("unchanged"), "documents": len(first.items)}


def _collection(client: Ragd, embedder: str) -> Collection:
    if embedder not in EMBEDDERS:
        raise ConfigError(f"conformance covers the embedders {', '.join(EMBEDDERS)}, not {embedder!r}")
    # a client of its own, whatever RAGD_EMBEDDER says: each collection is pinned to its embedder
    return Ragd(client.store, client.settings, embedder).collection(f"v{SPEC_VERSION}-{embedder}", tenant=TENANT)


def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_package().joinpath(f"golden-v{SPEC_VERSION}.json").read_text("utf-8"))
    return data


def pin(client: Ragd, path: Path) -> None:
    """Write the golden file from this installation (only when the spec version changes)."""
    data = {"spec_version": SPEC_VERSION, "k": K, "queries": list(QUERIES), "probes": list(PROBES),
            "embedders": {e: snapshot(client, e) for e in EMBEDDERS}}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def run(client: Ragd, embedders: tuple[str, ...] = EMBEDDERS, gold: dict[str, Any] | None = None) -> Report:
    """Check this installation against the golden data (the shipped file unless given); one Check per pinned
    property."""
    gold = gold or golden()
    report = Report(spec_version=gold["spec_version"])
    for embedder in embedders:
        want = gold["embedders"][embedder]
        got = snapshot(client, embedder)
        report.checks.append(Check(f"{embedder}: model", got["embed_model"] == want["embed_model"],
                                   f"{got['embed_model']} (golden {want['embed_model']})"))
        report.checks += _chunk_checks(embedder, want["chunks"], got["chunks"])
        report.checks.append(Check(f"{embedder}: re-ingest is a no-op",
                                   got["reingest_unchanged"] == got["documents"] == want["documents"],
                                   f"{got['reingest_unchanged']} of {got['documents']} unchanged"))
        cosines = [float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
                   for a, b in zip(np.asarray(got["vectors"]), np.asarray(want["vectors"]))]
        worst = max(abs(a - b) for va, vb in zip(got["vectors"], want["vectors"]) for a, b in zip(va, vb))
        vectors_ok = min(cosines) >= MIN_COSINE[embedder] and (embedder != "hash" or worst <= 1e-6)
        report.checks.append(Check(f"{embedder}: probe vectors", vectors_ok,
                                   f"min cosine {min(cosines):.6f}, max component difference {worst:.2e}"))
        for plan in PLANS:
            tol = TOLERANCE[embedder][plan]
            problems = [f"{q!r}: {p}" for q in QUERIES
                        if (p := conforms(want["search"][plan][q], got["search"][plan][q], tol))]
            report.checks.append(Check(f"{embedder}: top-{K} {plan}", not problems,
                                       problems[0] if problems else f"{len(QUERIES)} queries within {tol:g}"))
    return report


def _chunk_checks(embedder: str, want: dict[str, Any], got: dict[str, Any]) -> list[Check]:
    missing = sorted(set(want) ^ set(got))
    differ = sorted(d for d in set(want) & set(got) if want[d] != got[d])
    n = sum(len(v) for v in want.values())
    detail = (f"documents differ: {missing[:3]}" if missing else
              f"chunks differ in {differ[:3]}" if differ else f"{len(want)} documents, {n} chunks bit-identical")
    return [Check(f"{embedder}: chunk ids, indexes, hashes, tokens", not missing and not differ, detail)]


def conforms(want: list[list[Any]], got: list[list[Any]], tol: float) -> str:
    """'' when got matches want: same length, each score within tol of the golden score at its rank, and the
    golden order kept except within runs of scores closer than tol (the last run may hold other chunks of
    the same score: a tie at the cut-off)."""
    if len(got) != len(want):
        return f"{len(got)} results, golden {len(want)}"
    for rank, ((_, ws), (_, gs)) in enumerate(zip(want, got), start=1):
        if abs(ws - gs) > tol:
            return f"rank {rank}: score {gs} vs golden {ws}"
    runs: list[list[int]] = []
    for i in range(len(want)):
        if runs and abs(want[i][1] - want[runs[-1][-1]][1]) <= tol:
            runs[-1].append(i)
        else:
            runs.append([i])
    for n, run in enumerate(runs):
        if n == len(runs) - 1 and run[-1] == len(want) - 1:
            continue  # the tie at the cut-off: scores were checked above
        if {want[i][0] for i in run} != {got[i][0] for i in run}:
            return f"ranks {run[0] + 1}-{run[-1] + 1}: {[got[i][0][:8] for i in run]} vs golden " \
                   f"{[want[i][0][:8] for i in run]}"
    return ""
