"""What a run carries from room to room: the collection it writes into (a protocol: ingestion imports nothing
above it), a queued run's part, each document prepared for writing, the run's state, and a failed item's outcome."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from ..config import Settings
from ..errors import RagdError, Skipped
from ..types import Chunk, ExtractedDocument, ItemOutcome, ItemStatus
from . import dedupe, prefetch
from .normalize import storable

if TYPE_CHECKING:
    from ..embed.base import Embedder, TokenCounter
    from ..store import Store
    from ..types import ChunkPolicy


Progress = Callable[[int, int, str], None]
Duplicates = Literal["skip", "keep"]


# failures that are not a document's fault: they stop the run instead of failing its items one by one
STOP_CODES = frozenset({"provider_unavailable", "model_not_available", "dimension_mismatch", "database_unavailable",
                        "originals_unavailable", "superseded"})


class Collection(Protocol):
    """What the pipeline needs of the collection it writes into (engine.Collection is one); the pipeline imports
    nothing above it."""

    tenant: str
    name: str
    collection_id: uuid.UUID
    embed_model: str
    dims: int
    embedder: Embedder
    policy: ChunkPolicy

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def counter(self) -> TokenCounter: ...

    def check_dims(self, dims: int) -> None: ...

    def ensure_vector_index(self) -> bool: ...

    def write_artifacts(self, lines: Sequence[tuple[uuid.UUID, str]]) -> dict[uuid.UUID, str]: ...


# A queued run's file numbers its items from its ordinal times this (a container holds at most this many documents)
PART_ITEMS = 1_000_000


@dataclass(frozen=True)
class Part:
    """One job's share of a queued run: the run exists (its row, its other files' items); this file's items are
    numbered from `base`, and those in `done` were stored by an earlier attempt of the job (killed after their
    transaction committed), so they are skipped, not stored or counted again."""

    run_id: uuid.UUID
    base: int
    done: frozenset[int] = frozenset()
    attempt: int | None = None  # the job's attempt that claimed the file: its batches commit while it is the latest


@dataclass
class Prepared:
    item_index: int
    doc: ExtractedDocument
    doc_id: uuid.UUID
    content_hash: str
    chunks: list[Chunk]
    warnings: list[str]
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    signature: np.ndarray | None = None
    band_keys: list[int] = field(default_factory=list)
    artifact_uri: str | None = None  # written once planned as new, before the commit
    artifact_line: str | None = None  # its line in the artifact pack, made while the batch before is written
    lexemes: list[str] | None = None  # each chunk's tsvector (as text), made while the batch before is written
    # stored signatures sharing an LSH band with it and similar enough to be recorded, (version, document,
    # signature), found while the batch before is written; None: not looked up yet
    near_stored: list[tuple[uuid.UUID, uuid.UUID, np.ndarray]] | None = None
    action: str = "new"
    version_id: uuid.UUID | None = None
    version_number: int = 1
    reason: str | None = None
    extract_seconds: float = 0.0
    original: tuple[Path, str] | None = None  # the file it was read from and that file's name
    unkept: bool = False  # an unchanged version that has no original kept
    source: tuple[str, str, str] | None = None  # the kept original: its SHA-256, name and media type


@dataclass
class RunState:
    run_id: uuid.UUID
    next_index: int = 0
    by_index: dict[int, ItemOutcome] = field(default_factory=dict)  # one outcome per item, even after a retry
    pending: list[tuple[int, ItemOutcome]] = field(default_factory=list)
    embedded: int = 0
    cache_hits: int = 0
    warnings: list[str] = field(default_factory=list)
    near_threshold: float = 1.0
    near_index: dedupe.RunIndex = field(default_factory=dedupe.RunIndex)
    near_decisions: list[dict[str, Any]] = field(default_factory=list)
    shared: bool = False  # a queued run's part: other jobs write the run's row; this one writes its items only
    part: Part | None = None
    sources: dict[Path, tuple[str, str]] = field(default_factory=dict)  # a file's SHA-256 and media type
    read_ahead: prefetch.Prefetch = field(default_factory=prefetch.Prefetch)

    def take_index(self) -> int:
        self.next_index += 1
        return self.next_index - 1

    @property
    def outcomes(self) -> list[ItemOutcome]:
        return [self.by_index[i] for i in sorted(self.by_index)]

    def stats(self, started: float) -> dict[str, Any]:
        counts: dict[str, int] = {}
        outcomes = self.outcomes
        for o in outcomes:
            counts[o.status] = counts.get(o.status, 0) + 1
        return {
            "items": len(outcomes),
            "counts": dict(sorted(counts.items())),
            "chunks": sum(o.chunks for o in outcomes if o.status in ("ingested", "updated")),
            "embedded": self.embedded,
            "cache_hits": self.cache_hits,
            "warnings": self.warnings[:100],
            "near_duplicates": self.near_decisions[:1000],
            "seconds": round(time.monotonic() - started, 3),
        }


def fail_item(state: RunState, index: int, outcome: ItemOutcome) -> None:
    state.pending.append((index, outcome))
    state.by_index[index] = outcome


def failure_outcome(source_uri: str, exc: Exception) -> ItemOutcome:
    """A failed (or skipped) item's outcome: a code and a one-line reason, whatever the exception."""
    if isinstance(exc, RagdError):
        status: ItemStatus = "skipped" if isinstance(exc, Skipped) else "failed"
        return ItemOutcome(source_uri=storable(source_uri), status=status, reason=storable(str(exc)),
                           error_code=exc.code, external_id=getattr(exc, "external_id", None))
    return ItemOutcome(source_uri=storable(source_uri), status="failed", error_code="unexpected_error",
                       reason=storable(f"{type(exc).__name__}: {exc}"))
