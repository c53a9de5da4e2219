"""Versioned prompt templates, package files under `prompts/` (v1: seed 001 section 8, verbatim).

A prompt is a system message (rules, context format, output format, the one-shot abstain example) and a user
message (each context chunk in the template's format, then the question). The version travels with every answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ..errors import ConfigError
from ..types import Candidate

PROMPT_VERSION = "v1"


@dataclass(frozen=True)
class Prompt:
    version: str
    system: str
    user: str


@cache
def template(version: str, part: str) -> str:
    """One part (system, chunk, user) of a template version, as shipped."""
    entry = resources.files("ragd.answer").joinpath("prompts", f"{part}-{version}.txt")
    if not entry.is_file():
        raise ConfigError(f"no prompt template {version!r} (part {part}); known: {PROMPT_VERSION}")
    return entry.read_text(encoding="utf-8")


def context_block(chunk: Candidate, version: str = PROMPT_VERSION) -> str:
    """A context chunk as the template lays it out: Title, Version, Heading, ChunkID, Text."""
    return template(version, "chunk").format(
        title=chunk.title or chunk.external_id or "", version_label=chunk.version_label or "",
        heading_path=" > ".join(chunk.heading_path), chunk_id=chunk.chunk_id, text=chunk.content).rstrip("\n")


def render(question: str, chunks: Sequence[Candidate], version: str = PROMPT_VERSION) -> Prompt:
    context = "\n\n".join(context_block(c, version) for c in chunks)
    return Prompt(version=version, system=template(version, "system").rstrip("\n"),
                  user=template(version, "user").format(context=context, question=question).rstrip("\n"))
