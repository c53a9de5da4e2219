"""Compression: query-relevant sentence windows from the top candidates (pure, deterministic)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .embed.hashing import tokens
from .types import Candidate

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class CompressPolicy:
    window: int = 1  # sentences kept on each side of a matching sentence
    max_sentences: int = 8


def compress(query: str, candidates: Sequence[Candidate], policy: CompressPolicy | None = None) -> list[dict[str, Any]]:
    """For each candidate, the sentences around those sharing words with the query, in text order."""
    policy = policy or CompressPolicy()
    terms = set(tokens(query))
    out = []
    for cand in candidates:
        sentences = [s.strip() for s in _SPLIT.split(cand.content) if s.strip()]
        hits = [i for i, s in enumerate(sentences) if terms & set(tokens(s))]
        keep: set[int] = set()
        for i in hits:
            keep.update(range(max(0, i - policy.window), min(len(sentences), i + policy.window + 1)))
        chosen = sorted(keep)[: policy.max_sentences] or list(range(min(len(sentences), policy.max_sentences)))
        out.append({
            "chunk_id": str(cand.chunk_id),
            "doc_id": str(cand.doc_id),
            "chunk_index": cand.chunk_index,
            "text": " ".join(sentences[i] for i in chosen),
            "sentences": chosen,
            "score": cand.score,
        })
    return out
