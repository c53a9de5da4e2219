"""Near-duplicate detection over whole documents: MinHash of word 5-gram shingles, LSH bands to find candidates,
the signature agreement as the similarity estimate. Deterministic: fixed seed and permutation count, shingles
from locale-independent lower-cased words.

The signature is datasketch 2.x's MinHash with its "affine32" scheme (SHA-1's first 4 bytes, MurmurHash3's
finaliser, affine permutations mod 2**32), computed here with numpy: value for value the same (the tests compare
them), without datasketch's import of scipy (half a second per process) or its per-shingle Python calls, and in
bounded blocks for huge documents. Signatures are stored and compared across runs, so these values are fixed."""

from __future__ import annotations

import functools
import hashlib
import itertools
import operator
import re
import uuid
from dataclasses import dataclass, field

import numpy as np

from ..types import ExtractedDocument

NUM_PERM = 128
BANDS, ROWS = 32, 4  # candidates from a similarity of about (1/32) ** (1/4) = 0.42 up: thresholds from 0.5 work
SHINGLE = 5
RECORDED = 0.5  # a pair this similar is recorded in its run (with the decision), below it is not
SEED = 1
_WORD = re.compile(r"\w+")


def document_text(doc: ExtractedDocument) -> str:
    parts: list[str] = []
    for b in doc.blocks:
        if b.type == "table":
            parts.extend(" ".join(r) for r in (b.header, *b.rows))
        else:
            parts.append(b.text)
    return "\n".join(parts)


def signature(text: str) -> np.ndarray:
    """The MinHash signature (NUM_PERM values, as uint64) of the text's word 5-gram shingles: each shingle the
    five lower-cased words joined by single spaces, in UTF-8. The minimum over a set is the same in any order and
    with repeats, so shingles are hashed as the set yields them, a bounded block at a time."""
    if text.isascii():  # words found in the lower-cased bytes: the same words, every step in C
        words = _WORD_ASCII.findall(text.lower().encode("ascii"))
    else:  # lower-casing may change a word's length or what counts as a word character: word by word
        words = [w.lower().encode() for w in _WORD.findall(text)]
    if len(words) <= SHINGLE:
        shingles = {b" ".join(words)}
    else:
        shingles = set(map(b" ".join, zip(*(words[i:] for i in range(SHINGLE)))))
    a, b = _permutations()
    out = np.full(NUM_PERM, 0xFFFFFFFF, dtype=np.uint32)
    each = iter(shingles)
    while block := list(itertools.islice(each, _BLOCK)):  # a huge document stays small
        digests = b"".join(map(_DIGEST, map(hashlib.sha1, block)))  # 20 bytes each: the first 4 are the hash
        hashed = _fmix32(np.frombuffer(digests, dtype="<u4").reshape(-1, 5)[:, 0].astype(np.uint32))
        out = np.minimum(out, (hashed[:, None] * a + b).min(axis=0))  # uint32 arithmetic wraps mod 2**32
    return out.astype(np.uint64)


_BLOCK = 4096
_DIGEST = operator.methodcaller("digest")
_WORD_ASCII = re.compile(rb"\w+")  # on ASCII bytes \w is [A-Za-z0-9_], as str's \w on ASCII characters


@functools.cache
def _permutations() -> tuple[np.ndarray, np.ndarray]:
    """The affine permutations h -> a * h + b mod 2**32 (odd a: a bijection), drawn from the seeded legacy
    RandomState, whose stream numpy keeps fixed across releases."""
    gen = np.random.RandomState(SEED)
    a = gen.randint(0, 1 << 31, NUM_PERM, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, NUM_PERM, dtype=np.uint32)
    return a, b


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer (an avalanching bijection), applied to each SHA-1-derived value first."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    out: np.ndarray = h ^ (h >> np.uint32(16))
    return out


def band_keys(sig: np.ndarray) -> list[int]:
    """One signed 64-bit key per LSH band (band number and its rows hashed together)."""
    rows = sig.astype("<u8").tobytes()
    width = ROWS * 8
    digests = b"".join(hashlib.blake2b(_BAND_PREFIX[band] + rows[band * width : (band + 1) * width],
                                       digest_size=8).digest() for band in range(BANDS))
    keys: list[int] = np.frombuffer(digests, dtype="<i8").tolist()
    return keys


_BAND_PREFIX = [band.to_bytes(2, "little") for band in range(BANDS)]


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity of the two shingle sets: the share of agreeing signature values."""
    return float(np.count_nonzero(a == b)) / NUM_PERM


def to_bytes(sig: np.ndarray) -> bytes:
    """As stored: 4 bytes a value, little-endian (every value is below 2**32). Stores written before kept 8 bytes a
    value (1 KB a document, two thirds of a signature row); `from_bytes` reads both."""
    return sig.astype("<u4").tobytes()


def from_bytes(data: bytes) -> np.ndarray | None:
    """A stored signature (4 or 8 bytes a value), or None for bytes of another length (a row written by hand)."""
    width = {NUM_PERM * 4: "<u4", NUM_PERM * 8: "<u8"}.get(len(data))
    return None if width is None else np.frombuffer(data, dtype=width).astype(np.uint64)


@dataclass(frozen=True)
class Known:
    doc_id: uuid.UUID
    external_id: str
    signature: np.ndarray


@dataclass
class RunIndex:
    """Documents accepted earlier in this run, by band key, so near-duplicates within one run are caught."""

    by_band: dict[int, list[Known]] = field(default_factory=dict)

    def add(self, known: Known, keys: list[int]) -> None:
        for key in keys:
            self.by_band.setdefault(key, []).append(known)

    def candidates(self, keys: list[int]) -> list[Known]:
        seen: dict[uuid.UUID, Known] = {}
        for key in keys:
            for k in self.by_band.get(key, []):
                seen.setdefault(k.doc_id, k)
        return list(seen.values())


def best_match(sig: np.ndarray, doc_id: uuid.UUID, candidates: list[Known]) -> tuple[Known, float] | None:
    """The most similar other document (ties: the smaller external id), or None."""
    scored = [(similarity(sig, k.signature), k) for k in candidates if k.doc_id != doc_id]
    if not scored:
        return None
    score, known = min(scored, key=lambda x: (-x[0], x[1].external_id))
    return known, score
