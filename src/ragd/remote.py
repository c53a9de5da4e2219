"""ragd over the network: `ragd.connect("https://host:8000", api_key=...)` gives the library's face (a client,
its collections; ingest, search, ask, documents, runs, delete) over a `ragd serve` REST API, with the library's
result types (`Candidate`, `Answer`, `IngestReport`) and errors.

A 404 raises the library's `NotFound` (`CollectionNotFound`, `DocumentNotFound`, `RunNotFound`), a 429 raises
`RateLimited` (or `QueueFull`) with the server's `retry_after_s`, a 401 `Unauthorized`. A 503 (the server's
database busy or unreachable) and a connection that fails (a server restarting) are retried `retries` times, the
waits doubling from `backoff_s` (or the server's Retry-After, up to `max_wait_s`); then `Busy`,
`DatabaseUnavailable` or `ServerUnavailable`. Writes carry an Idempotency-Key, so a retried upload is stored once.

Rows (documents, runs, chunks) come back as the library gives them: ids as `uuid.UUID`, times as `datetime`."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote

import httpx

from . import errors
from .errors import (
    Busy,
    DatabaseUnavailable,
    FileTooLarge,
    Forbidden,
    InvalidRequest,
    LLMUnavailable,
    NotFound,
    RagdError,
    RateLimited,
    RetryLater,
    ServerUnavailable,
    Unauthorized,
)
from .ingest.walk import expand_paths
from .store.originals import Original
from .types import Answer, AnswerStream, Candidate, Filters, IngestReport, Plan

RETRIED = (503,)
_IDS = frozenset({"doc_id", "doc_version_id", "chunk_id", "run_id", "collection_id", "query_id",
                  "active_version_id", "id"})


def _codes() -> dict[str, type[RagdError]]:
    """Every library error by its code (the REST API's `error`)."""
    found: dict[str, type[RagdError]] = {}
    todo: list[type[RagdError]] = [RagdError]
    while todo:
        cls = todo.pop()
        found.setdefault(cls.code, cls)
        todo.extend(sorted(cls.__subclasses__(), key=lambda c: c.__name__))
    return found


CODES = _codes()
BY_STATUS: dict[int, type[RagdError]] = {400: InvalidRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
                                         413: FileTooLarge, 422: InvalidRequest, 429: RateLimited,
                                         502: LLMUnavailable, 503: Busy}


def _retry_after(response: httpx.Response, default: int) -> int:
    try:
        return max(0, int(response.headers.get("Retry-After", default)))
    except ValueError:
        return default


def error_of(response: httpx.Response) -> RagdError:
    """The library error a REST error response stands for, with the server's one-line message."""
    try:
        body = response.json()
        code, message = str(body["error"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "", response.text.strip().splitlines()[0][:300] if response.text.strip() else ""
    status = response.status_code
    if status == 500 or not message:
        rid = response.headers.get("X-Request-ID", "?")
        message = f"the ragd server failed on this request (HTTP {status}, request id {rid}); see its log"
    cls = CODES.get(code) or BY_STATUS.get(status) or RagdError
    if status == 503 and cls is RagdError:
        cls = Busy
    if code == "database_unavailable":
        cls = DatabaseUnavailable
    if issubclass(cls, RetryLater):
        return cls(message, _retry_after(response, cls.default_retry_after_s))
    try:
        return cls(message)
    except TypeError:
        return RagdError(message)


def revive(value: Any, key: str = "") -> Any:
    """JSON rows as the library gives them: ids as UUIDs, times (`*_at`) as datetimes."""
    if isinstance(value, dict):
        return {k: revive(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [revive(v, key) for v in value]
    if isinstance(value, str):
        if key in _IDS:
            with contextlib.suppress(ValueError):
                return uuid.UUID(value)
        if key.endswith("_at"):
            with contextlib.suppress(ValueError):
                return datetime.fromisoformat(value)
    return value


class Http:
    """One server: requests with the key, the retries of 503s and failed connections, errors as the library's."""

    def __init__(self, url: str, api_key: str | None, *, timeout_s: float, retries: int, backoff_s: float,
                 max_wait_s: float, transport: httpx.BaseTransport | None = None):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = url.rstrip("/")
        self.retries, self.backoff_s, self.max_wait_s = retries, backoff_s, max_wait_s
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self.client.close()

    def _wait(self, attempt: int, advised: float | None = None) -> None:
        doubled = self.backoff_s * 2 ** attempt
        time.sleep(min(self.max_wait_s, max(doubled, advised or 0.0)))

    @contextlib.contextmanager
    def open(self, method: str, path: str, *, files: Callable[[], Any] | None = None,
             timeout_s: float | None = None, **kwargs: Any) -> Iterator[httpx.Response]:
        """The response of a request (retried as the module says), its body still to be read; raises the library
        error of an error response."""
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            with contextlib.ExitStack() as stack:
                sent = {**kwargs, **({"files": stack.enter_context(_opened(files))} if files else {})}
                if timeout_s is not None:
                    sent["timeout"] = timeout_s
                try:
                    response = stack.enter_context(self.client.stream(method, path, **sent))
                except httpx.TransportError as exc:
                    if last:
                        raise ServerUnavailable(f"the ragd server at {self.url} cannot be reached "
                                                f"({type(exc).__name__}: {exc or 'no answer'}) after "
                                                f"{self.retries + 1} tries; is `ragd serve` running there?") from None
                    self._wait(attempt)
                    continue
                if response.status_code in RETRIED and not last:
                    response.read()
                    self._wait(attempt, _retry_after(response, 0))
                    continue
                if response.status_code >= 400:
                    response.read()
                    raise error_of(response)
                yield response
                return
        raise AssertionError("unreachable")  # pragma: no cover

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON body of a request's response."""
        with self.open(method, path, **kwargs) as response:
            response.read()
            return response.json()


@contextlib.contextmanager
def _opened(files: Callable[[], Any]) -> Iterator[Any]:
    """The multipart files of one try, open for its length (a retry reads them again from the start)."""
    with contextlib.ExitStack() as stack:
        yield [(field, (name, stack.enter_context(path.open("rb")), "application/octet-stream"))
               for field, name, path in files()]


class RemoteRagd:
    """A ragd server as a client: `collection(name)` for a collection's face, `collections()`, `run(id)`,
    `execution(id)`. Close it (or use `with`) to release its connections."""

    def __init__(self, url: str, api_key: str | None = None, *, collection: str | None = None,
                 timeout_s: float = 120.0, retries: int = 4, backoff_s: float = 0.5, max_wait_s: float = 8.0,
                 transport: httpx.BaseTransport | None = None):
        if not url.startswith(("http://", "https://")):
            raise InvalidRequest(f"{url!r} is not an http(s) URL of a ragd server")
        self.http = Http(url, api_key if api_key is not None else os.environ.get("RAGD_API_KEY"),
                         timeout_s=timeout_s, retries=retries, backoff_s=backoff_s, max_wait_s=max_wait_s,
                         transport=transport)
        self.default_collection = collection or os.environ.get("RAGD_COLLECTION") or "default"

    @property
    def url(self) -> str:
        return self.http.url

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RemoteRagd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def collection(self, name: str | None = None, *, create: bool = True) -> RemoteCollection:
        """A collection's face. It is created by its first ingest; `create=False` checks that it exists
        (CollectionNotFound)."""
        name = name or self.default_collection
        if not create and not any(c["name"] == name for c in self.collections()):
            raise errors.CollectionNotFound(f"collection {name!r} does not exist")
        return RemoteCollection(self, name)

    def collections(self) -> list[dict[str, Any]]:
        """The key's tenant's collections with their pinned model and sizes."""
        return revive(self.http.call("GET", "/v1/collections")["collections"])  # type: ignore[no-any-return]

    def run(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """One ingestion run with every item."""
        return revive(self.http.call("GET", f"/v1/runs/{run_id}"))  # type: ignore[no-any-return]

    def execution(self, ref: str | uuid.UUID) -> dict[str, Any]:
        """An answer's reproducibility record."""
        return revive(self.http.call("GET", f"/v1/executions/{ref}"))  # type: ignore[no-any-return]


class RemoteRun:
    """A queued ingestion (`ingest(..., wait=False)`): what was queued, `status()` now, `wait()` for its end."""

    def __init__(self, client: RemoteRagd, queued: dict[str, Any]):
        self.client, self.queued = client, queued
        self.run_id = uuid.UUID(queued["run_id"])

    def status(self) -> dict[str, Any]:
        return self.client.run(self.run_id)

    def wait(self, timeout_s: float = 600.0, poll_s: float = 0.5) -> dict[str, Any]:
        """The run once no file of it is queued or running; TimeoutError (with where it stands) past timeout_s."""
        deadline = time.monotonic() + timeout_s
        while True:
            run = self.status()
            if run["status"] not in ("queued", "running"):
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {self.run_id} is still {run['status']} after {timeout_s:g} s")
            time.sleep(poll_s)


class RemoteCollection:
    """A collection on a ragd server, with `Collection`'s methods for ingest, search, ask and documents."""

    def __init__(self, client: RemoteRagd, name: str):
        self.client, self.name = client, name

    def __repr__(self) -> str:
        return f"RemoteCollection({self.client.url!r}, {self.name!r})"

    @property
    def http(self) -> Http:
        return self.client.http

    def _params(self, **extra: Any) -> dict[str, Any]:
        return {"collection": self.name, **{k: v for k, v in extra.items() if v is not None}}

    # -- ingest -------------------------------------------------------------------------------

    def ingest(self, paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str] = (), *,
               documents: Sequence[Mapping[str, Any]] = (), tags: Sequence[str] = (),
               metadata: Mapping[str, Any] | None = None, duplicates: Literal["skip", "keep"] = "skip",
               near_duplicates: float | None = None, wait: bool = True,
               timeout_s: float = 3600.0) -> IngestReport | RemoteRun:
        """Upload files (directories walked as the library walks them; each file named by its path from the
        argument's own name) or give documents as text (as `Collection.ingest(documents=...)`), one or the
        other per call. The run's report; with `wait=False` (files only) the files are queued on the server's
        workers and a `RemoteRun` is returned at once."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        if paths and documents:
            raise InvalidRequest("give a remote collection files or documents, one or the other per ingest call")
        if documents:
            if not wait:
                raise InvalidRequest("wait=False queues files; documents given as text are stored at once")
            body = {"documents": [dict(d) for d in documents], "tags": list(tags),
                    "metadata": dict(metadata) if metadata else None, "duplicates": duplicates,
                    "near_duplicates": near_duplicates}
            found = self.http.call("POST", f"/v1/collections/{self.name}/ingest", json=body, timeout_s=timeout_s,
                                   headers={"Idempotency-Key": str(uuid.uuid4())})
            return IngestReport.from_dict(found)
        if metadata:
            raise InvalidRequest("metadata for every file is not sent over REST: give it per document as text, "
                                 "or ingest on the server")
        files = _named_files(paths)
        if not files:
            raise InvalidRequest("no files to upload")
        params = self._params(wait=str(wait).lower(), duplicates=duplicates)
        params["tag"] = list(tags)
        found = self.http.call("POST", "/v1/documents", params=params, timeout_s=timeout_s,
                               files=lambda: [("files", name, path) for name, path in files],
                               headers={"Idempotency-Key": str(uuid.uuid4())})
        return IngestReport.from_dict(found) if wait else RemoteRun(self.client, found)

    # -- search and ask -----------------------------------------------------------------------

    def search(self, query: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None,
               **plan: Any) -> list[Candidate]:
        """`Collection.search` on the server: candidates with every score, best first."""
        body = {"query": query, "k": k, "filters": _filters(filters), **plan}
        found = self.http.call("POST", f"/v1/collections/{self.name}/search", json=body)
        return [Candidate.from_dict(c) for c in found["results"]]

    def ask(self, question: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
            rerank: bool | None = None, debug: bool = False) -> Answer:
        """`Collection.ask` on the server: the answer with citations, or the abstention."""
        body = {"question": question, "k": k, "filters": _filters(filters), "rerank": rerank, "debug": debug}
        return Answer.from_json(self.http.call("POST", f"/v1/collections/{self.name}/ask", json=body))

    def ask_stream(self, question: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
                   rerank: bool | None = None) -> AnswerStream:
        """The answer's text as the server streams it, piece by piece; `.answer` is the whole Answer after."""
        body = {"question": question, "k": k, "filters": _filters(filters), "rerank": rerank, "stream": True}
        done: dict[str, Any] = {}

        def pieces() -> Iterator[str]:
            with self.http.open("POST", f"/v1/collections/{self.name}/ask", json=body) as response:
                for event, data in _events(response.iter_lines()):
                    if event == "token":
                        yield data["text"]
                    elif event == "done":
                        done.update(data)
            if not done:
                raise ServerUnavailable(f"the ragd server at {self.http.url} ended the answer's stream early")

        return AnswerStream(pieces(), lambda: Answer.from_json(done))

    def execution(self, ref: str | uuid.UUID) -> dict[str, Any]:
        return self.client.execution(ref)

    # -- documents and runs -------------------------------------------------------------------

    def documents(self, limit: int = 100, offset: int = 0, *, find: str | None = None, tag: str | None = None,
                  source_type: str | None = None) -> list[dict[str, Any]]:
        return self.documents_page(limit, offset, find=find, tag=tag, source_type=source_type)[0]

    def documents_page(self, limit: int = 100, offset: int = 0, *, find: str | None = None, tag: str | None = None,
                       source_type: str | None = None) -> tuple[list[dict[str, Any]], int]:
        found = self.http.call("GET", "/v1/documents", params=self._params(limit=limit, offset=offset, q=find,
                                                                           tag=tag, type=source_type))
        return revive(found["documents"]), int(found["total"])

    def document(self, ref: str) -> dict[str, Any]:
        return revive(self.http.call("GET", _document_path(ref), params=self._params()))  # type: ignore[no-any-return]

    def chunk(self, chunk_id: str | uuid.UUID) -> dict[str, Any]:
        return revive(self.http.call("GET", f"/v1/chunks/{chunk_id}",  # type: ignore[no-any-return]
                                     params=self._params()))

    def blocks(self, ref: str, version: str | None = None) -> dict[str, Any]:
        return revive(self.http.call("GET", _document_path(ref, "/blocks"),  # type: ignore[no-any-return]
                                     params=self._params(version=version)))

    def original(self, ref: str, version: str | None = None) -> Original:
        with self.http.open("GET", _document_path(ref, "/source"), params=self._params(version=version)) as got:
            data = got.read()
            name = _disposition_name(got.headers.get("Content-Disposition", "")) or ref
            media_type = got.headers.get("Content-Type", "application/octet-stream").split(";")[0]
            return Original(got.headers.get("ETag", "").strip('"'), name, media_type, data)

    def delete(self, ref: str) -> uuid.UUID:
        return uuid.UUID(self.http.call("DELETE", _document_path(ref), params=self._params())["deleted"])

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        return revive(self.http.call("GET", "/v1/runs", params=self._params(limit=limit))["runs"])  # type: ignore[no-any-return]

    def run(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        return self.client.run(run_id)


def _filters(filters: Mapping[str, Any] | Filters | None) -> dict[str, Any] | None:
    if isinstance(filters, Filters):
        return Plan(filters=filters).filters_dict()
    return dict(filters) if filters else None


def _document_path(ref: str, tail: str = "") -> str:
    return f"/v1/documents/{quote(str(ref), safe='/')}{tail}"


def _disposition_name(header: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == "filename*" and value.lower().startswith("utf-8''"):
            return unquote(value[7:])
    return None


def _named_files(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[str, Path]]:
    """(name, file) of every file the arguments hold: a file by its name, a directory's files by their path from
    the directory's own name. A path that is missing raises InvalidRequest."""
    named = []
    for raw in paths:
        top = Path(raw).expanduser()
        for found in expand_paths([top]):
            if isinstance(found, RagdError):
                raise InvalidRequest(str(found))
            name = found.name if found == top else (Path(top.resolve().name) / found.relative_to(top)).as_posix()
            named.append((name, found))
    return named


def _events(lines: Iterator[str]) -> Iterator[tuple[str, Any]]:
    """Server-sent events as (event, JSON data)."""
    event, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", list[str]()
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    if data:
        yield event, json.loads("\n".join(data))
