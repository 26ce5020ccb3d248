"""Cycle and cell metering for one transaction."""

from __future__ import annotations

from cowboy_node.execution.validity_errors import TxFailed


class Meter:
    """Counts cycles and cells against a transaction's limits.

    Exceeding a limit raises :class:`TxFailed` and pins usage at the limit, so a
    transaction that runs out pays for everything it was allowed to use.

    A read-only run (never block execution) can also be stopped from another
    thread with :meth:`interrupt`: the next cycle charge then raises the given
    code. Execution itself never decides to interrupt (it reads no clock); the
    caller that owns the deadline does.
    """

    __slots__ = ("_child", "ceiling", "cells_limit", "cells_used", "cycles_limit", "cycles_used", "interrupted")

    def __init__(self, cycles_limit: int, cells_limit: int) -> None:
        self.cycles_limit = cycles_limit
        self.cells_limit = cells_limit
        self.cycles_used = 0
        self.cells_used = 0
        self.ceiling = cycles_limit
        """The most ``cycles_used`` may reach without a charge failing: ``cycles_limit``, or -1 once
        interrupted (the PVM's inline fast path compares against it, so it sees an interrupt on its next
        charge)."""
        self.interrupted: tuple[str, str] | None = None
        """``(code, message)`` given to :meth:`interrupt`, or None."""
        self._child: Meter | None = None

    def charge_cycles(self, n: int) -> None:
        """Charge ``n`` compute cycles."""
        self.cycles_used += n
        if self.cycles_used > self.ceiling:
            stop = self.interrupted
            if stop is not None:
                self.cycles_used = min(self.cycles_used, self.cycles_limit)
                raise TxFailed(*stop)
            self.cycles_used = self.cycles_limit
            raise TxFailed("out_of_cycles", f"cycles limit {self.cycles_limit} exceeded")

    def charge_cells(self, n: int) -> None:
        """Charge ``n`` cells (bytes written or carried)."""
        self.cells_used += n
        if self.cells_used > self.cells_limit:
            self.cells_used = self.cells_limit
            raise TxFailed("out_of_cells", f"cells limit {self.cells_limit} exceeded")

    def child(self, cycles_limit: int, cells_limit: int) -> Meter:
        """A meter for a nested call (``call_actor``) that an :meth:`interrupt` of this one also stops."""
        sub = Meter(cycles_limit, cells_limit)
        self._child = sub
        stop = self.interrupted
        if stop is not None:  # interrupted while the child was being made
            sub.interrupt(*stop)
        return sub

    def interrupt(self, code: str, message: str = "") -> None:
        """Make the next cycle charge (here and in the nested call running now) raise ``TxFailed(code)``.

        Safe to call from another thread; the first call's code wins. Used for read-only calls only:
        block execution never interrupts a meter, so its outcomes stay a function of the block.
        """
        if self.interrupted is None:
            self.interrupted = (code, message)
        self.ceiling = -1
        sub = self._child
        if sub is not None:
            sub.interrupt(*self.interrupted)


class InterruptHandle:
    """Stops a read-only run from another thread: :meth:`interrupt` reaches the meter :meth:`bind` attached.

    The RPC read pool creates one per call and its watchdog calls :meth:`interrupt` at the deadline; the
    run binds its meter when it creates it (an interrupt that came first is applied at once).
    """

    __slots__ = ("_meter", "reason")

    def __init__(self) -> None:
        self._meter: Meter | None = None
        self.reason: tuple[str, str] | None = None
        """``(code, message)`` once interrupted."""

    def bind(self, meter: Meter) -> None:
        """Attach the run's root meter."""
        self._meter = meter
        reason = self.reason
        if reason is not None:
            meter.interrupt(*reason)

    def interrupt(self, code: str, message: str = "") -> None:
        """Stop the run at its next cycle charge with error ``code`` (idempotent; the first code wins)."""
        if self.reason is None:
            self.reason = (code, message)
        meter = self._meter
        if meter is not None:
            meter.interrupt(*self.reason)

    @property
    def interrupted(self) -> bool:
        """True once :meth:`interrupt` was called."""
        return self.reason is not None
