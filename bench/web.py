"""The web page's weight and speed on loopback, and how fast a cited PDF page is drawn.

    python bench/web.py [--loads 20] [--pages 30] [--embedder bge-small-en]

A private embedded server gets the samples and a long PDF of real text-layer pages (../shared/data's PDF sources
when present); `ragd serve` runs on it (open mode on loopback) and Debian's Chromium (Playwright) loads the page.

Printed: the first page's bytes (every response of the first load: the target is under 300 kB); the time from
navigation to interactive (the page has loaded its collections and set data-ready: the target under 1 s), cold
(a new browser context each load) and warm (reloads of one context); one ask in the page, from Enter to the
first citation chip; and the page image of cited PDF chunks (the target within 500 ms warm): cold (the first
draw of each page and chunk: the original read, rendered by pdfium, its boxes drawn) and warm (the same again,
served from the cache after the tenant and chunk checks).
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from pathlib import Path

import httpx
from _common import REPO, pct, private_ragd, serve
from _results import Results
from ingest_throughput import long_pdf
from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("RAGD_TEST_CHROMIUM", "/usr/bin/chromium")


RESULTS = Results("web")


def line(name: str, values: list[float], target: str = "") -> None:
    print(f"{name:<44} p50 {pct(values, 50):8.1f} ms  p95 {pct(values, 95):8.1f} ms  n={len(values):<4} {target}")
    RESULTS.row("timings", measure=name, p50_ms=pct(values, 50), p95_ms=pct(values, 95), n=len(values),
                target=target.strip("()"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, default=20, help="page loads per measure")
    parser.add_argument("--pages", type=int, default=30, help="pages of the generated long PDF")
    parser.add_argument("--embedder", default="bge-small-en")
    args = parser.parse_args()
    RESULTS.config = {"loads": args.loads, "pages": args.pages, "embedder": args.embedder}
    with tempfile.TemporaryDirectory(prefix="ragd-bench-web-") as tmp, private_ragd(args.embedder,
                                                                                   Path(tmp) / "home") as client:
        pdf = Path(tmp) / "long.pdf"
        pages = long_pdf(args.pages, pdf)
        col = client.collection("bench")
        col.ingest([REPO / "samples"], uploads=[("long.pdf", pdf)])
        cited = [(str(h.chunk_id), h.external_id) for h in col.search("the results of the study", k=50)
                 if h.external_id == "long.pdf"][:20]
        home = client.settings.home
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | {
            "RAGD_HOME": str(home), "RAGD_EMBEDDER": args.embedder, "RAGD_REQUEST_LOG": "off"}
        server, url = serve(env)
        try:
            print(f"corpus: samples + a {pages}-page PDF; {len(cited)} cited PDF chunks; embedder {args.embedder}")
            browse(url, args.loads)
            images(url, cited)
            RESULTS.save()
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)


def browse(url: str, loads: int) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        sizes: dict[str, int] = {}
        context = browser.new_context()
        page = context.new_page()
        page.on("response", lambda r: sizes.__setitem__(r.url, len(r.body())) if r.request.method == "GET"
                and r.status == 200 else None)
        page.goto(url + "/")
        page.wait_for_selector("html[data-ready=true]")
        print(f"first page: {sum(sizes.values()) / 1000:.1f} kB in {len(sizes)} responses (target < 300 kB)")
        RESULTS.row("weight", what="first page", kilobytes=sum(sizes.values()) / 1000, responses=len(sizes))
        cold, warm = [], []
        for _ in range(loads):
            fresh = browser.new_context()
            tab = fresh.new_page()
            started = time.perf_counter()
            tab.goto(url + "/")
            tab.wait_for_selector("html[data-ready=true]")
            cold.append((time.perf_counter() - started) * 1000)
            fresh.close()
        for _ in range(loads):
            started = time.perf_counter()
            page.reload()
            page.wait_for_selector("html[data-ready=true]")
            warm.append((time.perf_counter() - started) * 1000)
        line("interactive, new browser context", cold, "(target < 1000 ms)")
        line("interactive, reload", warm, "(target < 1000 ms)")
        page.select_option("#collection", "bench")
        asked = []
        for question in ("How many days of parental leave do employees in Germany get?",
                         "What is the travel expense policy for hotels?",
                         "How do I report a security incident?"):
            page.fill("#question", question)
            started = time.perf_counter()
            page.press("#question", "Enter")
            page.wait_for_selector("#answer .chip, #answer.abstained", timeout=120_000)
            asked.append((time.perf_counter() - started) * 1000)
        line("ask in the page: Enter to first citation", asked)
        browser.close()


def images(url: str, cited: list[tuple[str, str]]) -> None:
    cold, warm, sizes = [], [], []
    with httpx.Client(base_url=url, timeout=60) as http:
        for chunk_id, ref in cited:
            chunk = http.get(f"/v1/chunks/{chunk_id}", params={"collection": "bench"}).json()
            page = (chunk.get("pages") or [1])[0]
            path = f"/v1/documents/{ref}/pages/{page}.png"
            params = {"collection": "bench", "chunk": chunk_id}
            for sink in (cold, warm):
                started = time.perf_counter()
                r = http.get(path, params=params)
                sink.append((time.perf_counter() - started) * 1000)
                r.raise_for_status()
            sizes.append(len(r.content))
    if cold:
        line("page image of a cited PDF chunk, cold", cold)
        line("page image of a cited PDF chunk, warm", warm, "(target < 500 ms)")
        print(f"page image size: p50 {pct([float(s) for s in sizes], 50) / 1000:.0f} kB")
        RESULTS.row("weight", what="page image (p50)", kilobytes=pct([float(s) for s in sizes], 50) / 1000,
                    responses=len(sizes))


if __name__ == "__main__":
    main()
