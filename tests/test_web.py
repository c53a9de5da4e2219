"""The web page in a real browser: Playwright for Python driving Debian's Chromium against a real `ragd serve`.

Each test keeps a screenshot of the page it ends on in test-output/screenshots/ (beside the repository's
sources; not committed)."""

from __future__ import annotations

import io
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect, sync_playwright

import ragd
from ragd import keys
from ragd.config import Settings

from .conftest import REPO, SAMPLES, serving
from .test_originals import SENTENCE, report_pdf

CHROMIUM = os.environ.get("RAGD_TEST_CHROMIUM", "/usr/bin/chromium")
SHOTS = REPO / "test-output" / "screenshots"
DEMO_QUESTION = "How many days of parental leave do employees in Germany get?"
EVIL_TITLE = '<img src=x onerror="window.__xss=1">Quarterly <script>window.__xss=2</script> notes'
EVIL = f"""# {EVIL_TITLE}

The harbour crane inspection found <script>window.__xss=3</script> rust on the boom of crane seven.

<img src=x onerror="window.__xss=4">

[Open the report](javascript:window.__xss=5) before the crane inspection meeting.
"""


@pytest.fixture(scope="module")
def site(settings: Settings, ragd_home: Path, base_url: str,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real `ragd serve` (keys required) with tenant A's documents in collection `web`, tenant B's in `other`."""
    folder = tmp_path_factory.mktemp("web")
    a, b = "web-a-" + uuid.uuid4().hex[:6], "web-b-" + uuid.uuid4().hex[:6]
    client = ragd.connect(settings=settings)
    pdf = report_pdf(folder / "facilities.pdf")
    evil = folder / "evil.md"
    evil.write_text(EVIL, encoding="utf-8")
    doomed = folder / "doomed.md"
    doomed.write_text("# Doomed note\n\nThis note about the old canteen menu will be deleted.\n", encoding="utf-8")
    col = client.collection("web", tenant=a)
    col.ingest(uploads=[("facilities.pdf", pdf), ("evil.md", evil), ("doomed.md", doomed),
                        *((p.name, p) for p in sorted(SAMPLES.iterdir()))])
    client.collection("other", tenant=b).ingest(
        documents=[{"id": "b-secret", "title": "B secret", "text": "Tenant B's secret launch plan."}])
    _, key_a = keys.create(client.store, a, "web tests")
    _, key_b = keys.create(client.store, b, "web tests")
    env = {"RAGD_HOME": str(ragd_home), "RAGD_EMBEDDER": "hash", "RAGD_RERANKER": "none",
           "RAGD_RATE_LIMIT_PER_MINUTE": "0", "RAGD_SERVE_JOBS": "on", "RAGD_REQUEST_LOG": "off"}
    if os.environ.get("RAGD_TEST_DSN"):
        env["RAGD_DATABASE_URL"] = base_url
    with serving(env) as server:
        yield {"url": server["url"], "a": a, "b": b, "key_a": key_a, "key_b": key_b, "client": client,
               "folder": folder, "pdf": pdf}
    client.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        raise AssertionError(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install "
                             "chromium), or set RAGD_TEST_CHROMIUM")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    problems: list[str] = []
    opened.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    opened.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    opened.problems = problems  # type: ignore[attr-defined]
    yield opened
    SHOTS.mkdir(parents=True, exist_ok=True)
    opened.screenshot(path=str(SHOTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    # the page's own code never breaks the Content-Security-Policy nor throws
    assert not [p for p in problems if "Content Security Policy" in p or p.startswith("uncaught")], problems


def shot(page: Page, name: str) -> None:
    """A screenshot of the page as it is now, kept with the test outputs."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def sign_in(page: Page, site: dict[str, Any], key: str | None = None, path: str = "") -> None:
    """Open the page and enter the API key in its dialog, as a person does."""
    page.goto(site["url"] + "/" + path)
    page.wait_for_selector("#key-dialog[open]")
    page.fill("#key-input", key or site["key_a"])
    page.click("#key-save")
    expect(page.locator("html")).to_have_attribute("data-ready", "true")


def _api(site: dict[str, Any], path: str, key: str | None = None) -> httpx.Response:
    return httpx.get(site["url"] + path, headers={"Authorization": f"Bearer {key or site['key_a']}"}, timeout=60)


def test_upload_three_formats_and_watch_the_run_succeed(page: Page, site: dict[str, Any]) -> None:
    import docx

    folder = site["folder"]
    word = docx.Document()
    word.add_heading("Bicycle policy", 1)
    word.add_paragraph("Staff may lease one bicycle through the company every three years.")
    word.save(str(folder / "bicycles.docx"))
    (folder / "rooms.csv").write_text("room,seats\nFjord,12\nGlacier,8\n", encoding="utf-8")
    pdf = report_pdf(folder / "upload.pdf", "The upload test paragraph mentions the lighthouse budget.")
    sign_in(page, site, path="#/documents")
    expect(page.locator("#documents")).to_be_visible()
    page.set_input_files("#file-input", [str(folder / "bicycles.docx"), str(folder / "rooms.csv"), str(pdf)])
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=120_000)
    for name in ("bicycles.docx", "rooms.csv", "upload.pdf"):
        row = page.locator(f'tr[data-file="{name}"]')
        expect(row.locator(".status").first).to_have_text("done")
        expect(row).to_contain_text("ingested")
    expect(page.locator('#documents tr[data-ref="bicycles.docx"]')).to_be_visible()
    page.fill("#doc-find", "bicycle")
    expect(page.locator("#doc-count")).to_have_text("1 document")
    page.fill("#doc-find", "rooms")
    page.locator('#documents tr[data-ref="rooms.csv"] a').click()  # a table is shown as a table
    expect(page.locator("#blocks table").first).to_contain_text("Glacier")
    expect(page.locator("#versions")).to_contain_text("rooms.csv")
    listed = _api(site, "/v1/documents?collection=web&q=lighthouse").json()
    assert listed["total"] == 0  # titles and ids only, not text
    assert _api(site, "/v1/documents/upload.pdf/source?collection=web").content == pdf.read_bytes()


def test_a_file_dropped_on_the_page_is_stored(page: Page, site: dict[str, Any]) -> None:
    sign_in(page, site, path="#/documents")
    expect(page.locator("#documents")).to_be_visible()
    dropped = page.evaluate_handle("""() => {
        const dt = new DataTransfer();
        dt.items.add(new File(['# Orchard note\\n\\nThe orchard is watered at dawn on Tuesdays.'], 'orchard.md',
                              { type: 'text/markdown' }));
        return dt;
    }""")
    page.dispatch_event("#drop", "dragover", {"dataTransfer": dropped})
    expect(page.locator("#drop.over")).to_be_visible()
    page.dispatch_event("#drop", "drop", {"dataTransfer": dropped})
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=120_000)
    expect(page.locator('#documents tr[data-ref="orchard.md"]')).to_contain_text("Orchard note")


def test_ask_streams_the_answer_and_a_citation_shows_its_highlighted_page(page: Page, site: dict[str, Any]) -> None:
    sign_in(page, site)
    page.fill("#question", "How much less energy did the cooling plant in Oslo use, according to the audit?")
    with page.expect_response(lambda r: r.url.endswith("/v1/query")) as streamed:
        page.click("#ask")
    assert streamed.value.headers["content-type"].startswith("text/event-stream")
    chip = page.locator("#answer .chip").first
    expect(chip).to_be_visible(timeout=60_000)
    expect(page.locator("#answer")).to_contain_text("eleven percent")
    with page.expect_response(lambda r: "/pages/2.png" in r.url) as drawn:
        chip.click()
    image = drawn.value
    assert image.status == 200 and image.headers["content-type"] == "image/png"
    img = page.locator(".page-image img").first
    expect(img).to_be_visible()
    assert page.evaluate("document.querySelector('.page-image img').naturalWidth") > 500
    chunk_id = chip.get_attribute("data-chunk")
    chunk = _api(site, f"/v1/chunks/{chunk_id}?collection=web").json()
    assert SENTENCE in chunk["content"]
    scale = float(image.headers["x-ragd-scale"])
    expected = [[round(v * scale) for v in b["bbox"]] for b in chunk["boxes"] if b["page"] == 2]
    assert json.loads(img.get_attribute("data-boxes") or "[]") == expected and expected
    again = _api(site, image.url.removeprefix(site["url"]))  # the same image, as any client gets it
    assert again.headers["x-ragd-boxes"] == image.headers["x-ragd-boxes"]
    png = Image.open(io.BytesIO(again.content)).convert("RGB")
    x0, y0, x1, y1 = expected[0]
    inside = [png.getpixel((x, y)) for x in range(x0 + 2, x1 - 2, 5) for y in range(y0 + 1, y1 - 1, 2)]
    assert sum(p[2] for p in inside) / len(inside) < 200  # the box is tinted (the page is white paper)
    assert png.getpixel((x0 // 2, 5)) == (255, 255, 255)
    assert json.loads(image.headers["x-ragd-quotes"]), "the quoted sentence is marked on the page"
    expect(page.locator(".source-text mark").first).to_contain_text("eleven percent")
    expect(page.locator("#source-list li")).to_have_count(page.locator("#answer .chip").evaluate_all(
        "chips => new Set(chips.map(c => c.dataset.chunk)).size"))


def test_a_computed_answer_marks_each_operand_on_its_page(page: Page, site: dict[str, Any],
                                                        tmp_path: Path) -> None:
    from .test_filings import _filinggen

    questions = _filinggen().generate(tmp_path, count=2, nyears=1, seed=5, unheld=0)
    tenant = "web-c-" + uuid.uuid4().hex[:6]  # a tenant of its own: tenant A's default collection stays `web`
    site["client"].collection("filings", tenant=tenant).ingest([tmp_path / "pdfs"])
    _, key = keys.create(site["client"].store, tenant, "web tests")
    asked = next(q for q in map(json.loads, questions.read_text(encoding="utf-8").splitlines())
                 if "gross margin" in q["question"])
    sign_in(page, site, key=key)
    page.fill("#question", asked["question"])
    page.click("#ask")
    chip = page.locator("#answer .chip").first
    expect(chip).to_be_visible(timeout=60_000)
    expect(page.locator("#answer")).to_contain_text(asked["answer"])
    with page.expect_response(lambda r: "/pages/" in r.url and r.url.split("?")[0].endswith(".png")) as drawn:
        chip.click()
    image = drawn.value
    quoted = httpx.URL(image.url).params.get_list("quote")
    assert quoted[0::2] == ["Gross profit", "Net sales"]  # each operand's row label, then its cell as printed
    assert all(cell.replace(",", "").isdigit() for cell in quoted[1::2])
    assert json.loads(image.headers["x-ragd-quotes"]), "the operand's row and cell are marked on the page"
    expect(page.locator(".source-text mark").first).to_contain_text("Gross profit")
    shot(page, "computed-answer-operands")


def test_an_abstention_looks_like_one_with_the_closest_passages(page: Page, site: dict[str, Any]) -> None:
    sign_in(page, site)
    page.fill("#question", "What is the melting point of tungsten in kelvin?")
    page.click("#ask")
    answer = page.locator("#answer.abstained")
    expect(answer).to_be_visible(timeout=60_000)
    expect(answer.locator(".verdict")).to_have_text("Not enough evidence")
    expect(page.locator("#answer .chip")).to_have_count(0)
    expect(page.locator(".closest").first).to_be_visible()
    expect(page.locator("#source-view")).to_contain_text("not enough evidence")


def test_search_and_ask_with_the_debug_view(page: Page, site: dict[str, Any]) -> None:
    sign_in(page, site)
    page.fill("#question", "parental leave in Germany")
    page.check("#debug")
    page.click("#search")
    results = page.locator("#search-results")
    expect(results).to_be_visible(timeout=60_000)
    expect(results.locator("th")).to_contain_text(["#", "Document", "Passage", "Similarity", "Keyword", "Combined"])
    assert results.locator("tbody tr").count() >= 3
    page.fill("#question", DEMO_QUESTION)
    page.click("#ask")
    debug = page.locator("#debug-view")
    expect(debug).to_be_visible(timeout=60_000)
    expect(debug.locator("table").first).to_contain_text("fusion")
    legs = debug.locator("table.legs tbody tr")
    assert legs.count() >= 3
    expect(legs.first).to_contain_text("Parental Leave Policy")
    expect(debug.locator("table.bars")).to_contain_text("lexical")


def test_delete_a_document_with_confirmation(page: Page, site: dict[str, Any]) -> None:
    sign_in(page, site, path="#/documents")
    row = page.locator('#documents tr[data-ref="doomed.md"]')
    expect(row).to_be_visible()
    row.get_by_role("button", name="Delete").click()
    expect(page.locator("#confirm-dialog")).to_be_visible()
    page.get_by_role("button", name="Cancel").click()
    assert _api(site, "/v1/documents/doomed.md?collection=web").status_code == 200
    row.get_by_role("button", name="Delete").click()
    page.locator("#confirm-ok").click()
    expect(page.locator('#documents tr[data-ref="doomed.md"]')).to_have_count(0)
    expect(page.locator("#notice")).to_contain_text("Deleted Doomed note")
    assert _api(site, "/v1/documents/doomed.md?collection=web").status_code == 404
    # from a document's own page too: confirmed, it goes back to the list
    site["client"].collection("web", tenant=site["a"]).ingest(
        documents=[{"id": "doomed-2", "title": "Second doomed note", "text": "The old bike rack is gone."}])
    page.goto(site["url"] + "/#/documents/doomed-2")
    expect(page.locator("#doc-title")).to_have_text("Second doomed note")
    page.click("#delete-doc")
    page.locator("#confirm-ok").click()
    expect(page.locator("#documents")).to_be_visible()
    expect(page.locator("#notice")).to_contain_text("Deleted Second doomed note")
    assert _api(site, "/v1/documents/doomed-2?collection=web").status_code == 404


def test_a_hostile_document_renders_inert(page: Page, site: dict[str, Any]) -> None:
    sign_in(page, site, path="#/documents")
    row = page.locator('#documents tr[data-ref="evil.md"]')
    expect(row).to_contain_text("<script>window.__xss=2</script>")  # the title, as text
    row.locator("a").click()
    expect(page.locator("#doc-title")).to_contain_text("onerror")
    expect(page.locator("#blocks")).to_contain_text("javascript:window.__xss=5")
    shot(page, "document")
    page.goto(site["url"] + "/#/ask")
    page.fill("#question", "What did the harbour crane inspection find on crane seven?")
    page.click("#ask")
    expect(page.locator(".source-text").first).to_be_visible(timeout=60_000)
    expect(page.locator(".source-text").first).to_contain_text("<script>")
    assert page.evaluate("window.__xss") is None
    assert page.locator("img[onerror], script:not([src]), a[href^='javascript']").count() == 0
    headers = httpx.get(site["url"] + "/").headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "unsafe-inline" not in headers["content-security-policy"]


def test_a_wrong_api_key_is_refused_and_shows_nothing(page: Page, site: dict[str, Any]) -> None:
    page.goto(site["url"] + "/")
    page.wait_for_selector("#key-dialog[open]")
    page.fill("#key-input", "rk_wrong")
    page.click("#key-save")
    expect(page.locator("#key-dialog[open] #key-why")).to_contain_text("unknown or revoked")
    expect(page.locator("#collection option")).to_have_count(0)
    page.fill("#key-input", site["key_a"])
    page.click("#key-save")
    expect(page.locator("#collection")).to_have_value("web")


def test_another_tenants_objects_are_invisible(page: Page, site: dict[str, Any]) -> None:
    sign_in(page, site, key=site["key_b"])
    expect(page.locator("#collection")).to_have_value("other")
    assert page.locator("#collection option").all_inner_texts() == ["other"]
    page.goto(site["url"] + "/#/documents/facilities.pdf")
    expect(page.locator("#notice")).to_contain_text("no document 'facilities.pdf'")
    page.select_option("#collection", "other")
    page.goto(site["url"] + "/#/documents")
    expect(page.locator("#documents tbody tr")).to_have_count(1)
    expect(page.locator("#documents")).not_to_contain_text("Facilities")


def test_the_ask_flow_by_keyboard_alone(page: Page, site: dict[str, Any]) -> None:
    sign_in(page, site)
    expect(page.locator("#question")).to_be_focused()
    page.keyboard.type(DEMO_QUESTION)
    page.keyboard.press("Enter")
    expect(page.locator("#answer .chip").first).to_be_visible(timeout=60_000)
    expect(page.locator("#answer")).to_contain_text("Elternzeit")
    page.locator("#question").focus()
    for _ in range(30):  # Tab from the question to the first citation chip
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('chip')"):
            break
    assert page.evaluate("document.activeElement.classList.contains('chip')")
    page.keyboard.press("Enter")
    expect(page.locator("#source-view h3")).to_be_focused()
    expect(page.locator(".source-text mark").filter(has_text="Elternzeit")).to_have_count(1)


def test_runs_and_collections_with_quality_charts(page: Page, site: dict[str, Any]) -> None:
    client = site["client"]
    for ndcg in (0.61, 0.64, 0.66):
        client.save_evaluation(collection="web", dataset="scifact", kind="retrieval", tenant=site["a"],
                               metrics={"lexical": {"ndcg@10": ndcg, "mrr@10": ndcg + 0.02, "latency_p50_ms": 4.0},
                                        "weighted": {"ndcg@10": ndcg + 0.03, "latency_p50_ms": 9.0}})
    sign_in(page, site, path="#/collections")
    expect(page.locator("#collections")).to_contain_text("web")
    expect(page.locator("#collections")).not_to_contain_text("other")
    chart = page.locator('figure[data-metric="nDCG@10"]')
    expect(chart).to_be_visible()
    expect(chart.locator("polyline")).to_have_count(2)
    expect(chart.locator("circle")).to_have_count(6)
    expect(chart.locator(".legend")).to_contain_text("scifact · lexical")
    shot(page, "collections")
    page.goto(site["url"] + "/#/runs")
    expect(page.locator("#runs tbody tr").first).to_be_visible()
    page.locator("#runs tbody tr a").first.click()
    expect(page.locator("#run-items")).to_be_visible()
    shot(page, "run")
    assert page.locator("#run-items tbody tr").count() >= 1


def test_the_first_page_weighs_under_300_kB(browser: Browser, site: dict[str, Any]) -> None:
    context = browser.new_context()
    page = context.new_page()
    sizes: dict[str, int] = {}
    page.on("response", lambda r: sizes.__setitem__(r.url, len(r.body())) if r.status == 200 else None)
    page.goto(site["url"] + "/")
    page.wait_for_selector("#key-dialog[open]")
    page.wait_for_load_state("networkidle")
    context.close()
    assert {u.rsplit("/", 1)[-1] for u in sizes} >= {"", "app.js", "app.css", "favicon.svg"}
    assert sum(sizes.values()) < 300_000, sizes


def test_open_mode_on_loopback_needs_no_key(browser: Browser, fresh_database: str, settings: Settings,
                                            tmp_path: Path) -> None:
    """A database without keys: the server is open on loopback, and the page works without asking for one."""
    with ragd.connect(settings=settings.model_copy(update={"database_url": fresh_database})) as client:
        client.collection("notes").ingest(uploads=[("parental-leave.md", SAMPLES / "parental-leave.md")])
    env = {"RAGD_HOME": str(tmp_path), "RAGD_DATABASE_URL": fresh_database, "RAGD_EMBEDDER": "hash",
           "RAGD_RERANKER": "none", "RAGD_SERVE_JOBS": "off", "RAGD_REQUEST_LOG": "off"}
    with serving(env) as server:
        context = browser.new_context()
        page = context.new_page()
        page.goto(server["url"] + "/")
        expect(page.locator("html")).to_have_attribute("data-ready", "true")
        expect(page.locator("#key-dialog")).not_to_be_visible()
        expect(page.locator("#collection")).to_have_value("notes")
        page.fill("#question", DEMO_QUESTION)
        page.keyboard.press("Enter")
        expect(page.locator("#answer .chip").first).to_be_visible(timeout=60_000)
        shot(page, "open-mode")
        context.close()


def test_a_failed_file_shows_its_code_reason_and_what_to_do(page: Page, site: dict[str, Any]) -> None:
    folder = site["folder"]
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage without an end")
    (folder / "fine.md").write_text("# Fine note\n\nThe fine note is about the bicycle shed roof.\n", encoding="utf-8")
    sign_in(page, site, path="#/documents")
    expect(page.locator("#documents")).to_be_visible()
    page.set_input_files("#file-input", [str(folder / "broken.pdf"), str(folder / "fine.md")])
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=120_000)  # one file failed, not all
    broken = page.locator('tr[data-file="broken.pdf"]')
    expect(broken).to_contain_text("failed")
    expect(broken.locator("code")).to_have_text("corrupt_document")
    expect(broken.locator(".hint")).to_contain_text("damaged")
    expect(page.locator('tr[data-file="fine.md"]')).to_contain_text("ingested")
    page.locator("#upload-run a").first.click()  # the run's own page lists the same
    expect(page.locator("#run-items")).to_contain_text("corrupt_document")
