"""ragd: deterministic retrieval-augmented generation on PostgreSQL + pgvector."""

from .answer.compose import ask
from .compress import compress
from .engine import Collection, Ragd, chunk, connect, index
from .errors import RagdError
from .rerank import rerank
from .retrieve.fuse import fuse
from .retrieve.search import retrieve
from .types import Answer, Block, Candidate, Chunk, ChunkPolicy, Filters, IngestReport, Plan

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "Block",
    "Candidate",
    "Chunk",
    "ChunkPolicy",
    "Collection",
    "Filters",
    "IngestReport",
    "Plan",
    "Ragd",
    "RagdError",
    "ask",
    "chunk",
    "compress",
    "connect",
    "fuse",
    "index",
    "rerank",
    "retrieve",
]
