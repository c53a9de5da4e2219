"""Rich document formats, extracted from real files (../shared/data/docs) and ingested end to end."""

from __future__ import annotations

import functools
import json
import re
import shutil
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import ragd
from ragd.config import Settings
from ragd.ingest.bounds import Limits
from ragd.ingest.extract import ExtractOptions
from ragd.ingest.read import extract_path
from ragd.types import Block, ExtractedDocument

from .conftest import DATA

SYN = DATA / "docs" / "synthetic"
DOCLING_PDF = DATA / "docs" / "docling" / "pdf" / "sources"
INCIDENT_HEADER = ("Incident", "Date", "Severity", "Service", "Minutes down")
REVENUE_HEADER = ("Region", "Q3 Revenue (EUR)", "Change vs Q2")
WORD = re.compile(r"[0-9a-zà-ÿ]+(?:[.,'][0-9a-zà-ÿ]+)*", re.IGNORECASE)


def extract(path: Path) -> ExtractedDocument:
    docs = list(extract_path(path, Limits.from_settings(Settings()), ExtractOptions()))
    assert len(docs) == 1 and isinstance(docs[0], ExtractedDocument), docs
    return docs[0]


def tables(doc: ExtractedDocument, header: tuple[str, ...]) -> list[Block]:
    return [b for b in doc.blocks if b.type == "table" and b.header == header]


@functools.cache
def redbook() -> ExtractedDocument:
    """docling's IBM Redbook sample, one page of it OCR'd: extracted once for the tests that read it."""
    return extract(DOCLING_PDF / "redp5110_sampled.pdf")


def headings(doc: ExtractedDocument) -> list[tuple[int, str]]:
    return [(b.level, b.text) for b in doc.blocks if b.type == "heading"]


def test_pdf_table_over_three_pages_is_one_table_and_headings_have_levels() -> None:
    doc = extract(SYN / "long_report.pdf")
    incident = tables(doc, INCIDENT_HEADER)
    assert len(incident) == 1
    rows = incident[0].rows
    assert [r[0] for r in rows] == [f"INC-{2000 + i}" for i in range(75)]
    assert [r[1] for r in rows] == [f"2024-{(i % 12) + 1:02d}-{(i % 27) + 1:02d}" for i in range(75)]
    assert incident[0].meta["pages"] == [6, 7, 8]
    # the regional table cut by the page 2/3 break comes back whole too
    regions = tables(doc, ("Region", "Servers", "Uptime %", "Cost (kEUR)"))
    assert len(regions) == 17 and all(len(t.rows) == 6 for t in regions)
    borderless = tables(doc, ("Team", "Lead", "Headcount"))
    assert len(borderless) == 1 and borderless[0].rows[0] == ("Platform", "A. Novak", "14")
    levels = dict((text, level) for level, text in headings(doc))
    assert levels["1. Section 1: Costs review"] == 1 and levels["1.1 Subsection 1.1"] == 2
    assert doc.title == "Annual Infrastructure Report 2024"
    lists = [b for b in doc.blocks if b.type == "list"]
    assert lists and all(line.startswith("\u2022 ") for line in lists[0].text.split("\n"))


def test_pdf_two_columns_read_in_order_whatever_the_content_stream_order() -> None:
    truth = json.loads((SYN / "truth" / "twocol_gt.json").read_text())
    for name in ("twocol.pdf", "twocol_interleaved.pdf"):
        doc = extract(SYN / name)

        def plain(text: str) -> str:
            return " ".join(w.lower() for w in WORD.findall(text))

        text = plain(" ".join(b.text for b in doc.blocks))
        position = 0
        for number, paragraph in enumerate(truth):
            found = text.find(plain(paragraph), position)
            assert found >= 0, (name, number)
            position = found
        assert ("2", "1 Introduction") in {(str(lv), t) for lv, t in headings(doc)}


def test_docx_headings_lists_and_tables_in_body_order() -> None:
    doc = extract(SYN / "report.docx")
    kinds = [(b.type, b.text.split("\n")[0][:30]) for b in doc.blocks]
    assert kinds.index(("heading", "2. Revenue by Region")) < [k for k, _ in kinds].index("table") < kinds.index(
        ("heading", "2.1 Methodology"))
    assert (2, "1. Executive Summary") in headings(doc) and (3, "1.1 Key highlights") in headings(doc)
    lists = [b.text for b in doc.blocks if b.type == "list"]
    assert lists[0].startswith("- Asia Pacific revenue exceeded 1.5M EUR")
    assert lists[1].split("\n") == ["1. Hedge 60% of BRL exposure before October 15.",
                                    "2. Renegotiate the Rotterdam logistics contract.",
                                    "3. Launch the self-service portal in DACH."]
    table = tables(doc, REVENUE_HEADER)[0]
    assert table.rows[-1] == ("Total", "4,401,564", "+4.1%") and len(table.rows) == 7


def test_pptx_slide_titles_bullet_levels_and_tables() -> None:
    doc = extract(SYN / "review.pptx")
    assert [(b.page, b.text) for b in doc.blocks if b.type == "heading"] == [
        (1, "Q3 2024 Business Review"), (2, "Highlights"), (3, "Revenue by region")]
    bullets = next(b.text for b in doc.blocks if b.type == "list" and b.page == 2).split("\n")
    assert bullets == ["- Revenue +4.1% QoQ", "  - Asia Pacific above 1.5M EUR", "- Churn down to 2.9%",
                       "- Two new DCs opened"]
    assert tables(doc, REVENUE_HEADER)[0].page == 3


def test_xlsx_merged_title_is_not_the_header_and_uncached_formulas_are_reported() -> None:
    doc = extract(SYN / "sales.xlsx")
    assert not doc.warnings
    headcount = tables(doc, ("Department", "Location", "FTE 2023", "FTE 2024"))[0]
    assert headcount.rows[3] == ("Support", "Kraków", "14", "19")
    assert any(b.type == "paragraph" and b.text == "Headcount by department" for b in doc.blocks)
    sales = tables(doc, ("Order ID", "Date", "Customer", "Product", "Qty", "Unit price", "Total"))[0]
    assert sales.rows[0][1] == "2024-07-04" and sales.rows[0][6] == str(int(sales.rows[0][4]) * int(sales.rows[0][5]))
    nocache = extract(SYN / "sales_nocache.xlsx")
    assert len(nocache.warnings) == 1 and "21 formula cell(s) have no cached value" in nocache.warnings[0]
    first = tables(nocache, sales.header)[0].rows[0]
    assert first[6] == "=E2*F2"  # kept as the formula, never a silent blank


def test_a_large_workbook_is_read_with_the_garbage_collector_resting_and_left_as_found(tmp_path: Path) -> None:
    """openpyxl makes an object per cell, all alive until the workbook is read: the collector rests meanwhile
    (it traversed them over and over, half the time of a large workbook), and is on again after, whether the
    workbook read or could not be opened; the same blocks either way."""
    import gc
    import zipfile

    import openpyxl

    from ragd.errors import CorruptDocument
    from ragd.ingest.extract import EXTRACTORS, Source

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append([f"column {i}" for i in range(8)])
    for r in range(4000):
        sheet.append([f"item {r}"] + [r * 7 + c for c in range(7)])
    path = tmp_path / "large.xlsx"
    book.save(path)
    del book, sheet
    broken = tmp_path / "broken.xlsx"  # a zip openpyxl opens and finds no workbook in
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        doc = extract(path)
        read = len(collections)
        assert gc.isenabled()
        failed = list(EXTRACTORS["xlsx"].extract(Source(broken, broken.read_bytes(), "broken", broken.as_uri()),
                                                 ExtractOptions()))
        assert len(failed) == 1 and isinstance(failed[0], CorruptDocument) and gc.isenabled()
        gc.disable()
        assert extract(path).blocks == doc.blocks and not gc.isenabled()
    finally:
        gc.enable()
        gc.callbacks.remove(count)
    table = next(b for b in doc.blocks if b.type == "table")
    assert len(table.rows) == 4000 and table.rows[-1] == ("item 3999", *[str(3999 * 7 + c) for c in range(7)])
    assert read < 100  # 48 resting; with the collector running through the reading: 263


def test_csv_encoding_and_delimiter_are_detected() -> None:
    doc = extract(SYN / "customers_cp1252.csv")
    assert doc.metadata == {"encoding": "cp1252", "delimiter": ";"}
    table = doc.blocks[0]
    assert table.header == ("Kunde", "Straße", "Ort", "Umsatz €")
    assert table.rows[1] == ("Zoë's Café", "Rue de l'Été 3", "Besançon", "3.120,50")
    tsv = extract(DATA / "docs" / "docling" / "csv" / "sources" / "csv-tab.csv")
    assert tsv.metadata["delimiter"] == "\t" and len(tsv.blocks[0].header) == 12


def test_html_boilerplate_goes_and_structure_stays() -> None:
    doc = extract(SYN / "article.html")
    text = " ".join(b.text for b in doc.blocks)
    for boilerplate in ("cookies", "Accept all", "Careers", "Related articles", "newsletter", "All rights reserved",
                        "Privacy policy", "dataLayer"):
        assert boilerplate not in text, boilerplate
    assert headings(doc) == [(1, "Q3 2024 revenue by region"), (2, "Regional breakdown"), (2, "Outlook"),
                             (3, "Risks"), (3, "Guidance")]
    table = tables(doc, REVENUE_HEADER)[0]
    assert table.meta["caption"] == "Table 1: Q3 revenue by region" and len(table.rows) == 7
    assert any(b.type == "list" and b.text.startswith("- Currency exposure") for b in doc.blocks)


def test_type_is_detected_from_content_not_the_extension(tmp_path: Path) -> None:
    disguised = tmp_path / "quarterly.txt"
    shutil.copy(SYN / "report.docx", disguised)
    assert extract(disguised).source_type == "docx"
    pdf = tmp_path / "scan.bin"
    shutil.copy(SYN / "twocol.pdf", pdf)
    assert extract(pdf).source_type == "pdf"


@pytest.fixture(scope="module")
def synthetic(client: ragd.Ragd) -> tuple[ragd.Collection, ragd.IngestReport]:
    col = client.collection("formats-synthetic")
    return col, col.ingest([SYN])


def test_folder_ingest_every_file_accounted_for_and_incident_found(
        synthetic: tuple[ragd.Collection, ragd.IngestReport]) -> None:
    col, report = synthetic
    files = sorted(p.name for p in SYN.rglob("*") if p.is_file())
    assert len(report.items) >= len(files) and report.status == "succeeded"
    assert all(i.status != "failed" or i.reason for i in report.items)
    assert not [i for i in report.items if i.status == "failed" and "/make/" not in i.source_uri
                and "/truth/" not in i.source_uri], report.failed
    hits = col.search("INC-2070", k=5)
    header_line = "| " + " | ".join(INCIDENT_HEADER) + " |"
    # the incident log exists twice (the PDF report and long_table.docx): both hold the row under the header
    for hit in hits[:2]:
        assert hit.chunk_type == "table" and hit.content.startswith(header_line) and "| INC-2070 |" in hit.content
    top = next(h for h in hits[:2] if h.external_id.endswith("long_report.pdf"))
    assert top.metadata["format"] == "markdown"
    assert "INC-2070," in top.metadata["csv"] and top.metadata["csv"].startswith(",".join(INCIDENT_HEADER))
    assert top.metadata["rows"] == [39, 75] and top.metadata["pages"] == [7, 8] and top.metadata["keywords"]
    boxes = top.metadata["boxes"]
    assert [b["page"] for b in boxes] == [7, 8] and all(len(b["bbox"]) == 4 for b in boxes)
    assert top.metadata["summary"].startswith("Table: rows")


def test_every_chunk_of_a_split_table_starts_with_the_header(
        client: ragd.Ragd, synthetic: tuple[ragd.Collection, ragd.IngestReport]) -> None:
    col, _ = synthetic
    doc = next(d for d in col.documents(limit=100) if d["external_id"].endswith("long_report.pdf"))
    with client.store.tenant(col.tenant) as conn:
        rows = conn.execute(
            "SELECT content, metadata FROM chunks WHERE doc_id = %s AND is_active AND chunk_type = 'table' "
            "AND content LIKE '| Incident |%%' ORDER BY chunk_index", (doc["doc_id"],)).fetchall()
    assert len(rows) >= 2
    assert [r[1]["rows"] for r in rows] == [[0, rows[0][1]["rows"][1]], [rows[0][1]["rows"][1], 75]][: len(rows)]
    assert all(r[0].split("\n")[0] == "| " + " | ".join(INCIDENT_HEADER) + " |" for r in rows)


def scan_recall(doc: ExtractedDocument) -> float:
    """The share of the synthetic scan's words (with their counts) found in the document's text and cells."""
    truth = Counter(w.lower() for w in WORD.findall((SYN / "truth" / "gt_report_p1.txt").read_text()))
    text = " ".join(" ".join((b.text, *(" ".join(r) for r in b.rows))) for b in doc.blocks)
    found = Counter(w.lower() for w in WORD.findall(text))
    return sum(min(n, found[w]) for w, n in truth.items()) / sum(truth.values())


def test_scanned_page_is_read_by_ocr() -> None:
    for name in ("scanned_page.png", "scanned.pdf"):  # the image, and the same scan as an image-only PDF
        doc = extract(SYN / name)
        recall = scan_recall(doc)
        assert recall >= 0.9, (name, recall)
        table = tables(doc, REVENUE_HEADER)  # the ruled table in the image, from aligned text boxes
        assert len(table) == 1 and table[0].rows[3][0] == "Asia Pacific", (name, [b.header for b in doc.blocks])
        assert (3, "1. Executive Summary") in headings(doc) or (2, "1. Executive Summary") in headings(doc)


def test_blank_scanned_pages_are_read_as_blank_not_as_a_broken_file(tmp_path: Path) -> None:
    """A duplex scan's blank backs: a page of one shade (no contrast to threshold) is read as a page without text.
    (Otsu's threshold over one grey level was all NaN: the whole file failed as 'corrupt', ValueError.)"""
    from PIL import Image

    from ragd.errors import EmptyDocument

    page = Image.open(SYN / "scanned_page.png").convert("RGB")
    blanks = [Image.new("RGB", page.size, shade) for shade in ("white", (235, 235, 235))]
    page.save(tmp_path / "duplex.pdf", save_all=True, append_images=blanks, resolution=200)
    doc = extract(tmp_path / "duplex.pdf")
    assert doc.metadata["pages"] == 3 and doc.metadata["ocr_pages"] == [1, 2, 3]
    assert scan_recall(doc) >= 0.9
    assert {b.page for b in doc.blocks} == {1}
    blanks[0].save(tmp_path / "blank.png")
    docs = list(extract_path(tmp_path / "blank.png", Limits.from_settings(Settings()), ExtractOptions()))
    assert len(docs) == 1 and isinstance(docs[0], EmptyDocument), docs


def test_ocr_in_a_worker_uses_the_threads_it_is_given_and_reads_the_same() -> None:
    """Workers reading at once share the cores, so each one's OCR model is given its share of threads: on one
    thread a worker's OCR starts no thread pools of its own, on two it does, and the text is the same."""
    import os

    import psutil

    from ragd.ingest.worker import Worker

    limits, options = Limits.from_settings(Settings()), ExtractOptions()
    read: dict[int, tuple[int, list[Any]]] = {}
    for threads in (1, 2):
        worker = Worker(limits)
        try:
            docs = worker.extract(SYN / "scanned_page.png", options, 0, threads)
            assert isinstance(docs, list) and isinstance(docs[0], ExtractedDocument), docs
            read[threads] = (psutil.Process(worker._proc.pid).num_threads(), docs)
        finally:
            worker.close()
    assert read[1][1] == read[2][1]
    assert (read[2][0] > read[1][0]) == ((os.cpu_count() or 1) >= 2), read  # one core: one thread either way


def test_near_duplicate_files_are_recorded_with_their_similarity(
        synthetic: tuple[ragd.Collection, ragd.IngestReport]) -> None:
    col, report = synthetic
    status = {Path(i.source_uri).name: (i.status, i.reason or "") for i in report.items}
    # the interleaved PDF reads exactly like the plain one: an exact duplicate
    twocol = (SYN / "twocol.pdf").resolve().as_posix()  # as ingested: ../shared may be reached through a link
    assert status["twocol_interleaved.pdf"] == ("duplicate", f"same content as {twocol}")
    # the PDF rendering of report.docx has the same words in other blocks: a near-duplicate
    assert status["report.pdf"][0] == "duplicate" and "near-duplicate of" in status["report.pdf"][1]
    decisions = {Path(d["item"]).name: d for d in col.run(str(report.run_id))["stats"]["near_duplicates"]}
    assert decisions["report.pdf"]["decision"] == "duplicate" and decisions["report.pdf"]["similarity"] >= 0.9
    assert decisions["report.pdf"]["similar_to"].endswith("report.docx")
    # the scan reads (by OCR) like the Word original
    assert decisions["scanned_page.png"]["decision"] == "duplicate" and decisions["scanned_page.png"]["similar_to"]
    # the workbook shares most of its words with sales.csv but stays below the threshold: kept, and recorded
    assert decisions["sales.xlsx"]["decision"] == "kept" and 0.5 <= decisions["sales.xlsx"]["similarity"] < 0.9


def test_bad_files_fail_alone_with_specific_reasons(client: ragd.Ragd, settings: Settings, name: str,
                                                     tmp_path: Path) -> None:
    shutil.copy(DATA / "docs" / "pdfplumber" / "password-example.pdf", tmp_path / "locked.pdf")
    (tmp_path / "truncated.docx").write_bytes((SYN / "report.docx").read_bytes()[:3000])
    (tmp_path / "archive.zip").write_bytes(_zip_with("notes.txt", b"hello"))
    (tmp_path / "legacy.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    shutil.copy(SYN / "scanned.pdf", tmp_path / "big.pdf")
    shutil.copy(SYN / "report.docx", tmp_path / "good.docx")
    small = ragd.connect(settings=settings.model_copy(update={"max_file_bytes": 200_000}))
    try:
        report = small.collection(name).ingest([tmp_path])
    finally:
        small.close()
    failed = {Path(i.source_uri).name: (i.error_code, i.reason or "") for i in report.failed}
    assert failed["locked.pdf"][0] == "encrypted_document" and "encrypted" in failed["locked.pdf"][1]
    assert failed["truncated.docx"][0] == "corrupt_document" and "damaged zip" in failed["truncated.docx"][1]
    assert failed["archive.zip"][0] == "unsupported_format" and "unpack" in failed["archive.zip"][1]
    assert failed["legacy.doc"][0] == "corrupt_document" and "damaged OLE" in failed["legacy.doc"][1]
    assert failed["broken.png"][0] == "corrupt_document" and "image" in failed["broken.png"][1]
    assert failed["big.pdf"][0] == "file_too_large" and "RAGD_MAX_FILE_BYTES" in failed["big.pdf"][1]
    assert [i.status for i in report.items if i.source_uri.endswith("good.docx")] == ["ingested"]


def _zip_with(name: str, data: bytes) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


def test_tesseract_is_used_when_installed_and_its_tsv_becomes_blocks(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A `tesseract` command on PATH that speaks tesseract's CLI (image on stdin, TSV on stdout) stands in for
    the real one, which this machine does not have."""
    import os
    import stat
    import sys

    from ragd.ingest.extract import ocr

    rows = [("1", "1", "1", "1", "Quarterly", 100, 40, 300, 60), ("1", "1", "1", "1", "Report", 420, 40, 200, 60),
            ("2", "1", "1", "1", "Revenue", 100, 200, 150, 20), ("2", "1", "1", "1", "grew", 260, 200, 80, 20),
            ("2", "1", "1", "2", "strongly.", 100, 230, 160, 20)]
    tsv = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n" + "".join(
        f"5\t1\t{b}\t{p}\t{ln}\t{i}\t{x}\t{y}\t{w}\t{h}\t95\t{t}\n"
        for i, (b, p, ln, _, t, x, y, w, h) in enumerate(rows))
    script = tmp_path / "bin" / "tesseract"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nimport sys\nassert sys.argv[1:3] == ['stdin', 'stdout'], sys.argv\n"
                      f"data = sys.stdin.buffer.read()\nassert data.startswith(b'\\x89PNG'), 'expected a PNG'\n"
                      f"sys.stdout.write({tsv!r})\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    ocr.reset_ocr_engine()  # choose again with this PATH
    try:
        assert ocr.ocr_engine().name == "tesseract"
        doc = extract(SYN / "scanned_page.png")
    finally:
        monkeypatch.undo()
        ocr.reset_ocr_engine()
    assert doc.metadata["ocr"] == "tesseract"
    assert [(b.type, b.text) for b in doc.blocks] == [("heading", "Quarterly Report"),
                                                      ("paragraph", "Revenue grew strongly.")]


def test_a_zip_bomb_posing_as_docx_is_refused_unread(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b"<w:document>" + b" " * 300_000_000 + b"</w:document>")
    (tmp_path / "bomb.docx").write_bytes(buffer.getvalue())
    assert (tmp_path / "bomb.docx").stat().st_size < 1_000_000
    shutil.copy(SYN / "report.docx", tmp_path / "fine.docx")
    report = client.collection(name).ingest([tmp_path])
    failed = {Path(i.source_uri).name: (i.error_code, i.reason or "") for i in report.failed}
    assert failed["bomb.docx"][0] == "corrupt_document" and "decompression bomb" in failed["bomb.docx"][1]
    assert report.count("ingested") == 1


def test_pdf_right_to_left_text_and_bold_headings_read_as_written() -> None:
    arabic = extract(DOCLING_PDF / "right_to_left_01.pdf")
    assert headings(arabic)[0][1].startswith("تحسين الإنتاجية وحل المشكلات من خلال البرمجة بلغة R")
    history = extract(DOCLING_PDF / "multi_page.pdf")
    titles = [text for _, text in headings(history)]
    assert "Pre-Digital Era (19th - Early 20th Century)" in titles  # bold, a little larger, ends in a bracket
    assert "The Rise of Personal Computers (1980s)" in titles
    # ruled table cells in Persian come out in logical order too (they were reversed, "شريذپ خيرات")
    persian = extract(DOCLING_PDF / "right_to_left_03.pdf").blocks
    cells = {cell for t in persian if t.type == "table" for row in (t.header, *t.rows) for cell in row}
    assert {"تاريخ پذيرش", "تاريخ ارائه مدارک"} <= cells
    # the page's framed heading (a box, not a grid: no longer read as a table of copies) reads in order too
    assert "شرکت بورس کالای ايران" in {b.text for b in persian}


def test_docx_text_boxes_and_equations_are_read() -> None:
    docling = DATA / "docs" / "docling" / "docx" / "sources"
    boxes = extract(docling / "textbox.docx")
    texts = [b.text for b in boxes.blocks]
    assert "Chiayi County Shuishang Township Nanjing Elementary School Affiliated Kindergarten" in texts
    assert texts.count("Student falls ill") == 1  # the DrawingML text box, not also its VML fallback copy
    math = extract(docling / "equations.docx")
    assert math.blocks[0].text == "This is a word document and this is an inline equation: A=πr2 ."


def test_pptx_chart_data_becomes_a_table() -> None:
    deck = extract(DATA / "docs" / "docling" / "pptx" / "sources" / "pptx_chart.pptx")
    chart = tables(deck, ("", "Freshwater Ducks", "Saltwater Ducks"))
    assert len(chart) == 1 and chart[0].meta["caption"] == "Wild Duck Observations by Year"
    assert chart[0].rows == (("2019", "120", "80"), ("2020", "130", "95"), ("2021", "150", "110"),
                             ("2022", "175", "130"))
    assert [t for _, t in headings(deck)] == ["Quarterly Duck Survey", "Quarterly revenue"]  # 3-D chart: title only


def test_pdf_text_drawn_as_outlines_is_read_by_ocr(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.font_manager import FontProperties
    from matplotlib.patches import PathPatch
    from matplotlib.textpath import TextPath

    figure = plt.figure(figsize=(8.27, 11.69))
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, 827)
    axes.set_ylim(0, 1169)
    axes.axis("off")
    lines = ["Quarterly maintenance schedule", "Pumps are inspected every spring.",
             "Valves are replaced after ten years."]
    for i, line in enumerate(lines):  # glyph outlines as paths: the PDF has curves and no characters
        path = TextPath((60, 1050 - i * 60), line, size=30, prop=FontProperties(family="DejaVu Sans"))
        axes.add_patch(PathPatch(path, color="black", lw=0))
    figure.savefig(tmp_path / "outlined.pdf")
    plt.close(figure)
    doc = extract(tmp_path / "outlined.pdf")
    assert doc.metadata["ocr_pages"] == [1]
    text = " ".join(b.text for b in doc.blocks)
    assert "Pumps are inspected every spring." in text and "Valves are replaced" in text


def test_docx_numbered_headings_keep_the_numbers_word_shows() -> None:
    doc = extract(DATA / "docs" / "docling" / "docx" / "sources" / "unit_test_headers_numbered.docx")
    assert headings(doc)[:5] == [(1, "Test Document"), (2, "1. Section 1"), (3, "1.1. Section 1.1"),
                                 (3, "1.2. Section 1.2"), (4, "1.2.1. Section 1.2.3")]


def test_pdf_open_sided_ruled_table_and_borderless_header_on_two_lines() -> None:
    # rules between the rows and columns, none down the outer sides: the first and last columns are cells too
    korean = tables(extract(DOCLING_PDF / "normal_4pages.pdf"), ("구분", "개정전", "개정후"))
    assert len(korean) == 1 and [r[0] for r in korean[0].rows] == ["분류", "분류 기준", "대상 질병", "U코드"]
    assert korean[0].rows[0] == ("분류", "1군 감염병", "1급 감염병")
    assert korean[0].rows[-1][2].startswith("◦ 대상질병에 U코드 일부(3종) 포함")
    # a bold header over two lines ("State funded / legal aid") and an empty corner cell, above borderless rows
    # whose labels are bulleted (the bullet stays with its label: not a column of its own); MyriadBd is bold
    legal = [b for b in extract(DOCLING_PDF / "table_mislabeled_as_picture.pdf").blocks if b.type == "table"]
    assert [t.header for t in legal] == [("", "State funded legal aid", "CSOs")]
    assert [r[0] for r in legal[0].rows][:2] == ["\u2022 Persons with disabilities", "\u2022 Children"]
    assert all(r[1:] == ("*", "*") for r in legal[0].rows) and len(legal[0].rows) == 7
    # a two-level header whose outer sides are open: all 8 columns, the spanning "TEDs" stored once over its
    # three, the cells beside it spanning both header rows
    arxiv = tables(extract(DOCLING_PDF / "2305.03393v1-pg9.pdf"),
                   ("# enc-layers", "# dec-layers", "Language", "TEDs", "", "", "mAP (0.75)",
                    "Inference time (secs)"))
    assert len(arxiv) == 1 and arxiv[0].rows[0][3:6] == ("simple", "complex", "all")
    assert arxiv[0].meta["spans"] == [[0, 0, 2, 1], [0, 1, 2, 1], [0, 2, 2, 1], [0, 3, 1, 3], [0, 6, 2, 1],
                                      [0, 7, 2, 1]]
    assert arxiv[0].rows[1] == ("6", "6", "OTSL HTML", "0.965 0.969", "0.934 0.927", "0.955 0.955", "0.88 0.857",
                                "2.73 5.39")


def test_pdf_two_columns_under_a_full_width_abstract_are_columns_not_a_table() -> None:
    doc = extract(DOCLING_PDF / "normal_4pages.pdf")
    first = [b for b in doc.blocks if b.page == 1]
    assert not [b for b in first if b.type == "table"]  # the two columns were once paired line by line
    left = next(b.text for b in first if b.text.startswith("2020.3.30."))
    assert left.startswith("2020.3.30. 0시 기준 현재 “코로나바이러스감염 증-19(COVID-19, 이하")


def test_the_gutter_between_columns_is_found_as_its_definition_says() -> None:
    """The widest band between boxes' sides crossed by at most a tenth of them, with a fifth of the boxes on each
    side, is counted by bisection; on the lines of real one-, two- and three-column pages (and their first
    halves and every other line, for more shapes) it is the band a count over every box finds."""
    from ragd.ingest.extract.geometry import _band, lines_to_boxes
    from ragd.ingest.extract.pdfpages import FastPDF, extract_words
    from ragd.ingest.extract.pdfwords import word_box

    def defined(boxes: list[Any]) -> tuple[float, float] | None:
        n, size = len(boxes), statistics.median(b.size for b in boxes)
        events, best, start = sorted({b.x0 for b in boxes} | {b.x1 for b in boxes}), None, None
        for a, b in zip(events, events[1:]):
            if sum(1 for box in boxes if box.x0 < (a + b) / 2 < box.x1) > max(1, n // 10):
                start = None
                continue
            start = a if start is None else start
            left, right = sum(1 for box in boxes if box.x1 <= start), sum(1 for box in boxes if box.x0 >= b)
            if b - start >= size and (best is None or b - start > best[1] - best[0]) and min(left, right) >= 0.2 * n:
                best = (start, b)
        return best

    found = 0
    for path in (SYN / "twocol.pdf", DOCLING_PDF / "normal_4pages.pdf",
                 DATA / "docs" / "pdfplumber" / "federal-register-2020-17221.pdf"):
        with FastPDF.open_bytes(path.read_bytes()) as pdf:
            for page in pdf.pages[:6]:
                lines = lines_to_boxes([word_box(w) for w in extract_words(page, extra_attrs=["fontname", "size"])])
                for boxes in (lines, lines[: len(lines) // 2], lines[::2]):
                    if len(boxes) >= 6:
                        assert _band(boxes) == defined(boxes)
                        found += _band(boxes) is not None
    assert found >= 5  # gutters were found, not only their absence


def test_pdf_tex_bold_numbered_and_italic_title_lines_are_headings() -> None:
    tex = [text for _, text in headings(extract(DOCLING_PDF / "2305.03393v1-pg9.pdf"))]
    assert tex == ["5.1 Hyper Parameter Optimization", "5.2 Quantitative Results"]  # SFBX1000: TeX bold extended
    korean = [text for _, text in headings(extract(DOCLING_PDF / "normal_4pages.pdf"))]
    assert "(1) 「감염병의 예방 및 관리에 관한 법률」 개정" in korean  # numbered, 12.5 pt over an 11.5 pt body
    assert "(2) 생명보험 표준약관 재해분류표" in korean
    # the same size as the text below it but in the sans face over the serif body: its own block, a heading
    assert "(1) 상위법에 반하는 보험약관의 해석" in korean
    # italic lines in title case standing alone (a handbook's run-in style), not the italic figure captions
    handbook = [text for _, text in headings(extract(DOCLING_PDF / "amt_handbook_sample.pdf"))]
    assert handbook == ["Boots Self-Locking Nut", "Stainless Steel Self-Locking Nut", "Elastic Stop Nut"]


def test_pdf_unmapped_glyphs_become_bullets_in_cells_and_unmapped_pages_go_to_ocr() -> None:
    doc = redbook()
    usage = tables(doc, ("Column name", "Data type", "Description"))[0]
    assert usage.rows[2][2].startswith("Usage setting: \u2022 ALLOWED: The user profile is allowed")
    # page 3 sets its text in fonts without a Unicode map ("(cid:2)(cid:3)..."): it is read by OCR instead
    assert not [b for b in doc.blocks if "(cid:" in b.text]
    assert doc.metadata["ocr_pages"] == [3] and "page 3:" in doc.warnings[0] and "OCR" in doc.warnings[0]
    page3 = " ".join(b.text for b in doc.blocks if b.page == 3)
    assert "Database performance and scalability" in page3 and "Because no one else is IBM." in page3


@pytest.mark.parametrize("name", ["ocr_test_rotated_90.pdf", "ocr_test_rotated_180.pdf", "ocr_test_rotated_270.pdf"])
def test_scans_turned_sideways_or_upside_down_read_in_order(name: str) -> None:
    doc = extract(DATA / "docs" / "docling" / "ocr" / "sources" / name)
    text = " ".join(b.text for b in doc.blocks)
    assert text == "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"
    assert doc.metadata["ocr_pages"] == [1]


def test_pdf_table_headers_set_on_end_read_bottom_to_top() -> None:
    doc = redbook()
    matrix = [b for b in doc.blocks if b.type == "table" and b.header[:1] == ("User action",)]
    assert len(matrix) == 1 and matrix[0].header[1:5] == ("*JOBCTL", "QIBM_DB_SECADM", "QIBM_DB_SQLADM",
                                                           "QIBM_DB_SYSMON")
    assert matrix[0].rows[0] == ("SET CURRENT DEGREE (SQL statement)", "X", "", "X", "", "")


def test_pdf_table_of_contents_is_a_table_of_titles_and_pages_without_leaders() -> None:
    contents = [b for b in redbook().blocks if b.meta.get("contents")]
    assert len(contents) == 1
    entries = [contents[0].header, *contents[0].rows]
    assert entries[:2] == [("Notices", "vii"), ("Trademarks", "viii")] and len(entries) == 43
    assert ("2.1.7 Verifying function usage IDs for RCAC with the FUNCTION_USAGE view", "10") in entries
    assert entries[-1] == ("3.6.8 Demonstrating data access with a view and RCAC", "32")
    assert not [cell for row in entries for cell in row if ". ." in cell or cell.endswith(".")]


def test_pdf_pages_spooled_to_disk_read_the_same_and_running_headers_are_dropped() -> None:
    """A long PDF's pages are laid out one at a time from a spool (on disk past its size): the document is the
    same whichever way, and a running header found on every page is left out of each page's text."""
    from ragd.ingest.extract import Source
    from ragd.ingest.extract.pdf import PdfExtractor

    path = DATA / "docs" / "pdfplumber" / "federal-register-2020-17221.pdf"
    source = Source(path=path, data=path.read_bytes(), external_id="fr", source_uri=path.as_uri())
    in_memory = list(PdfExtractor().extract(source, ExtractOptions()))
    on_disk = list(PdfExtractor(spool_bytes=1).extract(source, ExtractOptions()))
    assert in_memory == on_disk and len(in_memory) == 1 and isinstance(in_memory[0], ExtractedDocument)
    doc = in_memory[0]
    assert doc.metadata["pages"] == 15 and {b.page for b in doc.blocks} == set(range(1, 16))
    # "Federal Register/Vol. 85, No. 152/Thursday, August 6, 2020/Proposed Rules 47699" tops pages 2 to 15
    text = [re.sub(r"\s*/\s*", "/", b.text) for b in doc.blocks]
    assert not [t for t in text if "Federal Register/Vol. 85" in t or "VerDate" in t]
    assert "airspeed" in " ".join(b.text for b in doc.blocks if b.page == 4)


def test_page_spool_rolls_to_disk_and_reads_pages_back_in_order() -> None:
    from ragd.ingest.extract.geometry import Box
    from ragd.ingest.extract.pdf import PageSpool

    table = Block(type="table", text="| a | b |", header=("a", "b"), rows=(("1", "2"),))
    pages = [[Box(f"page {i} line {j}", 10.0 * j, 20.0, 90.0, 30.0, 9.5, bold=j == 0) for j in range(50)]
             for i in range(40)] + [[Box("", 0, 0, 1, 1, 0.0, table=table)], []]
    with PageSpool(max_bytes=4096) as spool:
        for boxes in pages:
            spool.append(boxes)
        assert spool.on_disk and len(spool) == len(pages)
        assert list(spool) == pages and list(spool) == pages  # read twice: the same pages in the same order
    with PageSpool() as small:
        small.append(pages[0])
        assert not small.on_disk and list(small) == pages[:1]


def test_a_band_with_figures_alone_on_one_side_is_no_gutter_between_page_columns() -> None:
    """Issue 57: under Best Buy's income statement, a few rows of shares ("Basic | 318.5 | 346.5 | 349.5") left
    a wide band between their labels and figures; taken for the gutter between two page columns, it cut the
    statement above from its labels. Page columns are of words on both sides."""
    from ragd.ingest.extract.geometry import Box, column_gutter

    rows = []
    for n, label in enumerate(["Basic", "Diluted", "Average", "Weighted", "Shares", "Units"]):
        y = 500.0 + 14 * n
        rows += [Box(label, 31, y, 57, y + 9, 9.0)] + [Box(f"{318 + n}.5", x, y, x + 20, y + 9, 9.0)
                                                        for x in (428.0, 498.0, 568.0)]
    assert column_gutter(rows) is None
    text = []
    for n in range(12):
        y = 100.0 + 14 * n
        text += [Box("words of the left column of text", 30, y, 280, y + 9, 9.0),
                 Box("words of the right column of text", 320, y, 580, y + 9, 9.0)]
    band = column_gutter(text)
    assert band is not None and band[0] >= 280 and band[1] <= 320
