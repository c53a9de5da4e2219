"""The extractor contract: bytes of one source in, logical documents made of ordered blocks out."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...errors import EmptyDocument
from ...types import Block, ExtractedDocument, has_text


@dataclass(frozen=True)
class Source:
    path: Path
    data: bytes
    external_id: str  # for single-document formats; record formats derive ids per record
    source_uri: str


@dataclass(frozen=True)
class ExtractOptions:
    id_field: str | None = None  # JSON records: default tries _id, id, doc_id
    title_field: str | None = None  # default: title
    text_fields: tuple[str, ...] = ()  # default: text, content, body
    follow_symlinks: bool = False  # folders: follow links that point outside the folder given


class Extractor(Protocol):
    source_type: str

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        """Yield documents in source order; a record that cannot be read is yielded as an exception
        (an IngestError with the reason) so the other records go on."""
        ...


# Every format's extractor by kind: filled once by the package (extract/__init__.py), read here by an extractor of
# containers (an email's attachments) without importing the package above it.
EXTRACTORS: dict[str, Extractor] = {}


def single_document(source: Source, source_type: str, title: str | None, blocks: list[Block],
                    metadata: dict[str, Any] | None = None,
                    warnings: list[str] | None = None) -> Iterator[ExtractedDocument | Exception]:
    """The one document of a single-document format, or an EmptyDocument failure. Blocks without text (a
    scanned page that OCR read as blanks, a table of empty cells) are left out: stored, they would be chunks of
    nothing."""
    blocks = [b for b in blocks if has_text(b)]
    if not blocks:
        yield EmptyDocument(f"{source.path.name} has no text")
        return
    yield ExtractedDocument(external_id=source.external_id, source_uri=source.source_uri,
                            source_type=source_type, title=title, blocks=tuple(blocks),
                            metadata=metadata or {}, warnings=tuple(warnings or ()))



@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while objects that all live until the work is done are made (a PDF
    page's characters, a workbook's cells). The collector runs every few hundred allocations and, finding them
    alive again and again, traversed them over and over: a fifth of a dense PDF page's time, half a large
    workbook's. Work that stays bounded only (one page, one file within the size limit): what it leaves in cycles is
    collected after, in one pass. The collector is turned back on only if it was on: a caller that turned it off
    keeps it off."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
