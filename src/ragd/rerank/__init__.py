"""Reranking. Until a cross-encoder lands, rerank is the identity: the fused order stands."""

from __future__ import annotations

from collections.abc import Sequence

from ..types import Candidate


def rerank(query: str, candidates: Sequence[Candidate], model: object | None = None) -> list[Candidate]:
    """Pass-through: returns the candidates in their given order, unchanged."""
    return list(candidates)
