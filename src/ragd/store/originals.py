"""Original files, kept per version and addressed by their SHA-256 (once per tenant).

RAGD_ORIGINALS says where the bytes go: `postgres` (the default: in the `originals` row, so the embedded server
needs nothing more and a backup holds everything), a directory (`file:///srv/ragd-originals` or a plain absolute
path: one file per hash, under a folder per tenant), or `off` (nothing kept: no downloads, page images or
reindex). The row exists in every mode but `off`: the database's row security decides who may read an original.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import psycopg

from ..errors import ConfigError, NotFound

INSERT = """
INSERT INTO originals (tenant_id, sha256, size, content) VALUES (%(tenant_id)s, %(sha256)s, %(size)s, %(content)s)
ON CONFLICT DO NOTHING"""
KEPT = "SELECT 1 FROM originals WHERE tenant_id = %(tenant_id)s AND sha256 = %(sha256)s"
SELECT = "SELECT size, content FROM originals WHERE tenant_id = %(tenant_id)s AND sha256 = %(sha256)s"
FORGET = "SELECT ragd_forget_originals(%(shas)s)"

# Media types by what the bytes start with, then by the name's extension (a fixed table: the system's
# mime.types differs between machines).
_MAGIC = ((b"%PDF-", "application/pdf"), (b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"II*\x00", "image/tiff"), (b"MM\x00*", "image/tiff"), (b"GIF8", "image/gif"), (b"BM", "image/bmp"))
_EXTENSIONS = {
    ".pdf": "application/pdf", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".tif": "image/tiff", ".tiff": "image/tiff", ".webp": "image/webp", ".gif": "image/gif", ".bmp": "image/bmp",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".html": "text/html", ".htm": "text/html", ".md": "text/markdown", ".markdown": "text/markdown",
    ".txt": "text/plain", ".csv": "text/csv", ".tsv": "text/tab-separated-values", ".json": "application/json",
    ".jsonl": "application/jsonl", ".ndjson": "application/jsonl", ".eml": "message/rfc822", ".xml": "application/xml",
    ".zip": "application/zip",
}
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/tiff", "image/gif", "image/bmp", "image/webp"})


def media_type(name: str, head: bytes) -> str:
    """The media type of a file from its first bytes and its name."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return _EXTENSIONS.get(os.path.splitext(name)[1].lower(), "application/octet-stream")


@dataclass(frozen=True)
class Original:
    """One version's original file."""

    sha256: str
    name: str
    media_type: str
    data: bytes


class Originals:
    """Where a store keeps original files (see the module's docstring)."""

    def __init__(self, where: str):
        where = where.strip()
        self.where = where
        self.folder: Path | None = None
        if where.lower() in ("postgres", "off"):
            self.mode = where.lower()
        elif where.startswith("file://") or where.startswith("/"):
            path = Path(unquote(urlparse(where).path)) if where.startswith("file://") else Path(where)
            self.mode, self.folder = "directory", path
        else:
            raise ConfigError(f"RAGD_ORIGINALS={where!r} is not a place for original files: use postgres, off, "
                              "or a directory (an absolute path or file:// URI)")

    @property
    def kept(self) -> bool:
        return self.mode != "off"

    def _path(self, tenant: str, sha: str) -> Path:
        assert self.folder is not None
        return self.folder / tenant / sha[:2] / sha

    def put(self, conn: psycopg.Connection[Any], tenant: str, sha: str, data: bytes) -> None:
        """Keep `data` (whose hash is `sha`) for the tenant, in the caller's transaction. A directory's file is
        written first, under a temporary name renamed into place: a file without a row (a transaction that
        rolled back) is harmless and is used again by the next put of the same bytes."""
        if self.mode == "off":
            return
        if self.mode == "directory":
            path = self._path(tenant, sha)
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{sha}.{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_bytes(data)
                tmp.replace(path)
        conn.execute(INSERT, {"tenant_id": tenant, "sha256": sha, "size": len(data),
                              "content": data if self.mode == "postgres" else None})

    def get(self, conn: psycopg.Connection[Any], tenant: str, sha: str) -> bytes:
        """The bytes of a tenant's original (NotFound when none is kept)."""
        row = conn.execute(SELECT, {"tenant_id": tenant, "sha256": sha}).fetchone()
        if row is None:
            raise NotFound("the original file of this version is not kept (stored before originals were kept, "
                           "or with RAGD_ORIGINALS=off): ingest the file again to keep it")
        if row[1] is not None:
            return bytes(row[1])
        if self.folder is None:
            raise NotFound(f"the original file {sha[:12]} is kept outside the database: set RAGD_ORIGINALS to "
                           "the directory it was written to")
        try:
            data = self._path(tenant, sha).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"the original file {sha[:12]} is missing from {self.folder}") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise NotFound(f"the original file {sha[:12]} in {self.folder} was changed since it was kept")
        return data

    def forget(self, conn: psycopg.Connection[Any], tenant: str, shas: list[str]) -> None:
        """Drop the tenant's originals among `shas` that no version comes from any more."""
        if not shas:
            return
        gone = [r[0] for r in conn.execute(FORGET, {"shas": sorted(set(shas))})]
        if self.mode == "directory":
            for sha in gone:
                self._path(tenant, sha).unlink(missing_ok=True)


@functools.lru_cache(maxsize=8)
def originals(where: str) -> Originals:
    return Originals(where)
