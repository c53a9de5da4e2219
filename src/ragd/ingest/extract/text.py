"""Plain text: paragraphs split on blank lines; bullet runs become lists; setext underlines become headings."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...types import Block, ExtractedDocument
from ..normalize import decode_text, normalize_text
from .base import ExtractOptions, Source, single_document

_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d{1,3}[.)])\s+")
_UNDERLINE = re.compile(r"^(=+|-+)$")


def text_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    for para in normalize_text(text).split("\n\n"):
        lines = [line for line in para.split("\n") if line]
        if not lines:
            continue
        if len(lines) == 2 and _UNDERLINE.match(lines[1]) and len(lines[0]) <= 120:
            blocks.append(Block("heading", lines[0], level=1 if lines[1][0] == "=" else 2))
        elif all(_BULLET.match(line) for line in lines):
            blocks.append(Block("list", "\n".join(lines)))
        else:
            blocks.append(Block("paragraph", " ".join(lines)))  # para is normalised: fold_lines without redoing it
    return blocks


class TextExtractor:
    source_type = "text"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        yield from single_document(source, self.source_type, source.path.stem, text_blocks(decode_text(source.data)))
