"""Outlook .msg messages: the OLE compound file read with olefile (BSD), its MAPI properties (subject, sender,
recipients, date, message id, plain or HTML body, attachments, attached messages) made into the RFC 5322 message
they stand for, and that read as an .eml is (extract.mail): headers as metadata, the body as the document, each
attachment a document of its own."""

from __future__ import annotations

import contextlib
import dataclasses
import email.policy
import email.utils
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

from ...errors import CorruptDocument
from ...types import ExtractedDocument
from .base import ExtractOptions, Source
from .mail import EmailExtractor

SUBJECT, SENDER_NAME, SENDER_EMAIL, SENDER_SMTP = "0037", "0C1A", "0C1F", "5D01"
DISPLAY_TO, DISPLAY_CC, BODY, HTML, HEADERS, MESSAGE_ID, IN_REPLY_TO = "0E04", "0E03", "1000", "1013", "007D", \
    "1035", "1042"
ATTACH_DATA, ATTACH_LONG_NAME, ATTACH_NAME, ATTACH_MIME = "3701", "3707", "3704", "370E"
DISPLAY_NAME, SMTP_ADDRESS, EMAIL_ADDRESS, RECIPIENT_TYPE = "3001", "39FE", "3003", 0x0C15
SUBMIT_TIME, DELIVERY_TIME = 0x0039, 0x0E06  # PT_SYSTIME properties in the property stream
EPOCH_FILETIME = datetime(1601, 1, 1, tzinfo=UTC)
MAX_ATTACHED_DEPTH = 3


class Properties:
    """One storage of the message (the message, an attachment, an attached message): its properties."""

    def __init__(self, ole: Any, prefix: tuple[str, ...] = ()):
        self.ole, self.prefix = ole, prefix

    def _stream(self, name: str) -> bytes | None:
        path = [*self.prefix, name]
        found: bytes | None = self.ole.openstream(path).read() if self.ole.exists("/".join(path)) else None
        return found

    def text(self, tag: str) -> str | None:
        """A string property: UTF-16 (001F) or 8-bit in the message's code page, read as cp1252 (001E)."""
        wide = self._stream(f"__substg1.0_{tag}001F")
        if wide is not None:
            return wide.decode("utf-16-le", "replace").rstrip("\x00") or None
        narrow = self._stream(f"__substg1.0_{tag}001E")
        return narrow.decode("cp1252", "replace").rstrip("\x00") or None if narrow is not None else None

    def binary(self, tag: str) -> bytes | None:
        return self._stream(f"__substg1.0_{tag}0102")

    def fixed(self, kind: int) -> dict[int, int]:
        """The property stream's fixed-size properties of one type (0x0003 long, 0x0040 time) by property id: a
        header (32 bytes for the message, 24 for an attached one, 8 for a recipient or an attachment), then
        16-byte entries of tag, flags and value."""
        data = self._stream("__properties_version1.0") or b""
        header = 32 if not self.prefix else 24 if self.prefix[-1].endswith("000D") else 8
        found = {}
        for at in range(header, len(data) - 15, 16):
            tag = int.from_bytes(data[at:at + 4], "little")
            if tag & 0xFFFF == kind:
                found[tag >> 16] = int.from_bytes(data[at + 8:at + 16], "little")
        return found

    def time(self, *tags: int) -> datetime | None:
        """The first of these PT_SYSTIME properties that is set."""
        found = self.fixed(0x0040)
        for tag in tags:
            if found.get(tag):
                return EPOCH_FILETIME + timedelta(microseconds=found[tag] // 10)
        return None

    def children(self, kind: str) -> list[tuple[str, ...]]:
        """The storages under this one whose names start with `kind` (attachments, recipients), in order."""
        names = {tuple(entry[:len(self.prefix) + 1]) for entry in self.ole.listdir(streams=True, storages=True)
                 if entry[:len(self.prefix)] == list(self.prefix) and len(entry) > len(self.prefix)
                 and entry[len(self.prefix)].startswith(kind)}
        return sorted(names)


def _header(message: EmailMessage, name: str, value: str | None) -> None:
    if value and value.strip():
        with contextlib.suppress(ValueError, TypeError):  # a value no header can hold: left out
            message[name] = " ".join(value.split())


def _recipients(props: Properties) -> dict[int, str]:
    """The message's recipients by type (1 To, 2 Cc), each "Name <address>" where the address is known."""
    found: dict[int, list[str]] = {}
    for storage in props.children("__recip_version1.0_"):
        recipient = Properties(props.ole, storage)
        kind = recipient.fixed(0x0003).get(RECIPIENT_TYPE, 1) & 0x0F
        address = recipient.text(SMTP_ADDRESS) or recipient.text(EMAIL_ADDRESS)
        name = recipient.text(DISPLAY_NAME) or ""
        shown = email.utils.formataddr((name, address)) if address and "@" in address else name
        if shown:
            found.setdefault(kind, []).append(shown)
    return {kind: ", ".join(names) for kind, names in found.items()}


def rebuilt(props: Properties, depth: int = 0) -> EmailMessage:
    """The RFC 5322 message a .msg (or an attached message) stands for."""
    message = EmailMessage(policy=email.policy.default)
    _header(message, "Subject", props.text(SUBJECT))
    name = props.text(SENDER_NAME)
    address = props.text(SENDER_SMTP) or props.text(SENDER_EMAIL)
    _header(message, "From", email.utils.formataddr((name or "", address)) if address and "@" in address
            else name)
    listed = _recipients(props)
    _header(message, "To", listed.get(1) or (props.text(DISPLAY_TO) or "").replace(";", ","))
    _header(message, "Cc", listed.get(2) or (props.text(DISPLAY_CC) or "").replace(";", ","))
    sent = props.time(SUBMIT_TIME, DELIVERY_TIME)
    if sent is None:
        transport = email.message_from_string(props.text(HEADERS) or "", policy=email.policy.default)
        _header(message, "Date", str(transport.get("Date") or ""))
    else:
        _header(message, "Date", email.utils.format_datetime(sent))
    _header(message, "Message-ID", props.text(MESSAGE_ID))
    _header(message, "In-Reply-To", props.text(IN_REPLY_TO))
    body = props.text(BODY)
    html = props.binary(HTML) or (props.text(HTML) or "").encode("utf-8")
    if body and body.strip():
        message.set_content(body)
    elif html.strip():
        message.set_content(html.decode("utf-8", "replace"), subtype="html")
    for number, storage in enumerate(props.children("__attach_version1.0_"), start=1):
        attachment = Properties(props.ole, storage)
        filename = attachment.text(ATTACH_LONG_NAME) or attachment.text(ATTACH_NAME)
        inner = (*storage, f"__substg1.0_{ATTACH_DATA}000D")
        if props.ole.exists("/".join(inner)):
            if depth + 1 < MAX_ATTACHED_DEPTH:
                attached = rebuilt(Properties(props.ole, inner), depth + 1)
                shown = attachment.text(DISPLAY_NAME) or str(attached.get("Subject") or "message")
                message.add_attachment(attached, filename=filename or f"{shown}.msg")
            continue
        filename = filename or f"attachment-{number}"
        data = attachment.binary(ATTACH_DATA)
        if data:
            maintype, _, subtype = (attachment.text(ATTACH_MIME) or "application/octet-stream").partition("/")
            message.add_attachment(data, maintype=maintype.strip() or "application",
                                   subtype=subtype.strip() or "octet-stream", filename=filename)
    return message


class OutlookExtractor:
    source_type = "msg"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        import olefile

        try:
            with olefile.OleFileIO(source.data) as ole:
                data = rebuilt(Properties(ole)).as_bytes()
        except Exception as exc:  # olefile raises plain exceptions on damaged containers
            yield CorruptDocument(f"{source.path.name}: unreadable Outlook message ({type(exc).__name__}: {exc})")
            return
        for found in EmailExtractor().extract(dataclasses.replace(source, data=data), options):
            if isinstance(found, ExtractedDocument) and found.source_type == "email" and \
                    found.external_id == source.external_id:
                found = dataclasses.replace(found, source_type="msg")
            yield found
