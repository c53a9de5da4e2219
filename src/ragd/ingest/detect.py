"""File type from content first, the extension only to choose between text flavours."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import CorruptDocument, EncryptedDocument, UnsupportedFormat
from .extract.office import office_kind
from .normalize import wide_encoding

_MAGIC: list[tuple[bytes, str]] = [
    (b"%PDF-", "pdf"),
    (b"PK\x03\x04", "zip"),
    (b"\x89PNG\r\n\x1a\n", "image"),
    (b"\xff\xd8\xff", "image"),
    (b"II*\x00", "image"),
    (b"MM\x00*", "image"),
    (b"GIF8", "image"),
    (b"BM", "image"),
    (b"\xd0\xcf\x11\xe0", "ole"),
    (b"\x1f\x8b", "gzip"),
    (b"7z\xbc\xaf", "7z"),
    (b"Rar!", "rar"),
]

_REFUSED = {
    "gzip": "gzip archives are not unpacked: extract the files and ingest them",
    "7z": "7z archives are not unpacked: extract the files and ingest them",
    "rar": "RAR archives are not unpacked: extract the files and ingest them",
}

# an email's header block: "Name: value" lines (folded lines indented), with a From and a Subject, Date,
# Message-ID or MIME-Version among them, up to the blank line before the body
_EMAIL_HEAD = re.compile(
    rb"(?=(?:[\x21-\x39\x3b-\x7e]+:[^\n]*\r?\n(?:[ \t][^\n]*\r?\n)*)*?(?i:from):)"
    rb"(?=(?:[\x21-\x39\x3b-\x7e]+:[^\n]*\r?\n(?:[ \t][^\n]*\r?\n)*)*?(?i:subject|date|message-id|mime-version):)"
    rb"(?:[\x21-\x39\x3b-\x7e]+:[^\n]*\r?\n(?:[ \t][^\n]*\r?\n)*){2,}\r?\n")
_MARKDOWN_EXT = {".md", ".markdown", ".mdown", ".mkd"}
_JSON_EXT = {".json"}
_JSONL_EXT = {".jsonl", ".ndjson"}
_CSV_EXT = {".csv", ".tsv", ".tab"}


# an OLE compound file's top-level streams that tell what it is
_OLE_STREAMS = (("WordDocument", "doc"), ("PowerPoint Document", "ppt"), ("Workbook", "xls"), ("Book", "xls"))


def ole_kind(data: bytes) -> str:
    """What an OLE compound file holds, from its top-level streams: doc, ppt, xls or msg (an Outlook message)."""
    import olefile

    try:
        with olefile.OleFileIO(data) as ole:
            top = {entry[0] for entry in ole.listdir(streams=True, storages=True)}
    except (OSError, ValueError, IndexError) as exc:
        top = set()  # damaged: its stream names are looked for in the bytes
        top |= {name for name, _ in _OLE_STREAMS if f"{name}\x00".encode("utf-16-le") in data[:1_000_000]}
        top |= {"__substg1.0_"} if "__substg1.0_".encode("utf-16-le") in data else set()
        if not top:
            raise CorruptDocument(f"a damaged OLE compound file (Office 97-2003 or Outlook): {exc}") from None
    if "EncryptedPackage" in top:
        raise EncryptedDocument("a password-protected Office file: remove the password and ingest it again")
    if any(name.startswith("__substg1.0_") for name in top):
        return "msg"
    for name, kind in _OLE_STREAMS:
        if name in top:
            return kind
    raise UnsupportedFormat("an OLE compound file that is not a Word, PowerPoint, Excel or Outlook file")


def looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    if not head:
        return False
    controls = sum(1 for b in head if b < 9 or (13 < b < 32))
    return controls / len(head) > 0.05


def detect(path: Path, data: bytes) -> str:
    """The extractor for these bytes: pdf, docx, pptx, xlsx, image, html, csv, markdown, json, jsonl or text.

    Binary formats are told by their content; the extension only picks between text flavours."""
    head = data[:8192]
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image"
    if b"%PDF-" in head[:1024]:
        return "pdf"
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if kind == "zip":
                office = office_kind(data)
                if office is None:
                    raise UnsupportedFormat(
                        "a zip archive that is not DOCX, PPTX or XLSX: unpack it and ingest the files")
                return office
            if kind == "ole":
                return ole_kind(data)
            if kind in _REFUSED:
                raise UnsupportedFormat(_REFUSED[kind])
            if magic == b"BM" and head[6:10] != b"\x00\x00\x00\x00":
                break  # text that happens to start with "BM", not a bitmap (whose reserved bytes are zero)
            return kind
    wide = wide_encoding(head)
    if wide:  # UTF-16 or UTF-32 text: its flavour is told from the text itself
        head = head[: len(head) - len(head) % 4].decode(wide, errors="ignore").encode("utf-8")
    if looks_binary(head):
        raise UnsupportedFormat("binary content (not text, and no known document signature)")
    suffix = path.suffix.lower()
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    lowered = stripped[:512].lower()
    if stripped.startswith(b"{\\rtf"):
        return "rtf"
    if suffix == ".eml" or _EMAIL_HEAD.match(stripped[:4096]):
        return "email"
    if lowered.startswith((b"<!doctype html", b"<html")) or suffix in {".html", ".htm", ".xhtml"}:
        return "html"
    if suffix in _CSV_EXT:
        return "csv"
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
