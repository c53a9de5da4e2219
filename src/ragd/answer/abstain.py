"""When to abstain (seed 001 section 7): bad retrieval is worse than no retrieval.

- When the reranker ran: the best candidate's cross-encoder probability (the sigmoid of its logit) must reach
  the rerank threshold (0.15).
- When it did not (off, or failed open): the best reciprocal-rank-fusion score among the first candidates,
  computed from their ranks in the two legs with k = 60, must reach the RRF threshold (0.030: about a chunk ranked
  first by one leg and within the first ten by the other). This holds whatever fusion ordered the list, so it
  applies to the weighted default too.

Both are configurable; `ragd eval` is to calibrate them (not yet: see the README).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..rerank import probability
from ..types import Candidate

ABSTAIN_ANSWER = "I don't have enough information in the current documents to answer that."


@dataclass(frozen=True)
class Evidence:
    abstain: bool
    signal: str  # "rerank" or "rrf"
    score: float
    threshold: float


def judge(ranked: Sequence[Candidate], *, reranked: bool, rerank_threshold: float = 0.15,
          rrf_threshold: float = 0.030, rrf_k: int = 60, look: int = 5) -> Evidence:
    if not ranked:
        return Evidence(True, "rerank" if reranked else "rrf", 0.0, rerank_threshold if reranked else rrf_threshold)
    if reranked and ranked[0].rerank_score is not None:
        best = max(probability(c.rerank_score) for c in ranked[:look] if c.rerank_score is not None)
        return Evidence(best < rerank_threshold, "rerank", round(best, 6), rerank_threshold)
    best = max(rrf(c, rrf_k) for c in ranked[:look])
    return Evidence(best < rrf_threshold, "rrf", round(best, 6), rrf_threshold)


def rrf(c: Candidate, k: int = 60) -> float:
    """A candidate's reciprocal-rank score from its ranks in the two legs."""
    return sum(1 / (k + rank) for rank in (c.vector_rank, c.lexical_rank) if rank is not None)



# A generator's own "I don't know" (the prompt's rule 1 and its one-shot example), said at the start of its answer.
_DECLINES = re.compile(
    r"^\W*(?:i\s+(?:do\s+not|don'?t|cannot|can'?t|am\s+(?:not\s+able|unable)\s+to)\b.{0,60}?"
    r"\b(?:information|know|answer|find|determine|say)\b"
    r"|(?:the\s+)?(?:provided\s+|given\s+)?(?:context|documents?|sources?)\s+(?:does|do)\s+not\s+"
    r"(?:contain|provide|mention|say|include|cover|specify)"
    r"|there\s+is\s+no\s+(?:information|mention)|not\s+enough\s+information|\[?no\s+citations\s+available)",
    re.IGNORECASE | re.DOTALL)


def declines(answer: str) -> bool:
    """Whether a generated answer opens by saying the context does not answer the question."""
    return bool(_DECLINES.match(answer[:300]))
