"""Compression: query-relevant sentence windows from the top candidates (deterministic).

Which sentences are relevant: with a cross-encoder (the reranker, when one is loaded) the `top_sentences` it
scores highest in each candidate; without one, those sharing a word with the query. Each is kept with `window`
sentences on either side, in text order, at most `max_sentences` per candidate. The model reads at most
`max_pairs` sentences per call, so the cost stays bounded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .embed.hashing import tokens
from .types import Candidate

if TYPE_CHECKING:
    from .rerank import Reranker

# A sentence ends at . ! or ? (closing quotes and brackets with it) before a capital, a digit or an opening quote or
# bracket, or at a line break; never inside "Ae. albopictus" (a lowercase word follows), "Dr. Smith", "e.g. Bonn"
# or "J. Smith" (an abbreviation or an initial precedes).
_BREAK = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9\u00c0-\u024f])|\n+")
_ABBREVIATION = re.compile(
    r"(?:\b(?:Dr|Mr|Mrs|Ms|Prof|Sr|Jr|St|Mt|Fig|Figs|No|Nos|Vol|Vols|pp|Eq|Eqs|Ref|Refs|Sec|Ch|Art|Co|Corp|Inc|Ltd|"
    r"vs|cf|al|approx|resp|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.|\b(?:e\.g|i\.e|U\.S|a\.m|p\.m)\.|"
    r"(?:^|\s)[A-Z]\.)$")


def split_sentences(text: str) -> list[str]:
    """The sentences of a text, in order, stripped (what an answer quotes and compression keeps)."""
    out: list[str] = []
    pending = ""
    for piece in _BREAK.split(text):
        piece = piece.strip()
        if not piece:
            continue
        pending = f"{pending} {piece}" if pending else piece
        if not _ABBREVIATION.search(pending):
            out.append(pending)
            pending = ""
    return out + ([pending] if pending else [])


@dataclass(frozen=True)
class CompressPolicy:
    window: int = 1  # sentences kept on each side of a relevant sentence
    max_sentences: int = 8
    top_sentences: int = 2  # with a cross-encoder: the best-scored sentences of each candidate
    max_pairs: int = 96  # with a cross-encoder: sentences scored in all


def compress(query: str, candidates: Sequence[Candidate], policy: CompressPolicy | None = None,
             model: Reranker | None = None) -> list[dict[str, Any]]:
    """For each candidate, the windows around its query-relevant sentences, in text order."""
    policy = policy or CompressPolicy()
    split = [split_sentences(c.content) for c in candidates]
    scores = _model_scores(query, split, policy, model) if model is not None else None
    terms = set(tokens(query))
    out = []
    for n, (cand, sentences) in enumerate(zip(candidates, split)):
        if scores is not None and scores[n] is not None:
            ranked = sorted(range(len(sentences)), key=lambda i: (-scores[n][i], i))  # type: ignore[index]
            hits = sorted(ranked[: policy.top_sentences])
        else:
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


def _model_scores(query: str, split: list[list[str]], policy: CompressPolicy,
                  model: Reranker) -> list[list[float] | None]:
    """Sentence scores per candidate, for as many whole candidates (in rank order) as fit in max_pairs."""
    flat: list[str] = []
    covered = 0
    for sentences in split:
        if len(flat) + len(sentences) > policy.max_pairs:
            break
        flat += sentences
        covered += 1
    values = model.score(query, flat) if flat else []
    out: list[list[float] | None] = []
    start = 0
    for sentences in split[:covered]:
        out.append(values[start: start + len(sentences)])
        start += len(sentences)
    return out + [None] * (len(split) - covered)
