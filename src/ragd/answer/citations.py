"""Citations `[chunk:<id>]`: parsed from an answer and checked against the context it was given.

Every cited id must be a chunk of the context. An invalid one (an id that was not in the context, a made-up or
truncated id, one planted by a document's text) is removed from the answer and reported; the valid ones become
the answer's citations in order of first appearance (seed 001: doc_id, doc_version_id, chunk_id, title,
version_label).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..types import Candidate

MARKER = re.compile(r"\s?\[chunk:\s*([^\]\s]*)\s*\]", re.IGNORECASE)


@dataclass(frozen=True)
class Checked:
    text: str  # the answer with invalid markers removed
    cited: tuple[Candidate, ...]  # valid, in order of first appearance
    invalid: tuple[str, ...]  # ids cited that are not context chunks, in order, once each


def check(answer: str, context: Sequence[Candidate]) -> Checked:
    by_id = {str(c.chunk_id).lower(): c for c in context}
    cited: list[Candidate] = []
    invalid: list[str] = []

    def keep_or_drop(match: re.Match[str]) -> str:
        raw = match.group(1)
        chunk = by_id.get(raw.lower())
        if chunk is None:
            if raw not in invalid:
                invalid.append(raw)
            return ""
        if chunk not in cited:
            cited.append(chunk)
        return f" [chunk:{chunk.chunk_id}]"

    text = MARKER.sub(keep_or_drop, answer)
    return Checked(text=re.sub(r"[ \t]+\n", "\n", text).strip(), cited=tuple(cited), invalid=tuple(invalid))


def citation(chunk: Candidate) -> dict[str, Any]:
    """A citation in seed 001's shape."""
    return {"doc_id": str(chunk.doc_id), "doc_version_id": str(chunk.doc_version_id), "chunk_id": str(chunk.chunk_id),
            "title": chunk.title, "version_label": chunk.version_label}
