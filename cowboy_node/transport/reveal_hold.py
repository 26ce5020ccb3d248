"""Early reveals held back until their reveal window opens (CIP-11 §10.3), sans-I/O.

§10.3: "A validator receiving JobResult for a multi-runner job before the commitment is included / reveal window
opens MUST hold it or reject with Goodbye { ProtocolError }; it MUST NOT submit an early reveal."

This validator holds such a JobResult's transaction bytes (verbatim: nothing is rebuilt or re-signed) and forwards
them through the normal admission path after the block that opens the window is committed. Holding is bounded
per connection and in total, by count and by bytes; a frame that does not fit is refused with
``Goodbye{ProtocolError}`` — the spec's other option — which costs a conforming runner nothing: it never sends a
reveal before the window opens (§10.3 "after the reveal window opens, SystemInstruction::JobResultSubmit"), so
only a runner whose chain view runs ahead of this validator's ever gets a reveal held.

One entry per (connection, job): a second early JobResult for the same job on the same connection replaces the
first. A connection's entries are dropped when it closes (the runner retains its transaction and rebroadcasts,
§10.3); an entry whose job ended or whose window never opens is dropped when the caller finds so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

MAX_HELD_PER_CONNECTION = 32
"""Early reveals one connection may have held at once."""
MAX_HELD_TOTAL = 4096
"""Early reveals held at once over all connections."""
MAX_HELD_BYTES_PER_CONNECTION = 4 * 1024 * 1024
"""Transaction bytes one connection may have held at once."""
MAX_HELD_BYTES_TOTAL = 64 * 1024 * 1024
"""Transaction bytes held at once over all connections."""


@dataclass(frozen=True, slots=True)
class HeldReveal:
    """One JobResult frame's transaction, waiting for its job's reveal window."""

    owner: int
    """The connection it arrived on (a caller-chosen key)."""
    job_id: bytes
    """The frame's (and the transaction's) job_id."""
    tx_bytes: bytes
    """The runner-signed JobResultSubmit transaction, verbatim."""
    runner_index: int | None
    """Registry index of the runner (push bookkeeping)."""


class Verdict(Enum):
    """What to do with a held reveal now (decided by the caller from the chain head)."""

    KEEP = "keep"
    """The window is still closed."""
    RELEASE = "release"
    """The window is open at head + 1: forward it."""
    DROP = "drop"
    """The job ended or no longer exists: forget it."""


class RevealHold:
    """The held early reveals of one validator."""

    def __init__(self, *, per_connection: int = MAX_HELD_PER_CONNECTION, total: int = MAX_HELD_TOTAL,
                 bytes_per_connection: int = MAX_HELD_BYTES_PER_CONNECTION,
                 bytes_total: int = MAX_HELD_BYTES_TOTAL) -> None:
        self.per_connection = per_connection
        self.total = total
        self.bytes_per_connection = bytes_per_connection
        self.bytes_total = bytes_total
        self._entries: dict[tuple[int, bytes], HeldReveal] = {}
        self._count: dict[int, int] = {}
        self._bytes: dict[int, int] = {}
        self._total_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held_bytes(self) -> int:
        """Transaction bytes held over all connections."""
        return self._total_bytes

    def held_by(self, owner: int) -> int:
        """Reveals held for connection ``owner``."""
        return self._count.get(owner, 0)

    def hold(self, entry: HeldReveal) -> bool:
        """Hold ``entry`` (replacing the same connection's earlier one for the job); False if a bound is hit."""
        key = (entry.owner, entry.job_id)
        old = self._entries.get(key)
        count = self._count.get(entry.owner, 0) - (old is not None)
        size = self._bytes.get(entry.owner, 0) - (len(old.tx_bytes) if old is not None else 0)
        total_count = len(self._entries) - (old is not None)
        total_size = self._total_bytes - (len(old.tx_bytes) if old is not None else 0)
        n = len(entry.tx_bytes)
        if (count + 1 > self.per_connection or total_count + 1 > self.total
                or size + n > self.bytes_per_connection or total_size + n > self.bytes_total):
            return False
        if old is not None:
            self._remove(key)
        self._entries[key] = entry
        self._count[entry.owner] = self._count.get(entry.owner, 0) + 1
        self._bytes[entry.owner] = self._bytes.get(entry.owner, 0) + n
        self._total_bytes += n
        return True

    def drop_owner(self, owner: int) -> int:
        """Forget every reveal held for connection ``owner``; returns how many."""
        keys = [k for k in self._entries if k[0] == owner]
        for k in keys:
            self._remove(k)
        return len(keys)

    def sweep(self, decide: Callable[[HeldReveal], Verdict]) -> tuple[list[HeldReveal], int]:
        """Apply ``decide`` to every held reveal (in arrival order): released entries are removed and returned,
        dropped ones removed and counted, kept ones stay."""
        released: list[HeldReveal] = []
        dropped = 0
        for key, entry in list(self._entries.items()):
            verdict = decide(entry)
            if verdict is Verdict.KEEP:
                continue
            self._remove(key)
            if verdict is Verdict.RELEASE:
                released.append(entry)
            else:
                dropped += 1
        return released, dropped

    def _remove(self, key: tuple[int, bytes]) -> None:
        entry = self._entries.pop(key)
        n = len(entry.tx_bytes)
        self._count[entry.owner] -= 1
        self._bytes[entry.owner] -= n
        if self._count[entry.owner] == 0:
            del self._count[entry.owner], self._bytes[entry.owner]
        self._total_bytes -= n
