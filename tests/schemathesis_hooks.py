"""Hooks for the schemathesis run (tests/test_fuzz.py), loaded through SCHEMATHESIS_HOOKS.

The OpenAPI schema says what a valid request looks like; it cannot say what a server must survive inside values
it accepts as anything (seed 002's document `id` and `metadata`). So /v1/index bodies also get ids holding NUL or a
lone surrogate, and metadata nested up to 900 levels (below the JSON parser's own limit, where the body would no
longer be valid JSON for Python): each such item must come back in `failed`, the rest indexed, never a 500."""

from __future__ import annotations

import hashlib
from typing import Any

import schemathesis
from hypothesis import strategies as st

HOSTILE_IDS = st.sampled_from(["a\x00b", "\x00", "x\ud800y", "ok"])


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {"d": value} if level % 2 else [value]
    return {"m": value}


@schemathesis.hook
def flatmap_body(ctx: Any, body: Any) -> Any:
    docs = body.get("documents") if isinstance(body, dict) else None
    if ctx.operation.path != "/v1/index" or not isinstance(docs, list) or not docs:
        return st.just(body)

    def hostile(choice: tuple[int, str, int]) -> Any:
        index, rid, depth = choice
        changed = [dict(d) if isinstance(d, dict) else d for d in docs]
        if isinstance(changed[index], dict):
            changed[index].update(id=rid, metadata=_nested(depth))
        return {**body, "documents": changed}

    return st.tuples(st.integers(0, len(docs) - 1), HOSTILE_IDS, st.integers(0, 900)).map(hostile)


@schemathesis.hook
def map_case(ctx: Any, case: Any) -> Any:
    """An Idempotency-Key names one request: a generated key is made from the request's body, as a client's would
    be, so that the same key never comes with another body (a 422 `idempotency_key_reused`, by design; its own
    test is in test_serve). Requests repeated with the same body then test the replay."""
    headers = case.headers or {}
    if "Idempotency-Key" in headers:
        digest = hashlib.sha256(repr((case.path, case.query, case.body)).encode("utf-8", "backslashreplace"))
        headers["Idempotency-Key"] = "k-" + digest.hexdigest()[:32]
        case.headers = headers
    return case
