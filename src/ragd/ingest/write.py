"""The last room: a batch of prepared documents planned (unchanged, relabelled, duplicate, reactivated or new)
and written in one transaction through the store's SQL: versions, chunks, vectors (embedded with the cache, ahead
of the commit), BM25 postings, originals and artifacts, and each item's outcome."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import psycopg

from ..errors import (
    RagdError,
    Superseded,
)
from ..ids import chunk_id as make_chunk_id
from ..ids import doc_version_id as make_version_id
from ..ids import sha256_text
from ..store import queries
from ..store.originals import media_type
from ..store.originals import originals_for as original_files
from ..types import ExtractedDocument, ItemOutcome
from . import dedupe, prefetch
from .normalize import storable
from .state import PART_ITEMS, STOP_CODES, Collection, Duplicates, Prepared, RunState, fail_item

SAME_CONTENT = "same content as "  # the reason of a duplicate, before the external id of the document it repeats


# -- embedding with the cache ------------------------------------------------------------------------

class _Tally(Protocol):
    embedded: int
    cache_hits: int


@dataclass
class Ahead:
    """A batch's vectors embedded before its commit (by content hash), and what that took."""
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    embedded: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    counted: bool = False  # added to the run's figures once, even when the commit is retried item by item


def embed_cached(col: Collection, texts: Sequence[str], tally: _Tally,
                 ahead: Ahead | None = None) -> np.ndarray:
    """Vectors for texts in order; each distinct text is embedded at most once per model, ever. The model runs
    outside any transaction: the cache is read in one short transaction and written in another. Texts found in
    `ahead` are taken from it."""
    if not texts:
        return np.zeros((0, col.dims), dtype=np.float32)
    hashes = [sha256_text(t) for t in texts]
    found: dict[str, np.ndarray] = {}
    if ahead is not None:
        found = {h: ahead.vectors[h] for h in hashes if h in ahead.vectors}
    wanted = sorted(set(hashes) - set(found))
    if wanted:
        with col.store.tenant(col.tenant) as conn:
            rows = conn.execute(queries.CACHE_LOOKUP, {"embed_model": col.embed_model, "hashes": wanted}).fetchall()
        for h, vec in rows:
            found[h] = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)
        tally.cache_hits += len(rows)
    missing: dict[str, str] = {}
    for h, t in zip(hashes, texts):
        if h not in found and h not in missing:
            missing[h] = t
    if missing:
        vectors = col.embedder.embed_documents(list(missing.values()))
        col.check_dims(vectors.shape[1])
        with col.store.tenant(col.tenant) as conn:
            conn.execute(queries.CACHE_INSERT, {"tenant_id": col.tenant, "embed_model": col.embed_model,
                                                "hashes": list(missing), "embeddings": list(vectors)})
        found.update(zip(missing, vectors))
    tally.embedded += len(missing)
    return np.stack([found[h] for h in hashes])


def embed_ahead(col: Collection, batch: list[Prepared], state: RunState) -> Ahead:
    """Embed a batch while the batch before it is written, with the rest of a new version's work that needs no
    decision: its MinHash signature and the stored signatures similar to it. Documents stored with this content
    already are left out; the commit plans again and does whatever it needs that is not done here (its artifact
    too: written for a version that turned out a duplicate, it would be kept for nothing)."""
    started = time.perf_counter()
    doc_ids = sorted({p.doc_id for p in batch}, key=str)
    with col.store.tenant(col.tenant) as conn:
        stored = {row[0]: row[5] for row in conn.execute(queries.BATCH_DOCUMENT_STATE, {"doc_ids": doc_ids})}
    fresh = [p for p in batch if stored.get(p.doc_id) != p.content_hash]
    for p in fresh:
        _sign(p)
        _serialize(p)  # its artifact's line (written only if the commit stores the version)
    if fresh and state.near_threshold < 1.0:  # the band lookups (at 1M chunks a tenth of a batch's server time),
        # off the writer's path; the batch before is not committed yet, but its documents are in the run's index
        with col.store.tenant(col.tenant) as conn:
            _similar_stored(conn, col, fresh, state.read_ahead)
    texts = [c.search_text for p in fresh for c in p.chunks]
    ahead = Ahead()
    vectors = embed_cached(col, texts, ahead)
    ahead.vectors = {sha256_text(t): v for t, v in zip(texts, vectors)}
    if texts:  # the lexemes on this backend, beside the one writing the batch before (a quarter of a batch's server
        # time, taken off the writer's); a version without them has them made in its commit
        with col.store.tenant(col.tenant) as conn:
            lexemes = iter([r[0] for r in conn.execute(queries.LEXEMES, {"texts": texts})])
        for p in fresh:
            p.lexemes = [next(lexemes) for _ in p.chunks]
    ahead.seconds = time.perf_counter() - started
    return ahead


# -- planning and writing ----------------------------------------------------------------------------


def _plan(conn: psycopg.Connection[Any], col: Collection, batch: list[Prepared], duplicates: Duplicates,
          state: RunState) -> None:
    """Decide each document's action: unchanged, labels, duplicate (exact or near), reactivate or new."""
    doc_ids = sorted({p.doc_id for p in batch}, key=str)
    states = {row[0]: row for row in conn.execute(queries.BATCH_DOCUMENT_STATE, {"doc_ids": doc_ids})}
    active_by_hash: dict[str, list[tuple[uuid.UUID, str]]] = {}
    if duplicates == "skip":  # other documents with the same content: only looked for when they are skipped
        for h, doc, ext in conn.execute(queries.BATCH_ACTIVE_WITH_HASH, {
                "hashes": sorted({p.content_hash for p in batch}), "collection_id": col.collection_id}):
            active_by_hash.setdefault(h, []).append((doc, ext))
    known = {(d, h) for d, h in conn.execute(queries.BATCH_KNOWN_VERSIONS, {"doc_ids": doc_ids})}
    new_hashes: dict[str, str] = {}
    for p in batch:
        row = states.get(p.doc_id)
        if row is not None and row[5] == p.content_hash:
            changed = (list(row[1]) != list(p.tags) or row[2] != p.metadata or row[3] != p.doc.title)
            p.action, p.version_id = ("labels" if changed else "unchanged"), row[4]
            p.unkept = row[7] is None  # stored before originals were kept: this file is its original
            continue
        if duplicates == "skip":
            others = [ext for doc, ext in active_by_hash.get(p.content_hash, []) if doc != p.doc_id]
            other = others[0] if others else new_hashes.get(p.content_hash)
            if other is not None:
                p.action, p.reason = "duplicate", f"{SAME_CONTENT}{other}"
                continue
        new_hashes.setdefault(p.content_hash, p.doc.external_id)
        p.version_id = make_version_id(p.doc_id, p.content_hash)
        p.version_number = int(row[6]) + 1 if row is not None else 1
        p.action = "reactivate" if (p.doc_id, p.content_hash) in known else "new"
    _near_duplicates(conn, col, [p for p in batch if p.action == "new"], duplicates, state)


def _near_duplicates(conn: psycopg.Connection[Any], col: Collection, batch: list[Prepared],
                     duplicates: Duplicates, state: RunState) -> None:
    """Compare each new document with the stored active ones and with those accepted earlier in this run.
    At or above the threshold it is recorded as a duplicate (unless duplicates are kept); every pair found
    similar enough to be a candidate is recorded in the run with its score and the decision."""
    for p in batch:  # only documents planned as new need a signature (MinHash is a third of preparing one)
        _sign(p)
    if state.near_threshold >= 1.0:
        return  # the check is off: signatures are stored for later runs, nothing is compared
    stored = _stored_candidates(conn, col, batch, state.read_ahead)
    for i, p in enumerate(batch):
        assert p.signature is not None
        candidates = stored[i] + state.near_index.candidates(p.band_keys)
        match = dedupe.best_match(p.signature, p.doc_id, candidates)
        if match is not None and match[1] >= dedupe.RECORDED:
            other, score = match
            skip = score >= state.near_threshold and duplicates == "skip"
            state.near_decisions.append({"item": p.doc.external_id, "similar_to": other.external_id,
                                         "similarity": round(score, 4), "threshold": state.near_threshold,
                                         "decision": "duplicate" if skip else "kept"})
            if skip:
                p.action = "duplicate"
                p.reason = f"near-duplicate of {other.external_id} (similarity {score:.3f} >= {state.near_threshold})"
                continue
        state.near_index.add(dedupe.Known(p.doc_id, p.doc.external_id, p.signature), p.band_keys)


def _stored_candidates(conn: psycopg.Connection[Any], col: Collection, batch: list[Prepared],
                       read_ahead: prefetch.Prefetch) -> list[list[dedupe.Known]]:
    """Each document's stored candidates similar enough to be recorded (those found ahead, else looked up now)
    that are active now, with their external ids: read here, in the plan's transaction, so a candidate retired
    since it was found is no match (one committed by another run since then is not seen: as one committed while
    this batch is written is not)."""
    unsearched = [p for p in batch if p.near_stored is None]
    if unsearched:
        _similar_stored(conn, col, unsearched, read_ahead)
    versions = sorted({version for p in batch for version, _, _ in p.near_stored or ()})
    active = dict(conn.execute(queries.ACTIVE_CANDIDATES, {"versions": versions}).fetchall()) if versions else {}
    return [[dedupe.Known(doc_id, active[version], signature)
             for version, doc_id, signature in p.near_stored or () if version in active] for p in batch]


def _similar_stored(conn: psycopg.Connection[Any], col: Collection, batch: list[Prepared],
                    read_ahead: prefetch.Prefetch) -> None:
    """Each document's stored signatures (of any version of the collection) sharing an LSH band with it and
    similar enough to be recorded: a candidate below that can be no document's match. Each stored signature comes
    once with the batch's documents sharing a band with it, so each document tests its own (testing every
    candidate of the batch against every document was half of this process's time at 1M)."""
    docs = [i for i, p in enumerate(batch) for _ in p.band_keys]
    keys = [k for p in batch for k in p.band_keys]
    mine = [p.signature for p in batch if p.signature is not None]
    assert len(mine) == len(batch)
    rows = conn.execute(queries.NEAR_DUPLICATE_CANDIDATES, {
        "collection_id": col.collection_id, "docs": docs, "keys": keys}).fetchall() if keys else []
    read_ahead.signatures_read(len(batch), len(rows))
    found: list[list[tuple[uuid.UUID, uuid.UUID, np.ndarray]]] = [[] for _ in batch]
    for version, doc_id, sig, sharing in rows:
        signature = dedupe.from_bytes(sig)
        if signature is None:
            continue  # not a signature ragd wrote: no candidate
        for i in sharing:
            if dedupe.similarity(mine[i], signature) >= dedupe.RECORDED:
                found[i].append((version, doc_id, signature))
    for p, similar in zip(batch, found):
        p.near_stored = similar


def _sign(p: Prepared) -> None:
    if p.signature is None:
        p.signature = dedupe.signature(dedupe.document_text(p.doc))
        p.band_keys = dedupe.band_keys(p.signature)


def _write_new(conn: psycopg.Connection[Any], col: Collection, new: list[Prepared], vectors: np.ndarray) -> None:
    """New versions with their chunks and embeddings, a statement per table for the whole batch."""
    ids = {"tenant_id": col.tenant, "collection_id": col.collection_id}
    effective = [e if isinstance(e := p.metadata.get("effective_at"), str) else None for p in new]
    conn.execute(queries.INSERT_VERSIONS, {
        "tenant_id": col.tenant, "versions": [p.version_id for p in new], "doc_ids": [p.doc_id for p in new],
        "labels": [f"v{p.version_number}" for p in new], "hashes": [p.content_hash for p in new],
        "artifacts": [p.artifact_uri for p in new],
        "counts": [len(p.chunks) for p in new], "effective": effective,
        "sources": [p.source[0] if p.source else None for p in new],
        "source_names": [p.source[1] if p.source else None for p in new],
        "media_types": [p.source[2] if p.source else None for p in new]})
    tags = [json.dumps(list(p.tags), ensure_ascii=False) for p in new]
    rows = [(p, t, e, c) for p, t, e in zip(new, tags, effective) for c in p.chunks]  # a chunk with its document's
    chunk_ids = [make_chunk_id(_version(p), c.chunk_index) for p, _, _, c in rows]
    conn.execute(queries.INSERT_CHUNKS, {
        **ids, "chunk_ids": chunk_ids, "doc_ids": [p.doc_id for p, _, _, _ in rows],
        "versions": [p.version_id for p, _, _, _ in rows], "indexes": [c.chunk_index for *_, c in rows],
        "heading_paths": [json.dumps(list(c.heading_path), ensure_ascii=False) for *_, c in rows],
        "types": [c.chunk_type for *_, c in rows], "contents": [c.content for *_, c in rows],
        "hashes": [sha256_text(c.content) for *_, c in rows], "tokens": [c.token_count for *_, c in rows],
        "tags": [tags for _, tags, _, _ in rows],
        "metadata": [json.dumps(c.metadata, ensure_ascii=False, sort_keys=True) for *_, c in rows],
        "effective": [e for _, _, e, _ in rows], "search_texts": [c.search_text for *_, c in rows],
        "lexemes": [p.lexemes[c.chunk_index] if p.lexemes else None for p, _, _, c in rows]})
    conn.execute(queries.INSERT_EMBEDDINGS, {**ids, "embed_model": col.embed_model, "chunk_ids": chunk_ids,
                                             "embeddings": list(vectors)})


def _keep_originals(conn: psycopg.Connection[Any], col: Collection, state: RunState, new: list[Prepared]) -> None:
    """The files new versions were read from, kept (once per tenant and content) in this transaction. A file read
    for an earlier batch is not read again unless this transaction must keep it; a file gone since it was
    extracted leaves its version without an original."""
    keeper = original_files(col.settings)
    if not keeper.kept:
        return
    checked: set[str] = set()
    for p in new:
        if p.original is None:
            continue
        path, name = p.original
        known = state.sources.get(path)
        data = None
        if known is None:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            known = state.sources[path] = (hashlib.sha256(data).hexdigest(), media_type(name, data[:16]))
        sha, kind = known
        if sha not in checked:
            checked.add(sha)
            if conn.execute(queries.ORIGINAL_KEPT, {"tenant_id": col.tenant, "sha256": sha}).fetchone() is None:
                try:
                    data = data if data is not None else path.read_bytes()
                except OSError:
                    continue
                if hashlib.sha256(data).hexdigest() != sha:
                    continue  # changed since it was read: this version keeps no original
                keeper.put(conn, col.tenant, sha, data)
        p.source = (sha, name, kind)


def _artifacts(col: Collection, new: list[Prepared]) -> None:
    """The new versions' extracted blocks, one pack for them all (content-addressed by version id)."""
    versions = [make_version_id(p.doc_id, p.content_hash) for p in new]
    uris = col.write_artifacts([(v, _serialize(p)) for v, p in zip(versions, new)])
    for v, p in zip(versions, new):
        p.artifact_uri = uris[v]


def artifact_line(version: uuid.UUID, doc: ExtractedDocument) -> str:
    """A version's line of an artifact pack: its extracted document and blocks as one JSON object."""
    return json.dumps({"doc_version_id": str(version), "external_id": doc.external_id, "source_uri": doc.source_uri,
                       "source_type": doc.source_type, "title": doc.title,
                       "blocks": [vars(b) for b in doc.blocks]},  # (tuples are written as arrays, as asdict's)
                      ensure_ascii=False, sort_keys=True) + "\n"


def _serialize(p: Prepared) -> str:
    """The version's artifact line, made once (ahead of the commit, or by it)."""
    if p.artifact_line is None:
        p.artifact_line = artifact_line(make_version_id(p.doc_id, p.content_hash), p.doc)
    return p.artifact_line


def _version(p: Prepared) -> uuid.UUID:
    assert p.version_id is not None
    return p.version_id


def _outcome(p: Prepared, store_seconds: float) -> ItemOutcome:
    status = {"new": "ingested", "reactivate": "updated", "labels": "updated", "unchanged": "unchanged",
              "duplicate": "duplicate"}[p.action]
    reason = p.reason
    if p.action == "reactivate":
        reason = "content matches an earlier version; re-activated"
    elif p.action == "labels":
        reason = "tags, metadata or title changed; content unchanged"
    elif p.warnings:
        reason = "; ".join(p.warnings)
    return ItemOutcome(source_uri=p.doc.source_uri, status=status, external_id=p.doc.external_id,  # type: ignore[arg-type]
                       doc_id=p.doc_id, doc_version_id=p.version_id,
                       chunks=len(p.chunks) if p.action != "duplicate" else 0, reason=reason,
                       extract_seconds=p.extract_seconds, store_seconds=store_seconds)


def write_items(conn: psycopg.Connection[Any], tenant: str, run_id: uuid.UUID,
                items: Sequence[tuple[int, ItemOutcome]]) -> None:
    """A run's items (index, outcome) in one statement."""
    if items:
        conn.execute(queries.INSERT_ITEMS, {
            "run_id": run_id, "tenant_id": tenant, "indexes": [i for i, _ in items],
            "source_uris": [o.source_uri for _, o in items], "external_ids": [o.external_id for _, o in items],
            "statuses": [o.status for _, o in items], "codes": [o.error_code for _, o in items],
            "reasons": [o.reason for _, o in items], "doc_ids": [o.doc_id for _, o in items],
            "versions": [o.doc_version_id for _, o in items], "chunks": [o.chunks for _, o in items],
            "extract_seconds": [o.extract_seconds for _, o in items],
            "store_seconds": [o.store_seconds for _, o in items]})


def commit(col: Collection, state: RunState, batch: list[Prepared], duplicates: Duplicates,
            started: float, ahead: Ahead | None = None) -> None:
    begun = time.perf_counter()
    with col.store.tenant(col.tenant) as conn:
        _plan(conn, col, batch, duplicates, state)
    embedded_ahead = 0.0
    if ahead is not None and not ahead.counted:
        ahead.counted = True
        state.embedded += ahead.embedded
        state.cache_hits += ahead.cache_hits
        embedded_ahead = ahead.seconds
    todo = [p for p in batch if p.action == "new"]
    vectors = embed_cached(col, [c.search_text for p in todo for c in p.chunks], state, ahead)
    _artifacts(col, [p for p in todo if p.artifact_uri is None])  # before the transaction, outside it
    with col.store.tenant(col.tenant) as conn, conn.pipeline():
        hold_part(conn, state)
        stored = [p for p in batch if p.action not in ("unchanged", "duplicate")]
        if stored:  # (the upsert locks each document's row until commit, whether or not its WHERE let it update)
            conn.execute(queries.UPSERT_DOCUMENTS, {
                "tenant_id": col.tenant, "collection_id": col.collection_id, "doc_ids": [p.doc_id for p in stored],
                "external_ids": [p.doc.external_id for p in stored], "source_uris": [p.doc.source_uri for p in stored],
                "source_types": [p.doc.source_type for p in stored], "titles": [p.doc.title for p in stored],
                "tags": [json.dumps(list(p.tags), ensure_ascii=False) for p in stored],
                "metadata": [json.dumps(p.metadata, ensure_ascii=False, sort_keys=True) for p in stored]})
        for p in stored:
            if p.action == "labels":
                conn.execute(queries.UPDATE_CHUNK_TAGS, {"tags": list(p.tags), "doc_version_id": p.version_id})
        if todo:
            _keep_originals(conn, col, state, todo)
            _write_new(conn, col, todo, vectors)
        attach = [p for p in batch if p.original is not None and (p.unkept or p.action == "reactivate")]
        if attach:  # versions stored before originals were kept, read again from their file
            _keep_originals(conn, col, state, attach)
            found = [(p.version_id, p.source) for p in attach if p.source is not None]
            if found:
                conn.execute(queries.ATTACH_SOURCES, {
                    "versions": [v for v, _ in found], "sources": [s[0] for _, s in found],
                    "names": [s[1] for _, s in found], "types": [s[2] for _, s in found]})
        changing = [p.doc_id for p in stored if p.action != "labels"]
        activate = [_version(p) for p in stored if p.action != "labels"]
        signed = [p for p in batch if p.action == "new" and p.signature is not None]
        if signed:  # every new version's signature with its LSH band keys, in one statement for the batch
            conn.execute(queries.INSERT_MINHASH, {
                "tenant_id": col.tenant, "collection_id": col.collection_id,
                "versions": [p.version_id for p in signed], "doc_ids": [p.doc_id for p in signed],
                "signatures": [dedupe.to_bytes(p.signature) for p in signed if p.signature is not None],
                "bands": ["{" + ",".join(map(str, p.band_keys)) + "}" for p in signed]})
        written = sorted({p.doc_id for p in batch if p.action in ("new", "reactivate", "labels")}, key=str)
        if written:
            conn.execute(queries.CLEAR_FILTER_VALUES, {"doc_ids": written})
            conn.execute(queries.WRITE_FILTER_VALUES, {"doc_ids": written})
        retire = [r[0] for r in conn.execute(queries.ACTIVE_VERSIONS_OF_MANY, {"doc_ids": changing})]
        if retire:
            for statement in queries.RETIRE_VERSIONS:
                conn.execute(statement, {"versions": retire, "collection_id": col.collection_id})
        if activate:
            for statement in queries.ACTIVATE_VERSIONS:
                conn.execute(statement, {"versions": activate, "collection_id": col.collection_id})
        if retire or activate or any(p.action == "labels" for p in batch):
            conn.execute(queries.BUMP_GENERATION, {"collection_id": col.collection_id})
        shares = _shares(embedded_ahead + time.perf_counter() - begun, [len(p.chunks) + 1 for p in batch])
        outcomes = [(p.item_index, _outcome(p, share)) for p, share in zip(batch, shares)]
        write_items(conn, col.tenant, state.run_id, sorted(state.pending + outcomes, key=lambda x: x[0]))
        state.by_index.update(outcomes)
        for p in batch:
            state.warnings += [f"{p.doc.external_id}: {w}" for w in p.warnings]
        if not state.shared:
            conn.execute(queries.UPDATE_RUN, {"run_id": state.run_id, "stage": "store",
                                              "stats": json.dumps(state.stats(started))})
    state.pending = []


def _shares(seconds: float, weights: list[int]) -> list[float]:
    """Seconds shared in proportion to weights."""
    total = sum(weights) or 1
    return [seconds * w / total for w in weights]


def commit_isolating(col: Collection, state: RunState, batch: list[Prepared], duplicates: Duplicates,
                      started: float, ahead: Ahead | None = None) -> None:
    """Commit a batch; if it fails, commit each half of it the same way, so one bad item fails alone and the
    rest are committed in about 2 log2(n) transactions, not n (a batch of 512 documents with one that cannot be
    embedded took 512 transactions, each with its own embedder call). Committing part of a batch is the same as
    committing its documents one after another, so the outcome is the same whichever way it is split."""
    if not batch:
        return
    begun = time.perf_counter()
    try:
        commit(col, state, batch, duplicates, started, ahead)
        return
    except Exception as exc:  # of any kind: isolate the item that caused it
        if len(batch) == 1:
            p = batch[0]
            code = exc.code if isinstance(exc, RagdError) else (
                "store_error" if isinstance(exc, psycopg.Error) else "unexpected_error")
            fail_item(state, p.item_index, ItemOutcome(source_uri=p.doc.source_uri, status="failed",
                                                   external_id=p.doc.external_id, doc_id=p.doc_id,
                                                   reason=storable(f"store: {str(exc).strip()}"), error_code=code,
                                                   extract_seconds=p.extract_seconds,
                                                   store_seconds=time.perf_counter() - begun))
            return
        if isinstance(exc, RagdError) and exc.code in STOP_CODES:
            raise  # not the documents' fault: stop the run
    for p in batch:
        p.action, p.reason, p.version_id = "new", None, None
    half = (len(batch) + 1) // 2
    commit_isolating(col, state, batch[:half], duplicates, started, ahead)
    commit_isolating(col, state, batch[half:], duplicates, started, ahead)


def hold_part(conn: psycopg.Connection[Any], state: RunState) -> None:
    """A queued file's writes go on only while this attempt of its job is the file's latest (the row held to the
    end of the transaction, so a newer claim waits for it); Superseded otherwise."""
    part = state.part
    if part is None or part.attempt is None:
        return
    ordinal = part.base // PART_ITEMS
    row = conn.execute(queries.HOLD_FILE, {"run_id": part.run_id, "ordinal": ordinal,
                                           "attempt": part.attempt}).fetchone()
    if row is None or row[0] is not True:
        raise Superseded(f"file {ordinal} of run {part.run_id}: attempt {part.attempt} was superseded by a newer "
                         "attempt of its job, which stores the file")
