"""File type from content first, the extension only to choose between text flavours."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UnsupportedFormat

_MAGIC: list[tuple[bytes, str]] = [
    (b"%PDF-", "pdf"),
    (b"PK\x03\x04", "zip"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"GIF8", "gif"),
    (b"\xd0\xcf\x11\xe0", "ole"),
    (b"\x1f\x8b", "gzip"),
    (b"7z\xbc\xaf", "7z"),
    (b"Rar!", "rar"),
]

_PENDING = {
    "pdf": "PDF",
    "zip": "Office/zip",
    "png": "PNG image",
    "jpeg": "JPEG image",
    "tiff": "TIFF image",
    "gif": "GIF image",
    "ole": "legacy Office (OLE)",
}

_MARKDOWN_EXT = {".md", ".markdown", ".mdown", ".mkd"}
_JSON_EXT = {".json"}
_JSONL_EXT = {".jsonl", ".ndjson"}


def looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    if not head:
        return False
    controls = sum(1 for b in head if b < 9 or (13 < b < 32))
    return controls / len(head) > 0.05


def detect(path: Path, head: bytes) -> str:
    """Return one of: text, markdown, json, jsonl, html; raise UnsupportedFormat otherwise."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            what = _PENDING.get(kind, kind)
            raise UnsupportedFormat(
                f"{what} content is not supported by this build of ragd (plain text, Markdown and JSON/JSONL are)"
            )
    if looks_binary(head[:8192]):
        raise UnsupportedFormat("binary content (not text, and no known document signature)")
    suffix = path.suffix.lower()
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    lowered = stripped[:512].lower()
    if lowered.startswith((b"<!doctype html", b"<html")) or (suffix in {".html", ".htm"}):
        raise UnsupportedFormat("HTML content is not supported by this build of ragd")
    if suffix in _JSONL_EXT:
        return "jsonl"
    if suffix in _JSON_EXT:
        return "json"
    if stripped[:1] in (b"{", b"["):
        first_line = stripped.split(b"\n", 1)[0]
        try:
            json.loads(first_line)
            return "jsonl" if b"\n" in stripped.strip() and stripped[:1] == b"{" else "json"
        except ValueError:
            if suffix not in _MARKDOWN_EXT and suffix != ".txt":
                return "json"
    if suffix in _MARKDOWN_EXT:
        return "markdown"
    return "text"
