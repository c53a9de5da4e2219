"""Requests made safe to retry (`Idempotency-Key`): the same key with the same body replays the first response,
with another body it is refused (422); the request's hash is taken as its body or files stream in."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Header, UploadFile
from fastapi.responses import JSONResponse
from psycopg.types.json import Jsonb

from ..engine import Ragd
from ..store import queries
from ..types import jsonable
from .errors import ApiError


def hashed(upload: UploadFile, digest: Any) -> Iterator[bytes]:
    """An uploaded file's blocks, its name and bytes added to digest on the way (the request's hash)."""
    name = (upload.filename or "").encode("utf-8", "surrogatepass")
    digest.update(b"\x00file\x00%d\x00" % len(name) + name)
    while block := upload.file.read(1 << 20):
        digest.update(block)
        yield block


IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255,
                                              pattern=r"^[\x21-\x7e]+$",
                                              description="Makes a retry of this request safe (see above)")]


def request_hash(route: str, body: Any) -> str:
    try:
        text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    except (RecursionError, ValueError, TypeError) as exc:
        raise ApiError(400, "bad_request", "this body cannot be made idempotent (nested too deep); send it "
                                           "without Idempotency-Key") from exc
    return hashlib.sha256(f"{route}\x00{text}".encode()).hexdigest()


def idempotent(r: Ragd, who: str, key: str | None, request_hash: Callable[[], str],
                run: Callable[[], dict[str, Any]], status_code: int = 200) -> Any:
    """run(), once per Idempotency-Key: a repeat of a finished request replays its response."""
    if key is None:
        return run()
    digest = request_hash()
    r.store.tenant_role(who, create=True)  # (a write: its tenant exists from now on)
    with r.store.tenant(who) as conn:
        conn.execute(queries.CLAIM_IDEMPOTENCY_KEY, {"tenant_id": who, "key": key, "request_hash": digest})
        row = conn.execute(queries.GET_IDEMPOTENCY_KEY, {"key": key}).fetchone()
    assert row is not None
    if row[0] != digest:
        raise ApiError(422, "idempotency_key_reused", f"Idempotency-Key {key!r} was used for another request in the "
                                                      "last 24 hours; use a new key for a new request")
    if row[1] is not None:
        return JSONResponse(row[2], status_code=int(row[1]), headers={"Idempotent-Replayed": "true"})
    response = jsonable(run())
    with r.store.tenant(who) as conn:
        conn.execute(queries.FINISH_IDEMPOTENCY_KEY, {"key": key, "request_hash": digest, "status_code": status_code,
                                                      "response": Jsonb(response)})
    return response

