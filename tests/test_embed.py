"""Embedders: the conformance every implementation passes, plus each one's own behaviour."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragd.embed import HashingEmbedder, OnnxEmbedder, OpenAIEmbedder
from ragd.embed.base import Embedder
from ragd.errors import ProviderError

from .fakes import JsonService, serving

TEXTS = ["Parental leave in Germany lasts fourteen weeks.", "The cafeteria opens at noon.",
         "Elternzeit can be taken for up to three years.", "", "x " * 600]


def conformance(embedder: Embedder) -> None:
    vectors = embedder.embed_documents(TEXTS)
    assert vectors.shape == (len(TEXTS), embedder.dims) and vectors.dtype == np.float32
    norms = np.linalg.norm(vectors[:3], axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)
    # order preserved: each vector equals the one computed alone
    for text, vec in zip(TEXTS[:3], vectors[:3]):
        assert np.allclose(embedder.embed_documents([text])[0], vec, atol=1e-4)
    assert embedder.embed_documents([]).shape[0] == 0
    assert embedder.embed_query("parental leave").shape == (embedder.dims,)


def test_hashing_conformance_and_golden_values() -> None:
    emb = HashingEmbedder(64)
    conformance(emb)
    # NFC and case folding: composed and decomposed accents, upper and lower case, embed identically
    assert np.array_equal(emb.embed_documents(["Déjà vu, DÉJÀ VU!"])[0],
                          emb.embed_documents(["de\u0301ja\u0300 vu de\u0301ja\u0300 vu"])[0])
    # pinned golden vector: stored vectors must never change between versions or platforms
    golden = HashingEmbedder(16).embed_documents(["alpha beta alpha"])[0]
    assert np.round(golden, 4).tolist() == pytest.approx(GOLDEN_HASH_16, abs=1e-4)


GOLDEN_HASH_16 = [0, 0, 0, 0, 0, 0.1796, 0, 0, -0.1796, 0.9672, 0, 0, 0, 0, 0, 0]


def test_hashing_vectors_are_exactly_the_definitions_sums() -> None:
    """The hashing embedder's features, hashed and summed with numpy, give bit for bit the sums of its definition
    written as a loop (sorted features, 1 + ln(tf), bigrams half, the sign from the hash's low bit): in 8 buckets
    most features collide, so a different order of addition would show."""
    import hashlib
    import math
    import random
    from collections import Counter

    from ragd.embed.hashing import tokens

    def reference(text: str, dims: int) -> np.ndarray:
        words = tokens(text)
        features = Counter(words)
        features.update(f"{a} {b}" for a, b in zip(words, words[1:]))
        out = np.zeros(dims)
        for feature in sorted(features):
            value = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
            weight = (1.0 + math.log(features[feature])) * (0.5 if " " in feature else 1.0)
            out[(value >> 1) % dims] += weight if value & 1 else -weight
        return out

    rng = random.Random(3)
    vocabulary = ["alpha", "beta", "Gamma", "déjà", "vu", "ß", "中文", "x1", "2024", "naïve", "STRASSE", "o'neil"]
    texts = ["", "   ", "alpha", "alpha alpha", *TEXTS]
    texts += [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 300))) for _ in range(200)]
    for dims in (8, 384):
        embedder = HashingEmbedder(dims)
        for text in texts:
            assert embedder._vector(text).tobytes() == reference(text, dims).tobytes(), text


@pytest.mark.model
def test_onnx_bge_small_conformance_and_relevance() -> None:
    emb = OnnxEmbedder()
    conformance(emb)
    # batch size 1 (the default): each vector is independent of its neighbours, bit for bit
    alone = np.stack([emb.embed_documents([t])[0] for t in TEXTS])
    assert np.array_equal(emb.embed_documents(TEXTS), alone)
    assert np.array_equal(emb.embed_documents(TEXTS), alone)  # and of the run
    # micro-batches quantise activations with one scale per batch: close, not equal (0.9898 seen on one CPU)
    batched = OnnxEmbedder(batch_size=8).embed_documents(TEXTS)
    assert np.all(np.sum(batched * alone, axis=1) > 0.97)
    q = emb.embed_query("how long is parental leave in germany")
    docs = emb.embed_documents(TEXTS[:3])
    scores = docs @ q
    assert scores[0] > scores[1] and scores[2] > scores[1]
    # its threads sleep between runs: spinning ones took the cores of the extraction processes during an ingest
    options = emb._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


class _FakeOpenAI(JsonService):
    calls: list[dict[str, Any]] = []
    fail_first = 0
    status_after = 200

    def answer(self, body: Any) -> None:
        cls = type(self)
        cls.calls.append({"path": self.path, "n": len(body["input"]), "auth": self.headers.get("Authorization")})
        if cls.fail_first > 0:
            cls.fail_first -= 1
            self.send_json(503, b"overloaded")
            return
        if cls.status_after != 200:
            self.send_json(cls.status_after, {"error": {"message": "invalid api key"}})
            return
        data = [{"index": i, "embedding": [float(len(t)), 1.0, float(i)]} for i, t in enumerate(body["input"])]
        self.send_json(200, {"data": list(reversed(data)), "model": body["model"]})


@pytest.fixture
def openai_server() -> Iterator[str]:
    _FakeOpenAI.calls, _FakeOpenAI.fail_first, _FakeOpenAI.status_after = [], 0, 200
    with serving(_FakeOpenAI) as url:
        yield url + "/v1"


def test_openai_batches_orders_and_retries(openai_server: str) -> None:
    emb = OpenAIEmbedder("text-embedding-3-small", base_url=openai_server, api_key="sk-test", backoff_s=0.01)
    texts = [f"text number {i}" for i in range(300)]
    _FakeOpenAI.fail_first = 2
    vectors = emb.embed_documents(texts)
    assert vectors.shape == (300, 3) and emb.dims == 3
    assert [c["n"] for c in _FakeOpenAI.calls] == [256, 256, 256, 44]  # two 503s retried, then 256 + 44
    assert all(c["path"] == "/v1/embeddings" and c["auth"] == "Bearer sk-test" for c in _FakeOpenAI.calls)
    expected = np.array([[len(t), 1.0, i % 256] for i, t in enumerate(texts)], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)  # order restored from the response's index field
    assert emb.name == "openai:text-embedding-3-small"


def test_openai_errors_are_specific(openai_server: str) -> None:
    _FakeOpenAI.status_after = 401
    emb = OpenAIEmbedder("m", base_url=openai_server, backoff_s=0.01)
    with pytest.raises(ProviderError, match="refused the request: HTTP 401"):
        emb.embed_documents(["a"])
    _FakeOpenAI.status_after, _FakeOpenAI.fail_first = 200, 10
    emb = OpenAIEmbedder("m", base_url=openai_server, max_retries=2, backoff_s=0.01)
    with pytest.raises(ProviderError, match="failed after 3 attempts: HTTP 503"):
        emb.embed_documents(["a"])
    dead = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_s=0.01, timeout_s=1)
    with pytest.raises(ProviderError, match="ConnectError"):
        dead.embed_documents(["a"])


def test_token_counts_remembered_by_word_are_exactly_the_tokenizers() -> None:
    """The counter sums remembered per-word counts: on prose, hostile whitespace, controls, combining marks, CJK,
    special-token text and very long words it must give exactly what the tokenizer gives, cold, warm and after
    its memo starts afresh."""
    import random

    from ragd.embed.base import TokenCounter, bge_model_dir

    rng = random.Random(7)
    alphabet = (list("abcXYZ019.,;:-'\"()[]#$%/") + [" "] * 6 + ["\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1f",
                "\x85", "\u2028", "\u2029", "\u00a0", "\u2003", "\u3000", "\u200b", "\u0301", "\u00e9", "\u0130",
                "\u4e2d", "\u6587", "\x00", "\ufffd", "\U0001f600", "\u05d0", "[MASK]", "[CLS]", "##"])
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120))) for _ in range(400)]
    texts += [*TEXTS, "naïve café résumé — Straße", "a" * 150 + " b", " leading and trailing "]
    samples = Path(__file__).resolve().parents[1] / "samples"
    texts += [p.read_text(encoding="utf-8") for p in sorted(samples.iterdir()) if p.suffix in (".md", ".txt")]
    path = bge_model_dir() / "tokenizer.json"
    reference = TokenCounter(path)._tok
    expected = [len(reference.encode(t, add_special_tokens=False).ids) for t in texts]
    for memo_words in (200_000, 50):  # 50: the memo starts afresh over and over
        counter = TokenCounter(path, memo_words=memo_words)
        assert counter._by_word  # the default model's tokenizer is counted word by word, the path under test
        assert counter.count_many(texts) == expected  # cold: every word new
        assert [counter.count(t) for t in texts] == expected  # warm, one by one
        assert counter.count_many(texts[::-1]) == expected[::-1]
