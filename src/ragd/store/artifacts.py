"""Extracted blocks kept under RAGD_HOME/artifacts: one JSON Lines pack per ingest batch, a line per version,
each version's artifact_uri the pack's file:// URI with its version id as the fragment."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidRequest, NotFound


@functools.lru_cache(maxsize=256)
def _artifact_folder(artifacts: Path, collection_id: uuid.UUID) -> Path:
    """A collection's artifact folder, made and resolved once per process (each is a few system calls per
    document otherwise)."""
    folder = artifacts / str(collection_id)
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def load_artifact(uri: str) -> dict[str, Any]:
    """A version's extracted blocks from its artifact_uri: a line of a JSON Lines pack (the fragment names the
    version) or, for versions stored before packs, a JSON file of its own."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise InvalidRequest(f"artifact URI {uri!r} is not a file:// URI")
    path = Path(unquote(parts.path))
    try:
        if not parts.fragment:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                record = json.loads(line)
                if record.get("doc_version_id") == parts.fragment:
                    return dict(record)
    except FileNotFoundError:
        raise NotFound(f"artifact {path} does not exist (removed from RAGD_HOME/artifacts?)") from None
    raise NotFound(f"version {parts.fragment} is not in {path.name}")


def write_pack(artifacts: Path, collection_id: uuid.UUID,
               lines: Sequence[tuple[uuid.UUID, str]]) -> dict[uuid.UUID, str]:
    """The extracted blocks of new versions (each version's `artifact_line`), kept as JSON under RAGD_HOME: one
    JSON Lines pack per ingest batch (a line per version), each version's URI the pack's file:// URI with its
    version id as the fragment (read one back with load_artifact). One file per batch, not per version: creating
    a file costs far more than writing one (~1 ms of system time each here), and a million documents are not a
    million files. Packs are content-addressed (named by their versions), so writing one again is harmless; each
    is written to a temporary name and renamed, so a reader never sees half a pack."""
    if not lines:
        return {}
    folder = _artifact_folder(artifacts, collection_id)
    ordered = sorted(dict(lines).items(), key=lambda v: str(v[0]))  # a version once
    name = hashlib.sha256("\n".join(str(v) for v, _ in ordered).encode("ascii")).hexdigest()[:32]
    path = folder / f"pack-{name}.jsonl"
    if not path.exists():
        text = "".join(line for _, line in ordered)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
        except FileNotFoundError:  # the folder was removed since it was made: make it again
            _artifact_folder.cache_clear()
            _artifact_folder(artifacts, collection_id)
            tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    uri = path.as_uri()
    return {version: f"{uri}#{version}" for version, _ in lines}
