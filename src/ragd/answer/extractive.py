"""The default generator: offline and deterministic. The answer is the context's best supporting sentences, each
followed by its `[chunk:ID]`; nothing is written that the documents do not say.

Sentences are scored with the cross-encoder when one is given (the reranker: bounded to `max_pairs` sentences
from the first chunks) and by shared query words otherwise. At most `max_sentences` are kept, in the order they
were scored best, and only those close enough to the best one; none qualifying means there is no answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..embed.hashing import tokens
from ..rerank import probability
from ..types import Candidate

if TYPE_CHECKING:
    from ..rerank import Reranker

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
STOP = frozenset("a an and are as at be by do does for from how i in is it of on or the to was what when where "
                 "which who why will with".split())


@dataclass(frozen=True)
class Extract:
    text: str  # sentences with their markers, or "" when nothing supports an answer
    sentences: tuple[tuple[str, Candidate, float], ...]


def extract(question: str, context: Sequence[Candidate], model: Reranker | None = None, *, max_sentences: int = 3,
            max_pairs: int = 48, min_probability: float = 0.5) -> Extract:
    pool = [(s.strip(), c) for c in context for s in _SENTENCE.split(c.content) if len(s.strip()) > 1]
    if not pool:
        return Extract("", ())
    if model is not None:
        scored_pool = pool[:max_pairs]
        probabilities = [probability(x) for x in model.score(question, [s for s, _ in scored_pool])]
        best = max(probabilities)
        keep = [(s, c, p) for (s, c), p in zip(scored_pool, probabilities)
                if p >= min_probability and p >= best / 2]
    else:
        terms = set(tokens(question)) - STOP
        overlaps = [len(terms & set(tokens(s))) / max(1, len(terms)) for s, _ in pool]
        best = max(overlaps)
        keep = [(s, c, o) for (s, c), o in zip(pool, overlaps) if o > 0 and o >= best / 2]
    ranked = sorted(enumerate(keep), key=lambda item: (-item[1][2], item[0]))[:max_sentences]
    chosen = tuple(item for _, item in ranked)
    text = " ".join(f"{s} [chunk:{c.chunk_id}]" for s, c, _ in chosen)
    return Extract(text, chosen)

