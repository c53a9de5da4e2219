"""Fusion of ranked candidate lists: pure functions, no I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InvalidRequest
from ..types import Candidate

_LEG_FIELDS = ("vector_score", "vector_rank", "lexical_score", "lexical_rank")


def canonical_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Score descending; ties by (doc_id, chunk_index)."""
    return sorted(candidates, key=lambda c: c.sort_key)


def _merge(candidate_sets: Sequence[Sequence[Candidate]]) -> dict[Any, Candidate]:
    """One Candidate per chunk, carrying every leg's score and rank."""
    merged: dict[Any, Candidate] = {}
    for cands in candidate_sets:
        for cand in cands:
            prior = merged.get(cand.chunk_id)
            if prior is None:
                merged[cand.chunk_id] = cand
                continue
            legs = {f: getattr(cand, f) for f in _LEG_FIELDS if getattr(cand, f) is not None}
            merged[cand.chunk_id] = dataclasses.replace(prior, **legs)
    return merged


def _minmax(values: Mapping[Any, float]) -> dict[Any, float]:
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    if hi - lo <= 1e-12:
        return {key: 1.0 for key in values}
    return {key: (v - lo) / (hi - lo) for key, v in values.items()}


def _rrf(candidate_sets: Sequence[Sequence[Candidate]], params: Mapping[str, float]) -> dict[Any, float]:
    """score = sum over lists of 1 / (k + rank), rank from 1 (params: ``k``, default 60)."""
    k = float(params.get("k", 60))
    scores: dict[Any, float] = {}
    for cands in candidate_sets:
        for rank, cand in enumerate(canonical_order(cands), start=1):
            scores[cand.chunk_id] = scores.get(cand.chunk_id, 0.0) + 1.0 / (k + rank)
    return scores


def _weighted(candidate_sets: Sequence[Sequence[Candidate]], params: Mapping[str, float]) -> dict[Any, float]:
    """Min-max normalise each list's scores, then ``keyword_weight * lexical + semantic_weight * vector`` (params,
    default 0.5 / 0.5). A list is taken as the vector leg when its candidates carry vector scores, else as the
    lexical leg."""
    weights = {"vector": float(params.get("semantic_weight", 0.5)), "lexical": float(params.get("keyword_weight", 0.5))}
    scores: dict[Any, float] = {}
    for cands in candidate_sets:
        leg = "vector" if cands and cands[0].vector_score is not None else "lexical"
        raw = {c.chunk_id: c.score for c in cands}
        for key, value in _minmax(raw).items():
            scores[key] = scores.get(key, 0.0) + weights[leg] * value
    return scores


# The fusion methods a plan may name (besides one leg alone, "vector" or "lexical"): each turns the legs' ranked
# lists into a score per chunk, from the plan's parameters (k, keyword_weight, semantic_weight). A new method is a
# function here and a name in this table; plans, the CLI and the search read the names from it.
METHODS: dict[str, Callable[[Sequence[Sequence[Candidate]], Mapping[str, float]], dict[Any, float]]] = {
    "rrf": _rrf,
    "weighted": _weighted,
}


def fuse(
    candidate_sets: Sequence[Sequence[Candidate]],
    method: str = "rrf",
    params: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """Fuse ranked lists into one ranked list, by one of METHODS.

    - ``rrf``: score = sum over lists of 1 / (k + rank), rank from 1 (params: ``k``, default 60).
    - ``weighted``: min-max normalise each list's scores, then
      ``keyword_weight * lexical + semantic_weight * vector`` (params, default 0.5 / 0.5). A list is
      taken as the vector leg when its candidates carry vector scores, else as the lexical leg.
    """
    if method not in METHODS:
        raise InvalidRequest(f"unknown fusion method {method!r}: use {' or '.join(METHODS)}")
    merged = _merge(candidate_sets)
    found = METHODS[method](candidate_sets, dict(params or {}))
    scores = {key: found.get(key, 0.0) for key in merged}
    fused = [
        dataclasses.replace(cand, score=round(scores[key], 12), fused_score=round(scores[key], 12))
        for key, cand in merged.items()
    ]
    return canonical_order(fused)
