"""Hostile and broken inputs fail (or are skipped) alone, with a code and a reason; the rest of the run goes on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import ragd
from ragd.ingest.extract import ExtractOptions
from ragd.types import ItemOutcome

from .conftest import pdf_bytes, run_cli


def _by_name(report: ragd.IngestReport) -> dict[str, ItemOutcome]:
    return {Path(o.external_id or o.source_uri).name: o for o in report.items}


def test_a_file_name_that_is_not_utf8_is_ingested_with_its_bytes_escaped(
        client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("Apples grow on trees in the orchard.\n")
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xff\xfename.txt"), "wb") as handle:
        handle.write(b"Pears ripen in the late summer sun.\n")
    col = client.collection(name)
    report = col.ingest([tmp_path])
    assert report.count("ingested") == 2, report.items
    assert any(o.external_id.endswith("/bad\\xff\\xfename.txt") for o in report.items if o.external_id)
    assert [h.content for h in col.search("pears ripen", k=1)] == ["Pears ripen in the late summer sun."]
    assert col.ingest([tmp_path]).count("unchanged") == 2  # and a re-run finds them unchanged


def test_characters_postgresql_cannot_store_cost_only_themselves(
        client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join([
        '{"id": "n1", "text": "\\ud800"}',
        '{"id": "n2", "text": "Alpha \\udfff beta\\u0000gamma", "metadata": {"k\\u0000": "v\\ud800"}}',
        '{"id": "n3", "text": "A perfectly ordinary record about lighthouses."}',
    ]) + "\n")
    col = client.collection(name)
    report = col.ingest([records])
    assert not report.failed, report.failed
    outcomes = {o.external_id: o for o in report.items}
    assert set(outcomes) == {"n1", "n2", "n3"}
    assert "U+FFFD" in (outcomes["n2"].reason or "")
    assert [h.content for h in col.search("alpha", k=1, fusion="lexical")] == ["Alpha \ufffd betagamma"]
    assert col.document("n2")["metadata"] == {"k": "v\ufffd"}
    assert [h.external_id for h in col.search("lighthouses", k=1)] == ["n3"]


def test_fifos_and_devices_are_not_read(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text("Cherries are harvested in June.\n")
    os.mkfifo(folder / "pipe.txt")  # reading it would block forever
    (folder / "zero.txt").symlink_to("/dev/zero")  # stat size 0, reading it never ends
    col = client.collection(name)
    report = col.ingest([folder], options=ExtractOptions(follow_symlinks=True))
    items = _by_name(report)
    assert items["good.txt"].status == "ingested"
    assert (items["pipe.txt"].status, items["pipe.txt"].error_code) == ("failed", "not_a_regular_file")
    assert "FIFO" in (items["pipe.txt"].reason or "")
    assert (items["zero.txt"].status, items["zero.txt"].error_code) == ("failed", "not_a_regular_file")
    assert "character device" in (items["zero.txt"].reason or "")
    named = col.ingest([folder / "zero.txt"])  # named on the command line: followed, still refused
    assert [o.error_code for o in named.items] == ["not_a_regular_file"]


def test_links_out_of_an_ingested_folder_are_skipped_unless_asked(
        client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("The payroll password is swordfish.\n")
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "notes.txt").write_text("Plums are stone fruit.\n")
    (folder / "passwd.txt").symlink_to(outside / "secret.txt")
    (folder / "elsewhere").symlink_to(outside, target_is_directory=True)
    (folder / "again").symlink_to(folder / "sub", target_is_directory=True)  # inside: walked where it is
    (folder / "sub" / "loop").symlink_to(folder, target_is_directory=True)
    col = client.collection(name)
    report = col.ingest([folder])
    items = _by_name(report)
    assert report.status == "succeeded" and not report.failed
    assert items["notes.txt"].status == "ingested"
    for link in ("passwd.txt", "elsewhere"):
        assert (items[link].status, items[link].error_code) == ("skipped", "symlink_outside_folder")
        assert "outside" in (items[link].reason or "") and "--follow-symlinks" in (items[link].reason or "")
    for link in ("again", "loop"):  # links to folders inside it: walked where they are, each said so
        assert items[link].status == "skipped" and "already" in (items[link].reason or "")
    assert report.count("skipped") == 4 and len(report.items) == 5
    assert col.search("payroll password", k=3, fusion="lexical") == []
    followed = col.ingest([folder], options=ExtractOptions(follow_symlinks=True))
    assert followed.count("ingested") == 1 and not followed.failed  # the secret; the loop is walked once
    assert [h.content for h in col.search("payroll password", k=1)] == ["The payroll password is swordfish."]
    with client.store.tenant(col.tenant) as conn:
        codes = [r[0] for r in conn.execute("SELECT error_code FROM ingestion_items WHERE run_id = %s AND "
                                            "status = 'skipped' ORDER BY error_code", (report.run_id,))]
    assert codes == ["symlink_outside_folder"] * 2 + ["symlink_to_walked_folder"] * 2


def test_the_cli_reports_skipped_links_and_exits_zero(cli_env: dict[str, str], name: str, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("Outside the folder.\n")
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("Inside the folder.\n")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    result = run_cli(["ingest", str(folder), "--collection", name, "--json"], cli_env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["counts"]["skipped"] == 1 and data["counts"]["ingested"] == 1


def _form_loop_pdf(words: bytes, chain: int) -> bytes:
    """A page drawing a form that draws the next, the last drawing the first again: a circle of `chain` forms."""
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"

    def stream(head: bytes, data: bytes) -> bytes:
        return b"<< %s /Length %d >>\nstream\n%s\nendstream" % (head, len(data), data)

    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R"
               b" >> /XObject << /X0 6 0 R >> >> >>",
               stream(b"", b"BT /F1 12 Tf 72 720 Td (" + words + b") Tj ET /X0 Do"), font]
    for i in range(chain):
        following = 6 + (i + 1) % chain
        objects.append(stream(b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> "
                              b"/XObject << /X%d %d 0 R >> >>" % (i + 1, following),
                              b"BT /F1 12 Tf 72 %d Td (form%d) Tj ET /X%d Do" % (700 - 20 * i, i, i + 1)))
    return pdf_bytes(objects)


def test_a_pdf_whose_forms_draw_themselves_is_read_once_round_and_ends(
        client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    """A form drawing itself, directly or through others, is an endless drawing: the page is read with each form
    drawn once (as pdfminer refuses the circle), in bounded time and memory, and the rest of the run goes on."""
    (tmp_path / "itself.pdf").write_bytes(_form_loop_pdf(b"Lighthouse keepers", 1))
    (tmp_path / "circle.pdf").write_bytes(_form_loop_pdf(b"Harbour pilots", 3))
    (tmp_path / "good.txt").write_text("Fishermen mend their nets at dawn.\n")
    col = client.collection(name)
    report = col.ingest([tmp_path])
    assert report.count("ingested") == 3, report.items
    assert col.search("lighthouse keepers", k=1)[0].content == "Lighthouse keepers form0"
    assert col.search("harbour pilots", k=1)[0].content == "Harbour pilots form0 form1 form2"


def test_links_that_loop_or_lead_back_are_skipped_items_and_the_rest_is_stored(
        client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.txt").write_text("Apricots dry well in the sun.\n")
    (folder / "self.md").symlink_to("self.md")  # ln -s self.md self.md: a loop
    (folder / "here").symlink_to(".", target_is_directory=True)  # a link to the folder itself
    (folder / "dangling.txt").symlink_to(tmp_path / "missing.txt")
    col = client.collection(name)
    for options in (ExtractOptions(), ExtractOptions(follow_symlinks=True)):
        report = col.ingest([folder], options=options)
        items = _by_name(report)
        assert report.status == "succeeded" and not report.failed, report.items
        assert set(items) == {"good.txt", "self.md", "here", "dangling.txt"}
        assert items["good.txt"].status in ("ingested", "unchanged")
        assert (items["self.md"].status, items["self.md"].error_code) == ("skipped", "symlink_loop")
        assert "loop" in (items["self.md"].reason or "")
        assert items["here"].status == "skipped" and "already" in (items["here"].reason or "")
        assert (items["dangling.txt"].status, items["dangling.txt"].error_code) == ("skipped", "symlink_dangling")
    assert [h.external_id.rsplit("/", 1)[-1] for h in col.search("apricots", k=1)] == ["good.txt"]
