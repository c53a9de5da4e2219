"""Embedders behind one interface, chosen by a short spec string (RAGD_EMBEDDER)."""

from __future__ import annotations

from ..config import Settings, load_settings
from ..errors import ConfigError, DimensionMismatch
from .base import Embedder, TokenCounter, default_token_counter
from .hashing import HashingEmbedder
from .onnx import OnnxEmbedder
from .openai import OpenAIEmbedder

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "TokenCounter",
    "default_token_counter",
    "make_embedder",
    "pinned_embedder",
    "spec_for",
]


MAX_DIMS = 2000  # pgvector's HNSW index holds vectors of at most 2,000 dimensions


def _dims(spec: str, dims: int) -> int:
    if not 1 <= dims <= MAX_DIMS:
        raise ConfigError(f"embedder {spec!r}: {dims} dimensions; use 1 to {MAX_DIMS} (the most pgvector's HNSW "
                          "index holds)")
    return dims


def make_embedder(spec: str, settings: Settings | None = None) -> Embedder:
    """`bge-small-en` (default, local ONNX), `hash` or `hash:DIMS`, `openai:MODEL[:DIMS]`."""
    settings = settings or load_settings()
    kind, _, rest = spec.strip().partition(":")
    if kind in ("bge-small-en", "bge", "default", "onnx"):
        return OnnxEmbedder(batch_size=settings.onnx_batch_size, threads=settings.onnx_threads)
    if kind in ("hash", "hash-v1"):
        try:
            return HashingEmbedder(_dims(spec, int(rest)) if rest else 384)
        except ValueError as exc:
            raise ConfigError(f"bad hashing embedder spec {spec!r}: use hash or hash:DIMS") from exc
    if kind == "openai" and rest:
        model, _, dims = rest.partition(":")
        return OpenAIEmbedder(
            model,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            dims=_dims(spec, int(dims)) if dims.isdigit() else None,
            timeout_s=settings.embed_timeout_s,
            max_retries=settings.embed_max_retries,
        )
    raise ConfigError(
        f"unknown embedder {spec!r}: use bge-small-en (default), hash[:DIMS] or openai:MODEL[:DIMS]"
    )


def spec_for(model: str, dims: int) -> str:
    """The RAGD_EMBEDDER spec that makes a collection's pinned model (its name as stored, and its dims)."""
    if model.startswith("hash-v1-"):
        return f"hash:{dims}"
    if model.startswith("openai:"):
        return f"{model}:{dims}"
    return model


def pinned_embedder(collection: str, model: str, dims: int, explicit: Embedder | None,
                    settings: Settings) -> Embedder:
    """The embedder of a collection pinned to `model`: the one given explicitly when it is that model (else
    DimensionMismatch: changing a collection's model is an explicit re-embed job), else that model made."""
    if explicit is not None and explicit.name != model:
        raise DimensionMismatch(
            f"collection {collection!r} is pinned to embedding model {model} ({dims} dims) but the embedder in use is "
            f"{explicit.name}; use that model (RAGD_EMBEDDER={spec_for(model, dims)}) or another "
            "collection: changing a collection's model is an explicit re-embed job"
        )
    return explicit or make_embedder(spec_for(model, dims), settings)
