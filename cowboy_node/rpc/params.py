"""Path, query and body parameters of the HTTP API, parsed into typed values or a 400 with a stable code;
and what every route module shares (the facade key, running a facade call off the event loop).

Split from the server so the route modules (``job_routes``, ``runner_routes``) and the server import this one
module instead of each other.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from cowboy_node.rpc.facade import NodeFacade, RpcError
from cowboy_protocol.crypto.address import parse_address

MAX_HEIGHT = 2**64 - 1
"""Largest height a path accepts (u64)."""
MAX_SCAN_LIMIT = 1000
"""Largest ``limit`` of a paged query (actor state scans, runner lists)."""
FACADE_KEY: web.AppKey[NodeFacade] = web.AppKey("facade")
"""The application's :class:`NodeFacade`."""

_HASH_RE = re.compile(r"(?:0[xX])?([0-9a-fA-F]{64})")
_HEIGHT_RE = re.compile(r"[0-9]{1,20}")
_HEX_RE = re.compile(r"(?:0[xX])?((?:[0-9a-fA-F]{2})*)")
_LIMIT_RE = re.compile(r"[0-9]{1,7}")


def parse_hash(text: str, param: str = "hash") -> bytes:
    """``0x`` + 64 hex digits (the prefix is optional) -> 32 bytes; else 400 ``invalid_hash``."""
    m = _HASH_RE.fullmatch(text)
    if m is None:
        raise RpcError(400, "invalid_hash", f"{param} must be 32 bytes as 0x-prefixed hex (64 hex digits)")
    return bytes.fromhex(m.group(1))


def parse_height(text: str) -> int:
    """A non-negative decimal integer (u64); else 400 ``invalid_height``."""
    if _HEIGHT_RE.fullmatch(text) is None or int(text) > MAX_HEIGHT:
        raise RpcError(400, "invalid_height", "height must be a non-negative decimal integer (u64)")
    return int(text)


def parse_address_param(text: str) -> bytes:
    """A 20-byte hex address (EIP-55 checksum checked when mixed case); else 400 ``invalid_address``."""
    try:
        return parse_address(text)
    except ValueError as e:
        raise RpcError(400, "invalid_address", f"address: {e}") from None


def parse_hex(text: str, *, param: str, code: str, max_bytes: int | None = None,
              allow_empty: bool = False) -> bytes:
    """Optional ``0x`` prefix and an even number of hex digits; else 400 ``code``."""
    m = _HEX_RE.fullmatch(text)
    if m is None:
        raise RpcError(400, code, f"{param} must be 0x-prefixed hex with an even number of digits")
    data = bytes.fromhex(m.group(1))
    if not data and not allow_empty:
        raise RpcError(400, code, f"{param} must not be empty")
    if max_bytes is not None and len(data) > max_bytes:
        raise RpcError(400, code, f"{param} is longer than {max_bytes} bytes")
    return data


def parse_limit(text: str) -> int:
    """A decimal integer in ``1..MAX_SCAN_LIMIT``; else 400 ``invalid_limit``."""
    if _LIMIT_RE.fullmatch(text) is None or not 1 <= int(text) <= MAX_SCAN_LIMIT:
        raise RpcError(400, "invalid_limit", f"limit must be a decimal integer in 1..{MAX_SCAN_LIMIT}")
    return int(text)


async def off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a facade call in a worker thread: actor reads wait for the state lock (held while a block is
    built) and a read-only call runs actor code; neither may stall the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args))
