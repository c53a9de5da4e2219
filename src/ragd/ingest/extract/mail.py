"""Email (.eml, RFC 5322 with MIME): headers as metadata, the text body (or the HTML one) as the document, and
each attachment as a document of its own, read by the extractor for its format."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import PurePosixPath
from typing import Any

from ...errors import CorruptDocument, IngestError, UnsupportedFormat
from ...types import Block, ExtractedDocument
from .base import EXTRACTORS, ExtractOptions, Source, single_document
from .html import html_blocks
from .text import text_blocks

HEADERS = ("subject", "from", "to", "cc", "date", "message-id", "in-reply-to")
MAX_DEPTH = 3  # an email (or .msg) attached to an email attached to an email: deeper ones are not opened
MAX_ATTACHMENTS = 1000  # attachments read from one file, at every depth together


class Budget:
    """The attachments one file may still have read, shared by every message nested in it (.eml and .msg alike):
    a message attached twice to itself, level after level, doubles with each level."""

    def __init__(self, left: int = MAX_ATTACHMENTS):
        self.left = left
        self.said = False

    def take(self) -> bool:
        """One more attachment, if the file may have it."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def refusal(self, name: str) -> Exception | None:
        """The one error that says the rest were not read (once per file)."""
        if self.said:
            return None
        self.said = True
        return UnsupportedFormat(f"{name}: more than {MAX_ATTACHMENTS} attachments (nested ones counted); the rest "
                                 "are not read")


class EmailExtractor:
    source_type = "email"

    def __init__(self, depth: int = 0, budget: Budget | None = None):
        self.depth = depth
        self.budget = budget

    def nested(self, depth: int, budget: Budget) -> EmailExtractor:
        """This extractor for a message `depth` levels down in a file, sharing the file's budget."""
        return EmailExtractor(depth, budget)

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        try:
            message = email.message_from_bytes(source.data, policy=email.policy.default)
        except Exception as exc:  # the parser is lenient; anything it raises is a broken file
            yield CorruptDocument(f"{source.path.name}: unreadable email ({type(exc).__name__}: {exc})")
            return
        assert isinstance(message, EmailMessage)
        metadata: dict[str, Any] = {}
        for name in HEADERS:
            value = message.get(name)
            if value is not None:
                metadata[name.replace("-", "_")] = " ".join(str(value).split())
        subject = metadata.get("subject")
        blocks: list[Block] = []
        body = message.get_body(preferencelist=("plain", "html"))
        if body is not None:
            try:
                content = body.get_content()
            except (LookupError, ValueError) as exc:  # an unknown charset or a broken transfer encoding
                yield CorruptDocument(f"{source.path.name}: unreadable email body ({exc})")
                return
            if body.get_content_subtype() == "html":
                _, blocks = html_blocks(str(content), source.path.name)
            else:
                blocks = text_blocks(str(content))
        attachments = list(message.iter_attachments())
        metadata["attachments"] = [a.get_filename() or f"attachment-{n}" for n, a in enumerate(attachments, 1)]
        if not blocks and subject:
            blocks = [Block("paragraph", subject)]
        yield from single_document(source, "email", subject, blocks, metadata=metadata)
        budget = self.budget or Budget()
        for number, part in enumerate(attachments, start=1):
            if not budget.take():
                refusal = budget.refusal(source.path.name)
                if refusal is not None:
                    yield refusal
                return
            yield from self._attachment(source, options, number, part, budget)

    def _attachment(self, source: Source, options: ExtractOptions, number: int, part: EmailMessage,
                    budget: Budget) -> Iterator[ExtractedDocument | Exception]:
        from ..detect import detect

        name = PurePosixPath((part.get_filename() or f"attachment-{number}").replace("\\", "/")).name
        where = f"{source.path.name} attachment {number} ({name})"
        if part.get_content_type() == "message/rfc822":
            inner = part.get_payload(0) if part.is_multipart() else None
            data = inner.as_bytes() if isinstance(inner, email.message.Message) else b""
        else:
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
        if not data:
            yield CorruptDocument(f"{where} is empty")
            return
        child = Source(source.path.with_name(name), data, f"{source.external_id}#attachment-{number}/{name}",
                       f"{source.source_uri}#attachment-{number}/{name}")
        try:
            kind = "email" if part.get_content_type() == "message/rfc822" else detect(child.path, data)
        except IngestError as exc:
            yield type(exc)(f"{where}: {exc}")
            return
        if kind in ("email", "msg"):  # a message, attached as a message or as a file
            if self.depth + 1 >= MAX_DEPTH:
                yield UnsupportedFormat(f"{where}: emails nested more than {MAX_DEPTH} deep are not opened")
                return
            extractor: Any = EXTRACTORS[kind].nested(self.depth + 1, budget)  # type: ignore[attr-defined]
        else:
            extractor = EXTRACTORS[kind]
        for doc in extractor.extract(child, options):
            if isinstance(doc, ExtractedDocument):
                doc = _attached(doc, source)
            yield doc


def _attached(doc: ExtractedDocument, parent: Source) -> ExtractedDocument:
    import dataclasses

    return dataclasses.replace(doc, metadata={**doc.metadata, "attached_to": parent.external_id})
