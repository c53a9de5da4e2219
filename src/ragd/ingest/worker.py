"""Extraction in a child process under a wall-clock and memory budget.

A parser that loops or swells on one hostile file (a page of a million glyphs, a decompression bomb, a 150 MB
Markdown file) is killed when it overruns, its item is recorded as failed (`timeout`, `file_too_large`), and the
run goes on with a fresh worker. Workers are started as `python -c ...serve(fd)` (not forked: the parent
holds threads and connections; not multiprocessing's spawn, which would run the caller's own script again in the
child), talk over a socket pair, and are kept between runs, so the import cost is paid once per process.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import (
    CorruptDocument,
    ExtractionTimeout,
    FileTooLarge,
    IngestError,
    InvalidRequest,
    NotFound,
    PageNotRendered,
    RagdError,
)
from ..types import ExtractedDocument
from .bounds import Limits
from .extract import ExtractOptions
from .extract.legacy import kill_conversions_of

if TYPE_CHECKING:
    from ..pages import Rendered

from .read import PdfPart, PdfSplit, extract_or_split, extract_path, lay_out_pdf, read_pdf_pages

POLL_S = 0.05
STARTUP_S = 120
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class Worker:
    """One child process serving extraction requests over a pipe, one at a time."""

    def __init__(self, limits: Limits):
        self.limits = limits
        mine, theirs = socket.socketpair()
        self._proc = subprocess.Popen(
            # -P: nothing from the current folder shadows ragd in the worker
            [sys.executable, "-P", "-c", "import sys; from ragd.ingest.worker import serve; serve(int(sys.argv[1]))",
             str(theirs.fileno())], pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL, close_fds=True)
        theirs.close()
        self._conn = Connection(mine.detach())
        self._conn.send(limits)
        self._busy = False
        # the clock of the first item starts once the worker has imported the extractors
        try:
            ready = self._conn.poll(STARTUP_S) and self._conn.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise IngestError(f"the extraction worker did not start within {STARTUP_S} s "
                              f"(exit code {self._proc.returncode}); set RAGD_EXTRACT_ISOLATION=false to extract "
                              "in-process")

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def reusable(self) -> bool:
        """Alive and not left mid-request (an interrupted caller): its next answer would be a stale one."""
        return self.alive and not self._busy

    def extract(self, path: Path, options: ExtractOptions, split_pages: int = 0,
                ocr_threads: int | None = None) -> list[ExtractedDocument | Exception] | PdfSplit:
        """The documents of one file, or one exception saying why there are none; with `split_pages`, a PDF of
        that many pages or more comes back as a PdfSplit (its page count), to be read in ranges; `ocr_threads`:
        the threads its OCR may use (None: every core). On an overrun the worker is killed (and `alive` is False
        afterwards)."""
        answer: list[ExtractedDocument | Exception] | PdfSplit = self.ask(
            ("extract", path, ocr_threads, options, split_pages), path)
        return answer

    def ask(self, request: tuple[Any, ...], path: Path) -> Any:
        """The worker's answer to one request about `path`, or a list of one exception when it overran its
        time or memory or died (the file's failure)."""
        self._conn.send(request)
        self._busy = True
        started = time.monotonic()
        while True:
            if self._conn.poll(POLL_S):
                try:
                    result = self._conn.recv()
                    self._busy = False
                    return result
                except (EOFError, OSError):
                    pass  # the worker died mid-answer: reported below
            if not self.alive:
                self._conn.close()
                return [CorruptDocument(f"{path.name}: the extraction process died (exit code "
                                        f"{self._proc.returncode}) reading it")]
            if time.monotonic() - started > self.limits.timeout_s:
                self.kill()
                return [ExtractionTimeout(f"{path.name}: extraction took longer than {self.limits.timeout_s:g} s "
                                          "and was stopped (RAGD_EXTRACT_TIMEOUT_S)")]
            rss = _rss_mb(self._proc.pid)
            if rss is not None and rss > self.limits.memory_mb:
                self.kill()
                return [FileTooLarge(f"{path.name}: extraction needed more than {self.limits.memory_mb} MB of "
                                     "memory and was stopped (RAGD_EXTRACT_MEMORY_MB)")]

    def kill(self) -> None:
        self._proc.kill()
        self._proc.wait()
        self._conn.close()
        kill_conversions_of(self._proc.pid)  # a LibreOffice it started, and the tenant's file it was given

    def close(self) -> None:
        if self.alive:
            try:
                self._conn.send(None)
                self._proc.wait(timeout=2)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        if self.alive:
            self._proc.kill()
            self._proc.wait()
        self._conn.close()


def serve(fd: int) -> None:
    """The worker process: extract each requested file and send back the whole list."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (it stops this process)
    # stopped (SIGTERM) or orphaned mid-file: leave through the converters' cleanup, not past it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    limits: Limits = conn.recv()
    from .extract.ocr import set_ocr_threads

    if not sys.platform.startswith("linux"):  # no /proc to watch from the parent: the kernel enforces it
        import resource

        cap = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    conn.send("ready")
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        kind, path, *args = request
        answer: Any
        if kind == "render_page":  # a page image for a request: its errors go back as values
            answer = _rendered(*args)
        elif kind == "pdf_layout":  # the document of a long PDF's ranges read by workers
            answer = lay_out_pdf(path, *args)
        else:  # a file, or pages start..stop of a long PDF (unlaid), with the threads its OCR may use
            threads, *args = args
            set_ocr_threads(threads)
            answer = (read_pdf_pages if kind == "pdf_pages" else extract_or_split)(path, limits, *args)
        try:
            conn.send(answer)
        except OSError:  # the parent is gone
            return


def _exit_with_parent(parent: int) -> None:
    """Stop this worker once its parent is gone (killed, or stopped without closing its workers): SIGTERM to
    itself, so a conversion under way is killed and its files removed as on any other exit."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)


def _rendered(*args: Any) -> Any:
    from ..errors import RagdError
    from ..pages import render_page

    try:
        return render_page(*args)
    except RagdError as exc:
        return exc


def _rss_mb(pid: int | None) -> float | None:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        return None


class WorkerPool:
    """Idle workers kept for the next run, per set of limits; closed when the process exits."""

    def __init__(self) -> None:
        self._idle: list[Worker] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def take(self, limits: Limits) -> Worker:
        with self._lock:
            for i, worker in enumerate(self._idle):
                if worker.limits == limits and worker.alive:
                    return self._idle.pop(i)
        return Worker(limits)

    def give_back(self, worker: Worker) -> None:
        if not worker.reusable:
            worker.close()
            return
        with self._lock:
            self._idle.append(worker)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


POOL = WorkerPool()


PDF_RANGE_PAGES = 16  # the fewest pages of a long PDF read by one worker at a time


class Extraction:
    """Extracts files, each in a worker process under the time and memory limits when isolation is on, up to
    `workers` files at once; results come back in the order of the files, whatever the number of workers, so
    item numbers, ids and chunks are the same for any N. With more than one worker, a PDF of `pdf_split_pages`
    pages or more has its pages read in ranges by the workers at once (each range under the limits), then laid
    out as one document: each page is read on its own, so the document is the same as one worker's."""

    def __init__(self, settings: Settings, options: ExtractOptions, workers: int = 1):
        self.limits = Limits.from_settings(settings)
        self.isolated = settings.extract_isolation
        self.options = options
        self.workers = max(1, workers) if self.isolated else 1  # in-process parsers hold the GIL: one at a time
        # workers reading at once share the cores: each one's OCR gets its share of them (one worker: all)
        self.ocr_threads = max(1, default_workers() // self.workers) if self.workers > 1 else None
        self.split_pages = settings.pdf_split_pages if self.workers > 1 else 0
        self._taken: list[Worker] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._ranges = threading.BoundedSemaphore(self.workers)  # page ranges read at once, over all files

    def __call__(self, path: Path) -> list[ExtractedDocument | Exception]:
        if not self.isolated:
            return list(extract_path(path, self.limits, self.options))
        answer = self._worker().extract(path, self.options, self.split_pages, self.ocr_threads)
        return self._split(path, answer.pages) if isinstance(answer, PdfSplit) else answer

    def _worker(self) -> Worker:
        """This thread's worker, started (or taken from the idle pool) on first use or after it was killed."""
        worker: Worker | None = getattr(self._local, "worker", None)
        if worker is None or not worker.alive:
            worker = POOL.take(self.limits)
            self._local.worker = worker
            with self._lock:
                self._taken.append(worker)
        return worker

    def _split(self, path: Path, pages: int) -> list[ExtractedDocument | Exception]:
        """A long PDF read in page ranges by `workers` workers at once, then laid out by this thread's worker;
        the first range that fails fails the file."""
        size = max(PDF_RANGE_PAGES, -(-pages // (2 * self.workers)))
        ranges = [(start, min(start + size, pages)) for start in range(0, pages, size)]
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="ragd-pages") as pool:
            parts = list(pool.map(lambda r: self._read_range(path, *r), ranges))
        for part in parts:
            if isinstance(part, list):
                return list(part)
        answer: list[ExtractedDocument | Exception] = self._worker().ask(("pdf_layout", path, parts), path)
        return answer

    def _read_range(self, path: Path, start: int, stop: int) -> PdfPart | list[Exception]:
        with self._ranges:
            worker = POOL.take(self.limits)
            try:
                part: PdfPart | list[Exception] = worker.ask(("pdf_pages", path, self.ocr_threads, start, stop),
                                                             path)
                return part
            finally:
                POOL.give_back(worker)

    def timed(self, path: Path) -> tuple[list[ExtractedDocument | Exception], float]:
        """A file's documents or failures, and the seconds reading it took (a worker's start not counted)."""
        if self.isolated:
            self._worker()
        started = time.perf_counter()
        found = self(path)
        return found, time.perf_counter() - started

    def each(self, sources: Sequence[Path | IngestError]
             ) -> Iterator[tuple[Path | IngestError, list[Any], float]]:
        """(source, its documents or failures, the seconds reading it took), in the order of `sources`; a source
        that is already an error comes back with no documents."""
        if self.workers == 1 or len(sources) < 2:
            for src in sources:
                yield (src, [], 0.0) if isinstance(src, IngestError) else (src, *self.timed(src))
            return
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="ragd-extract") as pool:
            ahead: deque[tuple[Path | IngestError, Future[tuple[list[Any], float]] | None]] = deque()
            pending = iter(sources)
            try:
                for src in pending:
                    ahead.append((src, None if isinstance(src, IngestError) else pool.submit(self.timed, src)))
                    if len(ahead) >= 2 * self.workers:  # a bounded look-ahead: memory stays flat
                        first, future = ahead.popleft()
                        yield (first, *future.result()) if future is not None else (first, [], 0.0)
                while ahead:
                    first, future = ahead.popleft()
                    yield (first, *future.result()) if future is not None else (first, [], 0.0)
            finally:
                for _, future in ahead:
                    if future is not None:
                        future.cancel()

    def close(self) -> None:
        with self._lock:
            taken, self._taken = self._taken, []
        for worker in taken:
            POOL.give_back(worker)


def default_workers() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def render_isolated(data: bytes, media_type: str, page: int, boxes: Sequence[Sequence[float]], quotes: Sequence[str],
                    limits: Limits) -> Rendered:
    """render_page in a worker process under `limits` (its timeout and memory): an overrun kills the worker and
    is PageNotRendered; the page's own errors (no such page, not a PDF) come back as they are."""
    from ..pages import Rendered

    worker = POOL.take(limits)
    try:
        answer = worker.ask(("render_page", Path(f"page {page}"), data, media_type, page,
                             [list(map(float, b)) for b in boxes], list(quotes)), Path(f"page {page}"))
    finally:
        POOL.give_back(worker)
    if isinstance(answer, Rendered):
        return answer
    problem = answer[0] if isinstance(answer, list) and answer else answer
    if isinstance(problem, NotFound | InvalidRequest):
        raise problem
    reason = str(problem) if isinstance(problem, RagdError) else repr(problem)
    raise PageNotRendered(f"this page could not be drawn ({reason}); download the original from /source")


def render(settings: Settings, data: bytes, media_type: str, page: int, boxes: Sequence[Sequence[float]],
           quotes: Sequence[str]) -> Rendered:
    """A page drawn for a request: in a worker under RAGD_RENDER_TIMEOUT_S when extraction is isolated (no original
    or quote keeps the caller's thread past the deadline), else in this process."""
    from ..pages import render_page

    if not settings.extract_isolation:
        return render_page(data, media_type, page, boxes, quotes)
    limits = dataclasses.replace(Limits.from_settings(settings), timeout_s=settings.render_timeout_s)
    return render_isolated(data, media_type, page, boxes, quotes, limits)
