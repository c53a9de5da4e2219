"""Legacy Office files: .doc and .ppt written by LibreOffice's own MS Word 97 and PowerPoint 97 filters (real
legacy binaries, made here from documents whose content is known) read through LibreOffice; RTF tables; what
happens without LibreOffice or past its time limit; Outlook .msg messages written with exact truth."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docx
import pytest

import ragd
from ragd.config import Settings
from ragd.ingest.bounds import Limits
from ragd.ingest.extract import ExtractOptions
from ragd.ingest.read import extract_path
from ragd.types import ExtractedDocument

from .conftest import DATA, run_cli
from .olefiles import outlook_message

SOFFICE = shutil.which("soffice") or "soffice"  # `make test` installs Debian's LibreOffice
HEADER = ("Region", "Staff", "Leave days")
ROWS = (("Germany", "120", "98"), ("France", "75", "112"), ("Spain", "40", "112"))


def extract_all(path: Path) -> list[ExtractedDocument | Exception]:
    return list(extract_path(path, Limits.from_settings(Settings()), ExtractOptions()))


def _word(folder: Path) -> Path:
    document = docx.Document()
    document.add_heading("Leave policy 1998", level=1)
    document.add_paragraph("Every office grants parental leave as the table says.")
    document.add_heading("Days by region", level=2)
    table = document.add_table(rows=1 + len(ROWS), cols=len(HEADER))
    for r, row in enumerate((HEADER, *ROWS)):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    path = folder / "policy.docx"
    document.save(str(path))
    return path


def _legacy(source: Path, target: str, folder: Path) -> Path:
    """The file as LibreOffice writes it in a legacy format (doc, ppt, rtf)."""
    out = folder / "legacy"
    subprocess.run([str(SOFFICE), "--headless", "--norestore", f"-env:UserInstallation={(folder / 'p').as_uri()}",
                    "--convert-to", target, "--outdir", str(out), str(source)], check=True, capture_output=True,
                   timeout=180)
    made = out / f"{source.stem}.{target}"
    assert made.is_file() and made.stat().st_size > 0
    return made


def _table_of(doc: ExtractedDocument) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    table = next(b for b in doc.blocks if b.type == "table")
    return table.header, table.rows


def test_a_word_97_document_reads_like_its_docx(tmp_path: Path) -> None:
    modern = DATA / "docs" / "synthetic" / "report.docx"  # headings, lists, a table (its truth in make/)
    legacy = _legacy(modern, "doc", tmp_path)
    assert legacy.read_bytes()[:4] == b"\xd0\xcf\x11\xe0"
    [doc] = extract_all(legacy)
    [new] = extract_all(modern)
    assert isinstance(doc, ExtractedDocument) and isinstance(new, ExtractedDocument), doc
    assert doc.source_type == "doc" and doc.title == new.title
    assert [(b.type, b.level, b.text) for b in doc.blocks] == [(b.type, b.level, b.text) for b in new.blocks]
    assert _table_of(doc) == _table_of(new) and _table_of(doc)[0][0] == "Region"


def test_an_rtf_table_keeps_its_rows_and_cells(tmp_path: Path) -> None:
    [doc] = extract_all(_legacy(_word(tmp_path), "rtf", tmp_path))
    assert isinstance(doc, ExtractedDocument), doc
    assert doc.source_type == "rtf" and _table_of(doc) == (HEADER, ROWS)


def test_a_powerpoint_97_deck_reads_like_its_pptx(tmp_path: Path) -> None:
    modern = DATA / "docs" / "synthetic" / "review.pptx"
    [deck] = extract_all(modern)
    [old] = extract_all(_legacy(modern, "ppt", tmp_path))
    assert isinstance(deck, ExtractedDocument) and isinstance(old, ExtractedDocument), old
    assert old.source_type == "ppt"
    words = {w for b in deck.blocks for w in b.text.split()}
    read = {w for b in old.blocks for w in b.text.split()}
    assert len(words & read) >= 0.95 * len(words)
    assert [b.text for b in old.blocks if b.type == "heading"] == [b.text for b in deck.blocks if b.type == "heading"]


def test_a_password_protected_word_97_file_is_named_so(tmp_path: Path) -> None:
    import olefile

    legacy = _legacy(_word(tmp_path), "doc", tmp_path)
    with olefile.OleFileIO(str(legacy), write_mode=True) as ole:
        fib = bytearray(ole.openstream("WordDocument").read())
        fib[11] |= 0x01  # FibBase.fEncrypted
        ole.write_stream("WordDocument", bytes(fib))
    [failed] = extract_all(legacy)
    assert isinstance(failed, Exception) and failed.code == "encrypted_document"  # type: ignore[attr-defined]


def test_without_libreoffice_a_legacy_file_fails_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = DATA / "docs" / "synthetic" / "review.pptx"
    legacy = _legacy(source, "ppt", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    [failed] = extract_all(legacy)
    message = str(failed)
    assert isinstance(failed, Exception) and failed.code == "unsupported_format"  # type: ignore[attr-defined]
    assert "apt-get install libreoffice-impress-nogui" in message and "\n" not in message
    rtf = tmp_path / "table.rtf"
    rtf.write_text(r"{\rtf1\ansi{\fonttbl{\f0 Arial;}}\f0 Days\par\trowd\cellx2000\cellx4000 Germany\cell 98\cell"
                   r"\row}", encoding="ascii")
    [text] = extract_all(rtf)  # read as text by striprtf
    assert isinstance(text, ExtractedDocument) and "Germany" in " ".join(b.text for b in text.blocks)


def test_a_conversion_past_its_time_limit_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    legacy = _legacy(_word(tmp_path), "doc", tmp_path)
    token = f"{uuid.uuid4().int % 10**12:012d}"
    monkeypatch.setenv("PATH", f"{_stuck_soffice(tmp_path, token)}:{os.environ['PATH']}")
    monkeypatch.setenv("RAGD_CONVERT_TIMEOUT_S", "2")
    started = time.monotonic()
    [failed] = extract_all(legacy)
    assert time.monotonic() - started < 30
    assert isinstance(failed, Exception) and failed.code == "timeout"  # type: ignore[attr-defined]
    assert "RAGD_CONVERT_TIMEOUT_S" in str(failed)
    assert _gone(token, within_s=2), _running(token)  # killed with its process group


def _stuck_soffice(folder: Path, token: str) -> Path:
    """A LibreOffice that never finishes and, as soffice does (oosplash, then soffice.bin), leaves a child of its
    own running: both carry `token` on their command line."""
    stuck = folder / "bin" / "soffice"
    stuck.parent.mkdir(parents=True)
    sleep = shutil.which("sleep")
    stuck.write_text(f"#!/bin/sh\n{sleep} 300.{token} &\nexec {sleep} 301.{token}\n", encoding="ascii")
    stuck.chmod(0o755)
    return stuck.parent


def _running(token: str) -> list[int]:
    """The processes of this machine whose command line holds `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _gone(token: str, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while _running(token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_an_outlook_message_reads_like_an_email(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    sent = datetime(2024, 3, 5, 9, 30, tzinfo=UTC)
    to = (("Bo Chen", "bo@example.com"), ("Cy Dee", "cy@example.com"))
    data = outlook_message(subject="Travel caps for 2024", sender="Ana Silva", sender_email="ana@example.com",
                           to=to, sent=sent, body="Hotels are capped at 180 EUR a night.\n\nSee the note.",
                           attachments=(("caps.txt", "text/plain", b"Flights: economy below six hours."),),
                           forwarded=(("Old caps", "Hotels were capped at 150 EUR."),))
    path = tmp_path / "caps.msg"
    path.write_bytes(data)
    message, attachment, old = extract_all(path)
    assert isinstance(old, ExtractedDocument) and old.source_type == "email" and old.title == "Old caps"
    assert [b.text for b in old.blocks] == ["Hotels were capped at 150 EUR."]
    assert old.metadata["date"] == "Tue, 05 Mar 2024 09:30:00 +0000" and old.external_id.endswith("Old caps.msg")
    assert isinstance(message, ExtractedDocument) and isinstance(attachment, ExtractedDocument)
    assert message.source_type == "msg" and message.title == "Travel caps for 2024"
    assert message.metadata["from"] == "Ana Silva <ana@example.com>"
    assert message.metadata["to"] == "Bo Chen <bo@example.com>, Cy Dee <cy@example.com>"
    assert message.metadata["date"] == "Tue, 05 Mar 2024 09:30:00 +0000"
    assert [b.text for b in message.blocks] == ["Hotels are capped at 180 EUR a night.", "See the note."]
    assert attachment.source_type == "text" and attachment.metadata["attached_to"] == message.external_id
    html = tmp_path / "html.msg"  # no plain body: the HTML one is read
    html.write_bytes(outlook_message(subject="Menu", sender="Cafe", sender_email="cafe@example.com", to=(),
                                     sent=sent, html="<html><body><h1>Lunch</h1><p>Soup of the day</p></body></html>"))
    [menu] = extract_all(html)
    assert isinstance(menu, ExtractedDocument) and [b.text for b in menu.blocks] == ["Lunch", "Soup of the day"]
    broken = tmp_path / "broken.msg"
    broken.write_bytes(data[:1536])
    report = client.collection(name).ingest([path, broken])
    assert report.count("ingested") == 3
    assert [i.error_code for i in report.failed] == ["corrupt_document"]
    hits = client.collection(name).search("economy flights below six hours", k=1)
    assert hits[0].external_id is not None and hits[0].external_id.endswith("caps.txt")


def _msg(subject: str, **kwargs: Any) -> bytes:
    return outlook_message(subject=subject, sender="Ana", sender_email="ana@example.com",
                           to=(("Bo", "bo@example.com"),), sent=datetime(2024, 3, 5, tzinfo=UTC),
                           body=f"{subject} body text.", **kwargs)


def test_outlook_files_attached_as_files_are_bounded_by_depth_and_count(tmp_path: Path) -> None:
    """.msg files attached as files (not as messages) count toward the depth limit, and every attachment of one
    file toward one budget: a chain 50 deep, and one doubling at each level, stay small, with one line saying so."""
    chain = _msg("level 0")
    for level in range(1, 50):
        chain = _msg(f"level {level}", attachments=((f"level{level - 1}.msg", "application/vnd.ms-outlook", chain),))
    (tmp_path / "chain.msg").write_bytes(chain)
    found = extract_all(tmp_path / "chain.msg")
    documents = [d for d in found if isinstance(d, ExtractedDocument)]
    assert len(documents) == 3 and any("nested more than 3" in str(e) for e in found if isinstance(e, Exception))
    doubling = _msg("leaf", attachments=tuple((f"n{i}.txt", "text/plain", b"note %d" % i) for i in range(300)))
    for level in range(2):
        doubling = _msg(f"double {level}", attachments=(("a.msg", "application/vnd.ms-outlook", doubling),
                                                        ("b.msg", "application/vnd.ms-outlook", doubling)))
    (tmp_path / "doubling.msg").write_bytes(doubling)
    found = extract_all(tmp_path / "doubling.msg")
    refusals = [e for e in found if isinstance(e, Exception) and "more than 1000 attachments" in str(e)]
    assert len(refusals) == 1 and len(found) <= 1000 + 2


def test_a_bad_field_of_an_outlook_message_is_dropped_and_the_message_kept(tmp_path: Path) -> None:
    sent = datetime(2024, 3, 5, tzinfo=UTC)
    data = _msg("Odd fields", attachments=(("evil\r\nname.txt", "text/plain\r\nX-Evil: 1", b"attached words"),))
    stamp = struct.pack("<Q", int((sent - datetime(1601, 1, 1, tzinfo=UTC)).total_seconds() * 10_000_000))
    assert stamp in data
    (tmp_path / "odd.msg").write_bytes(data.replace(stamp, b"\xff" * 8))  # a date past the year 9999
    message, attachment = extract_all(tmp_path / "odd.msg")
    assert isinstance(message, ExtractedDocument) and message.title == "Odd fields" and "date" not in message.metadata
    assert isinstance(attachment, ExtractedDocument) and "attached words" in attachment.blocks[0].text
    assert "X-Evil" not in str(message.metadata)


def test_many_recipients_are_named_up_to_a_bound(tmp_path: Path) -> None:
    many = outlook_message(subject="All hands", sender="Ana", sender_email="ana@example.com",
                           to=tuple((f"P{i}", f"p{i}@example.com") for i in range(3000)),
                           sent=datetime(2024, 3, 5, tzinfo=UTC), body="Everyone is invited.")
    (tmp_path / "many.msg").write_bytes(many)
    [message] = extract_all(tmp_path / "many.msg")
    assert isinstance(message, ExtractedDocument)
    assert "P499 <p499@example.com>" in message.metadata["to"] and "P500 " not in message.metadata["to"]


def test_a_stream_declaring_more_than_the_file_holds_is_refused(tmp_path: Path) -> None:
    data = bytearray(_msg("Swollen"))
    name = "__substg1.0_1000001F".encode("utf-16-le")
    at = data.index(name)
    data[at + 120:at + 128] = struct.pack("<Q", 4 << 30)  # the body stream's size: 4 GB, in a file of kilobytes
    (tmp_path / "swollen.msg").write_bytes(bytes(data))
    [found] = extract_all(tmp_path / "swollen.msg")  # (nothing grows to the declared size on the way)
    if isinstance(found, Exception):
        assert found.code == "corrupt_document" and "\n" not in str(found)  # type: ignore[attr-defined]
    else:  # the rest of the message kept, the swollen body not read
        assert found.title == "Swollen" and "body text" not in " ".join(b.text for b in found.blocks)


def _field(paragraph: Any, code: str, result: str, simple: bool = False) -> None:
    """A field in a python-docx paragraph: its code and the result its program last wrote."""
    from docx.oxml import parse_xml

    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    if simple:
        paragraph._p.append(parse_xml(f'<w:fldSimple {w} w:instr="{code}"><w:r><w:t xml:space="preserve">{result}'
                                      "</w:t></w:r></w:fldSimple>"))
        return
    for run in (f'<w:r {w}><w:fldChar w:fldCharType="begin"/></w:r>',
                f'<w:r {w}><w:instrText xml:space="preserve">{code}</w:instrText></w:r>',
                f'<w:r {w}><w:fldChar w:fldCharType="separate"/></w:r>',
                f'<w:r {w}><w:t xml:space="preserve">{result}</w:t></w:r>',
                f'<w:r {w}><w:fldChar w:fldCharType="end"/></w:r>'):
        paragraph._p.append(parse_xml(run))


def test_fields_error_results_are_left_out_and_their_values_kept(tmp_path: Path) -> None:
    """A field's result is the text its program wrote last: a value (kept) or the error it wrote in its place
    (Word's own, in the language it ran in), which is no content of the document."""
    document = docx.Document()
    for code, result, simple in ((" = 1 + ", "!Unerwartetes Ende des Ausdrucks", False),
                                 (" REF _Ref1 ", "Error! Reference source not found.", False),
                                 (" REF _Ref2 ", "Fehler! Verweisquelle konnte nicht gefunden werden.", True),
                                 (" = 40 * 3 ", "120", False), (" DATE ", "5 March 2024", True)):
        paragraph = document.add_paragraph("Total: ")
        _field(paragraph, code, result, simple)
        paragraph.add_run(" days.")
    path = tmp_path / "fields.docx"
    document.save(str(path))
    [doc] = extract_all(path)
    assert isinstance(doc, ExtractedDocument)
    assert [b.text for b in doc.blocks] == ["Total: days.", "Total: days.", "Total: days.", "Total: 120 days.",
                                            "Total: 5 March 2024 days."]


def test_an_rtf_whose_conversion_fails_is_read_as_text_and_says_so(cli_env: dict[str, str], name: str,
                                                                    tmp_path: Path) -> None:
    """(`ragd ingest` in a process of its own: extraction workers kept by this test process would not see PATH.)"""
    token = f"{uuid.uuid4().int % 10**12:012d}"
    rtf = tmp_path / "table.rtf"
    rtf.write_text(r"{\rtf1\ansi{\fonttbl{\f0 Arial;}}\f0 Days\par\trowd\cellx2000\cellx4000 Germany\cell 98\cell"
                   r"\row}", encoding="ascii")
    env = {**cli_env, "PATH": f"{_stuck_soffice(tmp_path, token)}:{os.environ['PATH']}",
           "RAGD_CONVERT_TIMEOUT_S": "2"}
    done = run_cli(["ingest", str(rtf), "--collection", name, "--json"], env, timeout=120)
    [item] = json.loads(done.stdout)["items"]
    assert item["status"] == "ingested" and item["reason"] is not None, done.stdout + done.stderr
    assert "read as plain text" in item["reason"] and "RAGD_CONVERT_TIMEOUT_S" in item["reason"]
    assert _gone(token, within_s=2)
