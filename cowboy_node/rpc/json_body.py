"""Bounds on JSON request bodies, checked before ``json.loads`` sees them.

``json.loads`` recurses once per nesting level, so ``[`` × 20,000 ends in a RecursionError deep inside
the decoder (a 500 with a traceback in the log). :func:`check_json_body` refuses such a body first with
a linear scan: it removes the strings (which may hold any bracket) and counts the brackets left, in C
speed (regex, ``bytes.translate``, ``itertools.accumulate``): about 20 ms for a MiB of brackets, less than
``json.loads`` takes for the same body.

The scan reads bytes, so it is only sound for the encoding it assumes: ``json.loads(bytes)`` also accepts
UTF-16 and UTF-32, in which a byte ``"`` may be half of another character. Bodies ``json.loads`` would
decode as anything but UTF-8 are refused (RFC 8259 §8.1: JSON exchanged between systems is UTF-8).
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate

from cowboy_node.rpc.facade import RpcError

__all__ = ["MAX_JSON_DEPTH", "check_json_body", "json_depth_exceeds"]

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays/objects accepted in a JSON request body (no route needs more than a few)."""

_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
"""A JSON string literal, escapes included (possessive: linear even on long strings)."""
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")
"""Opening bracket -> +1, closing -> -1 (0xff read as a signed byte)."""


def json_depth_exceeds(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``body`` nests arrays/objects deeper than ``max_depth`` (brackets inside strings do not count).

    For a body that is not valid JSON the answer may be either; ``json.loads`` rejects such a body anyway.
    """
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return False
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKET)
    if brackets.count(b"[") + brackets.count(b"{") <= max_depth:
        return False
    return max(accumulate(array("b", brackets.translate(_STEP)))) > max_depth


def check_json_body(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise 400 ``invalid_body`` for a body that is not UTF-8 JSON or nests deeper than ``max_depth``.

    Call it on every JSON request body before ``json.loads``; with it, the decoder cannot recurse deeply.
    """
    if body and json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):
        raise RpcError(400, "invalid_body", "JSON body must be UTF-8")
    if json_depth_exceeds(body, max_depth):
        raise RpcError(400, "invalid_body", f"JSON body nests arrays/objects deeper than {max_depth} levels")
