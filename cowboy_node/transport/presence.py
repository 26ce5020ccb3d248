"""A validator's local presence (CIP-11 §6.3, §6.4, §7.4, §10.6, §11.3), sans-I/O.

Local presence is routing state, never consensus state: the set of registry indices this validator currently
holds an authenticated, accepting session to. The proposer writes it into each block's ``PresenceInput``
(§8.1) and push dispatch (§10.1) only targets runners in it.

Rules implemented here (each has a test in ``tests/unit/transport/test_transport_presence.py``):

- a valid HeartbeatPing records or refreshes the runner at the ping's chain height (§6.3) — unless the runner
  signalled ``accepting_new = false`` on this connection and has not re-asserted capacity (§6.4);
- a runner silent for more than ``PRESENCE_TIMEOUT_BLOCKS`` (default 15) is dropped (§6.3);
- ``accepting_new = false`` removes it at once; ``accepting_new = true`` (BackpressureSignal) or a fresh
  handshake lets the next valid ping restore it (§6.4);
- a HardFailure (no framed response within ``ACK_TIMEOUT_BLOCKS``) clears the entry; the next valid ping
  restores it (§10.6);
- connection loss clears the entry immediately (§11.3);
- a runner the registry does not show HEALTHY at the committed head (PAUSED by its own on-chain heartbeat with
  ``accepting = false``, or UNHEALTHY after a missed job) is withheld: removed now, and pings do not restore it
  until the registry shows it HEALTHY again. Such a runner is not floor-eligible (§7.1, §8.5), so marking it
  present would only mislead routing; its session stays up (admission, §6.2, only refuses Deregistered).

Heights are chain heights supplied by the caller (the head at the time of the event), so the table never reads
a clock.
"""

from __future__ import annotations

from dataclasses import dataclass

PRESENCE_TIMEOUT_BLOCKS = 15
"""CIP-11 §13 default: drop a runner from local presence after this many blocks without a valid ping."""


@dataclass(slots=True)
class PresenceEntry:
    """One runner's routing state."""

    index: int
    """Registry index (the PresenceInput bit)."""
    last_ping_height: int
    """Chain height of the last valid HeartbeatPing."""


class LocalPresence:
    """The present set of one validator, keyed by registry index."""

    def __init__(self, *, timeout_blocks: int = PRESENCE_TIMEOUT_BLOCKS) -> None:
        if timeout_blocks < 1:
            raise ValueError("presence timeout must be at least one block")
        self.timeout_blocks = timeout_blocks
        self._entries: dict[int, PresenceEntry] = {}
        self._backpressured: set[int] = set()
        self._withheld: set[int] = set()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, index: object) -> bool:
        return index in self._entries

    def ping(self, index: int, height: int) -> bool:
        """A valid HeartbeatPing from ``index`` at chain ``height``; returns True iff the runner is now present."""
        if index in self._backpressured or index in self._withheld:
            return False
        entry = self._entries.get(index)
        if entry is None:
            self._entries[index] = PresenceEntry(index, height)
        else:
            entry.last_ping_height = max(entry.last_ping_height, height)
        return True

    def backpressure(self, index: int, accepting_new: bool) -> None:
        """A verified BackpressureSignal: ``False`` removes the runner until it re-asserts capacity."""
        if accepting_new:
            self._backpressured.discard(index)
        else:
            self._backpressured.add(index)
            self._entries.pop(index, None)

    def registry_standing(self, index: int, healthy: bool) -> None:
        """The registry's health of ``index`` at the committed head: not HEALTHY removes it and keeps pings from
        restoring it; HEALTHY lets the next valid ping restore it."""
        if healthy:
            self._withheld.discard(index)
        else:
            self._withheld.add(index)
            self._entries.pop(index, None)

    def accepting(self, index: int) -> bool:
        """What this validator must report as ``accepting_new`` in pongs for ``index`` (§6.4)."""
        return index not in self._backpressured

    def hard_failure(self, index: int) -> None:
        """A push got no framed response within ACK_TIMEOUT_BLOCKS: routing entry cleared (§10.6)."""
        self._entries.pop(index, None)

    def connection_closed(self, index: int) -> None:
        """The runner's session ended: cleared now; a fresh handshake starts without backpressure (§6.4, §11.3)."""
        self._entries.pop(index, None)
        self._backpressured.discard(index)
        self._withheld.discard(index)  # re-applied from the registry after the next block if still so

    def expire(self, height: int) -> list[int]:
        """Drop entries silent for more than the timeout at ``height``; returns the dropped indices (sorted)."""
        stale = sorted(i for i, e in self._entries.items() if height - e.last_ping_height > self.timeout_blocks)
        for i in stale:
            del self._entries[i]
        return stale

    def present(self, height: int) -> frozenset[int]:
        """Indices present at ``height`` (expired entries dropped first): what the proposer encodes."""
        self.expire(height)
        return frozenset(self._entries)
