"""Legacy Word and PowerPoint files (.doc, .ppt: Office 97-2003's binary formats) and RTF with tables, read through
LibreOffice headless when it is installed: `soffice --convert-to docx|pptx` (as other ingestion tools do), then
the DOCX or PPTX extractor, so headings, lists, tables and slides come out as they do from the modern formats.

Each conversion runs in a process group of its own, with a fresh LibreOffice profile, at most
RAGD_CONVERT_TIMEOUT_S seconds (default 120; the group is killed past it) and RAGD_CONVERT_MEMORY_MB of address
space (default 2048). Without LibreOffice a .doc or .ppt fails with a one-line error naming the package to install;
RTF is then read as text (striprtf)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from ...errors import CorruptDocument, EncryptedDocument, ExtractionTimeout, UnsupportedFormat
from ...types import ExtractedDocument
from .base import ExtractOptions, Extractor, Source

PACKAGES = {"docx": "libreoffice-writer-nogui", "pptx": "libreoffice-impress-nogui"}
NAMES = {"doc": "a legacy Word file (.doc)", "ppt": "a legacy PowerPoint file (.ppt)", "rtf": "an RTF file"}


def soffice() -> str | None:
    """LibreOffice's command, when it is installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def _limits() -> tuple[float, int]:
    def number(name: str, default: float) -> float:
        try:
            return max(1.0, float(os.environ.get(name, default)))
        except ValueError:
            return default

    return number("RAGD_CONVERT_TIMEOUT_S", 120.0), int(number("RAGD_CONVERT_MEMORY_MB", 2048.0)) << 20


def _bounded(memory: int) -> Callable[[], None]:
    def limit() -> None:  # in the child, before LibreOffice starts
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return limit


def convert(data: bytes, suffix: str, target: str, name: str) -> bytes:
    """The file converted by LibreOffice to `target` (docx or pptx). UnsupportedFormat when LibreOffice is not
    installed, ExtractionTimeout past the time limit, CorruptDocument when it cannot read the file."""
    command = soffice()
    if command is None:
        raise UnsupportedFormat(f"{name}: {NAMES.get(suffix, suffix)} is read with LibreOffice, which is not "
                                f"installed: apt-get install {PACKAGES[target]} (or save the file as {target.upper()})")
    timeout_s, memory = _limits()
    with tempfile.TemporaryDirectory(prefix="ragd-convert-") as folder:
        work = Path(folder)
        source = work / f"in.{suffix}"
        source.write_bytes(data)
        args = [command, "--headless", "--norestore", "--nolockcheck", "--nodefault", "--nologo",
                f"-env:UserInstallation={(work / 'profile').as_uri()}", "--convert-to", target,
                "--outdir", str(work / "out"), str(source)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=folder, start_new_session=True, preexec_fn=_bounded(memory),
                                env={**os.environ, "HOME": folder})
        try:
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
        converted = work / "out" / f"in.{target}"
        if not converted.is_file() or converted.stat().st_size == 0:
            said = " ".join(output.decode("utf-8", "replace").split())[-200:]
            raise CorruptDocument(f"{name}: LibreOffice could not read it as {NAMES.get(suffix, suffix)}"
                                  + (f" ({said})" if said else ""))
        return converted.read_bytes()


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
        except (UnsupportedFormat, CorruptDocument, ExtractionTimeout) as exc:
            yield exc
            return
        modern = dataclasses.replace(source, data=data, path=source.path.with_suffix(f".{self.target}"))
        for found in self.modern.extract(modern, options):
            if isinstance(found, ExtractedDocument):
                title = found.title if found.title != modern.path.stem else source.path.stem
                found = dataclasses.replace(found, source_type=self.source_type, title=title)
            yield found
