"""One stop request shared by the parts of a node that may ask for it and the ones that must react.

The consensus service stops on it (after the block in progress); the after-commit work (halt height), the state
sync fall-back and the signal handlers ask for it. Created first at assembly and passed to each by constructor,
so none of them needs a reference to another to stop the node.
"""

from __future__ import annotations

from collections.abc import Callable


class StopSignal:
    """A one-way latch: once :meth:`request` is called, :attr:`requested` stays True and every subscriber is
    told (at once, on the caller's thread)."""

    def __init__(self) -> None:
        self.requested = False
        """True once a stop was asked for."""
        self._subscribers: list[Callable[[], None]] = []

    def subscribe(self, on_request: Callable[[], None]) -> None:
        """Call ``on_request`` on every :meth:`request` (the consensus service wakes its loop with it)."""
        self._subscribers.append(on_request)

    def request(self) -> None:
        """Ask the node to stop (idempotent for the flag; subscribers are told each time)."""
        self.requested = True
        for on_request in self._subscribers:
            on_request()
