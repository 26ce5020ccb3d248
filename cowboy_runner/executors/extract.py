"""HTTP extraction (project choice): a small JSON-path subset applied to a JSON response body, and the
timestamp reader behind ``freshness.timestamp_field``.

Path grammar (docs/runner-executors.md §HTTP)::

    path    = "$" { segment }  |  name { segment }  |  ""      ("" and "$" select the whole document)
    segment = "." name  |  "[" index "]"  |  "[" quoted "]"
    name    = one or more characters other than . [ ] " ' (any Unicode)
    index   = "0" | "-"? [1-9][0-9]*                            (negative counts from the end: [-1] is the last)
    quoted  = '"' … '"'  |  "'" … "'"                            (backslash escapes the next character)

A ``name`` segment selects an object member; on an array, a name that is a canonical non-negative decimal
selects that element, so the verifier's dotted field paths (``a.b.0.c``) mean the same here. An ``index``
selects array elements only; a quoted segment selects object members only. No wildcards, filters or slices:
an extraction yields exactly one value or fails with ``bad_extraction``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, TypeAlias

from cowboy_runner.executors.base import ExecutorError

Segment: TypeAlias = "str | int | tuple[str]"
"""A parsed segment: a name (``str``), an array index (``int``) or a quoted member name (``(str,)``)."""

MAX_PATH_SEGMENTS = 64
"""Most segments in one path."""
MAX_PATH_CHARS = 1024
"""Longest path text."""
MILLIS_THRESHOLD = 100_000_000_000
"""Numeric timestamps whose magnitude exceeds this (year 5138 in seconds) are taken as milliseconds."""

_STOP = frozenset(".[]\"'")


def _bad(path: str, message: str) -> ExecutorError:
    return ExecutorError("bad_extraction", f"extraction path {path[:80]!r}: {message}")


def _canonical_index(text: str) -> bool:
    body = text[1:] if text.startswith("-") else text
    return body.isascii() and body.isdigit() and len(body) <= 18 and (body == "0" or body[0] != "0") \
        and text != "-0"


def parse_path(path: str) -> tuple[Segment, ...]:
    """Parse an extraction path into segments; ``ExecutorError("bad_extraction")`` if it is not in the subset."""
    if len(path) > MAX_PATH_CHARS:
        raise _bad(path, f"longer than {MAX_PATH_CHARS} characters")
    segs: list[Segment] = []
    i, n = 0, len(path)
    if path.startswith("$"):
        i = 1
    elif path:
        i = _name(path, 0, segs)
    while i < n:
        ch = path[i]
        if ch == ".":
            i = _name(path, i + 1, segs)
        elif ch == "[":
            i = _bracket(path, i + 1, segs)
        else:
            raise _bad(path, f"unexpected {ch!r} at {i}")
        if len(segs) > MAX_PATH_SEGMENTS:
            raise _bad(path, f"more than {MAX_PATH_SEGMENTS} segments")
    return tuple(segs)


def _name(path: str, i: int, segs: list[Segment]) -> int:
    j = i
    while j < len(path) and path[j] not in _STOP:
        j += 1
    if j == i:
        raise _bad(path, f"empty name at {i}")
    segs.append(path[i:j])
    return j


def _bracket(path: str, i: int, segs: list[Segment]) -> int:
    if i < len(path) and path[i] in "\"'":
        quote, j, out = path[i], i + 1, []
        while j < len(path) and path[j] != quote:
            if path[j] == "\\":
                j += 1
                if j >= len(path):
                    break
            out.append(path[j])
            j += 1
        if j >= len(path) or j + 1 >= len(path) or path[j + 1] != "]":
            raise _bad(path, f"unterminated quoted name at {i}")
        segs.append(("".join(out),))
        return j + 2
    end = path.find("]", i)
    if end < 0 or not _canonical_index(path[i:end]):
        raise _bad(path, f"expected an integer index or a quoted name at {i}")
    segs.append(int(path[i:end]))
    return end + 1


def extract(value: Any, path: str) -> Any:
    """The value at ``path`` in a parsed JSON document; ``ExecutorError("bad_extraction")`` if absent."""
    current = value
    for seg in parse_path(path):
        if isinstance(seg, tuple):
            if not isinstance(current, dict) or seg[0] not in current:
                raise _bad(path, f"member {seg[0]!r} not found")
            current = current[seg[0]]
        elif isinstance(seg, int) or (isinstance(current, list) and _canonical_index(seg) and seg[0] != "-"):
            index = int(seg)
            if not isinstance(current, list) or not -len(current) <= index < len(current):
                raise _bad(path, f"index {index} not found")
            current = current[index]
        else:
            if not isinstance(current, dict) or seg not in current:
                raise _bad(path, f"member {seg!r} not found")
            current = current[seg]
    return current


def parse_timestamp(value: Any) -> float:
    """Seconds since the Unix epoch of a timestamp value; ``ValueError`` if it is not one.

    Accepted: a JSON number or a string of decimal digits (seconds; milliseconds when the magnitude exceeds
    :data:`MILLIS_THRESHOLD`), or an ISO 8601 / RFC 3339 string (``2024-05-01T12:00:00Z``; no offset = UTC).
    """
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if not math.isfinite(seconds):
            raise ValueError("timestamp is not finite")
        return seconds / 1000 if abs(seconds) > MILLIS_THRESHOLD else seconds
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"not an ISO 8601 timestamp: {value[:64]!r}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    raise ValueError(f"not a timestamp: {type(value).__name__}")
