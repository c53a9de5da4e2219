"""Reranking: the local cross-encoder, API rerankers against real local servers speaking their protocols, the
score blend, and fail-open on errors and timeouts."""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import ragd
from ragd.compress import CompressPolicy
from ragd.config import Settings
from ragd.errors import RerankerError
from ragd.eval.runner import plan_overrides
from ragd.rerank import CrossEncoder, blend, make_reranker, probability, rerank, rerank_fail_open
from ragd.rerank.local import SCORED
from ragd.types import Candidate

from .fakes import JsonService, serving

DOCS = [
    {"id": "leave", "text": "Every parent is entitled to sixteen weeks of fully paid parental leave."},
    {"id": "menu", "text": "The cafeteria menu lists leave-free weeks: weeks weeks weeks of lunch specials."},
    {"id": "hotel", "text": "Hotels are reimbursed up to 150 euros a night."},
]


class _FakeReranker(JsonService):
    """Cohere (/v2/rerank), Together (/v1/rerank) and TEI (/rerank): scores by shared words, best first."""

    requests: list[dict[str, Any]] = []
    status = 200
    delay_s = 0.0
    raw: bytes | None = None  # a body sent as it is

    def answer(self, body: Any) -> None:
        cls = type(self)
        cls.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        time.sleep(cls.delay_s)
        if cls.raw is not None:
            self.send_json(200, cls.raw)
            return
        if cls.status != 200:
            self.send_json(cls.status, {"message": "overloaded"})
            return
        texts = body.get("documents") if self.path != "/rerank" else body["texts"]
        query = set(body["query"].lower().split())
        scored = sorted(((len(query & set(t.lower().split())) / 10, i) for i, t in enumerate(texts)), reverse=True)
        if self.path == "/rerank":
            payload: Any = [{"index": i, "score": s} for s, i in scored]
        else:
            payload = {"id": "x", "results": [{"index": i, "relevance_score": s} for s, i in scored]}
        self.send_json(200, payload)


@pytest.fixture
def rerank_server() -> Iterator[str]:
    _FakeReranker.requests, _FakeReranker.status, _FakeReranker.delay_s, _FakeReranker.raw = [], 200, 0.0, None
    with serving(_FakeReranker) as url:
        yield url


def _client(settings: Settings, **overrides: Any) -> ragd.Ragd:
    return ragd.connect(settings=settings.model_copy(update={"cache_ttl_s": 0, **overrides}))


@pytest.mark.parametrize(("spec", "path", "fields"), [
    ("cohere:rerank-v3.5", "/v2/rerank", {"model", "query", "documents", "top_n"}),
    ("together:mixedbread-ai/mxbai-rerank-large-v2", "/v1/rerank",
     {"model", "query", "documents", "top_n", "return_documents"}),
    ("http:{url}/rerank", "/rerank", {"query", "texts", "documents", "top_n"}),
])
def test_api_rerankers_speak_their_protocol(settings: Settings, name: str, rerank_server: str, spec: str,
                                            path: str, fields: set[str]) -> None:
    url = None if spec.startswith("http:") else rerank_server + path
    client = _client(settings, reranker=spec.format(url=rerank_server), rerank_url=url, rerank_api_key="key-1",
                     rerank_weight=1.0)
    try:
        col = client.collection(name)
        col.ingest(documents=DOCS)
        debug: dict[str, Any] = {}
        hits = ragd.retrieve("hotels euros night", col.plan(3, None, rerank=True), col, debug=debug)
    finally:
        client.close()
    request = _FakeReranker.requests[-1]
    assert request["path"] == path and set(request["body"]) == fields and request["auth"] == "Bearer key-1"
    assert request["body"]["query"] == "hotels euros night" and len(request["body"].get("texts") or
                                                                     request["body"]["documents"]) == 3
    assert debug["reranker_used"] and not debug["reranker_skipped"] and debug["k_rerank"] == 3
    assert hits[0].external_id == "hotel" and hits[0].rerank_score == pytest.approx(0.2)  # "night." does not count


DEEP = b'{"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # past the JSON parser's limit


@pytest.mark.parametrize(("status", "delay", "raw", "says"), [
    (503, 0.0, None, "HTTP 503"), (200, 1.0, None, "ReadTimeout"),
    (200, 0.0, DEEP, "RecursionError"),  # not one of ragd's own errors: fails open all the same
])
def test_a_failing_reranker_fails_open(settings: Settings, name: str, rerank_server: str, status: int,
                                       delay: float, raw: bytes | None, says: str) -> None:
    _FakeReranker.status, _FakeReranker.delay_s, _FakeReranker.raw = status, delay, raw
    client = _client(settings, reranker="cohere:rerank-v3.5", rerank_url=rerank_server + "/v2/rerank",
                     rerank_timeout_s=0.3)
    try:
        col = client.collection(name)
        col.ingest(documents=DOCS)
        fused = col.search("parental leave weeks", k=3)
        debug: dict[str, Any] = {}
        started = time.perf_counter()
        hits = ragd.retrieve("parental leave weeks", col.plan(3, None, rerank=True), col, debug=debug)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in fused]  # the fused order stands
    assert all(h.rerank_score is None for h in hits)
    assert debug["reranker_skipped"] and not debug["reranker_used"] and says in debug["reranker_error"]
    assert elapsed < 2.0


def _candidate(text: str, score: float, doc: int) -> Candidate:
    return Candidate(chunk_id=uuid.UUID(int=doc), doc_id=uuid.UUID(int=doc), doc_version_id=uuid.UUID(int=doc),
                     chunk_index=0, content=text, score=score, fused_score=score)


def test_the_local_cross_encoder_reads_relevance() -> None:
    query = "how many weeks of parental leave do parents get"
    candidates = [_candidate(DOCS[1]["text"], 0.9, 1), _candidate(DOCS[2]["text"], 0.5, 2),
                  _candidate(DOCS[0]["text"], 0.4, 3)]
    model = CrossEncoder(max_tokens=128)
    ranked = rerank(query, candidates, model, weight=1.0)
    assert ranked[0].content == DOCS[0]["text"]
    assert [c.rerank_score for c in ranked] == [c.rerank_score for c in rerank(query, candidates, model, weight=1.0)]
    assert [c.content for c in rerank(query, candidates, model, weight=0.0)] == [c.content for c in candidates]
    with pytest.raises(RerankerError, match="RAGD_RERANK_TIMEOUT_S"):
        CrossEncoder(max_tokens=128, timeout_s=0.0).score(query, [c.content for c in candidates] * 3)


def test_the_cross_encoder_gives_the_int8_models_exact_logits_on_any_x86_cpu() -> None:
    """The model's int8 products are exact on a CPU with VNNI; on one without (AVX2), onnxruntime's fast path sums
    them in 16 bits that saturate, and these logits came out 0.19-0.28 lower (8.82, 8.14, 3.64), enough to move
    the answers' calibrated abstention. The figures were taken with exact products on such a CPU; float ops may
    differ a little between CPUs, well inside the tolerance."""
    model = CrossEncoder(max_tokens=128)
    pairs = [("how many weeks of parental leave do parents get", DOCS[0]["text"], 9.0804),
             ("how much is a hotel night reimbursed", DOCS[2]["text"], 8.4241),
             ("what is on the cafeteria menu", DOCS[1]["text"], 3.6552)]
    for query, text, logit in pairs:
        assert model.score(query, [text])[0] == pytest.approx(logit, abs=0.05), query


def test_the_local_models_load_does_not_count_against_the_rerank_limit() -> None:
    """The first rerank after a start loads the model (0.3-0.9 s here): counted against the limit, it was skipped
    on a loaded machine, and the first answer after a start differed from the next ones."""
    query, candidates = "how many weeks of parental leave", [_candidate(DOCS[0]["text"], 0.4, 1)]
    ranked, outcome = rerank_fail_open(query, candidates, CrossEncoder(max_tokens=128), top=20, weight=0.2,
                                       timeout_s=0.25)
    assert outcome.used and not outcome.skipped and ranked[0].rerank_score is not None
    assert outcome.latency_ms < 250
    _, overrun = rerank_fail_open(query, candidates, CrossEncoder(max_tokens=128), top=20, weight=0.2,
                                  timeout_s=1e-6)
    assert overrun.skipped and not overrun.used and "over the" in (overrun.error or "")


def test_blend_is_pure_and_breaks_ties_canonically() -> None:
    head = [_candidate("a", 1.0, 3), _candidate("b", 0.5, 2), _candidate("c", 0.0, 1)]
    assert [c.content for c in blend(head, [0.0, 0.0, 0.0], 0.2)] == ["a", "b", "c"]
    assert [c.content for c in blend(head, [0.0, 1.0, 2.0], 1.0)] == ["c", "b", "a"]
    tied = blend(head, [2.0, 1.0, 0.0], 0.5)  # 0.5*1+0.5*1, 0.5*0.5+0.5*0.5, 0: no tie; then a real tie:
    assert [c.content for c in tied] == ["a", "b", "c"]
    even = blend(head, [0.0, 0.5, 1.0], 0.5)  # every blended score is 0.5: doc_id order
    assert [c.content for c in even] == ["c", "b", "a"] and len({c.score for c in even}) == 1
    with pytest.raises(RerankerError):
        blend(head, [1.0], 0.5)


def test_reranker_specs_and_plans() -> None:
    settings = Settings()
    assert make_reranker("none", settings) is None
    assert make_reranker("local", settings).name == "ms-marco-MiniLM-L-12-v2-int8"  # type: ignore[union-attr]
    with pytest.raises(ragd.RagdError, match="unknown reranker"):
        make_reranker("cohere", settings)
    assert plan_overrides("weighted+rerank") == {"fusion": "weighted", "rerank": True}
    assert plan_overrides("weighted:0.3+rerank")["keyword_weight"] == 0.3
    with pytest.raises(ragd.RagdError, match="only addition"):
        plan_overrides("weighted+magic")


def test_compress_with_the_cross_encoder_finds_the_sentence_that_shares_no_word() -> None:
    filler = [f"Room {i} holds the archive of year {2000 + i}." for i in range(9)]
    text = " ".join([*filler, "Employees receive sixteen weeks of paid parental leave.", "Parking is free."])
    candidate = _candidate(text, 1.0, 1)
    query = "how long can new mothers and fathers stay home with a baby"
    plain = ragd.compress(query, [candidate])[0]
    assert "parental leave" not in plain["text"]  # no shared word: the first sentences stand in
    scored = ragd.compress(query, [candidate], CompressPolicy(top_sentences=1), CrossEncoder(max_tokens=64))[0]
    assert scored["sentences"] == [8, 9, 10]
    assert scored["text"].startswith("Room 8 holds the archive of year 2008. Employees receive sixteen weeks")


def test_search_reports_a_skipped_reranker(cli_env: dict[str, str], name: str) -> None:
    from .conftest import run_cli

    env = {**cli_env, "RAGD_RERANKER": "http:http://127.0.0.1:9/rerank", "RAGD_RERANK_TIMEOUT_S": "0.5"}
    assert run_cli(["ingest", "README.md", "-c", name], env).returncode == 0
    result = run_cli(["search", "tenant isolation", "-c", name, "--rerank", "--json"], env)
    assert result.returncode == 0, result.stderr
    debug = json.loads(result.stdout)["debug"]
    assert debug["reranker_skipped"] and "ConnectError" in debug["reranker_error"]
    text = run_cli(["search", "tenant isolation", "-c", name, "--rerank"], env)
    assert "reranker skipped, fused order kept" in text.stderr and text.returncode == 0


def test_a_query_longer_than_the_cross_encoder_reads_is_reranked() -> None:
    """A 2,023-character query (a classic test collection's) raised tokenizers' truncation error out of the
    reranker: the query is cut too now, and the passages are still told apart."""
    query = ("parental leave policy weeks paid " * 62)[:2023]
    candidates = [_candidate(DOCS[2]["text"], 0.9, 1), _candidate(DOCS[0]["text"], 0.5, 2)]
    model = CrossEncoder(max_tokens=256)
    scores = model.score(query, [c.content for c in candidates])
    assert len(set(scores)) == 2 and all(math.isfinite(x) for x in scores)
    assert model.score(query, [c.content for c in candidates]) == scores  # deterministic
    assert all(c.rerank_score is not None for c in rerank(query, candidates, model, weight=1.0))


def test_the_cross_encoder_reads_a_long_passage_to_its_end() -> None:
    """(issue 30) The model reads 256 tokens with the query; chunks hold up to 500 (800 at the hard cap). An answer
    past the first window was scored as if absent; the best window counts now, and a passage that fits is scored as
    it was."""
    filler = " ".join(f"The committee reviewed agenda item {i} about office supplies and parking rules."
                      for i in range(40))
    answer = "Employees in Germany receive 30 days of parental leave per year."
    query = "How many days of parental leave do employees in Germany get?"
    windowed, head = CrossEncoder(max_tokens=256), CrossEncoder(max_tokens=256, windows=False)
    late, short, none = windowed.score(query, [f"{filler} {answer}", answer, filler])
    assert probability(late) > 0.9 and probability(none) < 0.01
    assert probability(head.score(query, [f"{filler} {answer}"])[0]) < 0.01  # what reading the head alone gave
    assert short == head.score(query, [answer])[0]  # a passage that fits: the same score, bit for bit
    # of a long passage's windows only the head and the one sharing most words with the query (more than the head)
    # are scored, wherever the answer stands
    half = len(filler) // 2
    middle = f"{filler[:half]} {answer} {filler[half:]}"
    early = f"{answer} {filler}"  # the head holds the query's words and the rest none: the head alone is scored
    assert [len(p) for p in windowed._pairs(query, [middle, f"{filler} {answer}", early])] == [SCORED, SCORED, 1]
    assert probability(windowed.score(query, [middle])[0]) > 0.9
    assert probability(windowed.score(query, [early])[0]) > 0.9
