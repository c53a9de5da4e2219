"""Rerankers behind an HTTP API: Cohere (v2 rerank), Together (Mixedbread and others), and any server with a
Jina- or TEI-style `/rerank`. One call per rerank, within the timeout; no retries (the caller fails open)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from ..errors import RerankerError

COHERE_URL = "https://api.cohere.com/v2/rerank"
TOGETHER_URL = "https://api.together.xyz/v1/rerank"


class ApiReranker:
    """`protocol` is cohere, together or http; `url` the full endpoint."""

    def __init__(self, protocol: str, model: str | None, url: str, *, api_key: str | None = None,
                 timeout_s: float = 3.0):
        self.protocol = protocol
        self.model = model
        self.url = url
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = timeout_s

    @property
    def name(self) -> str:
        return f"{self.protocol}:{self.model or self.url}"

    @property
    def version(self) -> str:
        return self.name

    def payload(self, query: str, passages: Sequence[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"query": query, "documents": list(passages), "top_n": len(passages)}
        if self.model:
            body["model"] = self.model
        if self.protocol == "together":
            body["return_documents"] = False
        if self.protocol == "http":  # TEI reads `texts`, Jina-style servers `documents`
            body["texts"] = list(passages)
        return body

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        try:
            response = httpx.post(self.url, json=self.payload(query, passages), headers=self._headers,
                                  timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise RerankerError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise RerankerError(f"{self.name}: HTTP {response.status_code}: {response.text[:200]}")
        try:
            return _scores(response.json(), len(passages))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise RerankerError(f"{self.name}: unexpected response ({type(exc).__name__}: {exc})") from exc


def _scores(data: Any, n: int) -> list[float]:
    """Scores in input order from `{"results": [{"index", "relevance_score"}]}` (Cohere, Together, Jina) or
    `[{"index", "score"}]` (TEI); every passage must be scored once."""
    rows = data["results"] if isinstance(data, dict) else data
    scores: list[float | None] = [None] * n
    for row in rows:
        value = row["relevance_score"] if "relevance_score" in row else row["score"]
        scores[int(row["index"])] = float(value)
    if any(s is None for s in scores):
        raise ValueError(f"{scores.count(None)} of {n} passages were not scored")
    return [float(s) for s in scores if s is not None]
