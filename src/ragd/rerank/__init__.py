"""Reranking: a cross-encoder (local, or behind an API) rescores the head of the fused list.

The cross-encoder's scores are blended with the fused scores, not substituted for them: on SciFact the local
ms-marco-MiniLM-L-12 replacing the fused order scored nDCG@10 below the list it reordered, while a blend of
min-max normalised scores over the top of the list scored above it (README, "Rerank"). The blend is a pure
function of the scores; ties go by (doc_id, chunk_index).

`rerank()` is the canonical block and raises `RerankerError`; `rerank_fail_open()` is what searches use: on an
error or a timeout the fused order stands and the outcome says `skipped` with the error (seed 001).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..config import Settings
from ..errors import ConfigError, RagdError, RerankerError
from ..types import Candidate
from .api import COHERE_URL, TOGETHER_URL, ApiReranker
from .local import CrossEncoder

_log = logging.getLogger(__name__)

MAX_DOCS = 50  # seed 001: at most 50 documents per rerank


class Reranker(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True)
class RerankOutcome:
    used: bool
    skipped: bool = False
    error: str | None = None
    latency_ms: float = 0.0
    pairs: int = 0
    model: str | None = None


def make_reranker(spec: str, settings: Settings) -> Reranker | None:
    """`none`, `local`, `cohere:MODEL`, `together:MODEL` or `http:URL` (RAGD_RERANKER)."""
    kind, _, rest = spec.strip().partition(":")
    timeout = settings.rerank_timeout_s
    if kind in ("none", "off", ""):
        return None
    if kind == "local":
        return CrossEncoder(max_tokens=settings.rerank_max_tokens, threads=settings.onnx_threads, timeout_s=timeout,
                            windows=settings.rerank_windows)
    if kind == "cohere" and rest:
        return ApiReranker("cohere", rest, settings.rerank_url or COHERE_URL, api_key=settings.rerank_api_key,
                           timeout_s=timeout)
    if kind == "together" and rest:
        return ApiReranker("together", rest, settings.rerank_url or TOGETHER_URL,
                           api_key=settings.rerank_api_key, timeout_s=timeout)
    if kind == "http" and rest:
        return ApiReranker("http", None, rest, api_key=settings.rerank_api_key, timeout_s=timeout)
    raise ConfigError(f"unknown reranker {spec!r}: use none, local, cohere:MODEL, together:MODEL or http:URL")


def blend(head: Sequence[Candidate], scores: Sequence[float], weight: float) -> list[Candidate]:
    """The head reordered by weight x min-max(cross-encoder) + (1 - weight) x min-max(fused score)."""
    if len(scores) != len(head):
        raise RerankerError(f"the reranker scored {len(scores)} of {len(head)} passages")
    ce = _minmax(list(scores))
    fused = _minmax([c.fused_score if c.fused_score is not None else c.score for c in head])
    out = [dataclasses.replace(c, rerank_score=float(s), score=round(weight * a + (1 - weight) * b, 9))
           for c, s, a, b in zip(head, scores, ce, fused)]
    return sorted(out, key=lambda c: c.sort_key)


def probability(logit: float) -> float:
    """A cross-encoder logit as a probability of relevance (the sigmoid), for thresholds."""
    return 1 / (1 + math.exp(-max(-50.0, min(50.0, logit))))


def _minmax(values: list[float]) -> list[float]:
    low, high = min(values), max(values)
    return [1.0 if high == low else (v - low) / (high - low) for v in values]


_default: CrossEncoder | None = None
_default_lock = threading.Lock()


def rerank(query: str, candidates: Sequence[Candidate], model: Reranker | None = None, *, top: int = 20,
           weight: float = 0.2) -> list[Candidate]:
    """The first `top` candidates (at most 50) rescored by the reranker (the local cross-encoder by default) and
    blended with their fused scores; the rest follow in their order."""
    global _default
    if model is None:
        with _default_lock:
            _default = _default or CrossEncoder()
        model = _default
    n = max(0, min(top, MAX_DOCS, len(candidates)))
    head, tail = list(candidates[:n]), list(candidates[n:])
    if not head:
        return tail
    scores = model.score(query, [passage(c) for c in head])
    return blend(head, scores, weight) + tail


def rerank_fail_open(query: str, candidates: Sequence[Candidate], model: Reranker, *, top: int, weight: float,
                     timeout_s: float) -> tuple[list[Candidate], RerankOutcome]:
    started = time.perf_counter()
    pairs = max(0, min(top, MAX_DOCS, len(candidates)))
    try:
        if isinstance(model, CrossEncoder):  # its one-time load is not this query's latency: counted, it made the
            model.load()  # first rerank after a start overrun the limit on a loaded machine and answer differently
            started = time.perf_counter()
        ranked = rerank(query, candidates, model, top=top, weight=weight)
        elapsed = (time.perf_counter() - started) * 1000
        if elapsed > timeout_s * 1000:
            raise RerankerError(f"{model.name} took {elapsed:.0f} ms, over the {timeout_s * 1000:.0f} ms limit")
    except Exception as exc:  # any failure, not only ragd's own: the fused order is the answer's, said in debug
        error = str(exc) if isinstance(exc, RagdError) else f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, RagdError):
            _log.warning("reranker %s failed (%s); the fused order stands", model.name, error)
        return list(candidates), RerankOutcome(used=False, skipped=True, error=error, pairs=pairs,
                                               latency_ms=(time.perf_counter() - started) * 1000, model=model.name)
    return ranked, RerankOutcome(used=True, latency_ms=elapsed, pairs=pairs, model=model.name)


def passage(c: Candidate) -> str:
    """What the reranker reads: the title and heading path, then the text."""
    lead = " > ".join(x for x in (c.title, *c.heading_path) if x)
    return f"{lead}\n{c.content}" if lead and lead not in c.content[: len(lead) + 2] else c.content


__all__ = ["MAX_DOCS", "ApiReranker", "CrossEncoder", "RerankOutcome", "Reranker", "blend", "make_reranker",
           "passage", "probability", "rerank", "rerank_fail_open"]
