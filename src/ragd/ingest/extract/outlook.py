"""Outlook .msg messages: the OLE compound file read with olefile (BSD), its MAPI properties (subject, sender,
recipients, date, message id, plain or HTML body, attachments, attached messages) made into the RFC 5322 message
they stand for, and that read as an .eml is (extract.mail): headers as metadata, the body as the document, each
attachment a document of its own."""

from __future__ import annotations

import contextlib
import dataclasses
import email.policy
import email.utils
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

from ...errors import CorruptDocument
from ...types import ExtractedDocument
from .base import ExtractOptions, Source
from .mail import MAX_DEPTH, Budget, EmailExtractor

SUBJECT, SENDER_NAME, SENDER_EMAIL, SENDER_SMTP = "0037", "0C1A", "0C1F", "5D01"
DISPLAY_TO, DISPLAY_CC, BODY, HTML, HEADERS, MESSAGE_ID, IN_REPLY_TO = "0E04", "0E03", "1000", "1013", "007D", \
    "1035", "1042"
ATTACH_DATA, ATTACH_LONG_NAME, ATTACH_NAME, ATTACH_MIME = "3701", "3707", "3704", "370E"
DISPLAY_NAME, SMTP_ADDRESS, EMAIL_ADDRESS, RECIPIENT_TYPE = "3001", "39FE", "3003", 0x0C15
SUBMIT_TIME, DELIVERY_TIME = 0x0039, 0x0E06  # PT_SYSTIME properties in the property stream
EPOCH_FILETIME = datetime(1601, 1, 1, tzinfo=UTC)
STREAM = 2  # olefile's STGTY_STREAM
MAX_RECIPIENTS = 500  # named in the To and Cc headers (a header of 100,000 addresses helps no search)
MIME_TYPE = re.compile(r"[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*")


class Properties:
    """One storage of the message (the message, an attachment, an attached message): its properties. Entries are
    found through each storage's own index of its children (olefile's path lookup scans every sibling, which
    made a message of 100,000 recipients quadratic), and no stream is read that declares more bytes than the
    file holds (a broken sector chain would grow to its declared size first)."""

    def __init__(self, ole: Any, prefix: tuple[str, ...] = (), size: int | None = None):
        self.ole, self.prefix = ole, prefix
        self.size = size if size is not None else ole._filesize  # (olefile keeps no public size)

    def entry(self, path: tuple[str, ...]) -> Any:
        """The directory entry at `path` (names, any case), or None."""
        node = self.ole.root
        for name in path:
            node = node.kids_dict.get(name.lower())
            if node is None:
                return None
        return node

    def _stream(self, name: str) -> bytes | None:
        entry = self.entry((*self.prefix, name))
        if entry is None or entry.entry_type != STREAM:
            return None
        if entry.size > self.size:
            raise CorruptDocument(f"the stream {name} declares {entry.size} bytes in a file of {self.size}")
        data: bytes = self.ole._open(entry.isectStart, entry.size).read()  # (by entry: a path is found slowly)
        return data

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
        """The first of these PT_SYSTIME properties that is set and a date (one out of range is left out)."""
        found = self.fixed(0x0040)
        for tag in tags:
            if found.get(tag):
                with contextlib.suppress(OverflowError, ValueError):
                    return EPOCH_FILETIME + timedelta(microseconds=found[tag] // 10)
        return None

    def children(self, kind: str) -> list[tuple[str, ...]]:
        """The storages under this one whose names start with `kind` (attachments, recipients), in order."""
        node = self.entry(self.prefix)
        kids = node.kids if node is not None else []
        return sorted((*self.prefix, kid.name) for kid in kids if kid.name.startswith(kind))


def _header(message: EmailMessage, name: str, value: str | None) -> None:
    if value and value.strip():
        with contextlib.suppress(ValueError, TypeError):  # a value no header can hold: left out
            message[name] = " ".join(value.split())


def _recipients(props: Properties) -> dict[int, str]:
    """The message's recipients by type (1 To, 2 Cc), each "Name <address>" where the address is known."""
    found: dict[int, list[str]] = {}
    storages = props.children("__recip_version1.0_")
    for storage in storages[:MAX_RECIPIENTS]:
        recipient = Properties(props.ole, storage, props.size)
        kind = recipient.fixed(0x0003).get(RECIPIENT_TYPE, 1) & 0x0F
        address = recipient.text(SMTP_ADDRESS) or recipient.text(EMAIL_ADDRESS)
        name = recipient.text(DISPLAY_NAME) or ""
        shown = email.utils.formataddr((name, address)) if address and "@" in address else name
        if shown:
            found.setdefault(kind, []).append(shown)
    return {kind: ", ".join(names) for kind, names in found.items()}


def rebuilt(props: Properties, depth: int = 0, budget: Budget | None = None) -> EmailMessage:
    """The RFC 5322 message a .msg (or an attached message) stands for: attached messages below MAX_DEPTH, and
    the file's attachments within its budget, are attached; a field no header can hold is left out."""
    budget = budget or Budget()
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
        with contextlib.suppress(ValueError, TypeError, IndexError):  # a date header no parser can read
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
        if not budget.take():
            break  # (the extractor of the rebuilt message says so once)
        _attach(message, props, storage, number, depth, budget)
    return message


def _attach(message: EmailMessage, props: Properties, storage: tuple[str, ...], number: int, depth: int,
            budget: Budget) -> None:
    attachment = Properties(props.ole, storage, props.size)
    filename = _printable(attachment.text(ATTACH_LONG_NAME) or attachment.text(ATTACH_NAME))
    inner = (*storage, f"__substg1.0_{ATTACH_DATA}000D")
    if props.entry(inner) is not None:
        if depth + 1 < MAX_DEPTH:
            attached = rebuilt(Properties(props.ole, inner, props.size), depth + 1, budget)
            shown = _printable(attachment.text(DISPLAY_NAME)) or str(attached.get("Subject") or "message")
            message.add_attachment(attached, filename=filename or f"{shown}.msg")
        return
    data = attachment.binary(ATTACH_DATA)
    if data:
        declared = (attachment.text(ATTACH_MIME) or "").strip()
        maintype, _, subtype = (declared if MIME_TYPE.fullmatch(declared) else "application/octet-stream"
                                ).partition("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype,
                               filename=filename or f"attachment-{number}")


def _printable(text: str | None) -> str | None:
    """A name with no control characters (a CR or LF would end the header it goes into)."""
    cleaned = "".join(ch for ch in text or "" if ch.isprintable()).strip()
    return cleaned or None


class OutlookExtractor:
    source_type = "msg"

    def __init__(self, depth: int = 0, budget: Budget | None = None):
        self.depth, self.budget = depth, budget

    def nested(self, depth: int, budget: Budget) -> OutlookExtractor:
        """This extractor for a .msg `depth` levels down in a file (attached as a file), sharing its budget."""
        return OutlookExtractor(depth, budget)

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        import olefile

        try:
            with olefile.OleFileIO(source.data) as ole:  # (rebuilt within a budget of its own: what it holds)
                data = rebuilt(Properties(ole, (), len(source.data)), self.depth).as_bytes()
        except Exception as exc:  # olefile raises plain exceptions on damaged containers
            yield CorruptDocument(f"{source.path.name}: unreadable Outlook message ({type(exc).__name__}: {exc})")
            return
        for found in EmailExtractor(self.depth, self.budget).extract(dataclasses.replace(source, data=data), options):
            if isinstance(found, ExtractedDocument) and found.source_type == "email" and \
                    found.external_id == source.external_id:
                found = dataclasses.replace(found, source_type="msg")
            yield found

