"""Limits per input item: bytes unpacked and workbook cells are checked before parsing; extraction runs in a
worker process that is stopped past its time or memory budget. The bad item fails with its code, the good items
of the same run are stored."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
import openpyxl
import pytest

import ragd
from ragd.config import Settings

from .conftest import pdf_bytes


@pytest.fixture
def limited(settings: Settings) -> Iterator[ragd.Ragd]:
    client = ragd.connect(settings=settings.model_copy(update={
        "max_unzipped_bytes": 8_000_000, "max_cells": 100_000, "extract_timeout_s": 1.5,
        "extract_memory_mb": 400}))
    yield client
    client.close()


def _outcomes(report: ragd.IngestReport) -> dict[str, tuple[str, str | None]]:
    return {Path(o.source_uri).name: (o.status, o.error_code) for o in report.items}


def _rewrite(path: Path, part: str, edit: bytes | None = None, add: bytes | None = None) -> None:
    """Rewrite one member of an Office file: replace `</sheetData>` with edit, or add it as a new member."""
    members = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            members[info.filename] = archive.read(info)
    if edit is not None:
        members[part] = members[part].replace(b"</sheetData>", b"</sheetData>" + edit)
    if add is not None:
        members[part] = add
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    path.write_bytes(buffer.getvalue())


def _workbook(path: Path, cells: dict[str, str]) -> Path:
    book = openpyxl.Workbook()
    for ref, value in cells.items():
        book.active[ref] = value
    book.save(path)
    return path


def _glyph_pdf(pages: int, glyphs: int) -> bytes:
    """`pages` pages sharing one content stream that draws `glyphs` characters, two at a time: seconds of work
    for any PDF parser, with little to hold in memory at once (one page's characters)."""
    content = b"BT /F1 2 Tf " + b"".join(
        b"%d %d Td (Wx) Tj " % ((1, 0) if i % 300 else (-299, 1)) for i in range(glyphs // 2)) + b"ET"
    first_page = 5
    kids = b" ".join(b"%d 0 R" % (first_page + i) for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                b"/Contents 4 0 R >>"] * pages
    return pdf_bytes(objects)


def test_office_files_that_unpack_or_expand_too_far_are_refused_before_parsing(
        limited: ragd.Ragd, name: str, tmp_path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("A short memo.")
    document.save(tmp_path / "a_bomb.docx")  # like a 1.9 MB file inflating to 245 MB, in small
    _rewrite(tmp_path / "a_bomb.docx", "word/filler.xml", add=b"<x/>" * 3_000_000)
    _rewrite(_workbook(tmp_path / "b_merge.xlsx", {"A1": "title"}), "xl/worksheets/sheet1.xml",
             edit=b'<mergeCells count="1"><mergeCell ref="A1:XFD1048576"/></mergeCells>')
    _workbook(tmp_path / "c_corner.xlsx", {"A1": "start", "XFD1048576": "far away"})
    book = openpyxl.Workbook()
    for row in range(400):
        book.active.append([f"r{row}c{col}" for col in range(300)])  # 120,000 cells
    book.save(tmp_path / "d_cells.xlsx")
    _workbook(tmp_path / "e_fine.xlsx", {"A1": "Quarter", "B1": "Revenue", "A2": "Q1", "B2": "1200"})
    (tmp_path / "f_good.txt").write_text("Bananas are berries, botanically.\n")
    report = limited.collection(name).ingest([tmp_path])
    outcomes = _outcomes(report)
    assert {k: v for k, v in outcomes.items() if k[0] < "e"} == {
        "a_bomb.docx": ("failed", "file_too_large"), "b_merge.xlsx": ("failed", "file_too_large"),
        "c_corner.xlsx": ("failed", "file_too_large"), "d_cells.xlsx": ("failed", "file_too_large")}
    reasons = {Path(o.source_uri).name: o.reason or "" for o in report.items}
    assert "unpacks to 12," in reasons["a_bomb.docx"] and "RAGD_MAX_UNZIPPED_BYTES" in reasons["a_bomb.docx"]
    assert "17,179,869,184 merged cells" in reasons["b_merge.xlsx"]
    assert "RAGD_MAX_CELLS" in reasons["c_corner.xlsx"] and "120,000 cells" in reasons["d_cells.xlsx"]
    assert outcomes["e_fine.xlsx"] == ("ingested", None) and outcomes["f_good.txt"] == ("ingested", None)


def test_a_runaway_extraction_is_stopped_and_the_run_goes_on(
        limited: ragd.Ragd, name: str, tmp_path: Path) -> None:
    # ~10 s of parsing here, 6x the 1.5 s budget, in about 120 MB: a time overrun, never a memory one (one page
    # of 400,000 glyphs grew 200 MB a second, and on a fast machine passed 400 MB before 1.5 s)
    (tmp_path / "a_glyphs.pdf").write_bytes(_glyph_pdf(60, 10_000))
    (tmp_path / "b_swell.json").write_text("[" + ",".join(["{}"] * 8_000_000) + "]")  # ~600 MB once parsed
    (tmp_path / "c_good.txt").write_text("Kiwis were once called Chinese gooseberries.\n")
    (tmp_path / "d_good.md").write_text("# Figs\n\nFigs are pollinated by wasps.\n")
    col = limited.collection(name)
    report = col.ingest([tmp_path])
    outcomes = _outcomes(report)
    assert outcomes["a_glyphs.pdf"] == ("failed", "timeout")
    assert outcomes["b_swell.json"] == ("failed", "file_too_large")
    assert outcomes["c_good.txt"] == ("ingested", None) and outcomes["d_good.md"] == ("ingested", None)
    reasons = {Path(o.source_uri).name: o.reason or "" for o in report.items}
    assert "RAGD_EXTRACT_TIMEOUT_S" in reasons["a_glyphs.pdf"]
    assert "400 MB" in reasons["b_swell.json"]
    assert [h.external_id.rsplit("/", 1)[-1] for h in col.search("pollinated by wasps", k=1)] == ["d_good.md"]


def test_a_script_without_a_main_guard_can_ingest_files(cli_env: dict[str, str], name: str, tmp_path: Path) -> None:
    """The extraction worker must not run the caller's script again (as multiprocessing's spawn would)."""
    (tmp_path / "note.txt").write_text("Quinces are fragrant when ripe.\n")
    script = tmp_path / "user_script.py"
    script.write_text("import ragd\n"
                      f"report = ragd.connect().collection({name!r}).ingest([{str(tmp_path / 'note.txt')!r}])\n"
                      "print('RAN', report.count('ingested'), len(report.failed))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                            env={**env, **cli_env})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n").count("RAN 1 0") == 1 and "Traceback" not in result.stderr


# -- every item's work bounded (issue 29) ------------------------------------------------------------------------

def _pages_pdf(streams: list[bytes]) -> bytes:
    """A PDF of one page per content stream, all in Helvetica."""
    n = len(streams)
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(n))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, stream in enumerate(streams):
        objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                    b"/Contents %d 0 R >>" % (5 + 2 * i),
                    b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"]
    return pdf_bytes(objects)


def test_a_page_of_a_million_glyphs_fails_alone_and_the_rest_of_the_pdf_is_kept(
        client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    text = b"BT /F1 12 Tf 72 700 Td (Quinces are fragrant and golden when ripe.) Tj ET"
    heavy = b"BT /F1 1 Tf " + b"(" + b"Wx" * 500_000 + b") Tj ET"  # one line of a million glyphs
    closing = b"BT /F1 12 Tf 72 700 Td (Medlars are eaten when bletted.) Tj ET"
    (tmp_path / "heavy.pdf").write_bytes(_pages_pdf([text, heavy, closing]))
    col = client.collection(name)
    report = col.ingest([tmp_path / "heavy.pdf"])
    assert report.count("ingested") == 1, report.items
    warnings = report.items[0].reason or ""  # an item's warnings are its reason
    assert "page 2" in warnings and "glyphs" in warnings, warnings
    assert col.search("quinces fragrant", k=1, fusion="lexical")
    assert col.search("medlars bletted", k=1, fusion="lexical")


def test_a_document_whose_text_is_too_long_fails_alone(settings: Settings, name: str, tmp_path: Path) -> None:
    """Chunking, keywords and signatures run in the ingesting process: a document's text is capped (checked in the
    extraction worker, before it is sent back), so a 150 MB Markdown file cannot hold the run for many minutes."""
    (tmp_path / "a_huge.md").write_text("# Huge\n\n" + "Lorem ipsum dolor sit amet. " * 80_000)  # 2.2 M characters
    (tmp_path / "b_good.md").write_text("# Figs\n\nFigs are pollinated by wasps.\n")
    with ragd.connect(settings=settings.model_copy(update={"max_document_chars": 1_000_000})) as client:
        col = client.collection(name)
        report = col.ingest([tmp_path])
        outcomes = _outcomes(report)
        assert outcomes == {"a_huge.md": ("failed", "file_too_large"), "b_good.md": ("ingested", None)}
        reason = next(o.reason for o in report.items if o.status == "failed") or ""
        assert "RAGD_MAX_DOCUMENT_CHARS" in reason and "2,240,0" in reason, reason
        assert report.status == "succeeded" and col.search("pollinated by wasps", k=1)
