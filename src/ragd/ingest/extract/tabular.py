"""CSV/TSV: encoding detected (UTF-8 first, then charset-normalizer), delimiter sniffed among , ; tab |."""

from __future__ import annotations

import csv
from collections.abc import Iterator

from ...errors import CorruptDocument
from ...types import ExtractedDocument
from ..normalize import wide_encoding
from .base import ExtractOptions, Source, single_document
from .office import table_block

DELIMITERS = ",;\t|"


def decode_table_text(data: bytes) -> tuple[str, str]:
    """(text, encoding): BOMs and UTF-16/32, then strict UTF-8, then charset-normalizer's best guess."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8"), "utf-8-sig"
    wide = wide_encoding(data)
    if wide:
        return data.decode(wide, errors="replace").lstrip("\ufeff"), wide
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        return data.decode("cp1252", errors="replace"), "cp1252"
    return str(best), best.encoding


def sniff_delimiter(text: str, suffix: str) -> str:
    sample = "\n".join(text.splitlines()[:50])
    try:
        return csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:
        pass
    if suffix == ".tsv":
        return "\t"
    # most consistent non-zero count per line wins
    lines = [line for line in sample.split("\n") if line.strip()]
    best, best_score = ",", -1.0
    for d in DELIMITERS:
        counts = [line.count(d) for line in lines]
        if not counts or max(counts) == 0:
            continue
        score = sum(1 for c in counts if c == counts[0]) / len(counts) + min(counts[0], 20) / 100
        if score > best_score:
            best, best_score = d, score
    return best


class CsvExtractor:
    source_type = "csv"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        text, encoding = decode_table_text(source.data)
        text = text.replace("\x00", "")  # cells are normalised one by one; tabs may be the delimiter
        delimiter = sniff_delimiter(text, source.path.suffix.lower())
        try:
            grid = list(csv.reader(text.splitlines(), delimiter=delimiter))
        except csv.Error as exc:
            yield CorruptDocument(f"{source.path.name}: unreadable CSV ({exc})")
            return
        block = table_block(grid, sheet=source.path.stem)
        blocks = [block] if block is not None else []
        yield from single_document(source, "csv", None, blocks,
                                   metadata={"encoding": encoding, "delimiter": delimiter})
