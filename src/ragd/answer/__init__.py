"""Answering: the context budget, versioned prompts, generators (extractive, OpenAI-compatible, Anthropic, GGUF),
citation checks and abstention."""

from __future__ import annotations

from .budget import Budget, Context, select
from .generators import Completion, Generator, make_generator
from .prompt import PROMPT_VERSION, Prompt, context_block, render

__all__ = ["PROMPT_VERSION", "Budget", "Completion", "Context", "Generator", "Prompt", "context_block",
           "make_generator", "render", "select"]
