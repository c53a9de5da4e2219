"""Requests made safe to retry (`Idempotency-Key`): the same key with the same body replays the first response,
with another body it is refused (422), while the first still runs it is refused (409, Retry-After); the
request's hash is taken as its body or files stream in."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Header, UploadFile
from fastapi.responses import JSONResponse
from psycopg.types.json import Jsonb

from ..engine import Ragd
from ..store import queries
from ..types import jsonable
from .errors import ApiError

log = logging.getLogger("ragd.server")


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


HEARTBEAT_S = 1.0  # how often a running request says it still holds its key
STALE_S = 5.0  # a key whose request has not said so for this long was left by a killed server: taken over


def idempotent(r: Ragd, who: str, key: str | None, request_hash: Callable[[], str],
               run: Callable[[], dict[str, Any]], status_code: int = 200) -> Any:
    """run(), once per Idempotency-Key: a repeat of a finished request replays its response; a repeat while the
    first still runs is answered 409 (retry after a second); a request that failed (an error response) leaves
    the key free, so its retry runs again."""
    if key is None:
        return run()
    digest = request_hash()
    owner = uuid.uuid4()
    r.store.tenant_role(who, create=True)  # (a write: its tenant exists from now on)
    with r.store.tenant(who) as conn:
        conn.execute(queries.CLAIM_IDEMPOTENCY_KEY, {"tenant_id": who, "key": key, "request_hash": digest,
                                                      "owner": owner, "stale_s": STALE_S})
        row = conn.execute(queries.GET_IDEMPOTENCY_KEY, {"key": key, "owner": owner}).fetchone()
    assert row is not None
    if row[0] != digest:
        raise ApiError(422, "idempotency_key_reused", f"Idempotency-Key {key!r} was used for another request in the "
                                                      "last 24 hours; use a new key for a new request")
    if row[1] is not None:
        return JSONResponse(row[2], status_code=int(row[1]), headers={"Idempotent-Replayed": "true"})
    if not row[3]:
        raise ApiError(409, "idempotency_key_in_use", f"a request with Idempotency-Key {key!r} is still running; "
                                                      "retry it when that one has finished (its response is then "
                                                      "replayed)", {"Retry-After": "1"})
    params = {"key": key, "owner": owner}
    stop = threading.Event()
    beating = threading.Thread(target=_beat, args=(r, who, params, stop), daemon=True)
    beating.start()
    try:
        response = jsonable(run())
    except BaseException:
        with contextlib.suppress(Exception), r.store.tenant(who) as conn:  # free for a retry to run again
            conn.execute(queries.RELEASE_IDEMPOTENCY_KEY, params)
        raise
    finally:
        stop.set()
        beating.join()
    with r.store.tenant(who) as conn:
        conn.execute(queries.FINISH_IDEMPOTENCY_KEY, {**params, "status_code": status_code,
                                                      "response": Jsonb(response)})
    return response


def _beat(r: Ragd, who: str, params: dict[str, Any], stop: threading.Event) -> None:
    """Say the key is still held, every HEARTBEAT_S, until the request ends."""
    while not stop.wait(HEARTBEAT_S):
        try:
            with r.store.tenant(who) as conn:
                conn.execute(queries.BEAT_IDEMPOTENCY_KEY, params)
        except Exception as exc:  # of any kind: a missed beat only lets a retry in sooner
            log.warning("idempotency key heartbeat failed: %s", str(exc).splitlines()[0] if str(exc) else exc)
