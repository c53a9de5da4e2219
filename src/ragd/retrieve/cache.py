"""Search result cache: per (tenant, collection, normalised query, plan), for a TTL, and only while the
collection's generation (bumped by every ingest, version change and delete, from any process) is unchanged."""

from __future__ import annotations

import threading
import time
import unicodedata
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from ..types import Candidate, Plan

CacheKey = tuple[str, uuid.UUID, str, str]


def normalize_query(query: str) -> str:
    return " ".join(unicodedata.normalize("NFC", query).split())


def cache_key(tenant: str, collection_id: uuid.UUID, query: str, plan: Plan) -> CacheKey:
    return (tenant, collection_id, normalize_query(query), repr((sorted(plan.as_dict().items()), plan.filters)))


@dataclass
class CacheInfo:
    hits: int = 0
    misses: int = 0
    size: int = 0


class ResultCache:
    def __init__(self, ttl_s: float, max_entries: int):
        self._ttl = ttl_s
        self._max = max_entries
        self._data: OrderedDict[CacheKey, tuple[float, int, list[Candidate]]] = OrderedDict()
        self._lock = threading.Lock()
        self.info = CacheInfo()

    @property
    def enabled(self) -> bool:
        return self._ttl > 0 and self._max > 0

    def get(self, key: CacheKey, generation: int) -> list[Candidate] | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is None or entry[1] != generation or entry[0] < time.monotonic():
                if entry is not None:
                    del self._data[key]
                self.info.misses += 1
                return None
            self._data.move_to_end(key)
            self.info.hits += 1
            return list(entry[2])

    def put(self, key: CacheKey, generation: int, results: list[Candidate]) -> None:
        with self._lock:
            self._data[key] = (time.monotonic() + self._ttl, generation, list(results))
            self._data.move_to_end(key)
            while len(self._data) > self._max:
                self._data.popitem(last=False)
            self.info.size = len(self._data)
