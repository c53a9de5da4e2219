"""Answering: context budget, versioned prompts (generators, citations and abstention come next)."""

from __future__ import annotations

from .budget import Budget, Context, select
from .prompt import PROMPT_VERSION, Prompt, context_block, render

__all__ = ["PROMPT_VERSION", "Budget", "Context", "Prompt", "context_block", "render", "select"]
