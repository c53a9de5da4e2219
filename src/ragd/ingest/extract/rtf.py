"""RTF (Word, WordPad, TextEdit): the text with striprtf (BSD), each paragraph a block; an RTF with tables through
LibreOffice when it is installed (extract.legacy), which keeps their rows and cells."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...errors import CorruptDocument
from ...types import ExtractedDocument
from .base import ExtractOptions, Source, single_document
from .docx import DocxExtractor
from .legacy import LegacyOfficeExtractor, soffice
from .text import text_blocks

_TITLE = re.compile(rb"{\\info[^{}]*?{\\title\s+([^{}]*)}")


class RtfExtractor:
    source_type = "rtf"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        warnings = []
        if b"\\trowd" in source.data and soffice() is not None:  # tables: LibreOffice keeps their rows and cells
            converted = list(LegacyOfficeExtractor("rtf", "docx", DocxExtractor()).extract(source, options))
            failed = [found for found in converted if isinstance(found, Exception)]
            if not failed:
                yield from converted
                return
            warnings.append(f"read as plain text, its tables as lines: {failed[0]}")
        from striprtf.striprtf import rtf_to_text

        try:
            # RTF is 7-bit text: other characters come as escapes in the file's code page, which striprtf reads
            text = str(rtf_to_text(source.data.decode("latin-1"), errors="replace"))  # type: ignore[no-untyped-call]
        except Exception as exc:  # striprtf raises plain exceptions on broken control words
            yield CorruptDocument(f"{source.path.name}: damaged RTF ({type(exc).__name__}: {exc})")
            return
        match = _TITLE.search(source.data[:65536])
        title = match.group(1).decode("latin-1").strip() if match else None
        # each \par ends a paragraph: one line of the text, so it is a block of its own
        paragraphs = "\n\n".join(line for line in text.split("\n"))
        yield from single_document(source, "rtf", title or source.path.stem, text_blocks(paragraphs),
                                   warnings=warnings)
