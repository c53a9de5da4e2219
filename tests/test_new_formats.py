"""The formats users hit first, each on a real file written the way the tools that make them write them: text,
CSV and HTML in UTF-16/UTF-32 with and without a byte order mark, RTF, email, OpenDocument, EPUB, legacy .xls."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragd.config import Settings
from ragd.ingest.bounds import Limits
from ragd.ingest.extract import ExtractOptions
from ragd.ingest.read import extract_path
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


def test_rtf_paragraphs_and_title(tmp_path: Path) -> None:
    """As WordPad and Word write it: a font table, an info group with the title, escapes in the code page."""
    rtf = (r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fswiss Helvetica;}}{\info{\title Travel policy}}"
           r"\f0\fs24 Employees book trains for trips under 500 km.\par "
           r"Caf\'e9 receipts need a VAT number.\par "
           r"{\b Approval} comes from the team lead.\par}")
    path = tmp_path / "policy.rtf"
    path.write_bytes(rtf.encode("ascii"))
    doc = extract(path)
    texts = [b.text for b in doc.blocks]
    assert doc.source_type == "rtf" and doc.title == "Travel policy"
    assert texts == ["Employees book trains for trips under 500 km.", "Café receipts need a VAT number.",
                     "Approval comes from the team lead."]


def _email(tmp_path: Path) -> Path:
    from email.message import EmailMessage

    from openpyxl import Workbook

    message = EmailMessage()
    message["From"] = "Ana Ruiz <ana@example.org>"
    message["To"] = "team@example.org"
    message["Subject"] = "Q3 budget figures"
    message["Date"] = "Mon, 02 Sep 2024 09:30:00 +0200"
    message["Message-ID"] = "<q3-budget@example.org>"
    message.set_content("Hi all,\n\nthe Q3 budget is attached. Travel is capped at 12,000 EUR.\n\nAna")
    message.add_alternative("<html><body><p>Hi all,</p><p>the Q3 budget is attached.</p></body></html>",
                            subtype="html")
    book = Workbook()
    book.active.append(["Item", "EUR"])
    book.active.append(["Travel", 12000])
    xlsx = tmp_path / "budget.xlsx"
    book.save(xlsx)
    message.add_attachment(xlsx.read_bytes(), maintype="application",
                           subtype="vnd.openxmlformats-officedocument.spreadsheetml.sheet", filename="budget.xlsx")
    message.add_attachment(b"Minutes: the budget was approved.", maintype="text", subtype="plain",
                           filename="minutes.txt")
    path = tmp_path / "budget.eml"
    path.write_bytes(bytes(message))
    return path


def test_email_headers_body_and_attachments_as_documents(tmp_path: Path) -> None:
    path = _email(tmp_path)
    docs = extract_all(path)
    assert all(isinstance(d, ExtractedDocument) for d in docs), docs
    mail, sheet, minutes = docs  # type: ignore[misc]
    text = "\n".join(b.text for b in mail.blocks)
    assert mail.source_type == "email" and mail.title == "Q3 budget figures"
    assert mail.metadata["from"] == "Ana Ruiz <ana@example.org>"
    assert mail.metadata["message_id"] == "<q3-budget@example.org>"
    assert mail.metadata["attachments"] == ["budget.xlsx", "minutes.txt"]
    assert "Travel is capped at 12,000 EUR." in text
    assert "base64" not in text and "Content-Type" not in text  # not the MIME source
    assert sheet.source_type == "xlsx" and any(b.rows == (("Travel", "12000"),) for b in sheet.blocks)
    assert sheet.external_id.endswith("#attachment-1/budget.xlsx") and sheet.metadata["attached_to"] == mail.external_id
    assert minutes.source_type == "text" and "budget was approved" in minutes.blocks[0].text


def test_an_email_without_the_eml_suffix_is_told_by_its_headers(tmp_path: Path) -> None:
    path = _email(tmp_path)
    renamed = path.rename(tmp_path / "message")
    assert extract_all(renamed)[0].source_type == "email"  # type: ignore[union-attr]


def _odf(path: Path, mimetype: str, body: str, title: str = "") -> Path:
    import zipfile

    ns = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
          'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
          'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
          'xmlns:dc="http://purl.org/dc/elements/1.1/" '
          'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" office:version="1.3"')
    with zipfile.ZipFile(path, "w") as archive:  # as LibreOffice writes it: mimetype first and stored
        archive.writestr(zipfile.ZipInfo("mimetype"), mimetype)
        archive.writestr("content.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns}>'
                                        f"<office:body>{body}</office:body></office:document-content>")
        archive.writestr("meta.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {ns}>'
                                     f"<office:meta><dc:title>{title}</dc:title></office:meta></office:document-meta>")
        archive.writestr("META-INF/manifest.xml", f'<?xml version="1.0" encoding="UTF-8"?><manifest:manifest {ns}>'
                                                  f'<manifest:file-entry manifest:full-path="/" '
                                                  f'manifest:media-type="{mimetype}"/></manifest:manifest>')
    return path


def test_opendocument_text_spreadsheet_and_presentation(tmp_path: Path) -> None:
    odt = _odf(tmp_path / "handbook.odt", "application/vnd.oasis.opendocument.text",
               '<office:text><text:h text:outline-level="1">Leave</text:h>'
               "<text:p>Staff get<text:s/> <text:span>25 days</text:span> of leave.</text:p>"
               "<text:list><text:list-item><text:p>Carry over 5 days</text:p></text:list-item>"
               "<text:list-item><text:p>Ask two weeks ahead</text:p></text:list-item></text:list>"
               "<table:table><table:table-row><table:table-cell><text:p>Grade</text:p></table:table-cell>"
               "<table:table-cell><text:p>Days</text:p></table:table-cell></table:table-row>"
               "<table:table-row><table:table-cell><text:p>A</text:p></table:table-cell>"
               "<table:table-cell><text:p>25</text:p></table:table-cell></table:table-row></table:table>"
               "</office:text>", title="Staff handbook")
    doc = extract(odt)
    assert doc.source_type == "odt" and doc.title == "Staff handbook"
    assert [(b.type, b.text) for b in doc.blocks[:3]] == [
        ("heading", "Leave"), ("paragraph", "Staff get 25 days of leave."),
        ("list", "- Carry over 5 days\n- Ask two weeks ahead")]
    assert doc.blocks[3].header == ("Grade", "Days") and doc.blocks[3].rows == (("A", "25"),)

    ods = _odf(tmp_path / "sales.ods", "application/vnd.oasis.opendocument.spreadsheet",
               '<office:spreadsheet><table:table table:name="Q3">'
               "<table:table-row><table:table-cell><text:p>Region</text:p></table:table-cell>"
               "<table:table-cell><text:p>Revenue</text:p></table:table-cell>"
               '<table:table-cell table:number-columns-repeated="16380"/></table:table-row>'
               '<table:table-row table:number-rows-repeated="2"><table:table-cell><text:p>North</text:p>'
               "</table:table-cell><table:table-cell><text:p>100</text:p></table:table-cell></table:table-row>"
               '<table:table-row table:number-rows-repeated="1048570"><table:table-cell '
               'table:number-columns-repeated="16384"/></table:table-row></table:table></office:spreadsheet>')
    sheet = extract(ods)
    table = next(b for b in sheet.blocks if b.type == "table")
    assert sheet.source_type == "ods" and sheet.blocks[0].text == "Q3" and sheet.metadata["sheets"] == 1
    assert table.header == ("Region", "Revenue") and table.rows == (("North", "100"), ("North", "100"))

    odp = _odf(tmp_path / "deck.odp", "application/vnd.oasis.opendocument.presentation",
               '<office:presentation><draw:page draw:name="one"><draw:frame><draw:text-box>'
               "<text:p>Roadmap 2025</text:p></draw:text-box></draw:frame></draw:page>"
               '<draw:page draw:name="two"><draw:frame><draw:text-box><text:p>Launch in May</text:p>'
               "</draw:text-box></draw:frame></draw:page></office:presentation>")
    deck = extract(odp)
    assert deck.source_type == "odp" and [(b.page, b.text) for b in deck.blocks] == [
        (1, "Roadmap 2025"), (2, "Launch in May")]


def test_epub_chapters_in_spine_order(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "guide.epub"
    chapter = ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
               "<title>{0}</title></head><body><h1>{0}</h1><p>{1}</p></body></html>")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        archive.writestr("META-INF/container.xml",
                         '<?xml version="1.0"?><container version="1.0" '
                         'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                         '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
                         "</rootfiles></container>")
        archive.writestr("OEBPS/content.opf",
                         '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
                         '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Field guide</dc:title>'
                         '</metadata><manifest><item id="c2" href="text/two.xhtml" media-type="application/xhtml+xml"/>'
                         '<item id="c1" href="text/one.xhtml" media-type="application/xhtml+xml"/>'
                         '<item id="css" href="style.css" media-type="text/css"/></manifest>'
                         '<spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>')
        archive.writestr("OEBPS/text/one.xhtml", chapter.format("Birds", "Herons wade in shallow water."))
        archive.writestr("OEBPS/text/two.xhtml", chapter.format("Trees", "Oaks keep their leaves late."))
        archive.writestr("OEBPS/style.css", "p { margin: 0 }")
    doc = extract(path)
    assert doc.source_type == "epub" and doc.title == "Field guide" and doc.metadata["chapters"] == 2
    assert [(b.page, b.text) for b in doc.blocks] == [(1, "Birds"), (1, "Herons wade in shallow water."),
                                                      (2, "Trees"), (2, "Oaks keep their leaves late.")]


def test_legacy_xls_sheets_as_tables(tmp_path: Path) -> None:
    import datetime

    import xlwt

    book = xlwt.Workbook()
    sheet = book.add_sheet("Orders")
    for c, value in enumerate(["Order", "Qty", "Shipped", "Paid"]):
        sheet.write(0, c, value)
    sheet.write(1, 0, "A-17")
    sheet.write(1, 1, 3)
    sheet.write(1, 2, datetime.date(2024, 3, 5), xlwt.easyxf(num_format_str="YYYY-MM-DD"))
    sheet.write(1, 3, True)
    book.add_sheet("Empty")
    path = tmp_path / "orders.xls"
    book.save(str(path))
    doc = extract(path)
    table = next(b for b in doc.blocks if b.type == "table")
    assert doc.source_type == "xls" and doc.metadata["sheets"] == 2
    assert [b.text for b in doc.blocks if b.type == "heading"] == ["Orders", "Empty"]
    assert table.header == ("Order", "Qty", "Shipped", "Paid") and table.rows == (("A-17", "3", "2024-03-05", "TRUE"),)
