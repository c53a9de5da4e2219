"""Originals kept per version: downloads, page images with a chunk's boxes drawn, reindex, and their tenancy."""

from __future__ import annotations

import hashlib
import io
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image

import ragd
from ragd import keys
from ragd.config import Settings
from ragd.errors import NotFound, OriginalsUnavailable
from ragd.server import create_app

from .conftest import SAMPLES

SENTENCE = "The quarterly audit found that the cooling plant in Oslo used eleven percent less energy."


ENERGY = (SENTENCE + " The plant was rebuilt in the spring, and the new pumps run at night when power is cheaper. "
          "Staff were trained on the new controls.")


def report_pdf(path: Path, energy: str = ENERGY) -> Path:
    """A two-page PDF: a title and paragraphs, `energy` (the audit sentence) on page 2."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()
    story = [Paragraph("Facilities Report", styles["Title"]),
             Paragraph("The facilities team keeps the buildings running. " * 6, styles["BodyText"]),
             PageBreak(),
             Paragraph("Energy", styles["Heading1"]),
             Paragraph(energy, styles["BodyText"])]
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title="Facilities Report").build(story)
    return path


@pytest.fixture(scope="module")
def world(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    client = ragd.connect(settings=settings.model_copy(update={"cache_ttl_s": 0, "rate_limit_per_minute": 0}))
    a, b = "orig-a-" + uuid.uuid4().hex[:6], "orig-b-" + uuid.uuid4().hex[:6]
    folder = tmp_path_factory.mktemp("originals")
    pdf = report_pdf(folder / "facilities.pdf")
    _, key_a = keys.create(client.store, a, "tests")
    _, key_b = keys.create(client.store, b, "tests")
    with TestClient(create_app(client=client)) as http:
        files = [("files", ("facilities.pdf", pdf.read_bytes(), "application/pdf")),
                 ("files", ("parental-leave.md", (SAMPLES / "parental-leave.md").read_bytes(), "text/markdown"))]
        r = http.post("/v1/documents?collection=docs", files=files, headers=_auth(key_a))
        assert r.status_code == 200 and r.json()["status"] == "succeeded", r.text
        yield {"client": client, "http": http, "a": a, "b": b, "key_a": key_a, "key_b": key_b, "pdf": pdf}
    client.close()


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _energy_chunk(world: dict[str, Any]) -> dict[str, Any]:
    hits = world["client"].collection("docs", tenant=world["a"]).search("cooling plant Oslo energy", k=3)
    chunk = world["http"].get(f"/v1/chunks/{hits[0].chunk_id}?collection=docs", headers=_auth(world["key_a"]))
    assert chunk.status_code == 200, chunk.text
    return chunk.json()  # type: ignore[no-any-return]


def test_the_original_downloads_byte_for_byte_and_never_renders_in_place(world: dict[str, Any]) -> None:
    http, key = world["http"], world["key_a"]
    r = http.get("/v1/documents/facilities.pdf/source?collection=docs", headers=_auth(key))
    assert r.status_code == 200 and r.content == world["pdf"].read_bytes()
    assert r.headers["content-type"] == "application/pdf"
    assert r.headers["content-disposition"].startswith('attachment; filename="facilities.pdf"')
    assert r.headers["x-content-type-options"] == "nosniff" and "sandbox" in r.headers["content-security-policy"]
    md = http.get("/v1/documents/parental-leave.md/source?collection=docs", headers=_auth(key))
    assert md.content == (SAMPLES / "parental-leave.md").read_bytes() and md.headers["content-type"].startswith(
        "text/markdown")
    doc = http.get("/v1/documents/facilities.pdf?collection=docs", headers=_auth(key)).json()
    version = doc["versions"][0]
    assert version["source_sha256"] == hashlib.sha256(world["pdf"].read_bytes()).hexdigest()
    assert version["media_type"] == "application/pdf" and version["source_name"] == "facilities.pdf"
    listed = http.get("/v1/documents?collection=docs&q=FACILITIES", headers=_auth(key)).json()
    assert listed["total"] == 1 and listed["documents"][0]["size"] == len(world["pdf"].read_bytes())
    assert listed["documents"][0]["versions"] == 1
    assert http.get("/v1/documents?collection=docs&type=markdown", headers=_auth(key)).json()["total"] == 1
    assert http.get("/v1/documents?collection=docs&tag=nope", headers=_auth(key)).json()["total"] == 0


def test_a_cited_page_is_drawn_with_the_chunks_boxes(world: dict[str, Any]) -> None:
    chunk = _energy_chunk(world)
    assert SENTENCE in chunk["content"] and chunk["pages"] == [2] and chunk["has_original"]
    assert chunk["title"] == "Facilities Report" and chunk["version_label"] == "v1"
    boxes = [b["bbox"] for b in chunk["boxes"] if b["page"] == 2]
    assert boxes
    r = world["http"].get(f"/v1/documents/facilities.pdf/pages/2.png?collection=docs&chunk={chunk['chunk_id']}"
                          f"&quote={SENTENCE}", headers=_auth(world["key_a"]))
    assert r.status_code == 200 and r.headers["content-type"] == "image/png", r.text
    image = Image.open(io.BytesIO(r.content)).convert("RGB")
    scale = float(r.headers["x-ragd-scale"])
    assert image.width == round(595.28 * scale) or abs(image.width - 595.28 * scale) <= 1
    drawn = json.loads(r.headers["x-ragd-boxes"])
    assert drawn == [[round(v * scale) for v in box] for box in boxes]
    marks = json.loads(r.headers["x-ragd-quotes"])
    assert marks, "the quoted sentence is marked"
    for x0, y0, x1, y1 in marks:  # each mark lies inside a drawn box
        assert any(b[0] - 4 <= x0 and x1 <= b[2] + 4 and b[1] - 4 <= y0 and y1 <= b[3] + 4 for b in drawn)
    # the highlight is there: inside the box the white paper is tinted (blue falls), far above it the page is white
    x0, y0, x1, y1 = drawn[0]
    inside = [image.getpixel((x, y)) for x in range(x0 + 2, x1 - 2, 7) for y in range(y0 + 1, y1 - 1, 3)]
    paper = [p for p in inside if p[0] > 200 and p[1] > 150]
    assert paper and all(p[2] < 230 for p in paper)
    assert image.getpixel((5, 5)) == (255, 255, 255)
    plain = world["http"].get("/v1/documents/facilities.pdf/pages/2.png?collection=docs",
                              headers=_auth(world["key_a"]))
    assert plain.status_code == 200 and json.loads(plain.headers["x-ragd-boxes"]) == []
    unmarked = Image.open(io.BytesIO(plain.content)).convert("RGB")
    blue = [unmarked.getpixel((x, y))[2] for x in range(x0 + 2, x1 - 2, 7) for y in range(y0 + 1, y1 - 1, 3)]
    assert sum(blue) / len(blue) - sum(p[2] for p in inside) / len(inside) > 40  # the same region, not tinted


def test_page_requests_that_cannot_be_drawn_say_why(world: dict[str, Any]) -> None:
    http, key = world["http"], world["key_a"]
    r = http.get("/v1/documents/facilities.pdf/pages/9.png?collection=docs", headers=_auth(key))
    assert r.status_code == 404 and "has 2 page(s)" in r.json()["message"]
    r = http.get("/v1/documents/parental-leave.md/pages/1.png?collection=docs", headers=_auth(key))
    assert r.status_code == 400 and "PDF and image files" in r.json()["message"]
    md_chunk = world["client"].collection("docs", tenant=world["a"]).search("parental leave Germany", k=1)[0]
    r = http.get(f"/v1/documents/facilities.pdf/pages/1.png?collection=docs&chunk={md_chunk.chunk_id}",
                 headers=_auth(key))
    assert r.status_code == 404 and "not a chunk of document" in r.json()["message"]
    r = http.get("/v1/chunks/not-a-uuid?collection=docs", headers=_auth(key))
    assert r.status_code in (400, 404)


def test_another_tenant_cannot_see_or_probe_originals_pages_or_chunks(world: dict[str, Any]) -> None:
    http, other = world["http"], world["key_b"]
    chunk = _energy_chunk(world)
    world["client"].collection("docs", tenant=world["b"]).ingest(documents=[{"id": "b-doc", "text": "other"}])
    for path in ("/v1/documents/facilities.pdf/source?collection=docs",
                 f"/v1/documents/facilities.pdf/pages/2.png?collection=docs&chunk={chunk['chunk_id']}",
                 f"/v1/chunks/{chunk['chunk_id']}?collection=docs",
                 f"/v1/documents/{chunk['doc_id']}/source?collection=docs"):
        r = http.get(path, headers=_auth(other))
        assert r.status_code == 404, (path, r.text)
    with world["client"].store.tenant(world["b"]) as conn:  # SQL in the other tenant's session sees no row
        assert conn.execute("SELECT count(*) FROM originals").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM evaluations").fetchone()[0] == 0


def test_deleting_a_document_forgets_an_original_no_version_uses(settings: Settings, name: str,
                                                                  tmp_path: Path) -> None:
    client = ragd.connect(settings=settings)
    try:
        tenant = "orig-del-" + uuid.uuid4().hex[:6]
        col = client.collection(name, tenant=tenant)
        pdf = report_pdf(tmp_path / "a.pdf")
        copy = tmp_path / "b.pdf"
        copy.write_bytes(pdf.read_bytes())
        report = col.ingest(uploads=[("first.pdf", pdf), ("second.pdf", copy)], duplicates="keep")
        assert [o.status for o in report.items] == ["ingested", "ingested"]
        with client.store.tenant(tenant) as conn:
            assert conn.execute("SELECT count(*) FROM originals").fetchone()[0] == 1  # one copy for both
        col.delete("first.pdf")
        assert col.original("second.pdf").data == pdf.read_bytes()
        col.delete("second.pdf")
        with client.store.tenant(tenant) as conn:
            assert conn.execute("SELECT count(*) FROM originals").fetchone()[0] == 0
    finally:
        client.close()


def _one_pdf_kept(client: ragd.Ragd, name: str, folder: Path, prefix: str) -> tuple[str, Any, Path, str]:
    """A new tenant's collection holding one uploaded PDF: (tenant, collection, the PDF, its SHA-256)."""
    tenant = prefix + uuid.uuid4().hex[:6]
    col = client.collection(name, tenant=tenant)
    pdf = report_pdf(folder / "r.pdf")
    col.ingest(uploads=[("r.pdf", pdf)])
    return tenant, col, pdf, hashlib.sha256(pdf.read_bytes()).hexdigest()


def test_originals_in_a_directory(settings: Settings, name: str, tmp_path: Path) -> None:
    store = tmp_path / "kept"
    client = ragd.connect(settings=settings.model_copy(update={"originals": store.as_uri()}))
    try:
        tenant, col, pdf, sha = _one_pdf_kept(client, name, tmp_path, "orig-dir-")
        kept = store / tenant / sha[:2] / sha
        assert kept.read_bytes() == pdf.read_bytes()
        with client.store.tenant(tenant) as conn:
            assert conn.execute("SELECT content IS NULL FROM originals").fetchone()[0]
        assert col.original("r.pdf").data == pdf.read_bytes()
        assert col.page("r.pdf", 1).pages == 2
        kept.write_bytes(b"tampered")
        with pytest.raises(NotFound, match="was changed since it was kept"):
            col.original("r.pdf")
        col.delete("r.pdf")
        assert not kept.exists()
    finally:
        client.close()


def test_reindex_reads_originals_again_and_stores_only_what_changed(settings: Settings, name: str,
                                                                    tmp_path: Path, cli_env: dict[str, str]) -> None:
    from .conftest import run_cli

    client = ragd.connect(settings=settings)
    try:
        col = client.collection(name)
        pdf = report_pdf(tmp_path / "facilities.pdf")
        col.ingest([SAMPLES / "faq.jsonl"], uploads=[("reports/facilities.pdf", pdf)], tags=["kept"],
                   metadata={"owner": "ops"})
        col.ingest(documents=[{"id": "typed", "text": "A note typed in, with no file behind it."}])
        before = {d["external_id"]: d for d in col.documents()}
        again = col.reindex()
        statuses = {o.external_id: o.status for o in again.items}
        assert statuses.pop("typed") == "skipped"
        assert set(statuses.values()) == {"unchanged"} and len(statuses) == len(before) - 1
        skipped = next(o for o in again.items if o.external_id == "typed")
        assert skipped.error_code == "no_original" and "no original file is kept" in (skipped.reason or "")
        # as if an older extractor had read the kept PDF differently: the version now claims an original whose
        # second page reads otherwise (its first page is the same)
        changed = report_pdf(tmp_path / "changed.pdf", "The district heating pipes in Bergen were replaced, and "
                                                       "losses fell by a third.").read_bytes()
        sha = hashlib.sha256(changed).hexdigest()
        with client.store.admin() as conn:
            conn.execute("INSERT INTO originals (tenant_id, sha256, size, content) VALUES (%s, %s, %s, %s)",
                         (col.tenant, sha, len(changed), changed))
            conn.execute("UPDATE document_versions v SET source_sha256 = %s FROM documents d "
                         "WHERE d.doc_id = v.doc_id AND d.external_id = 'reports/facilities.pdf' "
                         "AND d.collection_id = %s", (sha, col.collection_id))
        result = run_cli(["reindex", "-c", name, "--json"], cli_env)
        assert result.returncode == 0, result.stdout
        report = json.loads(result.stdout)
        by_id = {i["external_id"]: i for i in report["items"]}
        assert by_id["reports/facilities.pdf"]["status"] == "ingested"
        assert sum(1 for i in report["items"] if i["status"] == "unchanged") == len(before) - 2
        assert report["cache_hits"] >= 1 and report["embedded"] < by_id["reports/facilities.pdf"]["chunks"]
        doc = col.document("reports/facilities.pdf")
        assert [v["version_label"] for v in doc["versions"] if v["is_active"]] == ["v2"]
        assert "kept" in doc["tags"] and doc["metadata"]["owner"] == "ops" and doc["metadata"]["pages"] == 2
        assert col.search("district heating pipes Bergen", k=1)[0].external_id == "reports/facilities.pdf"
        assert client.run(report["run_id"])["config"]["kind"] == "reindex"
        faq = col.document("faq-002")
        assert faq["tags"] == before["faq-002"]["tags"] and faq["versions"][0]["version_label"] == "v1"
    finally:
        client.close()


def test_eval_save_keeps_figures_per_tenant(world: dict[str, Any]) -> None:
    client = world["client"]
    eval_id = client.save_evaluation(collection="docs", dataset="tiny", kind="retrieval", tenant=world["a"],
                                     metrics={"lexical": {"ndcg@10": 0.5, "latency_p50_ms": 3, "note": "x"}})
    listed = world["http"].get("/v1/evals", headers=_auth(world["key_a"])).json()["evaluations"]
    mine = [e for e in listed if e["eval_id"] == str(eval_id)]
    assert mine and mine[0]["metrics"] == {"lexical": {"ndcg@10": 0.5, "latency_p50_ms": 3.0}}
    assert world["http"].get("/v1/evals", headers=_auth(world["key_b"])).json()["evaluations"] == []


def test_originals_in_an_s3_compatible_store(settings: Settings, name: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A real S3 protocol server on 127.0.0.1 (moto's), as an S3-compatible store (MinIO, R2...) is configured."""
    import boto3
    from moto.server import ThreadedMotoServer

    from .conftest import free_port

    for variable, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                            ("AWS_DEFAULT_REGION", "eu-north-1")):
        monkeypatch.setenv(variable, value)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="kept", CreateBucketConfiguration={"LocationConstraint": "eu-north-1"})
        client = ragd.connect(settings=settings.model_copy(update={"originals": "s3://kept/ragd",
                                                                   "s3_endpoint_url": endpoint}))
        try:
            tenant, col, pdf, sha = _one_pdf_kept(client, name, tmp_path, "orig-s3-")
            key = f"ragd/{tenant}/{sha[:2]}/{sha}"
            assert s3.get_object(Bucket="kept", Key=key)["Body"].read() == pdf.read_bytes()
            with client.store.tenant(tenant) as conn:
                assert conn.execute("SELECT content IS NULL FROM originals").fetchone()[0]
            assert col.original("r.pdf").data == pdf.read_bytes()
            assert col.page("r.pdf", 2).pages == 2
            s3.put_object(Bucket="kept", Key=key, Body=b"tampered")
            with pytest.raises(NotFound, match="was changed since it was kept"):
                col.original("r.pdf")
            col.delete("r.pdf")
            assert s3.list_objects_v2(Bucket="kept", Prefix=f"ragd/{tenant}/").get("KeyCount", 0) == 0
            kept_tenant, _, _, _ = _one_pdf_kept(client, name, tmp_path, "orig-s3-kept-")
        finally:
            client.close()
        server.stop()
        stopped = ragd.connect(settings=settings.model_copy(update={"originals": "s3://kept/ragd",
                                                                    "s3_endpoint_url": endpoint}))
        try:  # the store unreachable: reads say so in one line; ingest fails the item, nothing half-stored
            with pytest.raises(OriginalsUnavailable, match="cannot be reached"):
                stopped.collection(name, tenant=kept_tenant).original("r.pdf")
            col = stopped.collection(name + "x", tenant="orig-s3-down-" + uuid.uuid4().hex[:6])
            report = col.ingest(uploads=[("down.pdf", report_pdf(tmp_path / "down.pdf"))])
            assert report.items[0].status == "failed" and "S3" in (report.items[0].reason or "")
            assert col.documents() == []
        finally:
            stopped.close()
    finally:
        server.stop()


def test_scans_are_drawn_with_the_boxes_ocr_found(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    """An image file and an image-only PDF (both read by OCR): the cited region is drawn where OCR found it."""
    from PIL import ImageDraw, ImageFont

    scan = Image.new("RGB", (1400, 700), "white")
    draw = ImageDraw.Draw(scan)
    font = ImageFont.load_default(size=44)
    draw.text((60, 80), "Warehouse safety notice", fill="black", font=font)
    draw.text((60, 200), "Forklifts must stop at the yellow line", fill="black", font=font)
    draw.text((60, 270), "before the loading dock in Hamburg.", fill="black", font=font)
    scan.save(tmp_path / "notice.png")
    scan.save(tmp_path / "notice.pdf", resolution=150.0)  # an image-only PDF: 672 x 336 points
    col = client.collection(name)
    report = col.ingest(uploads=[("notice.png", tmp_path / "notice.png"), ("notice.pdf", tmp_path / "notice.pdf")],
                        duplicates="keep")
    assert [o.status for o in report.items] == ["ingested", "ingested"], report.items
    for ref, width in (("notice.png", 1400), ("notice.pdf", 672)):
        hit = next(h for h in col.search("forklifts yellow line Hamburg", k=5) if h.external_id == ref)
        chunk = col.chunk(str(hit.chunk_id))
        boxes = [b["bbox"] for b in chunk["boxes"] if b["page"] == 1]
        assert boxes and chunk["pages"] == [1]
        # OCR found the forklift lines where they were drawn (in pixels, or in points for the PDF)
        unit = width / 1400
        assert any(b[0] < 70 * unit and 190 * unit < b[1] < 215 * unit and b[3] > 300 * unit for b in boxes), boxes
        page = col.page(ref, 1, chunk=str(hit.chunk_id))
        assert page.boxes == tuple(tuple(round(v * page.scale) for v in b) for b in boxes)
        image = Image.open(io.BytesIO(page.png)).convert("RGB")
        assert abs(image.width - width * page.scale) <= 1
        x0, y0, x1, y1 = page.boxes[-1]
        paper = [image.getpixel((x, y)) for x in range(x0 + 2, x1 - 2, 5) for y in range(y0 + 1, y1 - 1, 3)]
        assert sum(p[2] for p in paper) / len(paper) < 215  # tinted
        assert image.getpixel((image.width - 5, image.height - 5)) == (255, 255, 255)


def test_a_version_stored_without_its_original_gets_it_when_its_file_comes_again(
        settings: Settings, name: str, tmp_path: Path) -> None:
    pdf = report_pdf(tmp_path / "old.pdf")
    with ragd.connect(settings=settings.model_copy(update={"originals": "off"})) as before:  # as before migration 20
        assert before.collection(name).ingest(uploads=[("old.pdf", pdf)]).items[0].status == "ingested"
    with ragd.connect(settings=settings) as client:
        col = client.collection(name)
        with pytest.raises(NotFound, match="not kept"):
            col.original("old.pdf")
        assert col.reindex().items[0].status == "skipped"
        again = col.ingest(uploads=[("old.pdf", pdf)])
        assert again.items[0].status == "unchanged" and again.embedded == 0
        assert col.original("old.pdf").data == pdf.read_bytes()
        assert col.document("old.pdf")["versions"][0]["media_type"] == "application/pdf"
        assert col.reindex().items[0].status == "unchanged"


# -- a page request never runs forever (issue 56) ---------------------------------------------------------------

@pytest.mark.parametrize("quote", ["%00", "%00abc", "a%00b"])
def test_a_quote_or_version_holding_nul_is_400_before_anything_runs(world: dict[str, Any], quote: str) -> None:
    """pdfium's text search with a NUL needle never returned (the thread sat at 100% CPU); every query parameter
    of every route is checked as bodies are."""
    http, auth = world["http"], _auth(world["key_a"])
    r = http.get(f"/v1/documents/facilities.pdf/pages/2.png?collection=docs&quote={quote}", headers=auth)
    assert r.status_code == 400 and r.json()["error"] == "bad_request" and "quote" in r.json()["message"], r.text
    for view in ("source", "blocks"):
        r = http.get(f"/v1/documents/facilities.pdf/{view}?collection=docs&version={quote}", headers=auth)
        assert r.status_code == 400 and "version" in r.json()["message"], r.text
    r = http.get(f"/v1/documents?collection=docs&q={quote}", headers=auth)
    assert r.status_code == 400, r.text
    assert http.get("/v1/documents/facilities.pdf/source?collection=docs", headers=auth).status_code == 200


def test_the_library_draws_quotes_that_hold_no_searchable_text(world: dict[str, Any]) -> None:
    """The library has no HTTP layer in front: a quote of control characters, a NUL or spaces marks nothing
    (pdfium is never given an empty or NUL-cut needle), and the page is drawn."""
    col = world["client"].collection("docs", tenant=world["a"], create=False)
    for quotes in (["\x00"], ["\x00abc"], ["\x01\x02", "   "], ["\u200b"]):
        page = col.page("facilities.pdf", 2, quotes=quotes)
        assert page.png.startswith(b"\x89PNG") and page.quotes == ()
    marked = col.page("facilities.pdf", 2, quotes=["\x00" + SENTENCE[:40]])  # the NUL dropped, the text found
    assert marked.quotes


def test_a_page_that_takes_too_long_to_draw_is_stopped(world: dict[str, Any], tmp_path: Path,
                                                       settings: Settings) -> None:
    """Drawing runs in a worker process with a deadline: a page too heavy to draw in RAGD_RENDER_TIMEOUT_S is
    stopped (422 page_not_rendered), and the next request is served by a fresh worker."""
    from reportlab.pdfgen import canvas

    heavy = tmp_path / "heavy.pdf"
    c = canvas.Canvas(str(heavy))
    c.drawString(72, 800, "A survey plan of the harbour drawn in a great many strokes.")
    for i in range(120_000):  # vector paths enough to take pdfium well over the deadline
        c.line(i % 590, (i * 7) % 840, (i * 13) % 590, (i * 3) % 840)
    c.showPage()
    c.save()
    slow = ragd.connect(settings=settings.model_copy(update={"render_timeout_s": 0.3, "rate_limit_per_minute": 0}))
    try:
        col = slow.collection("docs", tenant=world["a"], create=False)
        report = col.ingest([heavy])
        assert report.items[0].doc_id is not None, report.items
        doc = str(report.items[0].doc_id)
        with TestClient(create_app(client=slow)) as http:
            started = time.monotonic()
            r = http.get(f"/v1/documents/{doc}/pages/1.png?collection=docs", headers=_auth(world["key_a"]))
            assert r.status_code == 422 and r.json()["error"] == "page_not_rendered", r.text
            assert time.monotonic() - started < 10
            ok = http.get("/v1/documents/facilities.pdf/pages/1.png?collection=docs", headers=_auth(world["key_a"]))
            assert ok.status_code == 200, ok.text
        col.delete(doc)
    finally:
        slow.close()
