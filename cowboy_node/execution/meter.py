"""Cycle and cell metering for one transaction."""

from __future__ import annotations

from cowboy_node.execution.errors import TxFailed


class Meter:
    """Counts cycles and cells against a transaction's limits.

    Exceeding a limit raises :class:`TxFailed` and pins usage at the limit, so a
    transaction that runs out pays for everything it was allowed to use.
    """

    __slots__ = ("cells_limit", "cells_used", "cycles_limit", "cycles_used")

    def __init__(self, cycles_limit: int, cells_limit: int) -> None:
        self.cycles_limit = cycles_limit
        self.cells_limit = cells_limit
        self.cycles_used = 0
        self.cells_used = 0

    def charge_cycles(self, n: int) -> None:
        """Charge ``n`` compute cycles."""
        self.cycles_used += n
        if self.cycles_used > self.cycles_limit:
            self.cycles_used = self.cycles_limit
            raise TxFailed("out_of_cycles", f"cycles limit {self.cycles_limit} exceeded")

    def charge_cells(self, n: int) -> None:
        """Charge ``n`` cells (bytes written or carried)."""
        self.cells_used += n
        if self.cells_used > self.cells_limit:
            self.cells_used = self.cells_limit
            raise TxFailed("out_of_cells", f"cells limit {self.cells_limit} exceeded")
