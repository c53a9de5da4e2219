"""Any OpenAI-compatible /embeddings API: batches of at most 256, retries with backoff, timeouts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ProviderError
from ..net import post_json
from .base import Vectors, l2_normalize

MAX_BATCH = 256


class OpenAIEmbedder:
    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        dims: int | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        batch_size: int = MAX_BATCH,
    ):
        self._model = model
        self._url = base_url.rstrip("/") + "/embeddings"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._dims = dims
        self._timeout = timeout_s
        self._retries = max_retries
        self._backoff = backoff_s
        self._batch = max(1, min(batch_size, MAX_BATCH))

    @property
    def name(self) -> str:
        return f"openai:{self._model}"

    @property
    def dims(self) -> int:
        if self._dims is None:
            self._dims = int(self._call(["dimension probe"]).shape[1])
        return self._dims

    def _call(self, texts: Sequence[str]) -> Vectors:
        data = post_json(self._url, {"model": self._model, "input": list(texts)}, headers=self._headers,
                         timeout_s=self._timeout, retries=self._retries, backoff_s=self._backoff,
                         what=f"embedding provider {self._url}", error=ProviderError)
        return self._parse(data, len(texts))

    def _parse(self, body: Any, expected: int) -> Vectors:
        try:
            data = sorted(body["data"], key=lambda item: int(item["index"]))
            vectors = np.asarray([item["embedding"] for item in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderError(f"embedding provider {self._url} sent an unreadable response: {exc}") from exc
        if vectors.ndim != 2 or vectors.shape[0] != expected:
            raise ProviderError(
                f"embedding provider {self._url} returned {vectors.shape[0] if vectors.ndim else 0} "
                f"vectors for {expected} inputs"
            )
        return l2_normalize(vectors)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dims or 0), dtype=np.float32)
        parts = [self._call(texts[i : i + self._batch]) for i in range(0, len(texts), self._batch)]
        out = np.concatenate(parts)
        if self._dims is None:
            self._dims = int(out.shape[1])
        return out

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([text])[0]
        return vector
