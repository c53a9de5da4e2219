"""Images (PNG, JPEG, TIFF with all its pages, GIF, BMP, WebP): OCR, then the same layout analysis as PDF
pages, so columns, paragraphs, headings and aligned tables come out as blocks."""

from __future__ import annotations

import io
from collections.abc import Iterator

from ...errors import CorruptDocument
from ...types import ExtractedDocument
from .base import ExtractOptions, Source, single_document
from .geometry import PageText, reading_order
from .layout import finish, leaf_blocks
from .ocr import ocr_engine, to_rgb

MAX_PIXELS = 60_000_000  # a decompression bomb is refused before it is decoded


class ImageExtractor:
    source_type = "image"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        from PIL import Image, ImageSequence, UnidentifiedImageError

        try:
            image = Image.open(io.BytesIO(source.data))
            if image.width * image.height > MAX_PIXELS:
                yield CorruptDocument(f"{source.path.name}: {image.width}x{image.height} pixels is over the "
                                      f"{MAX_PIXELS:,}-pixel limit for OCR")
                return
            frames = [to_rgb(frame) for frame in ImageSequence.Iterator(image)]
        except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
            yield CorruptDocument(f"{source.path.name}: unreadable image ({exc})")
            return
        engine = ocr_engine()
        pages = []
        for number, frame in enumerate(frames, start=1):
            page = PageText(number)
            for leaf in reading_order(engine.read(frame)):
                page.blocks.extend(leaf_blocks(leaf, number))
            pages.append(page)
        blocks = finish(pages)
        yield from single_document(source, "image", None, blocks,
                                   metadata={"pages": len(frames), "ocr": engine.name})
