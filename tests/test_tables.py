"""PDF tables of the kinds that failed on documents nobody had tuned for, each on a real file that shows it
(`../shared/data/docs/tables`: ICDAR 2013 and camelot's test PDFs), plus the guard against empty blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragd.embed.base import default_token_counter
from ragd.errors import EmptyDocument
from ragd.ingest.chunk import chunk_blocks
from ragd.ingest.detect import detect
from ragd.ingest.extract import EXTRACTORS, ExtractOptions, Source
from ragd.ingest.extract.base import single_document
from ragd.types import Block, ChunkPolicy, ExtractedDocument

from .conftest import DATA

TABLES = DATA / "docs" / "tables"


def _document(path: Path) -> ExtractedDocument:
    path = path.resolve()
    data = path.read_bytes()
    docs = list(EXTRACTORS[detect(path, data)].extract(Source(path, data, path.as_posix(), path.as_uri()),
                                                        ExtractOptions()))
    assert len(docs) == 1 and isinstance(docs[0], ExtractedDocument), docs
    return docs[0]


def _tables(path: Path) -> list[list[list[str]]]:
    return [[list(b.header), *[list(r) for r in b.rows]] for b in _document(path).blocks if b.type == "table"]


def _row(tables: list[list[list[str]]], first: str) -> list[str]:
    """The row whose first non-empty cell is `first`, in any table."""
    found = [[c for c in row if c] for t in tables for row in t if [c for c in row if c][:1] == [first]]
    assert found, f"no row starting {first!r}"
    return found[0]


def test_a_borderless_table_is_read_as_a_table_not_as_paragraphs() -> None:
    """Whitespace-aligned columns without a rule between them (a US government report): the page's column
    gaps must not be taken for page columns."""
    tables = _tables(TABLES / "icdar2013" / "us-002.pdf")
    assert _row(tables, "Public 4-year") == ["Public 4-year", "44.4", "31,200", "25.5", "10.2", "26.9", "19.3",
                                             "18.1"]
    assert _row(tables, "Non-doctorate-granting")[1:3] == ["40.0", "25,000"]


def test_shading_inset_inside_a_cell_does_not_split_its_columns() -> None:
    """Coloured cells drawn a few points inside their frame: their sides are not grid lines."""
    tables = _tables(TABLES / "icdar2013" / "eu-001.pdf")
    assert _row(tables, "Carbon dioxide (CO2)") == ["Carbon dioxide (CO2)", "100 million", "-", "-"]
    assert all(len(t[0]) == 4 for t in tables)


def test_body_rows_drawn_without_rules_between_them_stay_rows() -> None:
    """A ruled table whose body has no rule between its rows: one ruled row holding a dozen text lines."""
    tables = _tables(TABLES / "icdar2013" / "eu-008.pdf")
    assert len(tables) == 1 and len(tables[0]) == 15
    assert _row(tables, "Bulgaria") == ["Bulgaria", "2.3", "3.2", "5.5"]
    assert _row(tables, "TOTAL") == ["TOTAL", "58.99", "86.70", "145.69"]


@pytest.mark.parametrize("name", ["clockwise_table_1.pdf", "anticlockwise_table_1.pdf"])
def test_a_ruled_table_set_sideways_reads_upright(name: str) -> None:
    tables = _tables(TABLES / "camelot" / "pdfs" / name)
    assert len(tables) == 1
    words = " ".join(c for row in tables[0] for c in row).split()
    singles = sum(1 for w in words if len(w) == 1 and w.isalpha())
    assert len(words) > 100 and singles * 20 < len(words)  # not scattered letters


@pytest.mark.parametrize("name", ["clockwise_table_2.pdf", "anticlockwise_table_2.pdf"])
def test_a_table_ruled_only_across_and_set_sideways_keeps_its_rows_and_columns(name: str) -> None:
    """Rules only above and below the header and the body, turned a quarter: neither a transposed grid nor
    one cell per row copied across the columns."""
    tables = _tables(TABLES / "camelot" / "pdfs" / name)
    assert _row(tables, "Scheduled caste")[:5] == ["Scheduled caste", "74.8", "55.8", "42.9", "0.9"]
    assert _row(tables, "Other backward class")[:3] == ["Other backward class", "71.4", "51.1"]
    for table in tables:
        for row in table:
            texts = [c for c in row if c]
            assert len(texts) < 3 or len(set(texts)) > 1, row  # no row of one text copied into every column


def test_text_drawn_twice_is_read_once() -> None:
    """A fake bold (each glyph drawn twice, a little offset) must not double the text."""
    path = (TABLES / "camelot" / "pdfs" / "birdisland.pdf").resolve()
    data = path.read_bytes()
    doc = next(iter(EXTRACTORS["pdf"].extract(Source(path, data, path.as_posix(), path.as_uri()),
                                              ExtractOptions())))
    assert isinstance(doc, ExtractedDocument)
    text = " ".join(b.text for b in doc.blocks)
    words = text.split()
    assert "Minnesota Central" in text and "Minnesota Minnesota" not in text and "SEASON SEASON" not in text
    assert sum(1 for a, b in zip(words, words[1:]) if a == b and a.isalpha()) <= 2  # was every word, twice


def test_blocks_without_text_are_not_stored() -> None:
    """A page whose only block is blank (OCR that read nothing, a table of empty cells) must not become an
    empty chunk, which the store refuses and which failed the whole document."""
    blank = [Block("paragraph", " \n "), Block("heading", "  ", level=1),
             Block("table", " | ", header=(" ", ""), rows=(("", " "),))]
    chunks, _ = chunk_blocks([*blank, Block("paragraph", "Real text.")], ChunkPolicy(), default_token_counter())
    assert [c.content for c in chunks] == ["Real text."]
    assert chunk_blocks(blank, ChunkPolicy(), default_token_counter())[0] == []
    path = Path("blank.pdf")
    source = Source(path, b"", path.as_posix(), "file:///blank.pdf")
    out = list(single_document(source, "pdf", None, blank))
    assert len(out) == 1 and isinstance(out[0], EmptyDocument) and "has no text" in str(out[0])


def test_rules_round_groups_of_columns_do_not_merge_the_columns_inside() -> None:
    """Rules drawn round "Total", "Male" and "Female" only, none between their three columns: each value in a
    cell of its own, not three numbers in one."""
    tables = _tables(TABLES / "camelot" / "pdfs" / "tabula__12s0324.pdf")
    violent = [[c for c in row if c] for t in tables for row in t if row[0].startswith("Violent crime")]
    assert violent[0][1:] == ["467 .9", "69 .1", "398 .8", "380 .2", "56 .5", "323 .7", "87 .7", "12 .6", "75 .2"]
    assert violent[1][1:] == ["456,965", "268,346", "177,766", "5,608", "5,245"]


def test_a_raised_footnote_mark_stays_in_its_cell_and_the_caption_is_not_a_row() -> None:
    """A borderless table whose header reads "Others(1)" with the "(1)" set above the line (it came out as a row of
    its own), under a caption line "Table: 5 ..." whose three pieces sat in the table's columns (it came out as
    the header)."""
    tables = _tables(TABLES / "camelot" / "pdfs" / "health.pdf")
    assert _row(tables, "States-A") == ["States-A", "Revenue", "Capital", "Total", "Others(1)", "Total"]
    assert not any(row[0].startswith("Table") or [c for c in row if c] == ["(1)"] for t in tables for row in t)


def test_a_page_set_in_three_columns_of_text_is_not_a_table() -> None:
    """Three columns of running text line up like a table's columns; only the two real tables are tables."""
    tables = _tables(TABLES / "icdar2013" / "us-001.pdf")
    assert len(tables) == 2
    assert not any("disability" in c and len(c) > 25 and c.endswith("-") for t in tables for r in t for c in r)


def test_a_caption_and_a_source_line_inside_the_frame_are_text_not_rows() -> None:
    """A ruled table whose frame also holds its caption ("Exhibit 9 ...") and its source line, each one cell across
    the whole row: the table is the four rows between them, and both lines stay in the document as text."""
    path = (TABLES / "icdar2013" / "us-013.pdf").resolve()
    data = path.read_bytes()
    doc = next(EXTRACTORS["pdf"].extract(Source(path, data, path.as_posix(), path.as_uri()), ExtractOptions()))
    assert isinstance(doc, ExtractedDocument)
    tables = [b for b in doc.blocks if b.type == "table"]
    assert len(tables) == 1 and len(tables[0].rows) == 3
    assert tables[0].rows[-1][0] == "Participating students"
    text = [b.text for b in doc.blocks if b.type != "table"]
    assert any(t.startswith("Exhibit 9") for t in text) and any(t.startswith("Source:") for t in text)


def test_a_ruled_table_with_an_open_stub_and_last_column_keeps_both() -> None:
    """Column rules drawn only between the value columns, row rules across the whole table: the label column on
    the left and the last value column on the right are cells too (they were cut off, the table read in pieces)."""
    tables = _tables(TABLES / "icdar2013" / "eu-013.pdf")
    assert _row(tables, "On labour market training") == ["On labour market training", "29 300", "25 800", "33 300",
                                                         "33 500", "33 000"]
    assert _row(tables, "Polytechnics") == ["Polytechnics", "20 527", "20 922", "22 083"]
    assert len(tables) == 4


FAST_PAGE_FILES = [
    "pdfplumber/federal-register-2020-17221.pdf",  # dense three-column text
    "tables/icdar2013/eu-012.pdf",  # ruled tables
    "tables/camelot/superscript.pdf",  # raised marks, two fonts
    "pdfplumber/issue-71-duplicate-chars-2.pdf",  # glyphs drawn twice
    "docling/pdf/sources/redp5110_sampled.pdf",  # a book, images, a page read by OCR
    "synthetic/twocol.pdf",
]


def _pdf_path(name: str) -> Path:
    path = DATA / "docs" / name
    if not path.exists():  # the camelot set names files as camelot does
        path = next((DATA / "docs" / "tables" / "camelot").rglob(Path(name).name))
    return path


@pytest.mark.parametrize("name", FAST_PAGE_FILES)
def test_pages_pdfminer_reads_are_exactly_what_pdfplumber_reads(name: str) -> None:
    """Where FastPage reads a page with pdfminer (PLAYA off or unable), it builds each character's dict itself:
    every object of every page equals pdfplumber's own."""
    import io

    import pdfplumber

    from ragd.ingest.extract.pdfpages import FastPDF

    data = _pdf_path(name).read_bytes()
    with pdfplumber.open(io.BytesIO(data)) as plain, FastPDF.open_bytes(data, use_playa=False) as fast:
        assert len(fast.pages) == len(plain.pages)
        chars = 0
        for ours, theirs in zip(fast.pages, plain.pages):
            assert type(ours).__name__ == "FastPage"
            assert ours.chars == theirs.chars
            for kind in set(ours.objects) | set(theirs.objects):  # an image's stream and colour space are objects
                assert ([{k: v for k, v in o.items() if k not in ("stream", "colorspace")}  # of their document
                         for o in ours.objects.get(kind, [])]
                        == [{k: v for k, v in o.items() if k not in ("stream", "colorspace")}
                            for o in theirs.objects.get(kind, [])])
            chars += len(ours.chars)
        assert chars > 100


def test_a_pdf_playa_cannot_open_is_read_by_pdfminer() -> None:
    """PLAYA given bytes it cannot parse: every page is read by pdfminer, exactly as with PLAYA off."""
    from ragd.ingest.extract.pdfpages import FastPDF

    data = _pdf_path("tables/camelot/superscript.pdf").read_bytes()
    with FastPDF.open_bytes(data) as broken, FastPDF.open_bytes(data, use_playa=False) as plain:
        broken._playa_data = data[: len(data) // 3]  # what PLAYA parses: a cut file, no trailer, no pages
        assert broken.playa_page(broken.pages[0]) is None
        for ours, theirs in zip(broken.pages, plain.pages, strict=True):
            assert ours.chars == theirs.chars and ours.rects == theirs.rects
            assert ours.reader == "pdfminer"


@pytest.mark.parametrize("every", [3, 1])
def test_a_long_pdf_parsed_again_every_few_pages_reads_the_same(every: int) -> None:
    """PLAYA's document is parsed again every `playa_pages` pages (it keeps all it reads), but never more than
    PLAYA_PARSES times (a parse costs time in proportion to the document): every page's objects are the same as
    from one parse."""
    from ragd.ingest.extract.pdfpages import PLAYA_PARSES, FastPDF

    data = _pdf_path("pdfplumber/issue-71-duplicate-chars-2.pdf").read_bytes()  # 20 pages
    with FastPDF.open_bytes(data) as often, FastPDF.open_bytes(data) as once:
        often.playa_pages = every
        docs = []  # each parse, kept alive so their ids are distinct
        for ours, theirs in zip(often.pages, once.pages, strict=True):
            assert ours.chars == theirs.chars and ours.curves == theirs.curves and ours.rects == theirs.rects
            assert ours.reader == theirs.reader == "playa"
            docs.append(often._playa)
        # a parse every 3 pages (1-3, 4-6, ..., 19-20): asked for every 3, or every page, which would be 20 > 8
        assert PLAYA_PARSES == 8 and len({id(d) for d in docs}) == 7


# vertical text, a MediaBox not at the origin (pdfminer's boxes are relative to it)
@pytest.mark.parametrize("name", [*FAST_PAGE_FILES, "pdfplumber/pr-136-example.pdf",
                                  "tables/camelot/row_span_1.pdf"])
def test_text_read_in_one_pass_is_exactly_what_playas_glyphs_give(name: str) -> None:
    """FastPage computes a text object's characters in one pass (PLAYA's glyph positions and pdfminer's boxes,
    the same arithmetic in the same order): every character's dict, its keys in order, and every other object
    are exactly those of PLAYA's glyph objects turned into pdfminer's LTChar, one by one."""
    from ragd.ingest.extract.pdfpages import FastPDF

    data = _pdf_path(name).read_bytes()
    with FastPDF.open_bytes(data) as fast, FastPDF.open_bytes(data) as glyphs:
        glyphs.playa_glyphs = True
        chars = 0
        for ours, theirs in zip(fast.pages, glyphs.pages, strict=True):
            assert ours.chars == theirs.chars and [list(c) for c in ours.chars] == [list(c) for c in theirs.chars]
            assert list(ours.objects) == list(theirs.objects)
            for kind in ("line", "rect", "curve"):
                assert ours.objects.get(kind, []) == theirs.objects.get(kind, [])
            assert ours.reader == theirs.reader == "playa"
            chars += len(ours.chars)
        assert chars > 100


def test_a_read_pages_objects_go_with_the_page_not_at_the_next_full_garbage_collection() -> None:
    """A page's characters are freed by reference counting once the page drops them: nothing read holds itself
    in a cycle (a walk function held by its own closure once kept every character of every page until a full
    collection: ~2 unreachable objects per character; now a few hundred per page, whatever its size)."""
    import gc

    from ragd.ingest.extract.pdfpages import FastPDF

    data = _pdf_path("pdfplumber/federal-register-2020-17221.pdf").read_bytes()
    with FastPDF.open_bytes(data) as pdf:
        gc.collect()
        gc.disable()
        try:
            for page in pdf.pages[:4]:
                chars = len(page.chars)
                page.flush_cache()
                assert chars > 5000 and gc.collect() < 0.05 * chars
                assert page.reader == "playa"
        finally:
            gc.enable()


def test_the_garbage_collector_rests_while_a_page_is_read_and_is_left_as_found() -> None:
    """No collection runs while a page is read (its objects are alive until it is read, then freed by reference
    counting); the collector is on again after, and left off when the caller had turned it off; the same text."""
    import gc

    path = _pdf_path("pdfplumber/federal-register-2020-17221.pdf")
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        assert gc.isenabled()
        on = _document(path)
        assert gc.isenabled()
        gc.disable()
        off = _document(path)
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.callbacks.remove(count)
    assert on.blocks == off.blocks and len(on.blocks) > 50
    # 15 dense pages read with the collector running: 315 collections, 2 of them full; paused: 45, none full
    assert len(collections) < 100 and collections.count(2) <= 1


@pytest.mark.parametrize("name", [*FAST_PAGE_FILES, "pdfplumber/pr-136-example.pdf", "vertical_header.pdf"])
def test_words_are_exactly_pdfplumbers(name: str) -> None:
    """`Words` writes out pdfplumber's word extraction for upright text read left to right: with the settings ragd
    reads pages with, pdfplumber's defaults and others (a smaller tolerance, punctuation split off), every word of
    every page is pdfplumber's, its keys in order; text turned or set vertically is left to pdfplumber's code."""
    from ragd.ingest.extract.pdfpages import FastPDF, extract_words

    settings: list[dict[str, Any]] = [{"extra_attrs": ["fontname", "size"], "use_text_flow": False}, {},
                                      {"x_tolerance": 1.5, "y_tolerance": 0, "split_at_punctuation": True}]
    with FastPDF.open_bytes(_pdf_path(name).read_bytes()) as pdf:
        words = 0
        for page in pdf.pages:
            for setting in settings:
                ours, theirs = extract_words(page, **setting), page.extract_words(**setting)
                assert ours == theirs and [list(w) for w in ours] == [list(w) for w in theirs]
                words += len(ours)
        assert words > 100


@pytest.mark.parametrize("name", FAST_PAGE_FILES)
def test_pages_playa_reads_are_what_pdfminer_reads(name: str) -> None:
    """PLAYA reads the same objects as pdfminer, in the same order: the same sizes and turns; characters within
    half a point of the same place (pdfminer leaves the horizontal scaling off character spacing, PLAYA applies
    it as the PDF reference says: on a line set with both the two drift apart by tenths of a point), but for the
    right edge of a glyph pdfminer knows no width for (advance 0); rules and boxes at the same points (1e-6).
    Fonts without a Unicode map are decoded in their own ways (a glyph one reads and the other leaves a number,
    a Windows-1252 byte), and a character's top and bottom come from its font's descent, which PLAYA reads
    otherwise for a few fonts (Symbol, Type 3): the same text for 99% of the characters or more, the same top
    and bottom for 97% or more."""
    from ragd.ingest.extract.pdfpages import FastPDF

    data = _pdf_path(name).read_bytes()
    near = pytest.approx
    with FastPDF.open_bytes(data) as fast, FastPDF.open_bytes(data, use_playa=False) as slow:
        chars = same_top = same_text = 0
        for ours, theirs in zip(fast.pages, slow.pages, strict=True):
            for kind in ("char", "line", "rect", "curve", "image"):
                assert len(ours.objects.get(kind, [])) == len(theirs.objects.get(kind, [])), (ours.page_number, kind)
            assert (ours.reader, theirs.reader) == ("playa", "pdfminer")  # PLAYA read it, not the fallback
            for a, b in zip(ours.chars, theirs.chars):
                same_text += a["text"] == b["text"]
                assert (a["upright"], a["size"], a["matrix"][:4]) == (b["upright"], near(b["size"]),
                                                                       near(b["matrix"][:4]))
                assert (a["x0"], a["x1"] if b["adv"] else 0) == near((b["x0"], b["x1"] if b["adv"] else 0), abs=0.5)
                same_top += abs(a["top"] - b["top"]) < 1e-6 and abs(a["bottom"] - b["bottom"]) < 1e-6
            for kind in ("line", "rect", "curve"):
                for a, b in zip(ours.objects.get(kind, []), theirs.objects.get(kind, [])):
                    assert [c for p in a["pts"] for c in p] == near([c for p in b["pts"] for c in p], abs=1e-6)
                    assert (a["fill"], a["stroke"]) == (b["fill"], b["stroke"])
            chars += len(ours.chars)
        assert chars > 100
        assert same_top >= 0.97 * chars
        assert same_text >= 0.99 * chars


@pytest.mark.parametrize("name", ["tables/icdar2013/eu-012.pdf", "tables/icdar2013/us-013.pdf",
                                  "tables/camelot/row_span_1.pdf", "vertical_header.pdf"])
def test_a_ruled_tables_cells_read_from_the_pages_character_middles_are_pdfplumbers(name: str) -> None:
    """A ruled table's cells are read from the page's character middles, worked out once, and only those inside
    the table tested: every cell's text is what pdfplumber's `Table.extract` reads (it tests every character on
    the page for every row), with and without turned text read bottom to top, on pages with text and tables
    outside."""
    from pdfplumber.table import Table

    from ragd.ingest.extract.pdfpages import FastPDF
    from ragd.ingest.extract.ruled import cell_texts, middles_of

    cells = outside = 0
    with FastPDF.open_bytes(_pdf_path(name).read_bytes()) as pdf:
        for page in pdf.pages:
            middles = middles_of(page.chars)
            for table in page.find_tables():
                x0, top, x1, bottom = table.bbox
                outside += sum(1 for x, y, _ in middles if not (x0 <= x <= x1 and top <= y <= bottom))
                # and a grid whose sides run through characters' middles, where the tests' edges decide
                xs, ys = (sorted({m[i] for m in middles if x0 < m[0] < x1 and top < m[1] < bottom}) for i in (0, 1))
                xs, ys = ([v[i * (len(v) - 1) // 4] for i in range(5)] if v else [] for v in (xs, ys))
                sides = [(a, b, c, d) for a, c in zip(xs, xs[1:]) for b, d in zip(ys, ys[1:])]
                for found in (table, Table(page, sides)) if sides else (table,):
                    for settings in ({}, {"char_dir_rotated": "btt"}):
                        whole = found.extract(**settings)
                        assert cell_texts(found, middles, **settings) == whole
                        cells += sum(1 for row in whole for c in row if c)
    assert cells > 40 and outside > 0


SPANNED_HTML = """<html><body><table>
<tr><th></th><th colspan="2">2019</th><th colspan="2">2020</th></tr>
<tr><td></td><td>Q1</td><td>Q2</td><td>Q1</td><td>Q2</td></tr>
<tr><td rowspan="3">Europe</td><td>1</td><td>2</td><td>3</td><td>4</td></tr>
<tr><td>5</td><td>6</td><td>7</td><td>8</td></tr>
<tr><td>9</td><td>10</td><td>11</td><td>12</td></tr>
<tr><td colspan="5">Registered office: 1 Main Street, Springfield</td></tr>
</table></body></html>"""


def _spanned_docx(path: Path) -> Path:
    import docx

    document = docx.Document()
    table = document.add_table(rows=4, cols=3)
    for r, row in enumerate([["Region", "2019", "2020"], ["Europe", "1", "2"], ["", "3", "4"],
                             ["Registered office: 1 Main Street", "", ""]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(1, 0).merge(table.cell(2, 0))  # python-docx keeps the text of both merged cells: only the first had any
    table.cell(3, 0).merge(table.cell(3, 2))
    document.save(path)
    return path


def _spanned_pptx(path: Path) -> Path:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    table = slide.shapes.add_table(4, 3, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([["Region", "2019", "2020"], ["Europe", "1", "2"], ["", "3", "4"],
                             ["Registered office: 1 Main Street", "", ""]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(1, 0).merge(table.cell(2, 0))
    table.cell(3, 0).merge(table.cell(3, 2))
    deck.save(path)
    return path


def test_a_cell_spanning_columns_or_rows_is_stored_once_with_its_span(tmp_path: Path) -> None:
    (tmp_path / "spanned.html").write_text(SPANNED_HTML)
    html = next(b for b in _document(tmp_path / "spanned.html").blocks if b.type == "table")
    assert html.text.count("Registered office") == 1 and html.text.count("Europe") == 1
    assert html.text.split("\n")[0] == " | 2019 |  | 2020 | "
    assert html.rows[2] == ("", "5", "6", "7", "8") and html.rows[4][0].startswith("Registered office")
    assert html.meta["spans"] == [[0, 1, 1, 2], [0, 3, 1, 2], [2, 0, 3, 1], [5, 0, 1, 5]]
    for path in (_spanned_docx(tmp_path / "spanned.docx"), _spanned_pptx(tmp_path / "spanned.pptx")):
        block = next(b for b in _document(path).blocks if b.type == "table")
        assert block.text.count("Registered office") == 1 and block.text.count("Europe") == 1, path.name
        assert block.rows[1] == ("", "3", "4"), path.name
        assert block.meta["spans"] == [[1, 0, 2, 1], [3, 0, 1, 3]], path.name


def test_a_span_cut_by_a_chunk_boundary_is_written_again_in_the_next_part() -> None:
    rows = tuple((("Europe" if i == 0 else ""), f"item {i}", str(i)) for i in range(40))
    block = Block("table", "", header=("Region", "Item", "Value"), rows=rows,
                  meta={"spans": [[0, 1, 1, 2], [1, 0, 40, 1]]})
    chunks, _ = chunk_blocks([block], ChunkPolicy(hard_cap_tokens=120), default_token_counter())
    assert len(chunks) > 1
    first, *rest = chunks
    assert first.metadata["spans"] == [[0, 1, 1, 2], [1, 0, first.metadata["rows"][1], 1]]
    assert first.content.count("Europe") == 1 and first.metadata["csv"].count("Europe") == 1
    for chunk in rest:
        low, high = chunk.metadata["rows"]
        assert chunk.content.split("\n")[2].startswith("| Europe | item ")  # the group written again, once
        assert chunk.content.count("Europe") == 1
        assert chunk.metadata["spans"] == [[0, 1, 1, 2], [1, 0, high - low, 1]]


def _tablegen() -> Any:
    """bench/tablegen.py: the generator of table layouts with exact cell truth."""
    import importlib.util
    import sys

    from .conftest import REPO

    if "tablegen" not in sys.modules:
        found = importlib.util.spec_from_file_location("tablegen", REPO / "bench" / "tablegen.py")
        assert found is not None and found.loader is not None
        module = importlib.util.module_from_spec(found)
        sys.modules["tablegen"] = module
        found.loader.exec_module(module)
    return sys.modules["tablegen"]


# the kinds of layout that failed on PDFs nobody had tuned for (issue 31), each drawn with exact truth
GENERATED = [{"shape": "wrapped"}, {"shape": "two-column"}, {"shape": "large", "rules": "none"},
             {"context": "beside"}, {"header": "spanning"}, {"shape": "groups"}, {"context": "across-pages"},
             {"shape": "footnotes"}, {"header": "wrapped", "align": "decimal"}]


@pytest.mark.parametrize("family", GENERATED, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_generated_layouts_of_a_family_read_right(family: dict[str, str], tmp_path: Path) -> None:
    import random

    gen = _tablegen()
    from tables import ragd_tables  # bench/tables.py, on the path the generator put it on

    rng = random.Random(f"test {sorted(family.items())}")  # (a string seed is the same in every process)
    score = gen.Score()
    for n in range(6):
        item = gen.layout(rng, **family)
        path = tmp_path / f"{n}.pdf"
        gen.draw(path, item, random.Random(rng.random()))
        found, error = ragd_tables(path)
        assert error is None, error
        gen.score_file([t.grid for t in item.tables], found, [score])
    row = score.row()
    assert row["det_r"] == 1.0 and row["cell_acc"] >= 0.9, row


def _draw(path: Path, rows: list[tuple[float, str, list[str]]], font: str = "Helvetica", size: float = 10) -> Path:
    """A PDF of text lines: (y from the top, x positions as "x:text" pairs)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4)
    pdf.setFont(font, size)
    for y, _, cells in rows:
        for cell in cells:
            x, _, text = cell.partition(":")
            if text.startswith(">"):
                pdf.drawRightString(float(x), A4[1] - y, text[1:])
            else:
                pdf.drawString(float(x), A4[1] - y, text)
    pdf.save()
    return path


def test_a_small_table_of_labels_and_figures_is_a_table_not_a_heading_and_a_paragraph(tmp_path: Path) -> None:
    path = _draw(tmp_path / "small.pdf", [
        (100, "", ["72:Graduates of 2023 went on to the following, as a share of those who answered the survey."]),
        (130, "", ["72:Employment", "300:>40"]),
        (144, "", ["72:Further studies (in higher education)", "300:>15"]),
        (158, "", ["72:Looking for work", "300:>9"]),
        (172, "", ["72:Other", "300:>6"]),
    ])
    tables = _tables(path)
    assert tables == [[["Employment", "40"], ["Further studies (in higher education)", "15"],
                       ["Looking for work", "9"], ["Other", "6"]]]


def test_a_label_wrapped_onto_more_lines_stays_in_its_row(tmp_path: Path) -> None:
    path = _draw(tmp_path / "wrapped.pdf", [
        (100, "", ["250:>2024", "320:>2023"]),
        (115, "", ["72:Revenue from contracts with", "250:>1,200", "320:>1,100"]),
        (126, "", ["72:customers, excluding leases"]),
        (141, "", ["72:Cost of sales", "250:>(800)", "320:>(750)"]),
        (156, "", ["72:Administrative expenses and", "250:>150", "320:>140"]),
        (167, "", ["72:other operating costs"]),
    ])
    assert _tables(path) == [[["", "2024", "2023"],
                              ["Revenue from contracts with customers, excluding leases", "1,200", "1,100"],
                              ["Cost of sales", "(800)", "(750)"],
                              ["Administrative expenses and other operating costs", "150", "140"]]]


def test_figures_set_closer_than_a_column_gap_stay_in_their_columns(tmp_path: Path) -> None:
    # one row's two figures are set 5 points apart (words closer than the text size join into one box): the
    # columns the other rows agree on split them again
    path = _draw(tmp_path / "close.pdf", [
        (100, "", ["200:>2022", "260:>2023", "320:>2024"]),
        (115, "", ["72:Gujarat", "200:>26,328,400", "260:>6,922,900", "320:>42,000"]),
        (130, "", ["72:Haryana", "200:>15,156,681", "260:>1,333,527", "320:>40,100"]),
        (145, "", ["72:Kerala", "200:>27,923,965", "205:12,664,000", "320:>0"]),
        (160, "", ["72:Punjab", "200:>19,775,485", "260:>2,208,343", "320:>2,470"]),
    ])
    [table] = _tables(path)
    assert table[3] == ["Kerala", "27,923,965", "12,664,000", "0"]


def test_a_title_centred_over_the_figure_columns_is_stored_once_with_its_span(tmp_path: Path) -> None:
    path = _draw(tmp_path / "title.pdf", [
        (100, "", ["260:Year ended December 31,"]),
        (115, "", ["260:>2022", "320:>2023", "380:>2024"]),
        (130, "", ["72:Revenue", "260:>1,200", "320:>1,100", "380:>1,000"]),
        (145, "", ["72:Cost of sales", "260:>(800)", "320:>(750)", "380:>(700)"]),
        (160, "", ["72:Gross margin", "260:>400", "320:>350", "380:>300"]),
    ])
    from ragd.ingest.extract import EXTRACTORS

    data = path.read_bytes()
    [doc] = EXTRACTORS["pdf"].extract(Source(path, data, path.as_posix(), path.as_uri()), ExtractOptions())
    assert isinstance(doc, ExtractedDocument)
    [table] = [b for b in doc.blocks if b.type == "table"]
    assert table.header == ("", "Year ended December 31,", "", "") and table.rows[0] == ("", "2022", "2023", "2024")
    assert table.meta["spans"] == [[0, 1, 1, 3]]
