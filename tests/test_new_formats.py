"""The formats users hit first, each on a real file written the way the tools that make them write them: text,
CSV and HTML in UTF-16/UTF-32 with and without a byte order mark, RTF, email, OpenDocument, EPUB, legacy .xls."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.config import Settings
from ragd.ingest.bounds import Limits
from ragd.ingest.extract import ExtractOptions
from ragd.ingest.pipeline import extract_path
from ragd.types import ExtractedDocument


def extract_all(path: Path) -> list[ExtractedDocument | Exception]:
    return list(extract_path(path, Limits.from_settings(Settings()), ExtractOptions()))


def extract(path: Path) -> ExtractedDocument:
    docs = extract_all(path)
    assert len(docs) == 1 and isinstance(docs[0], ExtractedDocument), docs
    return docs[0]


SAMPLES = {
    "notes.txt": "Quarterly notes\n\nThe café on Main Street reopened in March.",
    "people.csv": "name,city\nAnna,Zürich\nBéla,Győr\n",
    "page.html": "<html><head><title>Visit</title></head><body><h1>Opening hours</h1>"
                 "<p>Open daily, naïve visitors welcome.</p></body></html>",
}


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_text_csv_and_html_in_utf16_and_utf32_with_or_without_bom(tmp_path: Path, codec: str, name: str) -> None:
    """`utf-16`/`utf-32` write a byte order mark; the -le/-be codecs write none (as some exporters do)."""
    path = tmp_path / name
    path.write_bytes(SAMPLES[name].encode(codec))
    doc = extract(path)
    text = "\n".join(b.text for b in doc.blocks)
    if name == "people.csv":
        table = next(b for b in doc.blocks if b.type == "table")
        assert table.header == ("name", "city") and table.rows == (("Anna", "Zürich"), ("Béla", "Győr"))
    elif name == "page.html":
        assert doc.source_type == "html" and "Opening hours" in text and "naïve visitors" in text
    else:
        assert doc.source_type == "text" and "The café on Main Street" in text
    assert "\x00" not in text and "\ufeff" not in text
