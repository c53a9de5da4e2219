"""JSON / JSONL records: one document per record, with configurable id, title and text fields,
so a BEIR corpus.jsonl (`_id`, `title`, `text`) ingests as it is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ...errors import CorruptDocument, EmptyDocument, IngestError
from ...ids import sha256_text
from ...types import Block, ExtractedDocument
from ..normalize import decode_text
from .base import ExtractOptions, Source, single_document
from .text import text_blocks

ID_FIELDS = ("_id", "id", "doc_id")
TEXT_FIELDS = ("text", "content", "body")


def _leaves(value: Any, path: tuple[str, ...], out: list[str]) -> None:
    """Readable string leaves in document order, each after its key (references like "#/texts/0" skipped)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _leaves(item, (*path, str(key)), out)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, path, out)
    elif isinstance(value, str):
        text = " ".join(value.split())
        if text and not text.startswith("#/") and any(ch.isalpha() for ch in text):
            out.append(f"{path[-1]}: {text}" if path and len(text) < 80 else text)


def _first(record: dict[str, Any], names: tuple[str, ...]) -> tuple[str | None, Any]:
    for name in names:
        if name in record and record[name] is not None:
            return name, record[name]
    return None, None


def _content_id(record: dict[str, Any], occurrences: dict[str, int]) -> str:
    """A stable id for a record without one: its content's hash, and for the k-th record of the same content
    (k >= 2) that position among equals, so ids hold when other records are added, removed or reordered."""
    digest = sha256_text(json.dumps(record, sort_keys=True, ensure_ascii=False))[:16]
    occurrences[digest] = occurrences.get(digest, 0) + 1
    n = occurrences[digest]
    return f"sha256:{digest}" if n == 1 else f"sha256:{digest}-{n}"


class RecordsExtractor:
    def __init__(self, *, lines: bool):
        self.lines = lines
        self.source_type = "jsonl" if lines else "json"

    def _records(self, source: Source) -> Iterator[tuple[str, Any]]:
        text = decode_text(source.data)
        if self.lines:
            for number, line in enumerate(text.split("\n"), start=1):
                if line.strip():
                    try:
                        yield f"line {number}", json.loads(line)
                    except ValueError as exc:
                        yield f"line {number}", CorruptDocument(f"line {number} is not valid JSON: {exc}")
            return
        try:
            data = json.loads(text)
        except ValueError as exc:
            yield "document", CorruptDocument(f"not valid JSON: {exc}")
            return
        if isinstance(data, dict) and isinstance(data.get("documents"), list):
            data = data["documents"]
        items = data if isinstance(data, list) else [data]
        for number, item in enumerate(items, start=1):
            yield f"record {number}", item

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        id_fields = (options.id_field,) if options.id_field else ID_FIELDS
        text_fields = options.text_fields or TEXT_FIELDS
        title_field = options.title_field or "title"
        records = list(self._records(source))
        if not self.lines and not options.id_field and records and not any(
                isinstance(r, dict) and _first(r, id_fields)[1] is not None for _, r in records):
            # a JSON file that is not a record set (a config, an export, a list of strings): one document
            yield from self._whole(source)
            return
        seen = 0
        occurrences: dict[str, int] = {}
        for where, record in records:
            seen += 1
            if isinstance(record, Exception):
                yield record
                continue
            fallback = None
            if not options.id_field and isinstance(record, dict) and _first(record, id_fields)[1] is None:
                fallback = _content_id(record, occurrences)
            yield self._document(source, where, record, id_fields, title_field, text_fields, fallback)
        if seen == 0:
            yield EmptyDocument(f"{source.path.name} holds no records")

    def _whole(self, source: Source) -> Iterator[ExtractedDocument | Exception]:
        data = json.loads(decode_text(source.data))
        lines: list[str] = []
        _leaves(data, (), lines)
        blocks = [Block("paragraph", line) for line in lines]
        yield from single_document(source, self.source_type, source.path.stem, blocks)

    def _document(
        self,
        source: Source,
        where: str,
        record: Any,
        id_fields: tuple[str, ...],
        title_field: str,
        text_fields: tuple[str, ...],
        fallback: str | None = None,
    ) -> ExtractedDocument | IngestError:
        if not isinstance(record, dict):
            return CorruptDocument(f"{where}: expected a JSON object, got {type(record).__name__}")
        id_name, rid = _first(record, id_fields)
        rid = fallback if rid is None else rid
        if rid is None or str(rid).strip() == "":
            return CorruptDocument(f"{where}: no id field (looked for {', '.join(id_fields)})")
        text_name, text = _first(record, text_fields)
        title = record.get(title_field)
        title = str(title).strip() if title is not None and str(title).strip() else None
        body = text if isinstance(text, str) else ("" if text is None else json.dumps(text, sort_keys=True))
        blocks = text_blocks(body)
        if title is not None:
            blocks.insert(0, Block("heading", title, level=1))
        if not blocks:
            return EmptyDocument(f"{where} (id {rid}): empty text (looked for {', '.join(text_fields)})",
                                 external_id=str(rid))
        used = {id_name, text_name, title_field, "tags", "metadata"}
        metadata = dict(record["metadata"]) if isinstance(record.get("metadata"), dict) else {}
        for key in sorted(record):
            value = record[key]
            if key not in used and isinstance(value, (str, int, float, bool)):
                metadata.setdefault(key, value)
        raw_tags = record.get("tags")
        tags = tuple(str(t) for t in raw_tags) if isinstance(raw_tags, list) else ()
        return ExtractedDocument(
            external_id=str(rid),
            source_uri=f"{source.source_uri}#{rid}",
            source_type=self.source_type,
            title=title,
            blocks=tuple(blocks),
            tags=tags,
            metadata=metadata,
        )
