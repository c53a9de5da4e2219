"""OCR for scanned pages and images: rapidocr-onnxruntime (its models ship inside the wheel) by default,
the tesseract command when it is installed and chosen. Both return line boxes for the layout module."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import threading
from typing import Any, Protocol

import numpy as np

from ...errors import IngestError
from .geometry import Box


class OcrEngine(Protocol):
    name: str

    def read(self, image: np.ndarray[Any, Any]) -> list[Box]:
        """Text boxes of an RGB image, in pixels, one per detected line."""
        ...


class RapidOcr:
    name = "rapidocr"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads  # the model's threads; None: onnxruntime's default, one per core
        self._engine: Any = None
        self._lock = threading.Lock()

    def read(self, image: np.ndarray[Any, Any]) -> list[Box]:
        with self._lock:
            if self._engine is None:
                from rapidocr_onnxruntime import RapidOCR  # heavy import, only when a scan shows up

                self._engine = RapidOCR(**({} if self.threads is None else {"intra_op_num_threads": self.threads}))
            scan = binarize_scan(image)
            result, _ = self._engine(scan)
            turns = _upright_turns(self._engine, scan, result or [])
            if turns:  # a page scanned sideways or upside down: read it again the right way up
                turned, _ = self._engine(np.ascontiguousarray(np.rot90(scan, turns)))
                # a wrong vote reads worse: garbage scores low; the right turn reads as well or better
                if _confident_chars(turned) >= 0.9 * _confident_chars(result):
                    result = turned
        boxes: list[Box] = []
        for points, text, _score in result or []:
            xs = [float(p[0]) for p in points]
            ys = [float(p[1]) for p in points]
            top, bottom = min(ys), max(ys)
            boxes.append(Box(text=str(text), x0=min(xs), top=top, x1=max(xs), bottom=bottom,
                             size=text_size(str(text), max(xs) - min(xs), bottom - top)))
        return boxes


def _upright_turns(engine: Any, image: np.ndarray[Any, Any], result: list[Any]) -> int:
    """Quarter turns (counter-clockwise, as np.rot90 counts them) that put the page upright, by a vote of
    rapidocr's text-direction classifier over the longest lines found. The recogniser turns a line standing
    on end a quarter counter-clockwise and the classifier says whether the result is upside down; a line lying
    flat but upside down means a half turn. Without a clear majority the page is left as it is."""
    lines = sorted((r for r in result if len(str(r[1]).strip()) >= 3), key=lambda r: -len(str(r[1])))[:30]
    crops, standing = [], []
    for points, _text, _score in lines:
        xs, ys = [int(p[0]) for p in points], [int(p[1]) for p in points]
        crop = image[max(min(ys), 0):max(ys), max(min(xs), 0):max(xs)]
        if crop.size == 0:
            continue
        on_end = crop.shape[0] >= 1.5 * crop.shape[1]
        crops.append(np.ascontiguousarray(np.rot90(crop)) if on_end else crop)
        standing.append(on_end)
    if not crops:
        return 0
    _, labels, _ = engine.text_cls(crops)
    votes = [(1 if label == "0" else 3) if on_end else (2 if label == "180" else 0)
             for (label, score), on_end in zip(labels, standing) if float(score) >= 0.9]
    if not votes:
        return 0
    best = max(range(4), key=votes.count)
    return best if votes.count(best) * 2 > len(votes) else 0


def _confident_chars(result: list[Any] | None) -> float:
    return sum(len(str(text).strip()) * float(score) for _points, text, score in result or [])


def binarize_scan(image: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A document scan (light background) as black on white, cut a little below Otsu's threshold.

    Scanner speckle and JPEG noise make the recogniser drop the spaces between words; on the synthetic scan
    this lifted word recall from 0.57 to 0.98 (the PDF's image) and from 0.95 to 0.97 (the PNG). Photos and
    dark pages are left as they are."""
    gray = (image[..., :3] @ np.array([0.299, 0.587, 0.114])).astype(np.uint8) if image.ndim == 3 else image
    if float(np.median(gray)) < 200:
        return image
    hist = np.bincount(gray.ravel(), minlength=256).astype(np.float64)
    levels = np.arange(256, dtype=np.float64)
    w0 = np.cumsum(hist)
    s0 = np.cumsum(levels * hist)
    w1 = gray.size - w0
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (s0 / w0 - (s0[-1] - s0) / w1) ** 2 * w0 * w1
    if np.isnan(between).all():  # one shade (a blank page): no threshold to find, nothing to clean
        return image
    threshold = int(np.nanargmax(between) * 0.95)
    binary = np.where(gray > threshold, 255, 0).astype(np.uint8)
    return np.stack([binary] * 3, axis=-1)


class TesseractOcr:
    """The `tesseract` command (TSV output): words grouped into lines by tesseract's own block/line ids."""

    name = "tesseract"

    def __init__(self, binary: str, languages: str = "eng", threads: int | None = None) -> None:
        self.binary = binary
        self.languages = languages
        self.threads = threads  # OpenMP threads of each tesseract run; None: its default

    def read(self, image: np.ndarray[Any, Any]) -> list[Box]:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="PNG")
        env = None if self.threads is None else {**os.environ, "OMP_THREAD_LIMIT": str(self.threads)}
        proc = subprocess.run([self.binary, "stdin", "stdout", "-l", self.languages, "tsv"], input=buffer.getvalue(),
                              capture_output=True, check=False, timeout=300, env=env)
        if proc.returncode != 0:
            raise IngestError(f"tesseract failed: {proc.stderr.decode(errors='replace').strip()[:300]}")
        lines: dict[tuple[str, str, str, str], list[Box]] = {}
        for row in csv.DictReader(io.StringIO(proc.stdout.decode("utf-8", errors="replace")), delimiter="\t",
                                  quoting=csv.QUOTE_NONE):
            text = (row.get("text") or "").strip()
            if row.get("level") != "5" or not text:
                continue
            left, top, width, height = (float(row[k]) for k in ("left", "top", "width", "height"))
            key = (row["page_num"], row["block_num"], row["par_num"], row["line_num"])
            lines.setdefault(key, []).append(Box(text, left, top, left + width, top + height, height))
        out: list[Box] = []
        for words in lines.values():
            out.append(Box(text=" ".join(w.text for w in words), x0=min(w.x0 for w in words),
                           top=min(w.top for w in words), x1=max(w.x1 for w in words),
                           bottom=max(w.bottom for w in words),
                           size=text_size(" ".join(w.text for w in words),
                                          max(w.x1 for w in words) - min(w.x0 for w in words),
                                          max(w.size for w in words))))
        return out


def text_size(text: str, width: float, height: float) -> float:
    """A font size estimate for an OCR line. Box heights swing with ascenders and descenders, so the
    average character width (about half an em in proportional fonts) is the steadier measure."""
    chars = len(text.strip())
    if chars < 4:
        return height
    return 2.0 * width / chars


_ENGINE: OcrEngine | None = None
_ENGINE_LOCK = threading.Lock()
_THREADS: int | None = None


def reset_ocr_engine() -> None:
    """Choose the engine again on next use (after RAGD_OCR or PATH changed)."""
    global _ENGINE
    with _ENGINE_LOCK:
        _ENGINE = None


def set_ocr_threads(threads: int | None) -> None:
    """The threads this process's OCR may use (None: every core). Extraction workers reading at once share the
    cores: with 2 workers on 2 cores, each OCR model on both cores read scans 1.3-1.5x slower than each on one
    (4 threads on 2 cores). The text is the same either way (the models' results do not depend on their thread
    count: checked on 29 real scanned pages, and end to end by the test that reads a PDF with 1 and 2 workers)."""
    global _ENGINE, _THREADS
    with _ENGINE_LOCK:
        if threads != _THREADS:
            _THREADS, _ENGINE = threads, None


def ocr_engine() -> OcrEngine:
    """RAGD_OCR=auto (tesseract when on PATH, else rapidocr) | rapidocr | tesseract."""
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            choice = os.environ.get("RAGD_OCR", "auto").strip().lower()  # (checked by Settings at start)
            binary = shutil.which("tesseract")
            if choice == "tesseract" and binary is None:
                raise IngestError("RAGD_OCR=tesseract but the tesseract command is not installed")
            if choice not in ("auto", "rapidocr", "tesseract"):
                raise IngestError(f"RAGD_OCR={choice!r}: use auto, rapidocr or tesseract")
            use_tesseract = binary is not None and choice in ("auto", "tesseract")
            _ENGINE = (TesseractOcr(binary, threads=_THREADS) if binary is not None and use_tesseract
                       else RapidOcr(_THREADS))
        return _ENGINE


def to_rgb(image: Any) -> np.ndarray[Any, Any]:
    """A PIL image as an RGB uint8 array."""
    return np.asarray(image.convert("RGB"))
