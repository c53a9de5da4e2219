"""JSON over HTTP to services we do not own (embedding APIs, LLMs): one POST with a timeout per attempt, retried
with exponential backoff on 408/409/429/5xx and on transport errors, honouring a `Retry-After` of up to
`MAX_RETRY_AFTER_S`. A refusal (another 4xx) is not retried."""

from __future__ import annotations

import time
from typing import Any

import httpx

from .errors import RagdError

RETRYABLE = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 20.0


def post_json(url: str, payload: dict[str, Any], *, headers: dict[str, str], timeout_s: float, retries: int,
              backoff_s: float, what: str, error: type[RagdError]) -> Any:
    """The decoded JSON body of the first 2xx answer; `error(...)` naming `what` when every attempt failed, the
    service refused the request, or its answer is not JSON."""
    last = ""
    wait: float | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1) if wait is None else wait)
        try:
            response = httpx.post(url, json=payload, headers=headers, timeout=timeout_s)
        except httpx.HTTPError as exc:
            last, wait = f"{type(exc).__name__}: {exc}", None
            continue
        if response.status_code in RETRYABLE:
            last, wait = f"HTTP {response.status_code}: {_excerpt(response)}", _retry_after(response)
            continue
        if response.status_code >= 400:
            raise error(f"{what} refused the request: HTTP {response.status_code}: {_excerpt(response)}")
        try:
            return response.json()
        except ValueError as exc:
            raise error(f"{what} sent a response that is not JSON: {_excerpt(response)!r}") from exc
    raise error(f"{what} failed after {retries + 1} attempts: {last}")


def _excerpt(response: httpx.Response) -> str:
    return " ".join(response.text[:300].split())


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from a numeric Retry-After header, capped; None (use the backoff) when absent or not a number."""
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(response.headers.get("Retry-After", ""))))
    except ValueError:
        return None
