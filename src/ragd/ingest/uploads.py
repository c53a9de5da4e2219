"""Files that arrive over the network (a REST upload, an MCP `ingest` call) are spooled to disk before they are
extracted like any path: each under a safe base name, in a folder of its own so that equal names stay apart, and
refused as soon as it passes the size limit."""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..errors import FileTooLarge


def safe_name(filename: str | None, n: int) -> str:
    """A safe base name for an uploaded file: no directories, no leading dots, at most 200 characters."""
    base = os.path.basename((filename or "").replace("\\", "/")).strip().lstrip(".")
    base = "".join(ch for ch in base if ch.isprintable() and ch not in "/\0")[:200]
    return base or f"upload-{n}"


def spool(folder: str, n: int, filename: str | None, blocks: Iterable[bytes], limit: int) -> tuple[str, str]:
    """(the name the document takes, the spooled file), written block by block under `folder`."""
    name = safe_name(filename, n)
    path = os.path.join(folder, str(n))
    os.mkdir(path)
    path = os.path.join(path, name)
    size = 0
    with open(path, "wb") as out:
        for block in blocks:
            size += len(block)
            if size > limit:
                raise FileTooLarge(f"{name} is over the {limit}-byte limit (RAGD_MAX_FILE_BYTES)")
            out.write(block)
    return name, path
