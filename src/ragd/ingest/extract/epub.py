"""EPUB: the chapters in spine order (the package's reading order), each read as HTML."""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Iterator

from lxml import etree

from ...errors import CorruptDocument
from ...types import Block, ExtractedDocument
from ..normalize import decode_text, normalize_text
from .base import ExtractOptions, Source, single_document
from .html import html_blocks

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True)
OPF = "http://www.idpf.org/2007/opf"
DC = "http://purl.org/dc/elements/1.1/"


class EpubExtractor:
    source_type = "epub"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        try:
            with zipfile.ZipFile(io.BytesIO(source.data)) as archive:
                container = etree.fromstring(archive.read("META-INF/container.xml"), _PARSER)
                rootfile = next(e.get("full-path") for e in container.iter() if str(e.tag).endswith("rootfile"))
                package = etree.fromstring(archive.read(rootfile), _PARSER)
                base = posixpath.dirname(rootfile)
                manifest = {i.get("id"): i for i in package.iter(f"{{{OPF}}}item")}
                chapters = []
                for ref in package.iter(f"{{{OPF}}}itemref"):
                    item = manifest.get(ref.get("idref"))
                    if item is None or "html" not in (item.get("media-type") or ""):
                        continue
                    path = posixpath.normpath(posixpath.join(base, item.get("href") or ""))
                    chapters.append((path, archive.read(path)))
        except (KeyError, StopIteration, zipfile.BadZipFile, etree.XMLSyntaxError, ValueError) as exc:
            yield CorruptDocument(f"{source.path.name}: damaged EPUB ({type(exc).__name__}: {exc})")
            return
        title = next((normalize_text(t.text or "") for t in package.iter(f"{{{DC}}}title") if (t.text or "").strip()),
                     None)
        blocks: list[Block] = []
        for number, (path, data) in enumerate(chapters, start=1):
            try:
                _, chapter = html_blocks(decode_text(data), f"{source.path.name}:{path}")
            except CorruptDocument as exc:
                yield exc
                return
            blocks.extend(Block(b.type, b.text, b.level, number, b.header, b.rows, {**b.meta, "chapter": path})
                          for b in chapter)
        yield from single_document(source, "epub", title, blocks, metadata={"chapters": len(chapters)})
