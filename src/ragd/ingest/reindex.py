"""`ragd reindex`: every document of a collection read again from its kept original with today's extractors, as
one run through the pipeline; each keeps its tags and metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import IngestError, NoOriginal
from ..store import rows
from ..store.originals import originals_for as original_files
from ..telemetry import span
from ..types import IngestReport
from .pipeline import run_ingest
from .state import Collection, Progress
from .uploads import spool_folder


def reindex(col: Collection, *, on_progress: Progress | None = None, workers: int | None = None) -> IngestReport:
    """Read every document's active version again from its kept original with today's extractors, as one
    run: a document whose extracted content is the same is `unchanged`; one that changed gets a new version
    (its chunks re-embedded only where their text is new: the embedding cache has the rest); one whose
    original is not kept is `skipped`; one that no longer extracts is `failed` and keeps its version. Each
    document keeps its tags and metadata (what extraction gives now wins for its own keys)."""
    keeper = original_files(col.settings)
    with col.store.tenant(col.tenant) as conn:
        sources = rows.reindex_sources(conn, col.collection_id)
    refused: list[IngestError] = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in sources:
        if row["source_sha256"] is None:
            refused.append(NoOriginal(f"{row['external_id']}: no original file is kept for this version "
                                      "(stored before originals were kept, given as text, or with "
                                      "RAGD_ORIGINALS=off); ingest it again to read it anew",
                                      external_id=row["external_id"]))
        else:
            groups.setdefault((row["source_sha256"], row["source_name"]), []).append(row)
    labels = {row["external_id"]: (tuple(row["tags"] or ()), dict(row["metadata"] or {})) for row in sources}
    with spool_folder(col.settings.home) as folder:
        uploads = []
        for n, ((sha, name), docs) in enumerate(sorted(groups.items())):
            with col.store.tenant(col.tenant) as conn:
                data = keeper.get(conn, col.tenant, sha)
            path = Path(folder) / str(n) / (name.rsplit("/", 1)[-1] or "original")
            path.parent.mkdir()
            path.write_bytes(data)
            uploads.append((name, path, _container_uri(docs[0]["external_id"], name, docs[0]["source_uri"])))
        with span("rag.indexer.reindex", **{"rag.collection": col.name, "rag.documents": len(sources)}):
            report = run_ingest(col, [], uploads=uploads, labels=labels, refused=refused,
                                on_progress=on_progress, workers=workers, kind="reindex")
    return report


def _container_uri(external_id: str, name: str, source_uri: str) -> str:
    """The URI of the file a document was read from: a container's part (a record, an attachment) carries a
    suffix on its file's name and URI, or a #fragment on the URI."""
    suffix = external_id[len(name):] if external_id.startswith(name) else ""
    if suffix and source_uri.endswith(suffix):
        return source_uri[: len(source_uri) - len(suffix)]
    return source_uri.split("#", 1)[0] if external_id != name else source_uri
