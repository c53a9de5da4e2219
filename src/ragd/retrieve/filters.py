"""Parse user filters (dicts from the API, strings from the CLI) into a validated Filters value."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import InvalidRequest
from ..types import Filters

_KEYS = {"tags_any", "tags_all", "metadata", "doc_ids", "external_ids", "effective_from", "effective_to"}


def _shown(value: Any, limit: int = 60) -> str:
    """A value as an error message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "…" + text[-4:]


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) and v for v in value):
        raise InvalidRequest(f"filter {name} must be a list of non-empty strings")
    return tuple(sorted(set(value)))


def parse_filters(raw: Mapping[str, Any] | Filters | None) -> Filters:
    if raw is None:
        return Filters()
    if isinstance(raw, Filters):
        return raw
    if not isinstance(raw, Mapping):
        raise InvalidRequest("filters must be an object")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise InvalidRequest(f"unknown filter(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise InvalidRequest("filter metadata must be an object of top-level key: value pairs")
    try:
        doc_ids = tuple(sorted({uuid.UUID(str(d)) for d in (raw.get("doc_ids") or [])}, key=str))
    except ValueError as exc:
        raise InvalidRequest(f"filter doc_ids holds a value that is not a document id: {exc}") from exc
    try:
        json.dumps(dict(metadata))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidRequest("filter metadata values must be JSON values nested at most a few levels deep") from exc
    return Filters(
        tags_any=_strings("tags_any", raw.get("tags_any") or []),
        tags_all=_strings("tags_all", raw.get("tags_all") or []),
        metadata=tuple(sorted(metadata.items())),
        doc_ids=doc_ids,
        external_ids=_strings("external_ids", raw.get("external_ids") or []),
        effective_from=_date("effective_from", raw.get("effective_from")),
        effective_to=_date("effective_to", raw.get("effective_to")),
    )


def _date(name: str, value: Any) -> str | None:
    """An ISO 8601 date or date-time (kept as given, validated here rather than by PostgreSQL)."""
    if value is None or value == "":
        return None
    try:
        if not isinstance(value, str):
            raise ValueError
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidRequest(f"filter {name} {_shown(value)} is not an ISO 8601 date, e.g. 2024-01-31 or "
                             "2024-01-31T09:00:00+00:00") from exc
    return value


def parse_filter_args(args: Sequence[str]) -> Filters:
    """CLI form: `tag=hr` (tags_any), `tags_all=a,b`, `doc=<id>`, `meta.key=value`, or one JSON object."""
    if len(args) == 1 and args[0].lstrip().startswith("{"):
        try:
            parsed_json = json.loads(args[0])
        except ValueError as exc:
            raise InvalidRequest(f"--filter is not valid JSON: {exc}") from exc
        except RecursionError as exc:
            raise InvalidRequest("--filter is JSON nested too deeply") from exc
        return parse_filters(parsed_json)
    out: dict[str, Any] = {"tags_any": [], "tags_all": [], "metadata": {}, "doc_ids": [], "external_ids": []}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not value:
            raise InvalidRequest(f"--filter {_shown(arg)}: expected key=value (tag=, tags_all=, doc=, meta.KEY=)")
        if key in ("tag", "tags", "tags_any"):
            out["tags_any"] += value.split(",")
        elif key == "tags_all":
            out["tags_all"] += value.split(",")
        elif key in ("doc", "doc_id"):
            out["doc_ids"].append(value)
        elif key in ("external_id", "id"):
            out["external_ids"].append(value)
        elif key.startswith(("meta.", "metadata.")):
            try:
                parsed: Any = json.loads(value)
            except (ValueError, RecursionError):
                parsed = value  # not JSON: the text itself
            out["metadata"][key.split(".", 1)[1]] = parsed
        elif key in ("effective_from", "effective_to"):
            out[key] = value
        else:
            raise InvalidRequest(f"--filter {_shown(arg)}: unknown key {_shown(key)}")
    return parse_filters(out)
