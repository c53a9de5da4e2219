"""Legacy Word and PowerPoint files (.doc, .ppt: Office 97-2003's binary formats) and RTF with tables, read through
LibreOffice headless when it is installed: `soffice --convert-to docx|pptx` (as other ingestion tools do), then
the DOCX or PPTX extractor, so headings, lists, tables and slides come out as they do from the modern formats.

A document may link content from elsewhere (linked pictures, `vnd.sun.star.expand:` URLs that expand environment
variables and lines of files, linked sections, INCLUDEPICTURE/INCLUDETEXT, DDE), and LibreOffice loads links while
it converts; an uploaded file must not make the server fetch a URL or read its secrets. So each conversion runs:
- with a minimal environment (PATH, LANG=C.UTF-8, HOME and TMPDIR in the conversion's own folder): nothing of
  ragd's settings or secrets to expand;
- on Linux where the kernel allows it, in user, network and PID namespaces of its own (`unshare`): no network at
  all, and every process of LibreOffice dies with the namespace (RAGD_CONVERT_NAMESPACES=false turns this off);
- with a fresh profile that refuses linked content (links never updated, untrusted links blocked, macros off) and
  sends any URL it would still fetch to a proxy that cannot exist (`.invalid`), the guard where no namespace can
  be made;
- at most RAGD_CONVERT_TIMEOUT_S seconds (default 120) and RAGD_CONVERT_MEMORY_MB of address space (default
  2048); its process group is killed past them, and it dies with the process that started it (a parent-death
  signal), e.g. an extraction worker killed at RAGD_EXTRACT_TIMEOUT_S.
The folder (the file, the profile, LibreOffice's temporary files) is removed afterwards; folders of a process that
was killed before it could remove its own are removed by the next conversion.

Without LibreOffice a .doc or .ppt fails with a one-line error naming the package to install; RTF is then read as
text (striprtf)."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from ...config import Settings
from ...errors import CorruptDocument, EncryptedDocument, ExtractionTimeout, FileTooLarge, UnsupportedFormat
from ...types import ExtractedDocument
from ..uploads import sweep_dead
from .base import ExtractOptions, Extractor, Source

log = logging.getLogger("ragd.ingest")
PACKAGES = {"docx": "libreoffice-writer-nogui", "pptx": "libreoffice-impress-nogui"}
NAMES = {"doc": "a legacy Word file (.doc)", "ppt": "a legacy PowerPoint file (.ppt)", "rtf": "an RTF file"}
FOLDER_PREFIX = "ragd-convert-"
GROUP_FILE = "group"  # the converter's process group, for whoever must kill it (extract.worker)
PR_SET_PDEATHSIG = 1
NO_PROXY_HOST = "no-network.invalid"  # RFC 2606: never resolves


def _setting(path: str, name: str, value: str) -> str:
    return f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse"><value>{value}</value></prop></item>'


SCRIPTING, INET = "/org.openoffice.Office.Common/Security/Scripting", "/org.openoffice.Inet/Settings"
# The profile's registry: links are never updated on load (Writer 0 = never, Calc 1 = never), fields are not
# recomputed, untrusted links and macros are refused, and every protocol goes to a proxy that does not exist.
PROFILE = "\n".join([
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">',
    _setting(SCRIPTING, "BlockUntrustedRefererLinks", "true"),
    _setting(SCRIPTING, "DisableMacrosExecution", "true"),
    _setting(SCRIPTING, "MacroSecurityLevel", "3"),
    _setting("/org.openoffice.Office.Writer/Content/Update", "Link", "0"),
    _setting("/org.openoffice.Office.Writer/Content/Update", "Field", "false"),
    _setting("/org.openoffice.Office.Calc/Content/Update", "Link", "1"),
    _setting(INET, "ooInetProxyType", "2"),
    *(_setting(INET, f"ooInet{kind}Proxy{field}", value) for kind in ("HTTP", "HTTPS", "FTP")
      for field, value in (("Name", NO_PROXY_HOST), ("Port", "9"))),
    _setting(INET, "ooInetNoProxy", ""),
    "</oor:items>", ""])


def soffice() -> str | None:
    """LibreOffice's command, when it is installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def _limits() -> tuple[float, int]:
    """RAGD_CONVERT_TIMEOUT_S and RAGD_CONVERT_MEMORY_MB (bytes), read in whichever process converts; their
    defaults are the settings' own."""
    def number(field: str) -> float:
        default = float(Settings.model_fields[field].default)
        try:
            return max(1.0, float(os.environ.get(f"RAGD_{field.upper()}", default)))
        except ValueError:
            return default

    return number("convert_timeout_s"), int(number("convert_memory_mb")) << 20


def namespaces() -> tuple[str, ...]:
    """The `unshare` prefix that runs a command without network, in a PID namespace that dies with it, when this
    machine allows it (checked once per process); empty where it does not (not Linux, no util-linux, user
    namespaces disabled, a container's seccomp profile) or RAGD_CONVERT_NAMESPACES is false."""
    wanted = os.environ.get("RAGD_CONVERT_NAMESPACES", "auto").strip().lower()
    return () if wanted in ("0", "false", "no", "off") else _unshare()


@functools.cache
def _unshare() -> tuple[str, ...]:
    command = shutil.which("unshare")
    if not sys.platform.startswith("linux") or command is None:
        return ()
    prefix = (command, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child")
    try:
        works = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        works = False
    if not works:
        log.info("legacy Office conversions run without network namespaces here (unshare refused); linked "
                 "content is refused by LibreOffice's profile instead")
    return prefix if works else ()


@functools.cache
def _prctl() -> Callable[..., int] | None:
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


def _child_setup(memory: int) -> Callable[[], None]:
    prctl = _prctl() if sys.platform.startswith("linux") else None

    def setup() -> None:  # in the child, before the converter starts
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if prctl is not None:  # killed when the thread that started it dies (the worker, killed or not)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    return setup


def environment(folder: Path) -> dict[str, str]:
    """The converter's whole environment: nothing of this process's own (settings, keys, proxies)."""
    home, tmp = folder / "home", folder / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return {"PATH": os.environ.get("PATH") or os.defpath, "HOME": str(home), "TMPDIR": str(tmp),
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "SAL_USE_VCLPLUGIN": "svp"}


def sweep() -> int:
    """Remove the conversion folders of processes that no longer run (killed before they could)."""
    return sweep_dead(Path(tempfile.gettempdir()), FOLDER_PREFIX)


def kill_conversions_of(pid: int) -> None:
    """Kill what the (dead) process `pid` was converting and remove its folders: where no PID namespace ends
    LibreOffice with it, its process group outlives it."""
    for folder in sorted(Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}{pid}-*")):
        with contextlib.suppress(OSError, ValueError, ProcessLookupError, PermissionError):
            os.killpg(int((folder / GROUP_FILE).read_text(encoding="ascii")), signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def convert(data: bytes, suffix: str, target: str, name: str) -> bytes:
    """The file converted by LibreOffice to `target` (docx or pptx). UnsupportedFormat when LibreOffice is not
    installed, ExtractionTimeout past the time limit, FileTooLarge past the memory limit, CorruptDocument when it
    cannot read the file."""
    command = soffice()
    if command is None:
        raise UnsupportedFormat(f"{name}: {NAMES.get(suffix, suffix)} is read with LibreOffice, which is not "
                                f"installed: apt-get install {PACKAGES[target]} (or save the file as {target.upper()})")
    timeout_s, memory = _limits()
    sweep()
    with tempfile.TemporaryDirectory(prefix=f"{FOLDER_PREFIX}{os.getpid()}-") as folder:
        work = Path(folder)
        source = work / f"in.{suffix}"
        source.write_bytes(data)
        (work / "profile" / "user").mkdir(parents=True)
        (work / "profile" / "user" / "registrymodifications.xcu").write_text(PROFILE, encoding="utf-8")
        args = [*namespaces(), command, "--headless", "--norestore", "--nolockcheck", "--nodefault", "--nologo",
                f"-env:UserInstallation={(work / 'profile').as_uri()}", "--convert-to", target,
                "--outdir", str(work / "out"), str(source)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=folder, start_new_session=True, preexec_fn=_child_setup(memory),
                                env=environment(work))
        try:
            (work / GROUP_FILE).write_text(str(proc.pid), encoding="ascii")
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise ExtractionTimeout(f"{name}: LibreOffice did not convert it within {timeout_s:g} s "
                                    "(RAGD_CONVERT_TIMEOUT_S)") from None
        finally:
            with contextlib.suppress(ProcessLookupError):  # anything it left running
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        converted = work / "out" / f"in.{target}"
        if not converted.is_file() or converted.stat().st_size == 0:
            raise _failure(name, suffix, target, output.decode("utf-8", "replace"), proc.returncode, memory >> 20)
        return converted.read_bytes()


MEMORY_SAID = ("bad_alloc", "out of memory", "cannot allocate memory", "failed to map segment")
CRASHED = re.compile(r"Fatal exception: Signal (\d+)")


def _failure(name: str, suffix: str, target: str, output: str, returncode: int | None,
             memory_mb: int) -> FileTooLarge | CorruptDocument:
    """Why a conversion gave no file, in one line: out of its memory, crashed (a damaged file, or memory it
    could not get), or the file not read."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and "javaldx" not in line]
    said = " ".join(lines)
    if any(marker in said.lower() for marker in MEMORY_SAID):
        return FileTooLarge(f"{name}: converting it ran out of memory (RAGD_CONVERT_MEMORY_MB={memory_mb}); raise "
                            f"the setting or save the file as {target.upper()}")
    crash = CRASHED.search(said)
    signalled = int(crash.group(1)) if crash else -returncode if returncode is not None and returncode < 0 else 0
    if signalled:
        return CorruptDocument(f"{name}: LibreOffice crashed converting it (signal {signalled}): the file is "
                               f"damaged, or converting it needs more than RAGD_CONVERT_MEMORY_MB={memory_mb}")
    return CorruptDocument(f"{name}: LibreOffice could not read it as {NAMES.get(suffix, suffix)}"
                           + (f" ({said[-200:]})" if said else ""))


def encrypted(data: bytes) -> bool:
    """Whether an OLE file is a password-protected Word file (the FIB's fEncrypted bit) or PowerPoint file (its
    EncryptedSummary stream). Not an OLE file, or a broken one: False (LibreOffice says what is wrong)."""
    if not data.startswith(b"\xd0\xcf\x11\xe0"):
        return False
    import olefile

    try:
        with olefile.OleFileIO(data) as ole:
            if ole.exists("EncryptedSummary"):
                return True
            if ole.exists("WordDocument"):
                fib = ole.openstream("WordDocument").read(12)
                return len(fib) == 12 and bool(int.from_bytes(fib[10:12], "little") & 0x0100)
    except (OSError, ValueError, IndexError):
        return False
    return False


class LegacyOfficeExtractor:
    """A .doc or .ppt through LibreOffice and the modern format's extractor; documents keep the file's own name,
    id and type ("doc", "ppt")."""

    def __init__(self, source_type: str, target: str, modern: Extractor):
        self.source_type, self.target, self.modern = source_type, target, modern

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        if encrypted(source.data):
            yield EncryptedDocument(f"{source.path.name}: a password-protected Office file: remove the password "
                                    "and ingest it again")
            return
        try:
            data = convert(source.data, self.source_type, self.target, source.path.name)
        except (UnsupportedFormat, CorruptDocument, ExtractionTimeout, FileTooLarge) as exc:
            yield exc
            return
        modern = dataclasses.replace(source, data=data, path=source.path.with_suffix(f".{self.target}"))
        for found in self.modern.extract(modern, options):
            if isinstance(found, ExtractedDocument):
                title = found.title if found.title != modern.path.stem else source.path.stem
                found = dataclasses.replace(found, source_type=self.source_type, title=title)
            yield found
