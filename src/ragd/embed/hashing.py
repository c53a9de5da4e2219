"""Deterministic feature-hashing embedder: identical vectors on every platform, no model needed.

Tokens are NFC-normalised, case-folded runs of letters and digits; unigrams and adjacent bigrams are
hashed (blake2b) to a signed bucket, weighted 1 + ln(tf), and the vector is L2-normalised.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

import numpy as np

from .base import Vectors, l2_normalize

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFC", text).casefold())


class HashingEmbedder:
    def __init__(self, dims: int = 384):
        if dims < 8:
            raise ValueError("hashing embedder needs at least 8 dimensions")
        self._dims = dims

    @property
    def name(self) -> str:
        return f"hash-v1-{self._dims}"

    @property
    def dims(self) -> int:
        return self._dims

    def _vector(self, text: str) -> np.ndarray:
        words = tokens(text)
        features = Counter(words)
        features.update(f"{a} {b}" for a, b in zip(words, words[1:]))
        out = np.zeros(self._dims, dtype=np.float64)
        ordered = sorted(features)
        if not ordered:
            return out
        blake2b = hashlib.blake2b
        values = np.frombuffer(b"".join([blake2b(f.encode("utf-8"), digest_size=8).digest() for f in ordered]),
                               dtype="<u8")
        weights = np.array([(1.0 + math.log(features[f])) * (0.5 if " " in f else 1.0) for f in ordered])
        signed = np.where(values & np.uint64(1), weights, -weights)
        # added one feature at a time, in sorted order (ufunc.at is unbuffered): the same sums as a Python loop
        np.add.at(out, (values >> np.uint64(1)) % np.uint64(self._dims), signed)
        return out

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        return l2_normalize(np.stack([self._vector(t) for t in texts]))

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([text])[0]
        return vector
