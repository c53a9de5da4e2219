"""The remote client against a broken or hostile server (a real HTTP server on 127.0.0.1 that misbehaves on
purpose, chosen by the collection's name): every call ends within its deadline, no body is read past the size
cap, and what ragd's API never sends is the library's one error naming the URL and status."""

from __future__ import annotations

import http.server
import json
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import ragd
from ragd.errors import RequestInProgress, ServerUnavailable, UnexpectedResponse


class Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[str] = []
    tries: dict[str, int] = {}

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", "Content-Length": str(len(body)),
                            **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(self.path)
        behaviour = self.path.split("/")[3]
        self.tries[behaviour] = self.tries.get(behaviour, 0) + 1
        try:
            if behaviour == "endless":  # a chunked body that never ends
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"[" * 65536
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            elif behaviour == "trickle":  # a byte every 0.2 s: each read is quick, the whole never ends
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                while True:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            elif behaviour == "silent":
                time.sleep(30)
            elif behaviour == "notjson":
                self._send(200, b"<html>hello</html>", {"Content-Type": "text/html"})
            elif behaviour == "othershape":
                self._send(200, json.dumps({"hits": []}).encode())
            elif behaviour == "redirect":
                self._send(302, b"", {"Location": "https://elsewhere.example/login"})
            elif behaviour == "busyonce" and self.tries[behaviour] == 1:
                self._send(409, json.dumps({"error": "idempotency_key_in_use", "message": "still running"}).encode(),
                           {"Retry-After": "1"})
            elif behaviour == "busyonce":
                self._send(200, json.dumps({"results": []}).encode())
            elif behaviour == "alwaysbusy":
                self._send(409, json.dumps({"error": "idempotency_key_in_use", "message": "still running"}).encode(),
                           {"Retry-After": "1"})
            else:
                self._send(200, json.dumps({"results": []}).encode())
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _client(url: str, **kwargs: Any) -> ragd.RemoteRagd:
    return ragd.connect(url, api_key="k", retries=kwargs.pop("retries", 1), backoff_s=0.1, **kwargs)  # type: ignore[return-value]


@pytest.mark.parametrize("behaviour", ["trickle", "silent"])
def test_a_call_ends_within_its_deadline(hostile: str, behaviour: str) -> None:
    started = time.monotonic()
    with _client(hostile, timeout_s=2) as client, pytest.raises(ServerUnavailable) as raised:
        client.collection(behaviour).search("anything")
    assert time.monotonic() - started < 6
    assert hostile in str(raised.value) and "2 s" in str(raised.value) and "\n" not in str(raised.value)


def test_no_body_is_read_past_the_size_cap(hostile: str) -> None:
    started = time.monotonic()
    with _client(hostile, max_response_bytes=1 << 20) as client, pytest.raises(UnexpectedResponse) as raised:
        client.collection("endless").search("anything")
    assert time.monotonic() - started < 10 and "max_response_bytes" in str(raised.value)


@pytest.mark.parametrize(("behaviour", "said"), [("notjson", "HTTP 200"), ("othershape", "HTTP 200"),
                                                 ("redirect", "HTTP 302")])
def test_what_ragds_api_never_sends_is_one_error_naming_the_url(hostile: str, behaviour: str, said: str) -> None:
    with _client(hostile) as client, pytest.raises(UnexpectedResponse) as raised:
        client.collection(behaviour).search("anything")
    message = str(raised.value)
    assert said in message and f"{hostile}/v1/collections/{behaviour}/search" in message and "\n" not in message


def test_a_running_idempotency_key_is_waited_for(hostile: str) -> None:
    with _client(hostile, retries=3) as client:
        assert client.collection("busyonce").search("anything") == []
    with _client(hostile, retries=1, timeout_s=10) as client, pytest.raises(RequestInProgress) as raised:
        client.collection("alwaysbusy").search("anything")
    assert raised.value.retry_after_s == 1


def test_collection_names_stay_one_segment_of_the_path(hostile: str) -> None:
    Hostile.seen.clear()
    with _client(hostile) as client:
        for name in ("../admin", "a/b", "x?y=1#z", ".."):
            client.collection(name).search("anything")
    assert Hostile.seen == ["/v1/collections/..%2Fadmin/search", "/v1/collections/a%2Fb/search",
                            "/v1/collections/x%3Fy%3D1%23z/search", "/v1/collections/%2E%2E/search"]


def test_a_key_over_plain_http_to_another_host_warns() -> None:
    with pytest.warns(UserWarning, match="clear text"):
        ragd.connect("http://10.255.255.1:8000", api_key="secret").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for url in ("http://127.0.0.1:8000", "http://localhost:8000", "https://ragd.example:8000"):
            ragd.connect(url, api_key="secret").close()
        ragd.connect("http://10.255.255.1:8000", api_key="").close()  # no key, nothing to leak
