"""The first room: which paths are files to read. Folders walked in sorted order, hidden entries and links that
leave the folder skipped with their reason, a file read whole under its size limit (nothing else of ingestion is
known here)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import (
    FileTooLarge,
    IngestError,
    NotARegularFile,
    Skipped,
    SymlinkDangling,
    SymlinkLoop,
    SymlinkOutside,
    SymlinkWalked,
)
from .extract import Source


def expand_paths(paths: Sequence[str | os.PathLike[str]], *,
                 follow_symlinks: bool = False) -> Iterator[Path | IngestError]:
    """Files in argument order; directories walked recursively in sorted order, hidden entries skipped.

    A link inside a folder that points outside it is not followed (an item skipped with the reason) unless
    follow_symlinks; a link to a folder is never walked twice."""
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            yield from _walk(path, follow_symlinks)
        elif path.exists():
            yield path
        elif path.is_symlink():
            yield _target(path)  # a link that loops or leads nowhere: why
        else:
            yield IngestError(f"{raw}: no such file or directory")


def _walk(top: Path, follow_symlinks: bool) -> Iterator[Path | IngestError]:
    """Every link met is an item: followed, or skipped with the reason (one that loops or leads nowhere, one out of
    the folder unless follow_symlinks, one to a folder walked anyway)."""
    root = top.resolve()
    walked: set[Path] = set()
    for dirpath, dirs, files in os.walk(top, followlinks=follow_symlinks):
        here = Path(dirpath)
        walked.add(here.resolve())
        kept = []
        for name in sorted(d for d in dirs if not d.startswith(".")):
            entry = here / name
            if entry.is_symlink():
                target = _target(entry)
                if isinstance(target, Skipped):
                    yield target
                    continue
                if not follow_symlinks:
                    yield _outside(entry, target, top) if not target.is_relative_to(root) else _walked(entry, top)
                    continue  # a link within the folder: its target is walked where it is
                if target in walked or (target.is_relative_to(root) and root.is_relative_to(target)):
                    yield _walked(entry, top)  # a loop, or a folder already walked
                    continue
            kept.append(name)
        dirs[:] = kept
        # (a link that loops shows up among the files: os.walk cannot tell it is a folder)
        for name in sorted(f for f in files if not f.startswith(".")):
            entry = here / name
            if entry.is_symlink():
                target = _target(entry)
                if isinstance(target, Skipped):
                    yield target
                    continue
                if not follow_symlinks and not target.is_relative_to(root):
                    yield _outside(entry, target, top)
                    continue
            yield entry


def _target(link: Path) -> Path | Skipped:
    """Where a link leads, or why it leads nowhere."""
    try:
        return link.resolve(strict=True)
    except (RuntimeError, OSError) as exc:  # (RuntimeError: Python's own loop detection)
        if isinstance(exc, RuntimeError) or exc.errno == errno.ELOOP:
            return SymlinkLoop(f"{display(link)}: a link that loops (it leads back to itself); skipped")
        return SymlinkDangling(f"{display(link)}: a link to {display(Path(os.readlink(link)))}, which does not "
                               "exist; skipped")


def _walked(link: Path, top: Path) -> SymlinkWalked:
    return SymlinkWalked(f"{display(link)}: a link to a folder of {display(top)} already ingested where it is; "
                         "not walked twice")


def _outside(link: Path, target: Path, top: Path) -> SymlinkOutside:
    return SymlinkOutside(f"{display(link)}: a link to {display(target)}, outside {display(top)}; not followed "
                          "(ingest the target itself, or pass --follow-symlinks)")


def display(path: Path) -> str:
    """A path as text that can always be printed and stored (undecodable bytes as \\xNN escapes)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def read_source(path: Path, max_bytes: int) -> Source:
    """The bytes of a regular file, at most max_bytes. Opened without blocking and checked before reading: a
    FIFO would block forever, a device (a link to /dev/zero) would never end."""
    resolved = path.resolve()
    fd = os.open(resolved, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(f"{path.name} is not a regular file ({_file_kind(info.st_mode)}); "
                                  "only regular files are read")
        if info.st_size > max_bytes:
            raise FileTooLarge(f"{path.name} is {info.st_size} bytes, over the {max_bytes}-byte limit "
                               "(RAGD_MAX_FILE_BYTES)")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLarge(f"{path.name} grew past the {max_bytes}-byte limit while it was read (RAGD_MAX_FILE_BYTES)")
    return source_of(path, data)


def source_of(path: Path, data: bytes) -> Source:
    resolved = path.resolve()
    # a file name that is not valid UTF-8 keeps its bytes visible (and distinct) as \xNN escapes
    return Source(path=path, data=data, external_id=display(resolved), source_uri=resolved.as_uri())


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "not a file"
