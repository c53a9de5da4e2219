"""Locale-independent text normalisation: NFC, de-hyphenation across line breaks, whitespace folding."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\ufeff]")
_HYPHEN_BREAK = re.compile(r"(\w)-\n(?=[a-z])")
# runs that fold to one space: two or more blanks, or one blank other than a space (a lone space is left alone)
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000]{2,}|[\t\u00a0\u2000-\u200a\u202f\u205f\u3000]")
_BLANK_LINES = re.compile(r"\n{3,}")
# PostgreSQL text and jsonb hold neither NUL nor UTF-16 surrogates (which Python strings can carry: a file name's
# undecodable bytes, a JSON "\\ud800" escape).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def normalize_text(text: str) -> str:
    """Normalise a block of text, keeping line structure (paragraph breaks survive)."""
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n\n")
    text = _CONTROL.sub("", text)
    if "-\n" in text:
        text = _HYPHEN_BREAK.sub(r"\1", text)
    lines = [_fold_line(line) for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n")


def _fold_line(line: str) -> str:
    """Fold inner whitespace runs; keep leading indentation (nested lists, code) with tabs as 4 spaces."""
    body = line.lstrip(" \t")
    if not body.strip():
        return ""
    indent = line[: len(line) - len(body)].replace("\t", "    ")
    return indent + _SPACES.sub(" ", body).rstrip()


def fold_lines(text: str) -> str:
    """Join soft-wrapped lines of one paragraph with single spaces."""
    return " ".join(part for part in normalize_text(text).split("\n") if part)


_BOMS = [(b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xff\xfe", "utf-16"),
         (b"\xfe\xff", "utf-16")]  # UTF-32 first: its little-endian mark begins with UTF-16's


def wide_encoding(data: bytes) -> str | None:
    """UTF-16 or UTF-32 (the codec name, or None): by the byte order mark, or without one by where the zero
    bytes of mostly Latin text fall (every other byte, or three bytes in four)."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec
    head = data[:4096]
    head = head[: len(head) - len(head) % 4]
    if len(head) < 8:
        return None
    def zeros(offset: int, step: int) -> float:
        part = head[offset::step]
        return part.count(0) / len(part)
    if min(zeros(1, 4), zeros(2, 4), zeros(3, 4)) > 0.9 and zeros(0, 4) < 0.1:
        return "utf-32-le"
    if min(zeros(0, 4), zeros(1, 4), zeros(2, 4)) > 0.9 and zeros(3, 4) < 0.1:
        return "utf-32-be"
    if zeros(1, 2) > 0.6 and zeros(0, 2) < 0.1:
        return "utf-16-le"
    if zeros(0, 2) > 0.6 and zeros(1, 2) < 0.1:
        return "utf-16-be"
    return None


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM), UTF-16 or UTF-32 (with or without BOM); cp1252 as the last resort for legacy
    files."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8")
    wide = wide_encoding(data)
    if wide:
        return data.decode(wide, errors="replace").lstrip("\ufeff")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


# How deep metadata and filters may nest (objects and arrays): deeper values are refused, never walked recursively.
MAX_DEPTH = 32


def unstorable(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why value cannot be stored or looked up as given (a NUL character or a lone surrogate in a string, which
    PostgreSQL refuses, or nesting deeper than max_depth), or None. Walks without recursion, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            bad = _UNSTORABLE.search(item)
            if bad:
                return "holds a NUL character (U+0000)" if bad.group() == "\x00" else \
                    "holds a lone UTF-16 surrogate (U+D800-U+DFFF)"
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                return f"is nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item)
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return None


def storable(value: Any) -> Any:
    """value with every string made storable: NUL dropped, lone surrogates replaced by U+FFFD. Walks strings,
    lists, tuples, dict keys and values, and dataclasses (blocks, documents); returns value itself if clean."""
    if isinstance(value, str):
        return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", value) \
            if _UNSTORABLE.search(value) else value
    if isinstance(value, (list, tuple)):
        items = [storable(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if isinstance(value, dict):
        pairs = [(storable(k), storable(v)) for k, v in value.items()]
        return value if all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items())) else dict(pairs)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: storable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        changed = {k: v for k, v in changes.items() if v is not getattr(value, k)}
        return dataclasses.replace(value, **changed) if changed else value
    return value
