"""Near-duplicate detection over whole documents: MinHash (datasketch) of word 5-gram shingles, LSH bands
to find candidates, the signature agreement as the similarity estimate. Deterministic: fixed seed and
permutation count, shingles from locale-independent lower-cased words."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field

import numpy as np

from ..types import ExtractedDocument

NUM_PERM = 128
BANDS, ROWS = 32, 4  # candidates from a similarity of about (1/32) ** (1/4) = 0.42 up: thresholds from 0.5 work
SHINGLE = 5
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
    """The MinHash signature (NUM_PERM uint64 values) of the text's word 5-gram shingles."""
    from datasketch import MinHash

    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) <= SHINGLE:
        shingles = {" ".join(words).encode()}
    else:
        shingles = {" ".join(words[i : i + SHINGLE]).encode() for i in range(len(words) - SHINGLE + 1)}
    m = MinHash(num_perm=NUM_PERM, seed=SEED)
    m.update_batch(sorted(shingles))
    return np.asarray(m.hashvalues, dtype=np.uint64)


def band_keys(sig: np.ndarray) -> list[int]:
    """One signed 64-bit key per LSH band (band number and its rows hashed together)."""
    keys = []
    for band in range(BANDS):
        chunk = sig[band * ROWS : (band + 1) * ROWS].astype("<u8").tobytes()
        digest = hashlib.blake2b(band.to_bytes(2, "little") + chunk, digest_size=8).digest()
        keys.append(int.from_bytes(digest, "little", signed=True))
    return keys


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity of the two shingle sets: the share of agreeing signature values."""
    return float(np.count_nonzero(a == b)) / NUM_PERM


def to_bytes(sig: np.ndarray) -> bytes:
    return sig.astype("<u8").tobytes()


def from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)


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
