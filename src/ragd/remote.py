"""ragd over the network: `ragd.connect("https://host:8000", api_key=...)` gives the library's face (a client,
its collections; ingest, search, ask, documents, runs, delete) over a `ragd serve` REST API, with the library's
result types (`Candidate`, `Answer`, `IngestReport`) and errors.

A 404 raises the library's `NotFound` (`CollectionNotFound`, `DocumentNotFound`, `RunNotFound`), a 429 raises
`RateLimited` (or `QueueFull`) with the server's `retry_after_s`, a 401 `Unauthorized`. A 503 (the server's
database busy or unreachable), a 409 of an upload whose Idempotency-Key is still running, and a connection that
fails (a server restarting) are retried `retries` times, the waits doubling from `backoff_s` (or the server's
Retry-After, up to `max_wait_s`); then `Busy`, `DatabaseUnavailable`, `RequestInProgress` or
`ServerUnavailable`. Writes carry an Idempotency-Key, so a retried upload is stored once.

Every call ends within its deadline: `timeout_s` (120 s; an ingest's own, 3600 s) bounds the whole call, its
tries, waits and reading included, so a silent or trickling server costs at most that. A response over
`max_response_bytes` (1 GiB) is refused, and one that is not ragd's (not JSON, another shape, a redirect) raises
`UnexpectedResponse` naming the URL and status. A key sent over plain http to another host warns.

Rows (documents, runs, chunks) come back as the library gives them: ids as `uuid.UUID`, times as `datetime`."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote, unquote, urlsplit

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
    RequestInProgress,
    RetryLater,
    ServerUnavailable,
    Unauthorized,
    UnexpectedResponse,
)
from .ingest.walk import expand_paths
from .store.originals import Original
from .types import Answer, AnswerStream, Candidate, Filters, IngestReport, Plan

RETRIED = (503,)
MAX_RESPONSE_BYTES = 1 << 30  # an original file may be up to the server's RAGD_MAX_FILE_BYTES (200 MB by default)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
T = TypeVar("T")


def _identity(value: Any) -> Any:
    return value

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


def _retry_after(response: Response, default: int) -> int:
    try:
        return max(0, int(response.headers.get("Retry-After", default)))
    except ValueError:
        return default


def error_of(response: Response) -> RagdError:
    """The library error a REST error response (its body read) stands for, with the server's one-line message."""
    text = response.content.decode("utf-8", "replace")
    try:
        body = json.loads(text)
        code, message = str(body["error"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "", text.strip().splitlines()[0][:300] if text.strip() else ""
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
    """One server: requests with the key, the retries of 503s, 409s of a running Idempotency-Key and failed
    connections, errors as the library's; every call within its deadline and every body within the size cap."""

    def __init__(self, url: str, api_key: str | None, *, timeout_s: float, retries: int, backoff_s: float,
                 max_wait_s: float, max_response_bytes: int, transport: httpx.BaseTransport | None = None):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = url.rstrip("/")
        self.timeout_s, self.max_response_bytes = timeout_s, max_response_bytes
        self.retries, self.backoff_s, self.max_wait_s = retries, backoff_s, max_wait_s
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self.client.close()

    def _wait(self, attempt: int, deadline: float, advised: float | None = None) -> bool:
        """Sleep before the next try; False when that try could not start before the call's deadline."""
        wait = min(self.max_wait_s, max(self.backoff_s * 2 ** attempt, advised or 0.0))
        if time.monotonic() + wait >= deadline:
            return False
        time.sleep(wait)
        return True

    @contextlib.contextmanager
    def open(self, method: str, path: str, *, files: Callable[[], Any] | None = None,
             timeout_s: float | None = None, **kwargs: Any) -> Iterator[Response]:
        """The response of a request (retried as the module says), its body still to be read within the call's
        deadline (`timeout_s`, else the client's: the whole call, retries and reading included); raises the
        library error of an error response."""
        budget = timeout_s if timeout_s is not None else self.timeout_s
        deadline = time.monotonic() + budget
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            left = deadline - time.monotonic()
            if left <= 0:
                break
            with contextlib.ExitStack() as stack:
                sent = {**kwargs, **({"files": stack.enter_context(_opened(files))} if files else {}),
                        "timeout": httpx.Timeout(min(budget, left))}
                try:
                    raw = stack.enter_context(self.client.stream(method, path, **sent))
                except httpx.TransportError as exc:
                    if last or not self._wait(attempt, deadline):
                        raise ServerUnavailable(f"the ragd server at {self.url} cannot be reached "
                                                f"({type(exc).__name__}: {exc or 'no answer'}) after "
                                                f"{attempt + 1} tries in {budget:g} s; is `ragd serve` running "
                                                "there?") from None
                    continue
                response = Response(raw, self, deadline, budget)
                if raw.status_code in RETRIED or raw.status_code == 409:
                    response.read()
                    error = error_of(response)
                    retried = raw.status_code in RETRIED or isinstance(error, RequestInProgress)
                    if retried and not last and self._wait(attempt, deadline, _retry_after(response, 0)):
                        continue
                    raise error
                if raw.status_code >= 400:
                    response.read()
                    raise error_of(response)
                if raw.status_code >= 300:
                    raise UnexpectedResponse(f"{self.url}{path} answered HTTP {raw.status_code} (a redirect to "
                                             f"{raw.headers.get('Location', '?')!r}), not ragd's API: give the "
                                             "client the server's final URL")
                yield response
                return
        raise ServerUnavailable(f"the ragd server at {self.url} did not answer {method} {path} within {budget:g} s "
                                "(the call's timeout_s, retries included)")

    def call(self, method: str, path: str, parse: Callable[[Any], T] = _identity, **kwargs: Any) -> T:
        """`parse` of the JSON body of a request's response; a body ragd's API never sends (not JSON, another
        shape) raises UnexpectedResponse naming the URL and status."""
        with self.open(method, path, **kwargs) as response:
            data = response.read()
            try:
                return parse(json.loads(data))
            except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
                raise UnexpectedResponse(f"{self.url}{path} answered HTTP {response.status_code} with a body ragd's "
                                         f"API never sends ({type(exc).__name__}: {str(exc)[:100]}); is it a ragd "
                                         "server?") from None


class Response:
    """A streamed response whose body is read within the call's deadline and the client's size cap."""

    def __init__(self, raw: httpx.Response, http: Http, deadline: float, budget: float):
        self.raw, self.http, self.deadline, self.budget = raw, http, deadline, budget
        self.status_code, self.headers = raw.status_code, raw.headers
        self.content = b""

    def _checked(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        size = 0
        for piece in pieces:
            size += len(piece)
            if size > self.http.max_response_bytes:
                raise UnexpectedResponse(f"the response of {self.raw.request.url} is over the client's "
                                         f"max_response_bytes ({self.http.max_response_bytes}); raise it if this "
                                         "is expected")
            if time.monotonic() > self.deadline:
                raise ServerUnavailable(f"the ragd server at {self.http.url} did not finish its response within "
                                        f"{self.budget:g} s (the call's timeout_s)")
            yield piece

    def read(self) -> bytes:
        self.content = b"".join(self._checked(self.raw.iter_bytes()))
        return self.content

    def iter_lines(self) -> Iterator[str]:
        pending = b""
        for piece in self._checked(self.raw.iter_bytes()):
            pending += piece
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.rstrip(b"\r").decode("utf-8", "replace")
        if pending:
            yield pending.rstrip(b"\r").decode("utf-8", "replace")


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
                 max_response_bytes: int = MAX_RESPONSE_BYTES, transport: httpx.BaseTransport | None = None):
        if not url.startswith(("http://", "https://")):
            raise InvalidRequest(f"{url!r} is not an http(s) URL of a ragd server")
        key = api_key if api_key is not None else os.environ.get("RAGD_API_KEY")
        host = urlsplit(url).hostname or ""
        if key and url.startswith("http://") and host not in LOOPBACK_HOSTS and not host.startswith("127."):
            warnings.warn(f"ragd.connect({url!r}): the API key is sent in clear text over plain http to a host "
                          "that is not this machine; use https", UserWarning, stacklevel=3)
        self.http = Http(url, key, timeout_s=timeout_s, retries=retries, backoff_s=backoff_s, max_wait_s=max_wait_s,
                         max_response_bytes=max_response_bytes, transport=transport)
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
        return self.http.call("GET", "/v1/collections", lambda b: revive(b["collections"]))

    def run(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """One ingestion run with every item."""
        return self.http.call("GET", f"/v1/runs/{_segment(run_id)}", _row)

    def execution(self, ref: str | uuid.UUID) -> dict[str, Any]:
        """An answer's reproducibility record."""
        return self.http.call("GET", f"/v1/executions/{_segment(ref)}", _row)


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

    @property
    def _path(self) -> str:
        return f"/v1/collections/{_segment(self.name)}"

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
            return self.http.call("POST", f"{self._path}/ingest", IngestReport.from_dict, json=body,
                                  timeout_s=timeout_s, headers={"Idempotency-Key": str(uuid.uuid4())})
        if metadata:
            raise InvalidRequest("metadata for every file is not sent over REST: give it per document as text, "
                                 "or ingest on the server")
        files = _named_files(paths)
        if not files:
            raise InvalidRequest("no files to upload")
        params = self._params(wait=str(wait).lower(), duplicates=duplicates)
        params["tag"] = list(tags)
        parse: Callable[[Any], IngestReport | RemoteRun] = IngestReport.from_dict if wait else \
            (lambda b: RemoteRun(self.client, b))
        return self.http.call("POST", "/v1/documents", parse, params=params, timeout_s=timeout_s,
                              files=lambda: [("files", name, path) for name, path in files],
                              headers={"Idempotency-Key": str(uuid.uuid4())})

    # -- search and ask -----------------------------------------------------------------------

    def search(self, query: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None,
               **plan: Any) -> list[Candidate]:
        """`Collection.search` on the server: candidates with every score, best first."""
        body = {"query": query, "k": k, "filters": _filters(filters), **plan}
        return self.http.call("POST", f"{self._path}/search", lambda b: [Candidate.from_dict(c) for c in b["results"]],
                              json=body)

    def ask(self, question: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
            rerank: bool | None = None, debug: bool = False) -> Answer:
        """`Collection.ask` on the server: the answer with citations, or the abstention."""
        body = {"question": question, "k": k, "filters": _filters(filters), "rerank": rerank, "debug": debug}
        return self.http.call("POST", f"{self._path}/ask", Answer.from_json, json=body)

    def ask_stream(self, question: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None, *,
                   rerank: bool | None = None) -> AnswerStream:
        """The answer's text as the server streams it, piece by piece; `.answer` is the whole Answer after."""
        body = {"question": question, "k": k, "filters": _filters(filters), "rerank": rerank, "stream": True}
        done: dict[str, Any] = {}

        def pieces() -> Iterator[str]:
            with self.http.open("POST", f"{self._path}/ask", json=body) as response:
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
        return self.http.call("GET", "/v1/documents", lambda b: (revive(b["documents"]), int(b["total"])),
                              params=self._params(limit=limit, offset=offset, q=find, tag=tag, type=source_type))

    def document(self, ref: str) -> dict[str, Any]:
        return self.http.call("GET", _document_path(ref), _row, params=self._params())

    def chunk(self, chunk_id: str | uuid.UUID) -> dict[str, Any]:
        return self.http.call("GET", f"/v1/chunks/{_segment(chunk_id)}", _row, params=self._params())

    def blocks(self, ref: str, version: str | None = None) -> dict[str, Any]:
        return self.http.call("GET", _document_path(ref, "/blocks"), _row, params=self._params(version=version))

    def original(self, ref: str, version: str | None = None) -> Original:
        with self.http.open("GET", _document_path(ref, "/source"), params=self._params(version=version)) as got:
            data = got.read()
            name = _disposition_name(got.headers.get("Content-Disposition", "")) or ref
            media_type = got.headers.get("Content-Type", "application/octet-stream").split(";")[0]
            return Original(got.headers.get("ETag", "").strip('"'), name, media_type, data)

    def delete(self, ref: str) -> uuid.UUID:
        return self.http.call("DELETE", _document_path(ref), lambda b: uuid.UUID(b["deleted"]), params=self._params())

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        return self.http.call("GET", "/v1/runs", lambda b: revive(b["runs"]), params=self._params(limit=limit))

    def run(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        return self.client.run(run_id)


def _filters(filters: Mapping[str, Any] | Filters | None) -> dict[str, Any] | None:
    if isinstance(filters, Filters):
        return Plan(filters=filters).filters_dict()
    return dict(filters) if filters else None


def _document_path(ref: str, tail: str = "") -> str:
    return f"/v1/documents/{quote(str(ref), safe='/')}{tail}"


def _segment(value: object) -> str:
    """A value as one segment of a URL's path: `/`, `..`, `?` and `#` escaped."""
    text = quote(str(value), safe="")
    return text.replace(".", "%2E") if text in (".", "..") else text


def _row(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise TypeError(f"a row is an object, not {type(body).__name__}")
    return revive(body)  # type: ignore[no-any-return]


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
