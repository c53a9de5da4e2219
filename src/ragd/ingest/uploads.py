"""Files that arrive over the network (a REST upload, an MCP `ingest` call) are spooled to disk before they are
extracted like any path: each under a safe base name, in a folder of its own so that equal names stay apart, and
refused as soon as it passes the size limit."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import FileTooLarge

PREFIX = "upload-"


@contextlib.contextmanager
def spool_folder(home: Path) -> Iterator[str]:
    """A folder of its own for one request's files, under RAGD_HOME/uploads (never a shared /tmp: the files are a
    tenant's), named after this process so that a sweep can tell the folders of processes that ended; removed
    when the request ends."""
    root = home / "uploads"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sweep(home: Path) -> int:
    """Remove what requests of processes that no longer run left under RAGD_HOME/uploads (a server killed during
    an upload); the folders of running processes are left alone. Returns how many were removed."""
    return sweep_dead(home / "uploads", PREFIX)


def sweep_dead(root: Path, prefix: str) -> int:
    """Remove the folders `<prefix><pid>-*` under root whose process no longer runs. Returns how many."""
    removed = 0
    for entry in sorted(root.glob(prefix + "*")) if root.is_dir() else ():
        pid = entry.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process of this machine runs (a pid reused since is taken for the same process)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


MAX_NAME_BYTES = 200  # of the 255 bytes a file name may take on Linux and macOS file systems


def safe_name(filename: str | None, n: int) -> str:
    """A safe base name for an uploaded file: no directories, no leading dots, at most 200 bytes of UTF-8 (cut on
    a character boundary, its extension kept: it says how the file is read)."""
    base = os.path.basename((filename or "").replace("\\", "/")).strip().lstrip(".")
    base = "".join(ch for ch in base if ch.isprintable() and ch not in "/\0")
    if len(base.encode("utf-8")) > MAX_NAME_BYTES:
        stem, suffix = os.path.splitext(base)
        suffix = suffix if len(suffix.encode("utf-8")) <= 16 else ""
        room = MAX_NAME_BYTES - len(suffix.encode("utf-8"))
        base = stem.encode("utf-8")[:room].decode("utf-8", "ignore").rstrip() + suffix
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
