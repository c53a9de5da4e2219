"""`ragd serve` as a real process: keyed (refuses requests without a key) and open (no keys: loopback only)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from .conftest import REPO, SAMPLES, free_port, run_cli, serving


def test_serve_answers_with_a_key_and_refuses_without(cli_env: dict[str, str], name: str) -> None:
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_TENANT": "serve-t"}
    assert run_cli(["ingest", str(SAMPLES), "-c", name], env).returncode == 0
    key = run_cli(["keys", "create", "--tenant", "serve-t"], env).stdout.strip().splitlines()[-1]
    with serving(env) as server:
        url = server["url"]
        question = {"question": "How many days of parental leave do employees in Germany get?", "collection": name}
        answered = httpx.post(url + "/v1/query", json=question, headers={"Authorization": f"Bearer {key}"},
                              timeout=60)
        refused = httpx.post(url + "/v1/query", json=question, timeout=60)
    assert answered.status_code == 200 and answered.json()["citations"], answered.text
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"


def test_without_keys_serve_is_loopback_only_and_says_so(fresh_database: str, tmp_path: Path) -> None:
    env = {"RAGD_HOME": str(tmp_path), "RAGD_DATABASE_URL": fresh_database, "RAGD_EMBEDDER": "hash",
           "RAGD_RERANKER": "none"}
    refused = run_cli(["serve", "--host", "0.0.0.0", "--port", str(free_port())], env)
    assert refused.returncode == 2 and "binds to loopback only" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    with serving(env, "--workers", "2") as server, httpx.Client(base_url=server["url"], timeout=30) as client:
        replies = [client.post("/v1/search", json={"query": "anything", "namespace": "missing"}) for _ in range(4)]
    ok = replies[-1]
    assert {r.status_code for r in replies} == {404}
    assert ok.status_code == 404 and ok.json()["error"] == "collection_not_found"  # served, unauthenticated
    assert "WARNING: no API keys exist" in server["stderr"] and "Traceback" not in server["stderr"]


def test_the_shared_listener_gives_every_connection_tcp_nodelay() -> None:
    """With --workers > 1 the listener is bound once and shared; connections accepted from it must get TCP_NODELAY,
    or each keep-alive response waits for the client's delayed ACK (~40 ms on Linux)."""
    from ragd.server import ServerConfig

    async def accepted_nodelay(listener: socket.socket) -> int:
        loop = asyncio.get_running_loop()
        seen: asyncio.Future[int] = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await loop.create_server(Probe, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()

    config = ServerConfig("ragd.server:app_from_env", factory=True, host="127.0.0.1", port=0, workers=2)
    listener = config.bind_socket()
    assert listener.proto == socket.IPPROTO_TCP
    assert asyncio.run(accepted_nodelay(listener)) == 1


def test_the_official_openai_client_chats_with_a_collection(cli_env: dict[str, str], name: str) -> None:
    from openai import OpenAI

    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_TENANT": "chat-t"}
    assert run_cli(["ingest", str(SAMPLES), "-c", name], env).returncode == 0
    key = run_cli(["keys", "create", "--tenant", "chat-t"], env).stdout.strip().splitlines()[-1]
    question = [{"role": "user", "content": "How many days of parental leave do employees in Germany get?"}]
    with serving(env) as server:
        client = OpenAI(base_url=server["url"] + "/v1", api_key=key, max_retries=0)
        assert name in [m.id for m in client.models.list()]
        reply = client.chat.completions.create(model=name, messages=question)  # type: ignore[arg-type]
        pieces = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model=name, messages=question, stream=True)]  # type: ignore[arg-type]
        bad = OpenAI(base_url=server["url"] + "/v1", api_key="wrong", max_retries=0)
        try:
            bad.chat.completions.create(model=name, messages=question)  # type: ignore[arg-type]
            raise AssertionError("a bad key was accepted")
        except Exception as exc:  # openai.AuthenticationError
            assert type(exc).__name__ == "AuthenticationError"
    content = reply.choices[0].message.content or ""
    citations = (reply.model_extra or {})["citations"]
    assert citations and f"[chunk:{citations[0]['chunk_id']}]" in content
    assert "".join(pieces) == content


def test_a_lost_database_is_503_and_the_server_recovers_by_itself(tmp_path: Path) -> None:
    env = {"RAGD_HOME": str(tmp_path), "RAGD_EMBEDDER": "hash", "RAGD_RERANKER": "none"}
    try:
        assert run_cli(["ingest", str(SAMPLES), "-c", "docs"], env).returncode == 0
        key = run_cli(["keys", "create", "--tenant", "default"], env).stdout.strip().splitlines()[-1]
        auth = {"Authorization": f"Bearer {key}"}
        body = {"query": "parental leave", "namespace": "docs", "useReranking": False}
        with serving(env) as server:
            url = server["url"]
            assert httpx.post(url + "/v1/search", json=body, headers=auth, timeout=30).status_code == 200
            assert run_cli(["db", "stop"], env).returncode == 0
            down = httpx.post(url + "/v1/search", json=body, headers=auth, timeout=30)
            not_ready = httpx.get(url + "/readyz", timeout=30)
            alive = httpx.get(url + "/healthz", timeout=30)
            assert run_cli(["db", "start"], env).returncode == 0
            statuses = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                statuses.append(httpx.post(url + "/v1/search", json=body, headers=auth, timeout=30).status_code)
                if statuses[-1] == 200:
                    break
                time.sleep(0.5)
            # the server's own ingestion worker came back with the database: a queued upload is stored
            queued = httpx.post(url + "/v1/documents", params={"wait": "false", "collection": "docs"}, headers=auth,
                                files=[("files", ("after.md", b"# After\n\nThe database came back at noon.\n"))],
                                timeout=30)
            assert queued.status_code == 202, queued.text
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                run = httpx.get(url + queued.headers["location"], headers=auth, timeout=30).json()
                if run["status"] not in ("queued", "running"):
                    break
                time.sleep(0.5)
            assert run["status"] == "succeeded", run
        assert down.status_code == 503 and down.json()["error"] == "database_unavailable", down.text
        assert not_ready.status_code == 503 and alive.status_code == 200
        for response in (down, not_ready):  # nothing of the URL (user, database, socket path) to any client
            assert response.json()["message"] == "the database is unavailable; retry later", response.text
            assert response.headers["Retry-After"] == "5"
        assert "PostgreSQL" in server["stderr"], server["stderr"][-3000:]  # the server's log says what failed
        assert statuses[-1] == 200 and set(statuses) <= {200, 503}, statuses
        assert "Traceback" not in server["stderr"], server["stderr"][-8000:]
    finally:
        run_cli(["db", "stop"], env)


def test_serve_refuses_an_outdated_schema_and_gives_up_on_an_absent_database(fresh_database: str,
                                                                             tmp_path: Path) -> None:
    env = {"RAGD_HOME": str(tmp_path), "RAGD_DATABASE_URL": fresh_database, "RAGD_EMBEDDER": "hash"}
    outdated = run_cli(["serve", "--no-migrate", "--port", str(free_port())], env)
    assert outdated.returncode == 3 and "run `ragd migrate` first" in outdated.stderr, outdated.stderr
    absent = {**env, "RAGD_DATABASE_URL": f"postgresql://ragd:x@127.0.0.1:{free_port()}/ragd"}
    started = time.monotonic()
    gone = run_cli(["serve", "--wait", "2", "--port", str(free_port())], absent)
    assert gone.returncode == 3 and "waiting for the database" in gone.stderr
    assert gone.stderr.strip().splitlines()[-1].startswith("error (database_unavailable)")
    assert time.monotonic() - started < 30


def test_serve_writes_a_line_per_request_and_per_query(cli_env: dict[str, str], name: str) -> None:
    """The real `ragd serve` process: ragd.request lines on stderr by default, ragd.query lines where
    RAGD_QUERY_LOG says (issue 29: it wrote neither)."""
    import json

    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_QUERY_LOG": "stdout"}
    assert run_cli(["ingest", str(SAMPLES), "-c", name, "--tenant", "logs"], env).returncode == 0
    key = run_cli(["keys", "create", "--tenant", "logs"], env).stdout.strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {key}", "X-Request-ID": "req-logged-1"}
    with serving(env) as server:
        answered = httpx.post(server["url"] + "/v1/query", json={"question": "parental leave in Germany?",
                                                                 "collection": name}, headers=auth, timeout=60)
        assert answered.status_code == 200, answered.text
    lines = [json.loads(line) for line in server["stderr"].splitlines() if line.startswith("{")]
    requests = [line for line in lines if "method" in line and line.get("path") == "/v1/query"]
    queries = [line for line in lines if "question_hash" in line]
    assert len(requests) == 1 and requests[0]["request_id"] == "req-logged-1" and requests[0]["http_status"] == 200
    assert len(queries) == 1 and queries[0]["request_id"] == "req-logged-1" and queries[0]["http_status"] == 200


# -- open mode defended from web pages (issue 29) ----------------------------------------------------------------

def _role_count(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'ragd_t_%'").fetchone()[0])  # type: ignore[index]


def test_open_mode_answers_only_loopback_and_its_own_pages(fresh_database: str, tmp_path: Path) -> None:
    env = {"RAGD_HOME": str(tmp_path), "RAGD_DATABASE_URL": fresh_database, "RAGD_EMBEDDER": "hash",
           "RAGD_RERANKER": "none"}
    upload = {"files": ("note.md", b"# Note\n\nThe launch code is tulip.\n", "text/markdown")}
    with serving(env) as server, httpx.Client(base_url=server["url"], timeout=30) as client:
        port = server["url"].rsplit(":", 1)[1]
        roles = _role_count(fresh_database)
        refused = [
            client.post("/v1/documents", files=upload, headers={"Origin": "http://evil.example"}),  # CSRF
            client.post("/v1/documents", files=upload, headers={"Sec-Fetch-Site": "cross-site"}),
            client.post("/v1/documents", files=upload, headers={"Origin": "null"}),
            client.post("/v1/documents", files=upload, headers={"Origin": "http://localhost:1"}),  # another port
            client.get("/v1/collections", headers={"Host": f"rebound.example:{port}"}),  # DNS rebinding
            client.post("/mcp", headers={"Host": f"rebound.example:{port}", "Accept": "application/json"},
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ]
        assert [r.status_code for r in refused] == [403] * len(refused), [r.text for r in refused]
        assert all(r.json()["error"] == "forbidden" for r in refused)
        assert client.get("/v1/collections").json() == {"collections": []}  # nothing was ingested
        for i in range(20):  # a request that fails creates nothing, not even a login role
            missing = client.post("/v1/query", json={"question": "launch code?", "tenant_id": f"probe-{i}"})
            assert missing.status_code == 404, missing.text
        assert _role_count(fresh_database) == roles
        own = client.post("/v1/documents", files=upload, headers={"Origin": f"http://127.0.0.1:{port}",
                                                                  "Sec-Fetch-Site": "same-origin"})
        assert own.status_code == 200 and own.json()["counts"]["ingested"] == 1, own.text
        assert client.get("/v1/collections", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_a_server_whose_keys_were_all_revoked_does_not_start_open(fresh_database: str, tmp_path: Path) -> None:
    env = {"RAGD_HOME": str(tmp_path), "RAGD_DATABASE_URL": fresh_database, "RAGD_EMBEDDER": "hash",
           "RAGD_RERANKER": "none"}
    env["RAGD_TENANT"] = "acme"
    assert run_cli(["ingest", str(SAMPLES), "-c", "docs"], env).returncode == 0
    created = run_cli(["keys", "create", "--tenant", "acme"], env)
    prefix = created.stdout.strip().splitlines()[-1].split("_")[1]
    assert run_cli(["keys", "revoke", f"ragd_{prefix}"], env).returncode == 0
    refused = run_cli(["serve", "--port", str(free_port())], env)
    assert refused.returncode == 2 and "every API key of this database was revoked" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    with serving(env, "--open") as server:  # told so, it serves open (loopback only)
        reply = httpx.post(server["url"] + "/v1/search", json={"query": "parental leave", "namespace": "docs"},
                           timeout=30)
    assert reply.status_code == 200 and "WARNING: no API keys exist" in server["stderr"]


def test_a_server_killed_mid_upload_leaves_nothing_to_clean_and_a_retry_is_idempotent(
        cli_env: dict[str, str], tmp_path: Path) -> None:
    import random
    import threading
    import uuid

    tenant = "crash-" + uuid.uuid4().hex[:8]
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_INGEST_WORKERS": "1", "RAGD_RATE_LIMIT_PER_MINUTE": "0"}
    key = run_cli(["keys", "create", "--tenant", tenant], env).stdout.strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {key}", "Idempotency-Key": "upload-1"}
    rng = random.Random(7)
    words = [f"w{n}" for n in range(3000)]
    files = [("files", (f"n{i:04d}.md", f"# Note {i}\n\n{' '.join(rng.choices(words, k=3000))}\n".encode(),
                        "text/markdown")) for i in range(400)]
    uploads = Path(cli_env["RAGD_HOME"]) / "uploads"
    outcome: dict[str, object] = {}

    def post(url: str) -> None:
        try:
            outcome["response"] = httpx.post(url + "/v1/documents?collection=crash", files=files, headers=auth,
                                             timeout=300)
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    with serving(env) as server:
        sender = threading.Thread(target=post, args=(server["url"],))
        sender.start()
        deadline, running, stored = time.monotonic() + 120, [], 0
        while time.monotonic() < deadline and not (running and stored) and sender.is_alive():
            listed = httpx.get(server["url"] + "/v1/runs?collection=crash", headers=auth, timeout=30)
            running = [r for r in listed.json().get("runs", []) if r["status"] == "running"]
            if running:
                stored = len(httpx.get(server["url"] + "/v1/documents?collection=crash&limit=1000", headers=auth,
                                       timeout=30).json()["documents"])
            time.sleep(0.02)
        # killed mid-run: some stored, files spooled
        assert running and 0 < stored < 400, (stored, Path(server["log"]).read_text()[-4000:])
        os.kill(int(server["pid"]), signal.SIGKILL)
        sender.join(60)
    assert "error" in outcome  # the client saw only a disconnect
    left = [p for p in uploads.glob(f"upload-{server['pid']}-*")]
    assert left and any(left[0].rglob("*.md"))  # what a killed server leaves behind
    with serving(env) as server:  # the next start cleans it and closes the run
        assert not any(uploads.glob(f"upload-{server['pid']}-*")) and not any(p.exists() for p in left)
        runs = httpx.get(server["url"] + "/v1/runs?collection=crash", headers=auth, timeout=30).json()["runs"]
        killed = [r for r in runs if r["run_id"] == running[0]["run_id"]]
        assert killed[0]["status"] == "failed" and "interrupted" in killed[0]["error"], killed
        for _ in range(30):  # the killed request's key is taken over once its heartbeat is stale (409 until then)
            retried = httpx.post(server["url"] + "/v1/documents?collection=crash", files=files, headers=auth,
                                 timeout=300)
            if retried.status_code != 409:
                break
            time.sleep(int(retried.headers["Retry-After"]))
        assert retried.status_code == 200 and "Idempotent-Replayed" not in retried.headers, retried.text
        counts = retried.json()["counts"]
        assert counts["ingested"] + counts["unchanged"] == 400 and counts["unchanged"] > 0 and not counts["failed"]
        again = httpx.post(server["url"] + "/v1/documents?collection=crash", files=files, headers=auth, timeout=300)
        assert again.headers["Idempotent-Replayed"] == "true" and again.json() == retried.json()
        other = httpx.post(server["url"] + "/v1/documents?collection=crash", files=files[:1], headers=auth,
                           timeout=60)
        assert other.status_code == 422 and other.json()["error"] == "idempotency_key_reused"
        listed = httpx.get(server["url"] + "/v1/documents?collection=crash&limit=1000", headers=auth, timeout=30)
        assert len(listed.json()["documents"]) == 400


def test_concurrent_requests_with_one_idempotency_key_run_once(cli_env: dict[str, str]) -> None:
    """Requests with the same Idempotency-Key at once: one runs; the others are 409 with Retry-After while it does
    (or replay it once it is done); a retry after it replays its response. Nothing fails on another's rows."""
    import threading
    import uuid

    tenant = "twice-" + uuid.uuid4().hex[:8]
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_RATE_LIMIT_PER_MINUTE": "0"}
    key = run_cli(["keys", "create", "--tenant", tenant], env).stdout.strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {key}", "Idempotency-Key": "same-upload"}
    files = [("files", (f"n{i:03d}.md", f"# Note {i}\n\n{' '.join(WORDS[(i + j) % len(WORDS)] for j in range(400))}"
                        "\n".encode(), "text/markdown")) for i in range(150)]
    responses: list[httpx.Response] = []

    def post(url: str) -> None:
        responses.append(httpx.post(url + "/v1/documents?collection=twice", files=files, headers=auth, timeout=300))

    with serving(env) as server:
        senders = [threading.Thread(target=post, args=(server["url"],)) for _ in range(4)]
        for sender in senders:
            sender.start()
            time.sleep(0.05)
        for sender in senders:
            sender.join(300)
        statuses = sorted(r.status_code for r in responses)
        ran = [r for r in responses if r.status_code == 200 and "Idempotent-Replayed" not in r.headers]
        assert len(responses) == 4 and set(statuses) <= {200, 409}, [(r.status_code, r.text[:300]) for r in responses]
        assert len(ran) == 1, statuses  # one ran; the others waited for it or replayed it
        counts = ran[0].json()["counts"]
        assert counts["ingested"] + counts["duplicate"] == 150 and not counts["failed"], counts
        for busy in (r for r in responses if r.status_code == 409):
            assert busy.json()["error"] == "idempotency_key_in_use" and int(busy.headers["Retry-After"]) >= 1
        again = httpx.post(server["url"] + "/v1/documents?collection=twice", files=files, headers=auth, timeout=300)
        assert again.headers["Idempotent-Replayed"] == "true" and again.json() == ran[0].json()


WORDS = ("apples pears plums cherries lemons limes melons grapes figs dates olives peaches apricots quinces kiwis "
         "mangoes papayas guavas lychees").split()


def test_serve_stores_a_queued_upload_and_a_worker_process_shares_it(cli_env: dict[str, str], client: Any) -> None:
    """The issue's done-when: `ragd serve` on the embedded server answers an upload of 20 files with ?wait=false
    with 202 at once, and the run succeeds, its files stored by the server's own worker and a `ragd worker`."""
    tenant = "serve-q-" + uuid.uuid4().hex[:6]
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_WORKER_HEARTBEAT_S": "0.5"}
    key = run_cli(["keys", "create", "--tenant", tenant], env).stdout.strip().splitlines()[-1]
    def body(n: int) -> str:  # twenty different inventories (not near-duplicates of one another)
        return "\n\n".join(f"Paragraph {p} of inventory {n}: aisle {p * n} holds {p * 11 + n * 7} pallets of "
                           f"{WORDS[(p + n) % len(WORDS)]} and {WORDS[(p * n) % len(WORDS)]}." for p in range(400))

    files = [("files", (f"inventory-{n:02d}.md", f"# Inventory {n}\n\n{body(n)}\n".encode(), "text/markdown"))
             for n in range(20)]
    worker_env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | env
    with serving(env) as server:
        worker = subprocess.Popen([sys.executable, "-m", "ragd.cli", "worker"], env=worker_env, cwd=REPO,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(3)  # the worker process registered (it takes jobs as soon as they are queued)
            began = time.monotonic()
            response = httpx.post(server["url"] + "/v1/documents", params={"wait": "false", "collection": "inv"},
                                  files=files, headers={"Authorization": f"Bearer {key}"}, timeout=60)
            answered_in = time.monotonic() - began
            assert response.status_code == 202, response.text
            location = server["url"] + response.headers["location"]
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                run = httpx.get(location, headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
                if run["status"] not in ("queued", "running"):
                    break
                time.sleep(0.3)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
    assert answered_in < 10  # at once: nothing was extracted or embedded before the answer
    assert run["status"] == "succeeded" and run["stats"]["counts"] == {"ingested": 20}, run
    with client.store.admin() as conn:
        pids = {r[0].rsplit(":", 1)[1] for r in conn.execute(
            "SELECT worker FROM ingestion_files WHERE run_id = %s", (run["run_id"],))}
    assert pids == {server["pid"], str(worker.pid)}  # both stored some of its files


def test_a_keyed_server_that_cannot_bind_says_why_in_one_line(cli_env: dict[str, str]) -> None:
    """With keys (so not refused as open), an address that is not this machine's or a port already taken: one line
    and exit 2, not uvicorn's own log line and exit 1."""
    env = {**cli_env, "RAGD_TENANT": "bind-t"}
    assert run_cli(["keys", "create", "--tenant", "bind-t"], env).returncode == 0
    bad = run_cli(["serve", "--host", "no-such-host.invalid", "--port", str(free_port())], env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert bad.stderr.startswith("error (config_error): cannot serve on host 'no-such-host.invalid'")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = run_cli(["serve", "--port", str(taken.getsockname()[1])], env)
    assert busy.returncode == 2 and busy.stderr.count("\n") == 1 and "another server on that port" in busy.stderr, \
        busy.stderr
