"""The web page: its HTML at `/` and its files under `/static` (no build step, no CDN; see ragd/web/)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

WEB = Path(__file__).resolve().parent.parent / "web"

router = APIRouter()


@router.get("/", include_in_schema=False)
def page() -> FileResponse:
    """The web page: ask with sources, documents, runs, collections and quality (it calls this API)."""
    return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache"})


def mount(app: FastAPI) -> None:
    """The page's files under /static, and the page at /."""
    app.mount("/static", StaticFiles(directory=WEB, check_dir=True), name="static")
    app.include_router(router)
