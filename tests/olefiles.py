"""Writes OLE compound files (MS-CFB version 3) and Outlook .msg messages in them, with exact truth, for the
format tests: nothing on PyPI with a permissive licence writes either."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

FREE, END, FATSECT, NOSTREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
SECTOR, MINI, CUTOFF = 512, 64, 4096


def _chain(fat: list[int], first: int, count: int) -> None:
    for n in range(count):
        fat[first + n] = first + n + 1 if n + 1 < count else END


def _sectors(data: bytes, size: int) -> int:
    return -(-len(data) // size)


def compound_file(streams: dict[tuple[str, ...], bytes]) -> bytes:
    """A compound file holding `streams` (paths of storage names, then the stream's name)."""
    entries: list[dict[str, object]] = [{"name": "Root Entry", "type": 5, "path": ()}]
    paths = sorted({p[:n] for p in streams for n in range(1, len(p) + 1)})
    for path in paths:
        entries.append({"name": path[-1], "type": 2 if path in streams else 1, "path": path,
                        "data": streams.get(path, b"")})
    index = {e["path"]: n for n, e in enumerate(entries)}
    children: dict[object, list[dict[str, object]]] = {}
    for entry in entries[1:]:
        children.setdefault(entry["path"][:-1], []).append(entry)  # type: ignore[index]
    for entry in entries:  # children of a storage: a balanced tree, in the order CFB compares names
        kids = sorted(children.get(entry["path"], []), key=lambda e: (len(str(e["name"])), str(e["name"]).upper()))
        entry["child"] = _balanced(kids, index)
    mini = bytearray()
    mini_fat: list[int] = []
    big: list[tuple[dict[str, object], bytes]] = []
    for entry in entries[1:]:
        data = entry.get("data", b"")
        assert isinstance(data, bytes)
        if entry["type"] != 2 or not data:
            entry["start"] = END if entry["type"] == 2 else 0
            continue
        if len(data) < CUTOFF:
            entry["start"] = len(mini) // MINI
            count = _sectors(data, MINI)
            mini_fat.extend(len(mini_fat) + n + 1 if n + 1 < count else END for n in range(count))
            mini += data.ljust(count * MINI, b"\0")
        else:
            big.append((entry, data))
    # sectors: big streams, the mini stream, the mini FAT, the directory, then the FAT itself
    layout: list[tuple[str, bytes]] = [("big", d) for _, d in big] + [("mini", bytes(mini))]
    layout.append(("minifat", b"".join(struct.pack("<I", v) for v in mini_fat)))
    directory = len(entries)
    layout.append(("dir", b"\0" * (_sectors(b"\0" * 128 * directory, SECTOR) * SECTOR)))
    used = sum(_sectors(d, SECTOR) for _, d in layout)
    fat_sectors = 1
    while fat_sectors * (SECTOR // 4) < used + fat_sectors:
        fat_sectors += 1
    fat = [FREE] * (fat_sectors * SECTOR // 4)
    starts: dict[str, int] = {}
    at = 0
    for n, (kind, data) in enumerate(layout):
        count = _sectors(data, SECTOR)
        if count:
            _chain(fat, at, count)
            starts[kind if kind != "big" else f"big{n}"] = at
        at += count
    for n, (entry, _) in enumerate(big):
        entry["start"] = starts[f"big{n}"]
    for n in range(fat_sectors):
        fat[at + n] = FATSECT
    root = entries[0]
    root["start"], root["data"] = (starts["mini"], bytes(mini)) if mini else (END, b"")
    body = bytearray()
    for kind, data in layout:
        if kind == "dir":
            data = b"".join(_entry(e) for e in entries).ljust(len(data), b"\0")
        body += data.ljust(_sectors(data, SECTOR) * SECTOR, b"\0")
    body += b"".join(struct.pack("<I", v) for v in fat)
    difat = [at + n for n in range(fat_sectors)] + [FREE] * (109 - fat_sectors)
    header = struct.pack("<8s16sHHHHH6sIIIIIIIII", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", b"\0" * 16, 0x3E, 3, 0xFFFE,
                         9, 6, b"\0" * 6, 0, fat_sectors, starts["dir"], 0, CUTOFF,
                         starts.get("minifat", END), _sectors(bytes(4 * len(mini_fat)), SECTOR), END, 0)
    header += b"".join(struct.pack("<I", v) for v in difat)
    return header.ljust(SECTOR, b"\0") + bytes(body)


def _balanced(kids: list[dict[str, object]], index: dict[object, int]) -> int:
    """The root of a balanced tree of these siblings (in CFB's order), as Outlook writes large storages: each
    entry's left and right set; NOSTREAM when there are none."""
    if not kids:
        return NOSTREAM
    middle = len(kids) // 2
    kids[middle]["left"] = _balanced(kids[:middle], index)
    kids[middle]["right"] = _balanced(kids[middle + 1:], index)
    return index[kids[middle]["path"]]


def _entry(e: dict[str, object]) -> bytes:
    name = str(e["name"]).encode("utf-16-le") + b"\0\0"
    data = e.get("data", b"")
    assert isinstance(data, bytes)
    return struct.pack("<64sHBBIII16sIQQIQ", name, len(name), int(e["type"]), 1,  # type: ignore[call-overload]
                       e.get("left", NOSTREAM), e.get("right", NOSTREAM), e.get("child", NOSTREAM), b"\0" * 16, 0, 0, 0,
                       e.get("start", END), len(data))


def _utf16(value: str) -> bytes:
    return value.encode("utf-16-le")


def _filetime(when: datetime) -> int:
    return int((when - datetime(1601, 1, 1, tzinfo=UTC)).total_seconds() * 10_000_000)


def outlook_message(*, subject: str, sender: str, sender_email: str, to: tuple[tuple[str, str], ...],
                    sent: datetime, body: str = "",
                    html: str = "", attachments: tuple[tuple[str, str, bytes], ...] = (),
                    forwarded: tuple[tuple[str, str], ...] = ()) -> bytes:
    """An Outlook .msg of these fields (to: (name, address) pairs; attachments: name, MIME type, bytes), as Outlook
    lays them out: each string property a UTF-16 stream, the submit time and each recipient's type in a property
    stream, a storage per recipient and per attachment; `forwarded` (subject, body) messages attached as Outlook
    attaches a message: a storage of their own inside the attachment's."""
    streams: dict[tuple[str, ...], bytes] = {
        ("__substg1.0_0037001F",): _utf16(subject), ("__substg1.0_0C1A001F",): _utf16(sender),
        ("__substg1.0_5D01001F",): _utf16(sender_email), ("__substg1.0_0E04001F",): _utf16("; ".join(n for n, _ in to)),
        ("__substg1.0_001A001F",): _utf16("IPM.Note"),
    }
    if body:
        streams[("__substg1.0_1000001F",)] = _utf16(body)
    if html:
        streams[("__substg1.0_10130102",)] = html.encode("utf-8")
    header = struct.pack("<8sIIII8s", b"\0" * 8, len(to), len(attachments), len(to), len(attachments), b"\0" * 8)
    for n, (name, address) in enumerate(to):
        storage = f"__recip_version1.0_#{n:08X}"
        streams[(storage, "__substg1.0_3001001F")] = _utf16(name)
        streams[(storage, "__substg1.0_39FE001F")] = _utf16(address)
        streams[(storage, "__properties_version1.0")] = b"\0" * 8 + struct.pack("<IIQ", (0x0C15 << 16) | 3, 6, 1)
    submit = struct.pack("<IIQ", (0x0039 << 16) | 0x0040, 6, _filetime(sent))
    streams[("__properties_version1.0",)] = header + submit
    for n, (name, mime, data) in enumerate(attachments):
        storage = f"__attach_version1.0_#{n:08X}"
        streams[(storage, "__substg1.0_3707001F")] = _utf16(name)
        streams[(storage, "__substg1.0_370E001F")] = _utf16(mime)
        streams[(storage, "__substg1.0_37010102")] = data
        streams[(storage, "__properties_version1.0")] = b"\0" * 8
    for n, (inner_subject, inner_body) in enumerate(forwarded, start=len(attachments)):
        storage = f"__attach_version1.0_#{n:08X}"
        inner = (storage, "__substg1.0_3701000D")
        streams[(storage, "__substg1.0_3001001F")] = _utf16(inner_subject)
        streams[(storage, "__properties_version1.0")] = b"\0" * 8
        streams[(*inner, "__substg1.0_0037001F")] = _utf16(inner_subject)
        streams[(*inner, "__substg1.0_1000001F")] = _utf16(inner_body)
        streams[(*inner, "__properties_version1.0")] = b"\0" * 24 + submit
    return compound_file(streams)
