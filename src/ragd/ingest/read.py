"""What reading a file means, wherever it runs (in a worker process or in this one): its format detected, the
checks made before any parser runs, its documents extracted; a long PDF read in page ranges and laid out from them.
Any failure is the file's own error, never an exception that ends the run."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import (
    CorruptDocument,
    EmptyDocument,
    FileTooLarge,
    IngestError,
    RagdError,
)
from ..types import ExtractedDocument
from . import bounds
from .bounds import Limits
from .detect import detect
from .extract import EXTRACTORS, ExtractOptions, Source, pdf
from .walk import display, read_source, source_of


def extract_path(path: Path, limits: Limits, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
    try:
        kind, source = _read_checked(path, limits)
        for doc in EXTRACTORS[kind].extract(source, options):  # (in the worker: a text too long is not sent back)
            yield too_long(doc, limits.max_document_chars) or doc if isinstance(doc, ExtractedDocument) else doc
    except Exception as exc:
        yield _extract_error(path, exc)


def too_long(doc: ExtractedDocument, max_chars: int) -> FileTooLarge | None:
    """The error of a document whose text is over max_chars characters, or None."""
    chars = sum(len(b.text) + sum(len(c or "") for row in b.rows for c in row) for b in doc.blocks)
    if chars <= max_chars:
        return None
    return FileTooLarge(f"{doc.external_id.rsplit('/', 1)[-1]}: its text is {chars:,} characters, over the "
                        f"{max_chars:,}-character limit of one document (RAGD_MAX_DOCUMENT_CHARS)")


def _read_checked(path: Path, limits: Limits) -> tuple[str, Source]:
    """The file's format and bytes, after the checks made before any parser runs."""
    source = read_source(path, limits.max_file_bytes)
    kind = detect(path, source.data)
    if not source.data.strip():
        raise EmptyDocument(f"{path.name} is empty")
    bounds.check(kind, path.name, source.data, limits)
    return kind, source


def _extract_error(path: Path, exc: Exception) -> Exception:
    """What an exception raised while extracting a file says in its report."""
    if isinstance(exc, RagdError):
        return exc
    if isinstance(exc, OSError):
        return IngestError(f"{display(path)}: cannot read: {exc.strerror or exc}")
    if isinstance(exc, MemoryError):
        return FileTooLarge(f"{path.name}: extraction ran out of memory")
    # a parser library choking on a malformed file fails that file only
    return CorruptDocument(f"{path.name}: could not be extracted ({type(exc).__name__}: {exc})")


def extract_or_split(path: Path, limits: Limits, options: ExtractOptions,
                     split_pages: int = 0) -> list[ExtractedDocument | Exception] | PdfSplit:
    """A file's documents, or for a PDF of `split_pages` pages or more (when given) its page count, for the
    caller to have its pages read by several workers at once."""
    if not split_pages:
        return list(extract_path(path, limits, options))
    found: list[ExtractedDocument | Exception] = []
    try:
        kind, source = _read_checked(path, limits)
        if kind == "pdf" and (pages := pdf.page_count(source)) >= split_pages:
            return PdfSplit(pages)
        found.extend(EXTRACTORS[kind].extract(source, options))
    except Exception as exc:
        found.append(_extract_error(path, exc))
    return found


@dataclass
class PdfPart:
    """Pages start..stop of a PDF read in a worker: what was read, and the pages' boxes as a spool's bytes."""

    read: pdf.PagesRead
    pages: int
    boxes: bytes


def read_pdf_pages(path: Path, limits: Limits, start: int, stop: int) -> PdfPart | list[Exception]:
    try:
        _, source = _read_checked(path, limits)
        with pdf.PageSpool() as spool:
            read = pdf.read_pages(source, spool, start, stop)
            return PdfPart(read, len(spool), spool.to_bytes())
    except Exception as exc:
        return [_extract_error(path, exc)]


def lay_out_pdf(path: Path, parts: list[PdfPart]) -> list[ExtractedDocument | Exception]:
    """The document of a PDF from its page ranges, in order."""
    try:
        read = pdf.PagesRead()
        for part in parts:
            read.extend(part.read)
        with pdf.PageSpool.from_bytes([(p.pages, p.boxes) for p in parts]) as spool:
            return list(pdf.lay_out(source_of(path, b""), read, spool))
    except Exception as exc:
        return [_extract_error(path, exc)]


@dataclass(frozen=True)
class PdfSplit:
    """A worker's answer for a PDF long enough to be read in page ranges by several workers at once."""

    pages: int
