"""The context budget (seed 001): 6000 tokens in all, 1000 of them reserved for the system prompt and the
question, at most 12 chunks, counted with the real tokenizer on each chunk as the prompt lays it out.

Chunks are taken in rank order; one that does not fit in what is left is passed over and the next is tried, so a
long chunk never crowds out shorter, lower-ranked ones that fit. Deterministic: the same ranked list gives the
same context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..embed.base import TokenCounter
from ..types import Candidate
from .prompt import PROMPT_VERSION, context_block


@dataclass(frozen=True)
class Budget:
    total_tokens: int = 6000
    reserved_tokens: int = 1000  # the system prompt and the question
    max_chunks: int = 12

    @property
    def context_tokens(self) -> int:
        return self.total_tokens - self.reserved_tokens


@dataclass(frozen=True)
class Context:
    chunks: tuple[Candidate, ...]
    tokens: int  # of the context blocks, as counted
    passed_over: tuple[Candidate, ...] = ()  # ranked, but too long for what was left


def select(candidates: Sequence[Candidate], counter: TokenCounter, budget: Budget = Budget(),
           version: str = PROMPT_VERSION) -> Context:
    chosen: list[Candidate] = []
    passed: list[Candidate] = []
    used = 0
    for candidate in candidates:
        if len(chosen) >= budget.max_chunks:
            break
        cost = counter.count(context_block(candidate, version)) + 2  # the blank line between blocks
        if used + cost > budget.context_tokens:
            passed.append(candidate)
            continue
        chosen.append(candidate)
        used += cost
    return Context(chunks=tuple(chosen), tokens=used, passed_over=tuple(passed))
