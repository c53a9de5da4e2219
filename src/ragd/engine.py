"""The library surface: connect() -> Ragd -> Collection, and the canonical blocks composed with plain calls."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from . import ids
from .answer.compose import ask
from .answer.generators import Generator, make_generator
from .config import Settings, load_settings
from .embed import Embedder, default_token_counter, make_embedder, pinned_embedder
from .embed.base import TokenCounter
from .errors import (
    CollectionNotFound,
    DimensionMismatch,
    InvalidRequest,
    NotFound,
    TenantNotFound,
)
from .ingest.chunk import chunk_blocks
from .ingest.extract import ExtractOptions
from .ingest.extract.text import text_blocks
from .ingest.given import GivenDocuments, documents_of_chunks, require_storable
from .ingest.pipeline import run_ingest
from .ingest.reindex import reindex
from .ingest.state import Duplicates, Part, Progress
from .ingest.worker import render
from .metrics import count_items
from .pages import PAGES, Rendered
from .rerank import Reranker, make_reranker
from .retrieve.cache import ResultCache
from .retrieve.filters import parse_filters
from .retrieve.postings import PostingsCache
from .retrieve.scope import HeldCache
from .retrieve.search import explain, make_plan, search_cached
from .store import Store, blocks, rows, vector_index
from .store.artifacts import load_artifact, write_pack
from .store.names import check_name, check_tenant
from .store.originals import Original
from .store.originals import originals_for as original_files
from .store.vector_index import IndexBuilds
from .telemetry import annotate, span
from .types import (
    ITEM_STATUSES,
    Answer,
    AnswerStream,
    Block,
    Candidate,
    Chunk,
    ChunkPolicy,
    ExtractedDocument,
    Filters,
    IngestReport,
    Plan,
)

if TYPE_CHECKING:
    from .remote import RemoteRagd


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
        self._index_builds = IndexBuilds()

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
        meanwhile (store.vector_index.IndexBuilds)."""
        self._index_builds.queue(col)

    def wait_for_index_builds(self, timeout_s: float | None = None) -> bool:
        """Wait for the index builds queued or running in the background; True when none is left."""
        return self._index_builds.wait(timeout_s)

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
        embedder = pinned_embedder(name, model, dims, explicit, self.settings)
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
            return rows.run(conn, run_id, tenant)

    def save_evaluation(self, *, collection: str, dataset: str, kind: str, metrics: Mapping[str, Mapping[str, Any]],
                        config: Mapping[str, Any] | None = None, tenant: str | None = None) -> uuid.UUID:
        """Keep an evaluation's figures ({plan: {metric: number}}) in the tenant's store, to be compared over
        time (`ragd eval --save`, the web page's quality view)."""
        who = self._tenant(tenant)
        with self.store.tenant(who) as conn:
            return rows.save_evaluation(conn, who, collection, dataset, kind, metrics, config)

    def evaluations(self, *, tenant: str | None = None, collection: str | None = None,
                    limit: int = 200) -> list[dict[str, Any]]:
        """The tenant's kept evaluations, oldest first (the latest `limit`)."""
        with self.store.tenant(self._tenant(tenant)) as conn:
            return rows.evaluations(conn, collection, limit)

    def execution(self, ref: str, *, tenant: str | None = None) -> dict[str, Any]:
        """One reproducibility record (query id or unique prefix) of the tenant, in any collection."""
        tenant = self._tenant(tenant)
        with self.store.tenant(tenant) as conn:
            return rows.execution(conn, ref, tenant)

    def _load(self, tenant: str, name: str) -> dict[str, Any] | None:
        """The collection's row; None when it, or its tenant, does not exist."""
        try:
            self.store.tenant_role(tenant)
        except TenantNotFound:
            return None
        with self.store.tenant(tenant) as conn:
            return rows.collection(conn, name)

    def _create(self, tenant: str, name: str, embedder: Embedder, policy: ChunkPolicy) -> None:
        """The collection row and its BM25 statistics (the tenant exists: _load opened its session). Its HNSW index
        is built when its first ingest run ends, from all the rows at once (Collection.ensure_vector_index)."""
        with self.store.admin(tenant) as conn:
            rows.create_collection(conn, ids.collection_id(tenant, name), tenant, name, embedder.name, embedder.dims,
                                   policy.as_dict(), self.settings.vector_type, self.settings.hnsw_ef_construction)

    def collections(self, tenant: str | None = None) -> list[dict[str, Any]]:
        try:
            self.store.tenant_role(self._tenant(tenant))
        except TenantNotFound:
            return []
        with self.store.tenant(self._tenant(tenant)) as conn:
            return rows.collections(conn)


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
        """ensure_vector_index's build, on a connection of its own (store.vector_index.build); False when another
        process is building it."""
        return vector_index.build(self.store, self.collection_id, self.embed_model, self.dims, self.vector_type,
                                  self.ef_construction)

    def write_artifacts(self, lines: Sequence[tuple[uuid.UUID, str]]) -> dict[uuid.UUID, str]:
        """The extracted blocks of new versions, kept as a pack (store.artifacts.write_pack)."""
        return write_pack(self.settings.artifacts, self.collection_id, lines)

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
        require_storable("metadata", dict(metadata or {}))
        docs = GivenDocuments(documents)
        with span("rag.indexer.index_documents", **{"rag.collection": self.name, "rag.paths": len(paths),
                                                    "rag.documents": len(docs), "rag.uploads": len(uploads)}) as s:
            report = run_ingest(self, list(paths), documents=docs, tags=tags, metadata=dict(metadata or {}),
                                options=options or ExtractOptions(), duplicates=duplicates,
                                near_duplicates=near_duplicates, on_progress=on_progress,
                                uploads=[(u[0], Path(u[1]), *u[2:]) for u in uploads],
                                workers=workers, part=part)
            annotate(s, **{"rag.items": len(report.items), "rag.failed": len(report.failed),
                           "rag.chunks": report.chunks})
            count_items(self.tenant, {status: report.count(status) for status in ITEM_STATUSES})
            self.client.wrote(self.tenant)
            return report

    def reindex(self, *, on_progress: Progress | None = None, workers: int | None = None) -> IngestReport:
        """Read every document's active version again from its kept original with today's extractors, as one
        run (ingest.reindex)."""
        report = reindex(self, on_progress=on_progress, workers=workers)
        self.client.wrote(self.tenant)
        return report

    # -- search -------------------------------------------------------------------------------

    def plan(self, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, **overrides: Any) -> Plan:
        """A search's plan from k, filters and overrides (retrieve.search.make_plan)."""
        return make_plan(k, filters, **overrides)

    def search(self, query: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
               debug: dict[str, Any] | None = None, **plan: Any) -> list[Candidate]:
        """Retrieve with a plan built from k, filters and overrides; served from the result cache while the
        collection is unchanged. `debug`, when given, receives the reranker's outcome (see `retrieve`) or
        `cached: true`."""
        require_storable("the query", query)
        require_storable("the filters", filters if isinstance(filters, Mapping) else None)
        return search_cached(query, self.plan(k, filters, **plan), self, {} if debug is None else debug)

    def ask(self, question: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
            rerank: bool | None = None, debug: bool = False, request_id: str | None = None,
            emit_log: bool = True) -> Answer:
        """Answer from the collection with citations, or abstain when the evidence is weak (see `ask`). Reranks
        unless `rerank=False` or RAGD_RERANKER is none."""
        require_storable("the question", question)
        require_storable("the filters", filters if isinstance(filters, Mapping) else None)
        use_rerank = self.settings.reranker != "none" if rerank is None else rerank
        return ask(question, self.plan(k, filters, rerank=use_rerank), self, debug=debug, request_id=request_id,
                   emit_log=emit_log)

    def ask_stream(self, question: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
                   rerank: bool | None = None) -> AnswerStream:
        """ask(), its text as an iterator of word-sized pieces (as the REST API and a remote client stream it);
        `.answer` is the whole Answer once they are read."""
        answer = self.ask(question, k, filters, rerank=rerank)
        return AnswerStream(answer.pieces(), lambda: answer)

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
        return explain(self, query, self.plan(k, filters, **plan), analyze)

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
                require_storable(what, value)
        with self.store.tenant(self.tenant) as conn:
            return rows.documents_page(conn, self.collection_id, limit, offset, find, tag, source_type)

    def chunk(self, chunk_id: str) -> dict[str, Any]:
        """One chunk of the collection (any version of its document) with its document's id, title and version,
        its pages and boxes (where extraction knew them) and whether its original file is kept."""
        with self.store.tenant(self.tenant) as conn:
            return rows.chunk(conn, self.collection_id, self.name, chunk_id)

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
        require_storable("the document reference", ref)
        return rows.source(conn, self.collection_id, self.name, ref, version, original)

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
            cached = PAGES.get(key)
            if cached is not None:
                return cached
            data = keeper.get(conn, self.tenant, row["source_sha256"])
        rendered = render(self.settings, data, row["media_type"] or "application/octet-stream", number, boxes, quotes)
        PAGES.put(key, rendered)
        return rendered

    def document(self, ref: str) -> dict[str, Any]:
        """A document by external id or doc id, with its versions."""
        require_storable("the document reference", ref)
        with self.store.tenant(self.tenant) as conn:
            return rows.document(conn, self.collection_id, self.name, ref)

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
        require_storable("the document reference", ref)
        with self.store.tenant(self.tenant) as conn:
            doc_id, gone = rows.delete_document(conn, self.collection_id, self.name, ref, self.tenant,
                                                original_files(self.settings))
        original_files(self.settings).remove(self.tenant, gone)  # committed: the bytes go too
        self.client.wrote(self.tenant)
        return doc_id

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The collection's latest ingestion runs, newest first."""
        with self.store.tenant(self.tenant) as conn:
            return rows.runs(conn, self.collection_id, limit)

    def run(self, run_id: str) -> dict[str, Any]:
        """One ingestion run (id or unique prefix) of this tenant, with every item."""
        return self.client.run(run_id, tenant=self.tenant)


# -- the canonical blocks ------------------------------------------------------------------------------


@overload
def connect(url: None = None, *, settings: Settings | None = None, embedder: Embedder | str | None = None) -> Ragd: ...


@overload
def connect(url: str, *, settings: Settings | None = None, embedder: Embedder | str | None = None,
            api_key: str | None = None, **remote: Any) -> Ragd | RemoteRagd: ...


def connect(url: str | None = None, *, settings: Settings | None = None, embedder: Embedder | str | None = None,
            api_key: str | None = None, **remote: Any) -> Ragd | RemoteRagd:
    """Open ragd: `url`, else RAGD_DATABASE_URL, else the embedded server under RAGD_HOME. Migrates on first use.

    An http(s) `url` is a `ragd serve` server: the client (ragd.remote.RemoteRagd) has the same face over its
    REST API, the tenant that of `api_key` (else RAGD_API_KEY); `remote` are its options (timeout_s, retries,
    backoff_s, max_wait_s, max_response_bytes, collection)."""
    if url is not None and url.startswith(("http://", "https://")):
        from .remote import RemoteRagd

        return RemoteRagd(url, api_key, **remote)
    if api_key is not None or remote:
        raise InvalidRequest("api_key and the remote options are for an http(s) URL of a ragd server")
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
    return store.ingest(documents=documents_of_chunks(chunks)).as_dict()



