"""Original files, kept per version and addressed by their SHA-256 (once per tenant).

RAGD_ORIGINALS says where the bytes go: `postgres` (the default: in the `originals` row, so the embedded server
needs nothing more and a backup holds everything), a directory (`file:///srv/ragd-originals` or a plain absolute
path: one file per hash, under a folder per tenant), an S3-compatible bucket (`s3://bucket/prefix`: AWS S3, MinIO,
R2, Ceph...; `pip install 'ragd[s3]'`, RAGD_S3_ENDPOINT_URL for a store other than AWS, credentials from the
standard AWS variables and files), or `off` (nothing kept: no downloads, page images or reindex). The row exists in
every mode but `off`: the database's row security decides who may read an original, and bytes read back from
outside the database are checked against their hash.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import psycopg

from ..config import Settings
from ..errors import ConfigError, NotFound, OriginalsUnavailable
from .queries import ORIGINAL_FORGET as FORGET
from .queries import ORIGINAL_INSERT as INSERT
from .queries import ORIGINAL_SELECT as SELECT

log = logging.getLogger("ragd.originals")

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

    def __init__(self, where: str, endpoint: str | None = None, region: str | None = None):
        where = where.strip()
        self.folder: Path | None = None
        self.bucket = self.prefix = ""
        self.endpoint = endpoint
        if where.lower() in ("postgres", "off"):
            self.mode = where.lower()
        elif where.startswith("file://") or where.startswith("/"):
            path = Path(unquote(urlparse(where).path)) if where.startswith("file://") else Path(where)
            self.mode, self.folder = "directory", path
        elif where.startswith("s3://") and urlparse(where).netloc:
            parts = urlparse(where)
            self.mode, self.bucket, self.prefix = "s3", parts.netloc, parts.path.strip("/")
            self._s3 = _s3_client(endpoint, region)
        else:
            raise ConfigError(f"RAGD_ORIGINALS={where!r} is not a place for original files: use postgres, off, "
                              "a directory (an absolute path or file:// URI) or s3://bucket/prefix")

    @property
    def kept(self) -> bool:
        return self.mode != "off"

    def _path(self, tenant: str, sha: str) -> Path:
        assert self.folder is not None
        return self.folder / tenant / sha[:2] / sha

    def _key(self, tenant: str, sha: str) -> str:
        return "/".join(p for p in (self.prefix, tenant, sha[:2], sha) if p)

    def _where(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" + (f" at {self.endpoint}" if self.endpoint else "")

    def _s3_call(self, what: str, call: Any, **args: Any) -> Any:
        """An S3 request, its failure one line naming the store (a missing object is None)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call(Bucket=self.bucket, **args)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise OriginalsUnavailable(f"the S3 store {self._where()} refused to {what} an original: "
                                       f"{exc.response.get('Error', {}).get('Message') or exc}") from None
        except BotoCoreError as exc:
            raise OriginalsUnavailable(f"the S3 store {self._where()} cannot be reached to {what} an original: "
                                       f"{exc}") from None

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
        elif self.mode == "s3":  # one PUT of the whole object is atomic: a reader never sees part of it
            self._s3_call("keep", self._s3.put_object, Key=self._key(tenant, sha), Body=data,
                          ContentType="application/octet-stream")
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
        if self.mode == "s3":
            found = self._s3_call("read", self._s3.get_object, Key=self._key(tenant, sha))
            if found is None:
                raise NotFound(f"the original file {sha[:12]} is missing from {self._where()}")
            data = bytes(found["Body"].read())
            where = self._where()
        elif self.folder is not None:
            try:
                data = self._path(tenant, sha).read_bytes()
            except FileNotFoundError:
                raise NotFound(f"the original file {sha[:12]} is missing from {self.folder}") from None
            where = str(self.folder)
        else:
            raise NotFound(f"the original file {sha[:12]} is kept outside the database: set RAGD_ORIGINALS to "
                           "the directory or bucket it was written to")
        if hashlib.sha256(data).hexdigest() != sha:
            raise NotFound(f"the original file {sha[:12]} in {where} was changed since it was kept")
        return data

    def forget(self, conn: psycopg.Connection[Any], tenant: str, shas: list[str]) -> list[str]:
        """Drop the rows of the tenant's originals among `shas` that no version comes from any more, in the
        caller's transaction; returns their hashes, whose bytes outside the database `remove` deletes once that
        transaction has committed (so a rollback never leaves a row without its bytes)."""
        if not shas:
            return []
        return [r[0] for r in conn.execute(FORGET, {"shas": sorted(set(shas))})]

    def remove(self, tenant: str, gone: list[str]) -> None:
        """Delete the bytes kept outside the database of originals whose rows are gone (best effort: what cannot
        be deleted now is logged, and is unreachable anyway without its row)."""
        for sha in gone:
            try:
                if self.mode == "directory":
                    self._path(tenant, sha).unlink(missing_ok=True)
                elif self.mode == "s3":
                    self._s3_call("delete", self._s3.delete_object, Key=self._key(tenant, sha))
            except (OSError, OriginalsUnavailable) as exc:
                log.warning("the original %s of tenant %s was not deleted: %s", sha[:12], tenant, exc)


def _s3_client(endpoint: str | None, region: str | None) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ConfigError("RAGD_ORIGINALS=s3://... needs the S3 client: pip install 'ragd[s3]'") from None
    # bounded waits: a store that does not answer fails the file in seconds, not minutes
    config = Config(connect_timeout=5, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client("s3", endpoint_url=endpoint or None, region_name=region or None, config=config)


@functools.lru_cache(maxsize=8)
def originals(where: str, endpoint: str | None = None, region: str | None = None) -> Originals:
    return Originals(where, endpoint, region)


def originals_for(settings: Settings) -> Originals:
    """The store of original files `settings` name (made once per process)."""
    return originals(settings.originals, settings.s3_endpoint_url, settings.s3_region)
