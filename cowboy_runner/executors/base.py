"""Executor interface: what every job executor returns or raises, and the wall-clock guard they share.

An executor runs one job's :data:`~cowboy_protocol.types.jobspec.JobType` and returns the bytes that go into
``JobResultSubmit.result`` (docs/runner-executors.md). Executors are asyncio-native: one job never blocks the
event loop or another job, and every execution is bounded by ``deadline_s`` seconds of wall time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from cowboy_protocol.types.jobspec import JobType, ResourceBounds

T = TypeVar("T")

DEADLINE_MARGIN_S = 0.5
"""Grace the caller may allow beyond ``deadline_s`` for cleanup (killing a process group, closing sockets)."""


@dataclass(frozen=True)
class ExecutionResult:
    """A successful execution."""

    output: bytes
    """The result bytes submitted on chain (``JobResultSubmit.result``)."""
    usage_units: int
    """Units of usage reported with the result (``JobResultSubmit.units``; meaning per job kind)."""
    detail: dict[str, object] = field(default_factory=dict)
    """Operator-facing facts (HTTP status, model name, exit code…); never submitted on chain."""


class ExecutorError(Exception):
    """An execution failed; ``code`` is stable and machine-readable (docs/runner-executors.md lists them)."""

    def __init__(self, code: str, message: str, *, detail: dict[str, object] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        """Stable snake_case failure code."""
        self.message = message
        """Human-readable explanation."""
        self.detail: dict[str, object] = detail or {}
        """Operator-facing facts about the failure (HTTP status, stderr tail, pid…)."""


class Executor(Protocol):
    """Runs jobs of one kind."""

    async def execute(self, job: JobType, bounds: ResourceBounds | None, *, deadline_s: float) -> ExecutionResult:
        """Run ``job`` within ``deadline_s`` seconds of wall time, or raise :class:`ExecutorError`."""
        ...


async def with_deadline(work: Awaitable[T], deadline_s: float) -> T:
    """Await ``work`` for at most ``deadline_s`` seconds; past it the work is cancelled and
    ``ExecutorError("timeout")`` raised. Cancellation lets the work's own ``finally`` blocks clean up."""
    if deadline_s <= 0:
        if asyncio.iscoroutine(work):
            work.close()  # never started: avoid a "coroutine was never awaited" warning
        raise ExecutorError("timeout", "no time left before the deadline")
    try:
        async with asyncio.timeout(deadline_s):
            return await work
    except TimeoutError:
        raise ExecutorError("timeout", f"execution exceeded {deadline_s:g} s") from None


def canonical_json(value: object) -> bytes:
    """Canonical JSON bytes of a result value: sorted keys, no spaces, UTF-8 (not ASCII-escaped)."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    except (TypeError, ValueError) as e:  # UnicodeEncodeError (a lone surrogate) is a ValueError
        raise ExecutorError("bad_extraction", f"value is not representable as JSON: {e}") from None


def check_output_size(output: bytes, limit: int) -> bytes:
    """Return ``output`` or raise ``output_too_large`` when it exceeds ``limit`` bytes (the on-chain result cap)."""
    if len(output) > limit:
        raise ExecutorError("output_too_large", f"result is {len(output)} bytes, over the {limit}-byte limit",
                            detail={"size": len(output), "limit": limit})
    return output
