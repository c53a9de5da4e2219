"""The library surface: connect() -> Ragd -> Collection, and the canonical blocks composed with plain calls."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from . import ids
from .answer.compose import ask
from .answer.generators import Generator, make_generator
from .config import Settings, load_settings
from .embed import Embedder, default_token_counter, make_embedder
from .embed.base import TokenCounter
from .errors import (
    CollectionNotFound,
    DimensionMismatch,
    DocumentNotFound,
    IngestError,
    InvalidRequest,
    NoOriginal,
    NotFound,
    RunNotFound,
    TenantNotFound,
)
from .ingest.bounds import Limits as ExtractLimits
from .ingest.chunk import chunk_blocks
from .ingest.extract import ExtractOptions
from .ingest.extract.markdown import markdown_blocks
from .ingest.extract.text import text_blocks
from .ingest.normalize import unstorable
from .ingest.pipeline import run_ingest
from .ingest.state import Duplicates, Part, Progress
from .ingest.uploads import spool_folder
from .ingest.worker import render_isolated
from .pages import Rendered, render_page
from .rerank import Reranker, make_reranker
from .retrieve.cache import ResultCache, cache_key
from .retrieve.filters import parse_filters
from .retrieve.legs import (
    plan_lexical,
    prepare_vector_scan,
    vector_sql,
)
from .retrieve.postings import PostingsCache
from .retrieve.scope import HeldCache
from .retrieve.search import hybrid_filter_count, retrieve
from .store import Store, blocks, queries
from .store.originals import Original
from .store.originals import originals_for as original_files
from .store.postgres import check_name, check_tenant
from .telemetry import annotate, span
from .types import Answer, Block, Candidate, Chunk, ChunkPolicy, ExtractedDocument, Filters, IngestReport, Plan

MAX_K = 1000


class _PageCache:
    """Rendered pages, least recently used dropped past `size` entries or `max_bytes` of PNG."""

    def __init__(self, size: int = 256, max_bytes: int = 128 * 1024 * 1024):
        self.size, self.max_bytes = size, max_bytes
        self.entries: dict[Any, Rendered] = {}
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, key: Any) -> Rendered | None:
        with self.lock:
            found = self.entries.pop(key, None)
            if found is not None:
                self.entries[key] = found  # now the most recent
            return found

    def put(self, key: Any, value: Rendered) -> None:
        with self.lock:
            old = self.entries.pop(key, None)
            self.bytes -= len(old.png) if old else 0
            self.entries[key] = value
            self.bytes += len(value.png)
            while self.entries and (len(self.entries) > self.size or self.bytes > self.max_bytes):
                dropped = self.entries.pop(next(iter(self.entries)))
                self.bytes -= len(dropped.png)


_PAGES = _PageCache()


def _embedder_spec_for(model: str, dims: int) -> str:
    if model.startswith("hash-v1-"):
        return f"hash:{dims}"
    if model.startswith("openai:"):
        return f"{model}:{dims}"
    return model


# index builds a process runs at once in the background (Ragd.build_in_background), on a connection of its own: every
# collection's HNSW index is on chunk_embeddings, where two CREATE INDEX CONCURRENTLY deadlock (each takes the table's
# self-conflicting SHARE UPDATE EXCLUSIVE lock and waits for the other's transaction), so one at a time
MAX_INDEX_BUILDS = 1
HNSW_BUILDS = "hnsw index builds"  # the ragd_locks row every process's build holds (the same deadlock, across them)


class Ragd:
    """A connection to one ragd database (embedded by default)."""

    def __init__(self, store: Store, settings: Settings, embedder: Embedder | str | None = None):
        self.store = store
        self.settings = settings
        self._embedder = embedder
        self.cache = ResultCache(settings.cache_ttl_s, settings.cache_entries)
        self.postings = PostingsCache(settings.lexical_cache_mb << 20, settings.lexical_cache_min_postings)
        self.held = HeldCache()  # each collection's document identities, for questions that name a document
        self._reranker: Reranker | bool | None = False  # False: not made yet
        self._generator: Generator | bool | None = False
        self._written: dict[str, str] = {}  # tenant -> the primary's WAL position after its last write here
        # A server builds new collections' HNSW indexes in threads of their own, on connections of their own, so that
        # no request waits for one: CREATE INDEX CONCURRENTLY waits for every older transaction, another tenant's
        # too. Elsewhere (the CLI, workers, the library) an ingest builds its collection's index before it returns.
        self.background_index_builds = False
        self._builds = threading.Condition()  # guards the four below
        self._pending: dict[uuid.UUID, Collection] = {}  # queued, first come first built
        self._building: set[uuid.UUID] = set()
        self._builders = 0
        self._indexed: set[uuid.UUID] = set()  # collections whose index this process saw valid

    @property
    def reranker(self) -> Reranker | None:
        """The reranker of RAGD_RERANKER (None for `none`), made on first use."""
        if self._reranker is False:
            self._reranker = make_reranker(self.settings.reranker, self.settings)
        return self._reranker  # type: ignore[return-value]

    @property
    def generator(self) -> Generator | None:
        """The generator of RAGD_GENERATOR (None for the extractive default), made on first use."""
        if self._generator is False:
            self._generator = make_generator(self.settings.generator, self.settings)
        return self._generator  # type: ignore[return-value]

    def reading(self, tenant: str) -> contextlib.AbstractContextManager[Any]:
        """A tenant's read-only session for search and ask: a replica when one is configured and current enough
        (it has replayed this client's last write of the tenant, or the primary serves it), else the primary."""
        return self.store.reading(tenant, after_lsn=self._written.get(tenant))

    def reading_pair(self, tenant: str, *, pair: bool = True) -> contextlib.AbstractContextManager[Any]:
        """reading()'s session and a way to open a second one in its snapshot (Store.reading_pair): a hybrid
        search runs its legs side by side on them."""
        return self.store.reading_pair(tenant, after_lsn=self._written.get(tenant), pair=pair)

    def wrote(self, tenant: str) -> None:
        """Remember the primary's WAL position after a write of the tenant (with replicas only): its next reads
        wait for a replica to replay it (read your writes)."""
        if self.store.replicas:
            self._written[tenant] = self.store.write_lsn()

    @contextlib.contextmanager
    def indexes_in_background(self) -> Iterator[None]:
        """Within the block (a server's life, a worker's run), ingest leaves new collections' index builds to this
        process's builder thread (background_index_builds); afterwards as before."""
        before, self.background_index_builds = self.background_index_builds, True
        try:
            yield
        finally:
            self.background_index_builds = before

    def build_in_background(self, col: Collection) -> None:
        """Queue col's HNSW index build (Collection.build_vector_index) for this process's builder threads, unless
        it knows the index valid or has it queued or building; searches scan the collection's vectors exactly
        meanwhile. At most MAX_INDEX_BUILDS run at once, each on a connection of its own: a tenant making many
        collections while its snapshot holds every build back queues builds, not connections."""
        with self._builds:
            cid = col.collection_id
            if cid in self._indexed or cid in self._pending or cid in self._building:
                return
            self._pending[cid] = col
            if self._builders < MAX_INDEX_BUILDS:
                self._builders += 1
                threading.Thread(target=self._builder, name="ragd-index-builder",
                                 daemon=True).start()  # (a build cut short by the process's exit is redone next time)

    def _builder(self) -> None:
        while True:
            with self._builds:
                if not self._pending:
                    self._builders -= 1
                    self._builds.notify_all()
                    return
                cid, col = next(iter(self._pending.items()))
                del self._pending[cid]
                self._building.add(cid)
            built = False
            try:
                built = col.build_vector_index()
            except Exception as exc:  # of any kind: the rows are stored and searched exactly; the next ingest retries
                _log.warning("the HNSW index of collection %s was not built (%s); searches scan its vectors exactly "
                             "until the next ingest builds it", cid, " ".join(str(exc).split()))
            finally:
                with self._builds:
                    self._building.discard(cid)
                    if built:
                        self._indexed.add(cid)
                    self._builds.notify_all()

    def wait_for_index_builds(self, timeout_s: float | None = None) -> bool:
        """Wait for the index builds queued or running in the background; True when none is left."""
        with self._builds:
            return self._builds.wait_for(lambda: not self._pending and not self._building, timeout_s)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Ragd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tenant(self, tenant: str | None) -> str:
        """The given tenant, or the configured one when none is given; an empty name is an error, not a default."""
        return check_tenant(self.settings.tenant if tenant is None else tenant)

    def _explicit_embedder(self) -> Embedder | None:
        if isinstance(self._embedder, str):
            self._embedder = make_embedder(self._embedder, self.settings)
        if self._embedder is not None:
            return self._embedder
        if "embedder" in self.settings.model_fields_set:
            self._embedder = make_embedder(self.settings.embedder, self.settings)
            return self._embedder
        return None

    def collection(self, name: str | None = None, *, tenant: str | None = None, create: bool = True,
                   policy: ChunkPolicy | None = None) -> Collection:
        """The named collection; created on first use (model and dims fixed then) unless create=False."""
        name = check_name("collection name", self.settings.collection if name is None else name, 128)
        tenant = self._tenant(tenant)
        row = self._load(tenant, name)
        explicit = self._explicit_embedder()
        if row is None:
            if not create:
                raise CollectionNotFound(
                    f"collection {name!r} does not exist for tenant {tenant!r}; ingest into it first "
                    f"(`ragd ingest PATH --collection {name}`) or list them with `ragd collections list`"
                )
            embedder = explicit or make_embedder(self.settings.embedder, self.settings)
            self.store.tenant_role(tenant, create=True)
            self._create(tenant, name, embedder, policy or ChunkPolicy())
            row = self._load(tenant, name)
            assert row is not None
        model, dims = row["embed_model"], int(row["embed_dims"])
        if explicit is not None and explicit.name != model:
            raise DimensionMismatch(
                f"collection {name!r} is pinned to embedding model {model} ({dims} dims) but the embedder in use is "
                f"{explicit.name}; use that model (RAGD_EMBEDDER={_embedder_spec_for(model, dims)}) or another "
                "collection: changing a collection's model is an explicit re-embed job"
            )
        embedder = explicit or make_embedder(_embedder_spec_for(model, dims), self.settings)
        stored = row["chunk_policy"] or {}
        col_policy = ChunkPolicy(**{k: int(v) for k, v in stored.items() if k in ChunkPolicy.__dataclass_fields__})
        return Collection(self, tenant=tenant, name=name, collection_id=row["collection_id"],
                          embed_model=model, dims=dims, embedder=embedder, policy=col_policy,
                          vector_type=str(row.get("vector_type") or "vector"),
                          ef_construction=int(row["hnsw_ef_construction"]))  # NOT NULL since migration 28

    def run(self, run_id: str, *, tenant: str | None = None) -> dict[str, Any]:
        """One ingestion run (id or unique prefix) of the tenant, in any collection, with every item."""
        tenant = self._tenant(tenant)
        with self.store.tenant(tenant) as conn:
            cur = conn.execute(queries.GET_RUN, {"prefix": f"{run_id}%"})
            names = [d.name for d in cur.description or ()]
            rows = cur.fetchall()
            if not rows:
                raise RunNotFound(f"no ingestion run {run_id!r} for tenant {tenant!r}")
            if len(rows) > 1:
                raise InvalidRequest(f"run id prefix {run_id!r} is ambiguous; give more characters")
            run = dict(zip(names, rows[0]))
            run["items"] = rows_as_dicts(conn.execute(queries.RUN_ITEMS, {"run_id": run["run_id"]}))
            run["files"] = dict(conn.execute(queries.RUN_FILES, {"run_id": run["run_id"]}).fetchall())
            run["file_list"] = rows_as_dicts(conn.execute(queries.RUN_FILE_LIST, {"run_id": run["run_id"]}))
            run["progress"] = progress(run)
            return run

    def save_evaluation(self, *, collection: str, dataset: str, kind: str, metrics: Mapping[str, Mapping[str, Any]],
                        config: Mapping[str, Any] | None = None, tenant: str | None = None) -> uuid.UUID:
        """Keep an evaluation's figures ({plan: {metric: number}}) in the tenant's store, to be compared over
        time (`ragd eval --save`, the web page's quality view)."""
        who = self._tenant(tenant)
        numbers = {str(plan): {str(k): float(v) for k, v in figures.items()
                               if isinstance(v, int | float) and not isinstance(v, bool)}
                   for plan, figures in metrics.items()}
        eval_id = uuid.uuid4()
        with self.store.tenant(who) as conn:
            conn.execute(queries.INSERT_EVALUATION, {
                "eval_id": eval_id, "tenant_id": who, "collection": collection, "dataset": dataset, "kind": kind,
                "config": json.dumps(dict(config or {}), sort_keys=True, default=str),
                "metrics": json.dumps(numbers, sort_keys=True)})
        return eval_id

    def evaluations(self, *, tenant: str | None = None, collection: str | None = None,
                    limit: int = 200) -> list[dict[str, Any]]:
        """The tenant's kept evaluations, oldest first (the latest `limit`)."""
        who = self._tenant(tenant)
        with self.store.tenant(who) as conn:
            rows = rows_as_dicts(conn.execute(queries.LIST_EVALUATIONS, {"collection": collection, "limit": limit}))
        return rows[::-1]

    def execution(self, ref: str, *, tenant: str | None = None) -> dict[str, Any]:
        """One reproducibility record (query id or unique prefix) of the tenant, in any collection."""
        tenant = self._tenant(tenant)
        with self.store.tenant(tenant) as conn:
            rows = rows_as_dicts(conn.execute(queries.GET_EXECUTION, {"prefix": f"{ref}%"}))
        if not rows:
            raise NotFound(f"no query execution {ref!r} for tenant {tenant!r}")
        if len(rows) > 1:
            raise InvalidRequest(f"query id prefix {ref!r} is ambiguous; give more characters")
        return rows[0]

    def _load(self, tenant: str, name: str) -> dict[str, Any] | None:
        """The collection's row; None when it, or its tenant, does not exist."""
        try:
            self.store.tenant_role(tenant)
        except TenantNotFound:
            return None
        with self.store.tenant(tenant) as conn:
            cur = conn.execute(queries.GET_COLLECTION, {"name": name})
            row = cur.fetchone()
            if row is None:
                return None
            return dict(zip([d.name for d in cur.description or ()], row))

    def _create(self, tenant: str, name: str, embedder: Embedder, policy: ChunkPolicy) -> None:
        """The collection row and its BM25 statistics (the tenant exists: _load opened its session). Its HNSW index
        is built when its first ingest run ends, from all the rows at once (Collection.ensure_vector_index)."""
        cid = ids.collection_id(tenant, name)
        dims = embedder.dims
        with self.store.admin(tenant) as conn:
            conn.execute(queries.CREATE_COLLECTION, {
                "collection_id": cid, "tenant_id": tenant, "name": name, "embed_model": embedder.name,
                "embed_dims": dims, "chunk_policy": json.dumps(policy.as_dict()),
                "vector_type": self.settings.vector_type,
                "hnsw_ef_construction": self.settings.hnsw_ef_construction})
            conn.execute(queries.INIT_LEXICAL_STATS, {"collection_id": cid, "tenant_id": tenant})

    def collections(self, tenant: str | None = None) -> list[dict[str, Any]]:
        try:
            self.store.tenant_role(self._tenant(tenant))
        except TenantNotFound:
            return []
        with self.store.tenant(self._tenant(tenant)) as conn:
            cur = conn.execute(queries.LIST_COLLECTIONS)
            return rows_as_dicts(cur)


@functools.lru_cache(maxsize=256)
def _artifact_folder(artifacts: Path, collection_id: uuid.UUID) -> Path:
    """A collection's artifact folder, made and resolved once per process (each is a few system calls per
    document otherwise)."""
    folder = artifacts / str(collection_id)
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def load_artifact(uri: str) -> dict[str, Any]:
    """A version's extracted blocks from its artifact_uri: a line of a JSON Lines pack (the fragment names the
    version) or, for versions stored before packs, a JSON file of its own."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise InvalidRequest(f"artifact URI {uri!r} is not a file:// URI")
    path = Path(unquote(parts.path))
    try:
        if not parts.fragment:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                record = json.loads(line)
                if record.get("doc_version_id") == parts.fragment:
                    return dict(record)
    except FileNotFoundError:
        raise NotFound(f"artifact {path} does not exist (removed from RAGD_HOME/artifacts?)") from None
    raise NotFound(f"version {parts.fragment} is not in {path.name}")


def rows_as_dicts(cur: Any) -> list[dict[str, Any]]:
    names = [d.name for d in cur.description or ()]
    return [dict(zip(names, row)) for row in cur.fetchall()]


@dataclasses.dataclass
class Collection:
    """One tenant's collection: ingest into it, search it, manage its documents and runs."""

    client: Ragd
    tenant: str
    name: str
    collection_id: uuid.UUID
    embed_model: str
    dims: int
    embedder: Embedder
    policy: ChunkPolicy
    vector_type: str = "vector"  # the HNSW index's precision: vector (float4) or halfvec (pinned at creation)
    ef_construction: int = 64  # the HNSW graph's breadth at every insert and rebuild (pinned at creation)

    @property
    def store(self) -> Store:
        return self.client.store

    @property
    def settings(self) -> Settings:
        return self.client.settings

    @property
    def counter(self) -> TokenCounter:
        return default_token_counter()

    def check_dims(self, dims: int) -> None:
        if dims != self.dims:
            raise DimensionMismatch(
                f"embedder {self.embedder.name} produced {dims}-dimensional vectors but collection {self.name!r} "
                f"stores {self.dims} dimensions"
            )

    def ensure_vector_index(self) -> bool:
        """Build the collection's HNSW index if it is missing or invalid (a build that was killed); True when a
        valid index is in place. A new collection has none: its first ingest run writes its rows without paying
        for one graph insert per vector and builds the graph once at the end (several times faster), while
        searches scan its vectors exactly. In a server (Ragd.background_index_builds) the build runs in a thread
        of its own and this returns False at once: no request waits for it."""
        if self.client.background_index_builds:
            self.client.build_in_background(self)
            return False
        return self.build_vector_index()

    def build_vector_index(self) -> bool:
        """ensure_vector_index's build, on a connection of its own (never one of the pools': CREATE INDEX
        CONCURRENTLY waits for every transaction older than it, another tenant's too, and must hold no slot that
        requests need meanwhile). The build runs concurrently, so other tenants keep writing; one process builds a
        collection's index at a time, the others leave it to that one."""
        name = queries.hnsw_index_name(self.collection_id)
        with self.store.dedicated() as conn:
            if conn.execute(queries.HNSW_INDEX_VALID, {"name": name}).fetchone() == (True,):
                return True
            with self.store.exclusive(conn, name) as mine:
                if not mine:
                    return False  # another process is building it
                with self.store.serialized(conn, HNSW_BUILDS):
                    state = conn.execute(queries.HNSW_INDEX_VALID, {"name": name}).fetchone()
                    if state == (True,):
                        return True  # built by another process while this one waited its turn
                    if state == (False,):
                        conn.execute(queries.drop_hnsw_index(self.collection_id))
                    index = queries.create_hnsw_index(self.collection_id, self.embed_model, self.dims,
                                                      self.vector_type, self.ef_construction)
                    self.store.build_hnsw_index(conn, index, queries.drop_hnsw_index(self.collection_id),
                                                lambda: self._graph_bytes(conn))
        return True

    def _graph_bytes(self, conn: Any) -> int:
        """About the memory pgvector's build of this collection's graph takes (its active vectors counted)."""
        row = conn.execute(queries.INDEXED_ROWS, {"collection_id": self.collection_id,
                                                  "embed_model": self.embed_model}).fetchone()
        return queries.hnsw_graph_bytes(row[0] if row else 0, self.dims, self.vector_type)

    def write_artifacts(self, lines: Sequence[tuple[uuid.UUID, str]]) -> dict[uuid.UUID, str]:
        """The extracted blocks of new versions (each version's `artifact_line`), kept as JSON under RAGD_HOME: one
        JSON Lines pack per ingest batch (a line per version), each version's URI the pack's file:// URI with its
        version id as the fragment (read one back with load_artifact). One file per batch, not per version:
        creating a file costs far more than writing one (~1 ms of system time each here), and a million documents
        are not a million files. Packs are content-addressed (named by their versions), so writing one again is
        harmless; each is written to a temporary name and renamed, so a reader never sees half a pack."""
        if not lines:
            return {}
        folder = _artifact_folder(self.settings.artifacts, self.collection_id)
        ordered = sorted(dict(lines).items(), key=lambda v: str(v[0]))  # a version once
        name = hashlib.sha256("\n".join(str(v) for v, _ in ordered).encode("ascii")).hexdigest()[:32]
        path = folder / f"pack-{name}.jsonl"
        if not path.exists():
            text = "".join(line for _, line in ordered)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                tmp.write_text(text, encoding="utf-8")
            except FileNotFoundError:  # the folder was removed since it was made: make it again
                _artifact_folder.cache_clear()
                _artifact_folder(self.settings.artifacts, self.collection_id)
                tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        uri = path.as_uri()
        return {version: f"{uri}#{version}" for version, _ in lines}

    # -- ingest -------------------------------------------------------------------------------

    def ingest(self, paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str] = (), *,
               documents: Sequence[ExtractedDocument | Mapping[str, Any]] = (),
               tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
               options: ExtractOptions | None = None, duplicates: Duplicates = "skip",
               near_duplicates: float | None = None, on_progress: Progress | None = None,
               uploads: Sequence[tuple[str, str | os.PathLike[str]] | tuple[str, str | os.PathLike[str], str]] = (),
               workers: int | None = None, part: Part | None = None) -> IngestReport:
        """Ingest files/directories and/or in-memory documents ({"id", "text", "title"?, "tags"?, "metadata"?,
        "source_type"?: "markdown" reads the text as Markdown, tables included; anything else as plain text}).

        `near_duplicates` is the whole-document similarity (0.5-1.0) at which a new document counts as a
        near-duplicate of a stored one (default RAGD_NEAR_DUPLICATE_THRESHOLD, 0.9); 1.0 turns the check off.
        `uploads` are (name, file) pairs: files extracted like paths but named `name` (the REST upload), or
        (name, file, source URI) triples. `part`: the items join a queued run (ragd.jobs runs its files so).
        `workers`: files extracted at once, each in its own process (default RAGD_INGEST_WORKERS, else the cores
        available); the result is the same for any number."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        _require_storable("metadata", dict(metadata or {}))
        docs = _Documents(documents)
        with span("rag.indexer.index_documents", **{"rag.collection": self.name, "rag.paths": len(paths),
                                                    "rag.documents": len(docs), "rag.uploads": len(uploads)}) as s:
            report = run_ingest(self, list(paths), documents=docs, tags=tags, metadata=dict(metadata or {}),
                                options=options or ExtractOptions(), duplicates=duplicates,
                                near_duplicates=near_duplicates, on_progress=on_progress,
                                uploads=[(u[0], Path(u[1]), *u[2:]) for u in uploads],
                                workers=workers, part=part)
            annotate(s, **{"rag.items": len(report.items), "rag.failed": len(report.failed),
                           "rag.chunks": report.chunks})
            self.client.wrote(self.tenant)
            return report

    def reindex(self, *, on_progress: Progress | None = None, workers: int | None = None) -> IngestReport:
        """Read every document's active version again from its kept original with today's extractors, as one
        run: a document whose extracted content is the same is `unchanged`; one that changed gets a new version
        (its chunks re-embedded only where their text is new: the embedding cache has the rest); one whose
        original is not kept is `skipped`; one that no longer extracts is `failed` and keeps its version. Each
        document keeps its tags and metadata (what extraction gives now wins for its own keys)."""
        keeper = original_files(self.settings)
        with self.store.tenant(self.tenant) as conn:
            rows = rows_as_dicts(conn.execute(queries.REINDEX_SOURCES, {"collection_id": self.collection_id}))
        refused: list[IngestError] = []
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            if row["source_sha256"] is None:
                refused.append(NoOriginal(f"{row['external_id']}: no original file is kept for this version "
                                          "(stored before originals were kept, given as text, or with "
                                          "RAGD_ORIGINALS=off); ingest it again to read it anew",
                                          external_id=row["external_id"]))
            else:
                groups.setdefault((row["source_sha256"], row["source_name"]), []).append(row)
        labels = {row["external_id"]: (tuple(row["tags"] or ()), dict(row["metadata"] or {})) for row in rows}
        with spool_folder(self.settings.home) as folder:
            uploads = []
            for n, ((sha, name), docs) in enumerate(sorted(groups.items())):
                with self.store.tenant(self.tenant) as conn:
                    data = keeper.get(conn, self.tenant, sha)
                path = Path(folder) / str(n) / (name.rsplit("/", 1)[-1] or "original")
                path.parent.mkdir()
                path.write_bytes(data)
                uploads.append((name, path, _container_uri(docs[0]["external_id"], name, docs[0]["source_uri"])))
            with span("rag.indexer.reindex", **{"rag.collection": self.name, "rag.documents": len(rows)}):
                report = run_ingest(self, [], uploads=uploads, labels=labels, refused=refused,
                                    on_progress=on_progress, workers=workers, kind="reindex")
        self.client.wrote(self.tenant)
        return report

    # -- search -------------------------------------------------------------------------------

    def plan(self, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, **overrides: Any) -> Plan:
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise InvalidRequest(f"k must be an integer from 1 to {MAX_K}")
        unknown = sorted(set(overrides) - set(Plan.__dataclass_fields__))
        if unknown:
            raise InvalidRequest(f"unknown plan option(s): {', '.join(unknown)}")
        plan = Plan(k=k, filters=parse_filters(filters), **overrides)
        if plan.fusion not in ("rrf", "weighted", "vector", "lexical"):
            raise InvalidRequest(f"unknown fusion {plan.fusion!r}: use rrf, weighted, vector or lexical")
        return dataclasses.replace(plan, k_vec=max(plan.k_vec, plan.k), k_lex=max(plan.k_lex, plan.k))

    def search(self, query: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
               debug: dict[str, Any] | None = None, **plan: Any) -> list[Candidate]:
        """Retrieve with a plan built from k, filters and overrides; served from the result cache while the
        collection is unchanged. `debug`, when given, receives the reranker's outcome (see `retrieve`) or
        `cached: true`."""
        _require_storable("the query", query)
        _require_storable("the filters", filters if isinstance(filters, Mapping) else None)
        full = self.plan(k, filters, **plan)
        cache = self.client.cache
        debug = {} if debug is None else debug
        if not cache.enabled:
            return retrieve(query, full, self, debug=debug)
        key = cache_key(self.tenant, self.collection_id, query, full)
        with self.client.reading(self.tenant) as conn:
            row = conn.execute(queries.COLLECTION_GENERATION, {"collection_id": self.collection_id}).fetchone()
        if row is None:
            raise CollectionNotFound(f"collection {self.name!r} no longer exists")
        hit = cache.get(key, int(row[0]))
        if hit is not None:
            debug["cached"] = True
            return hit
        results = retrieve(query, full, self, debug=debug)
        if not debug.get("reranker_skipped"):  # a reranker that failed may answer next time
            cache.put(key, int(row[0]), results)
        return results

    def ask(self, question: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
            rerank: bool | None = None, debug: bool = False, request_id: str | None = None,
            emit_log: bool = True) -> Answer:
        """Answer from the collection with citations, or abstain when the evidence is weak (see `ask`). Reranks
        unless `rerank=False` or RAGD_RERANKER is none."""
        _require_storable("the question", question)
        _require_storable("the filters", filters if isinstance(filters, Mapping) else None)
        use_rerank = self.settings.reranker != "none" if rerank is None else rerank
        return ask(question, self.plan(k, filters, rerank=use_rerank), self, debug=debug, request_id=request_id,
                   emit_log=emit_log)

    def execution(self, ref: str) -> dict[str, Any]:
        """One reproducibility record of this tenant (query id or unique prefix)."""
        return self.client.execution(ref, tenant=self.tenant)

    def replay(self, ref: str) -> tuple[dict[str, Any], Answer]:
        """Ask a recorded question again with its recorded plan: (the record, the new answer). The hashes match
        when the store and the configuration are unchanged."""
        record = self.execution(ref)
        stored = dict(record["plan"])
        filters = parse_filters(stored.pop("filters", None))
        fields = {k: v for k, v in stored.items() if k in Plan.__dataclass_fields__}
        return record, ask(record["question"], Plan(**fields, filters=filters), self)

    def explain(self, query: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
                analyze: bool = False, **plan: Any) -> list[dict[str, str]]:
        """The SQL each leg would run for this request, with PostgreSQL's plan (EXPLAIN [ANALYZE])."""
        full = self.plan(k, filters, **plan)
        out: list[dict[str, str]] = []
        with self.store.tenant(self.tenant) as conn:
            matching = hybrid_filter_count(conn, self, full)
            if full.fusion != "lexical":
                qvec = self.embedder.embed_query(query)
                exact, _ = prepare_vector_scan(conn, collection_id=self.collection_id, filters=full.filters,
                                               limit=full.k_vec + 10, ef_search=self.settings.hnsw_ef_search,
                                               exact_threshold=self.settings.exact_scan_threshold,
                                               force_exact=full.exact, matching=matching,
                                               ef_grow_from=self.settings.hnsw_ef_search_grow_from)
                stmt, params = vector_sql(self.collection_id, self.embed_model, self.dims, full.filters, exact=exact,
                                          vector_type=self.vector_type)
                params = {**params, "collection_id": self.collection_id, "embed_model": self.embed_model,
                          "qvec": qvec, "limit": full.k_vec + 10}
                leg = "vector (exact)"
                if not exact:  # the breadth the leg set for this collection's size
                    (ef,) = conn.execute("SHOW hnsw.ef_search").fetchone() or ("?",)
                    leg = f"vector (hnsw, ef_search {ef})"
                out.append(_explain(conn, leg, stmt, params, analyze))
            if full.fusion != "vector":
                lex = plan_lexical(conn, collection_id=self.collection_id, query=query, limit=full.k_lex,
                                   filters=full.filters, matching=matching)
                if lex.statement is not None:
                    out.append(_explain(conn, f"lexical (bm25, {lex.mode})", lex.statement, lex.params, analyze))
        return out

    # -- documents and runs -------------------------------------------------------------------

    def documents(self, limit: int = 100, offset: int = 0, *, find: str | None = None, tag: str | None = None,
                  source_type: str | None = None) -> list[dict[str, Any]]:
        """The collection's documents by external id: `find` a piece of the title or id (any case), `tag` and
        `source_type` exact."""
        return self.documents_page(limit, offset, find=find, tag=tag, source_type=source_type)[0]

    def documents_page(self, limit: int = 100, offset: int = 0, *, find: str | None = None, tag: str | None = None,
                       source_type: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """documents() and how many match in all."""
        for what, value in (("the title filter", find), ("the tag filter", tag), ("the type filter", source_type)):
            if value is not None:
                _require_storable(what, value)
        args = {"collection_id": self.collection_id, "limit": limit, "offset": offset, "find": find or None,
                "tag": tag or None, "source_type": source_type or None}
        with self.store.tenant(self.tenant) as conn:
            rows = rows_as_dicts(conn.execute(queries.LIST_DOCUMENTS, args))
            total = conn.execute(queries.COUNT_DOCUMENTS, args).fetchone()
        return rows, int(total[0] if total else 0)

    def chunk(self, chunk_id: str) -> dict[str, Any]:
        """One chunk of the collection (any version of its document) with its document's id, title and version,
        its pages and boxes (where extraction knew them) and whether its original file is kept."""
        try:
            key = uuid.UUID(str(chunk_id))
        except ValueError:
            raise InvalidRequest(f"{chunk_id!r} is not a chunk id (a UUID)") from None
        with self.store.tenant(self.tenant) as conn:
            rows = rows_as_dicts(conn.execute(queries.GET_CHUNK, {"chunk_id": key,
                                                                   "collection_id": self.collection_id}))
        if not rows:
            raise NotFound(f"no chunk {chunk_id} in collection {self.name!r}")
        row = rows[0]
        meta = row["metadata"] or {}
        row["boxes"] = [b for b in meta.get("boxes", []) if isinstance(b, dict) and "bbox" in b]
        row["pages"] = sorted({int(p) for p in meta.get("pages", [])} | {int(b["page"]) for b in row["boxes"]
                                                                         if b.get("page") is not None})
        return row

    def blocks(self, ref: str, version: str | None = None) -> dict[str, Any]:
        """What extraction read from a version of a document (the active one unless named): its blocks in order
        (type, text, level, page; a table's header and rows)."""
        with self.store.tenant(self.tenant) as conn:
            row = self._source(conn, ref, version, original=False)
        if not row["artifact_uri"]:
            raise NotFound(f"the extracted blocks of {row['external_id']!r} ({row['version_label']}) are not kept")
        artifact = load_artifact(row["artifact_uri"])
        return {"external_id": row["external_id"], "doc_version_id": row["doc_version_id"],
                "version_label": row["version_label"], "title": artifact.get("title"),
                "blocks": artifact.get("blocks", [])}

    def _source(self, conn: Any, ref: str, version: str | None, original: bool = True) -> dict[str, Any]:
        _require_storable("the document reference", ref)
        rows = rows_as_dicts(conn.execute(queries.DOCUMENT_SOURCE, {"collection_id": self.collection_id,
                                                                     "ref": str(ref), "version": version}))
        if not rows:
            if version is None:
                raise DocumentNotFound(f"no document {ref!r} in collection {self.name!r}")
            raise DocumentNotFound(f"no version {version!r} of document {ref!r} in collection {self.name!r}")
        if original and rows[0]["source_sha256"] is None:
            raise NotFound(f"the original file of {rows[0]['external_id']!r} ({rows[0]['version_label']}) is not "
                           "kept: it was stored before originals were kept, or given as text; ingest it again")
        return rows[0]

    def original(self, ref: str, version: str | None = None) -> Original:
        """The original file a version of a document was read from (the active version unless one is named by
        id or label)."""
        keeper = original_files(self.settings)
        with self.store.tenant(self.tenant) as conn:
            row = self._source(conn, ref, version)
            data = keeper.get(conn, self.tenant, row["source_sha256"])
        return Original(row["source_sha256"], row["source_name"] or row["external_id"], row["media_type"], data)

    def page(self, ref: str, number: int, *, chunk: str | None = None, quotes: Sequence[str] = ()) -> Rendered:
        """Page `number` (from 1) of a document's original (a PDF or an image) as a PNG, with `chunk`'s boxes on
        that page highlighted and `quotes` marked inside them; the version is the chunk's (else the active one).
        Rendered pages are cached (per tenant, original, page, chunk and quotes); each call checks the document
        and chunk in the tenant's session first."""
        quotes = tuple(q for q in quotes if q.strip())[:20]
        boxes: list[list[float]] = []
        version = None
        if chunk is not None:
            found = self.chunk(chunk)
            if str(ref) not in (found["external_id"], str(found["doc_id"])):
                raise NotFound(f"chunk {chunk} is not a chunk of document {ref!r}")
            version = str(found["doc_version_id"])
            boxes = [list(map(float, b["bbox"])) for b in found["boxes"] if b.get("page") == number]
        keeper = original_files(self.settings)
        with self.store.tenant(self.tenant) as conn:
            row = self._source(conn, ref, version)
            key = (self.tenant, row["source_sha256"], number, tuple(map(tuple, boxes)), quotes)
            cached = _PAGES.get(key)
            if cached is not None:
                return cached
            data = keeper.get(conn, self.tenant, row["source_sha256"])
        media_type = row["media_type"] or "application/octet-stream"
        if self.settings.extract_isolation:  # no original or quote keeps this thread past the render's deadline
            limits = dataclasses.replace(ExtractLimits.from_settings(self.settings),
                                         timeout_s=self.settings.render_timeout_s)
            rendered = render_isolated(data, media_type, number, boxes, quotes, limits)
        else:
            rendered = render_page(data, media_type, number, boxes, quotes)
        _PAGES.put(key, rendered)
        return rendered

    def document(self, ref: str) -> dict[str, Any]:
        """A document by external id or doc id, with its versions."""
        _require_storable("the document reference", ref)
        with self.store.tenant(self.tenant) as conn:
            cur = conn.execute(queries.GET_DOCUMENT, {"collection_id": self.collection_id, "ref": str(ref)})
            row = cur.fetchone()
            if row is None:
                raise DocumentNotFound(f"no document {ref!r} in collection {self.name!r}")
            doc = dict(zip([d.name for d in cur.description or ()], row))
            doc["versions"] = rows_as_dicts(conn.execute(queries.DOCUMENT_VERSIONS, {"doc_id": doc["doc_id"]}))
            return doc

    def compact(self) -> dict[str, Any]:
        """Rewrite the BM25 blocks that need it (postings of retired or deleted chunks dropped, a term's small
        blocks merged into full ones), a page of terms per transaction; search answers the same throughout
        (results are unchanged, so cached results stay valid). Then the blocks' index is rebuilt if compactions
        have left it sparse (`index_rebuilt`; not during ingest's own compactions: the rebuild waits for every
        open transaction on the blocks)."""
        done: dict[str, Any] = dataclasses.asdict(blocks.compact(lambda: self.store.tenant(self.tenant),
                                                                 self.collection_id))
        done["index_rebuilt"] = self.store.rebuild_sparse_blocks_index()
        return done

    def delete(self, ref: str) -> uuid.UUID:
        """Delete a document and all its versions; it leaves retrieval at once."""
        _require_storable("the document reference", ref)
        with self.store.tenant(self.tenant) as conn:
            row = conn.execute(queries.GET_DOCUMENT, {"collection_id": self.collection_id, "ref": str(ref)}).fetchone()
            if row is None:
                raise DocumentNotFound(f"no document {ref!r} in collection {self.name!r}")
            doc_id = row[0]
            conn.execute(queries.LOCK_DOCUMENT, {"doc_id": doc_id})
            active = [r[0] for r in conn.execute(queries.ACTIVE_VERSIONS_OF, {"doc_id": doc_id})]
            if active:
                for statement in queries.RETIRE_VERSIONS:
                    conn.execute(statement, {"versions": active, "collection_id": self.collection_id})
            sources = [r[0] for r in conn.execute(queries.VERSION_SOURCES, {"doc_id": doc_id})]
            conn.execute(queries.DELETE_DOCUMENT, {"doc_id": doc_id})
            gone = original_files(self.settings).forget(conn, self.tenant, sources)
            conn.execute(queries.BUMP_GENERATION, {"collection_id": self.collection_id})
        original_files(self.settings).remove(self.tenant, gone)  # committed: the bytes go too
        self.client.wrote(self.tenant)
        return uuid.UUID(str(doc_id))

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The collection's latest ingestion runs, newest first."""
        with self.store.tenant(self.tenant) as conn:
            cur = conn.execute(queries.LIST_RUNS, {"collection_id": self.collection_id, "limit": limit})
            return rows_as_dicts(cur)

    def run(self, run_id: str) -> dict[str, Any]:
        """One ingestion run (id or unique prefix) of this tenant, with every item."""
        return self.client.run(run_id, tenant=self.tenant)


def _container_uri(external_id: str, name: str, source_uri: str) -> str:
    """The URI of the file a document was read from: a container's part (a record, an attachment) carries a
    suffix on its file's name and URI, or a #fragment on the URI."""
    suffix = external_id[len(name):] if external_id.startswith(name) else ""
    if suffix and source_uri.endswith(suffix):
        return source_uri[: len(source_uri) - len(suffix)]
    return source_uri.split("#", 1)[0] if external_id != name else source_uri


def progress(run: Mapping[str, Any]) -> dict[str, Any]:
    """Done/total per stage, the rate and the time left of a run (any run: one not queued is one stage)."""
    files = run.get("files") or {}
    items = run.get("items") or []
    counts: dict[str, int] = {}
    for item in items:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    started, finished = run.get("started_at"), run.get("finished_at")
    elapsed = ((finished.timestamp() if finished else time.time()) - started.timestamp()) if started else 0.0
    out: dict[str, Any] = {"items": dict(sorted(counts.items())), "items_done": len(items),
                           "chunks": sum(i["chunk_count"] for i in items if i["status"] in ("ingested", "updated")),
                           "elapsed_s": round(max(elapsed, 0.0), 3)}
    if files:
        total = sum(files.values())
        rate = files.get("done", 0) / elapsed if elapsed > 0 else 0.0
        out["files"] = {"total": total, **{k: files.get(k, 0) for k in ("queued", "running", "done", "cancelled")}}
        out["files_per_s"] = round(rate, 3)
        left = total - files.get("done", 0) - files.get("cancelled", 0)
        out["eta_s"] = 0.0 if left == 0 else round(left / rate, 1) if rate > 0 else None  # None: no rate yet
    return out


def _explain(conn: Any, leg: str, stmt: Any, params: dict[str, Any], analyze: bool) -> dict[str, str]:
    text = stmt.as_string(conn)
    prefix = b"EXPLAIN (ANALYZE, BUFFERS) " if analyze else b"EXPLAIN "
    lines = [row[0] for row in conn.execute(prefix + stmt.as_bytes(conn), params)]
    return {"leg": leg, "sql": text, "plan": "\n".join(lines)}


def _require_storable(what: str, value: Any) -> None:
    """Refuse what PostgreSQL cannot store or look up as given (NUL, lone surrogates, nesting past MAX_DEPTH),
    instead of storing it changed (an id without its NUL names another document) or failing inside a query."""
    problem = unstorable(value)
    if problem:
        raise InvalidRequest(f"{what} {problem}")


class _Documents(Sequence[ExtractedDocument]):
    """In-memory documents, each checked at once (a bad one refuses the whole call before anything is stored) and
    read into blocks when the run reaches it: the first batch is stored while the rest are still being read."""

    def __init__(self, documents: Iterable[ExtractedDocument | Mapping[str, Any]]):
        self._documents = documents if isinstance(documents, Sequence) else list(documents)
        for d in self._documents:
            if not isinstance(d, ExtractedDocument):
                _check_mapping(d)

    def __len__(self) -> int:
        return len(self._documents)

    @overload
    def __getitem__(self, i: int) -> ExtractedDocument: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[ExtractedDocument]: ...

    def __getitem__(self, i: int | slice) -> ExtractedDocument | Sequence[ExtractedDocument]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        d = self._documents[i]
        return d if isinstance(d, ExtractedDocument) else _read_mapping(d)


def _check_mapping(raw: Mapping[str, Any]) -> None:
    rid, text = raw.get("id"), raw.get("text")
    if not rid or not isinstance(text, str):
        raise InvalidRequest("an in-memory document needs a non-empty 'id' and a 'text' string")
    _require_storable(f"document id {str(rid)!r}:", str(rid))
    _require_storable(f"document {str(rid)!r}: metadata", raw.get("metadata"))


def _document_from_mapping(raw: Mapping[str, Any]) -> ExtractedDocument:
    _check_mapping(raw)
    return _read_mapping(raw)


def _read_mapping(raw: Mapping[str, Any]) -> ExtractedDocument:
    """A checked in-memory document as blocks."""
    rid, text = raw["id"], raw["text"]
    title = raw.get("title")
    kind = str(raw.get("source_type") or "text")
    body = markdown_blocks(text) if kind == "markdown" else text_blocks(text)
    if kind == "markdown" and not title:  # as a Markdown file: its first heading is its title
        title = next((b.text for b in body if b.type == "heading"), None)
    elif title:
        body = [Block("heading", str(title), level=1), *body]
    return ExtractedDocument(external_id=str(rid), source_uri=str(raw.get("source_uri") or f"memory:{rid}"),
                             source_type=kind, title=str(title) if title else None, blocks=tuple(body),
                             tags=tuple(raw.get("tags") or ()), metadata=dict(raw.get("metadata") or {}))


# -- the canonical blocks ------------------------------------------------------------------------------


def connect(url: str | None = None, *, settings: Settings | None = None,
            embedder: Embedder | str | None = None) -> Ragd:
    """Open ragd: `url`, else RAGD_DATABASE_URL, else the embedded server under RAGD_HOME. Migrates on first use."""
    settings = settings or load_settings()
    return Ragd(Store.open(settings, url), settings, embedder)


def chunk(text_or_blocks: str | Sequence[Block], policy: ChunkPolicy | None = None, *,
          doc_id: str = "") -> list[Chunk]:
    """Deterministic chunking of text (split into paragraphs) or extracted blocks."""
    blocks = text_blocks(text_or_blocks) if isinstance(text_or_blocks, str) else list(text_or_blocks)
    chunks, _ = chunk_blocks(blocks, policy or ChunkPolicy(), default_token_counter(), doc_id=doc_id)
    return chunks


def index(chunks: Sequence[Chunk], store: Collection) -> dict[str, Any]:
    """Upsert chunks (grouped by doc_id) into a collection; idempotent. Returns the run's counts."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    docs = []
    for doc_id in sorted(by_doc):
        parts = sorted(by_doc[doc_id], key=lambda c: c.chunk_index)
        blocks = [Block("paragraph", c.content) if c.chunk_type != "table" else Block("table", c.content)
                  for c in parts]
        docs.append(ExtractedDocument(external_id=doc_id, source_uri=f"memory:{doc_id}", source_type="chunks",
                                      title=None, blocks=tuple(blocks),
                                      tags=tuple(sorted({t for c in parts for t in c.tags}))))
    report = store.ingest(documents=docs)
    return report.as_dict()


_log = logging.getLogger("ragd.engine")


