"""Markdown through markdown-it-py (CommonMark + tables): headings, paragraphs, lists, code, tables."""

from __future__ import annotations

from collections.abc import Iterator

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ...types import Block, ExtractedDocument, table_text
from ..normalize import decode_text, fold_lines, normalize_text
from .base import ExtractOptions, Source, single_document

_MD = MarkdownIt("commonmark").enable("table")


def _table(tokens: list[Token], start: int) -> tuple[Block, int]:
    header: list[str] = []
    rows: list[list[str]] = []
    current: list[str] | None = None
    in_head = False
    i = start
    while i < len(tokens) and tokens[i].type != "table_close":
        tok = tokens[i]
        if tok.type == "thead_open":
            in_head = True
        elif tok.type == "thead_close":
            in_head = False
        elif tok.type == "tr_open":
            current = []
        elif tok.type == "tr_close" and current is not None:
            if in_head:
                header = current
            else:
                rows.append(current)
            current = None
        elif tok.type == "inline" and current is not None:
            current.append(fold_lines(tok.content))
        i += 1
    return Block("table", table_text(header, rows), header=tuple(header), rows=tuple(tuple(r) for r in rows)), i


def markdown_blocks(text: str) -> list[Block]:
    source = normalize_text(text)
    lines = source.split("\n")
    tokens = _MD.parse(source)
    blocks: list[Block] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "heading_open":
            blocks.append(Block("heading", fold_lines(tokens[i + 1].content), level=int(tok.tag[1:])))
            i += 3
            continue
        if tok.type in ("bullet_list_open", "ordered_list_open") and tok.level == 0 and tok.map:
            depth = 1
            j = i + 1
            while depth and j < len(tokens):
                if tokens[j].type in ("bullet_list_open", "ordered_list_open"):
                    depth += 1
                elif tokens[j].type in ("bullet_list_close", "ordered_list_close"):
                    depth -= 1
                j += 1
            body = "\n".join(line for line in lines[tok.map[0] : tok.map[1]] if line.strip())
            blocks.append(Block("list", body))
            i = j
            continue
        if tok.type == "paragraph_open":
            blocks.append(Block("paragraph", fold_lines(tokens[i + 1].content)))
            i += 3
            continue
        if tok.type in ("fence", "code_block"):
            if tok.content.strip():
                blocks.append(Block("code", tok.content.rstrip("\n"), meta={"lang": tok.info.strip()}))
        elif tok.type == "html_block":
            if tok.content.strip():
                blocks.append(Block("paragraph", fold_lines(tok.content)))
        elif tok.type == "table_open":
            block, i = _table(tokens, i)
            blocks.append(block)
        i += 1
    return [b for b in blocks if b.text.strip()]


class MarkdownExtractor:
    source_type = "markdown"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        blocks = markdown_blocks(decode_text(source.data))
        title = next((b.text for b in blocks if b.type == "heading"), source.path.stem)
        yield from single_document(source, self.source_type, title, blocks)
