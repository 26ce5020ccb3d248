"""The runner's side of a CIP-11 §5.3 reconfiguration while it runs.

The daemon follows the snapshot its validator publishes in ``/status`` (``validator_set`` and, once governance
has activated an epoch E+1, ``reconfiguration``), re-plans its sessions at every new head
(:func:`cowboy_runner.sessions_plan.plan_sessions`: ``Sub_E`` before ``h``, ``Sub_E ∪ Sub_{E+1}`` during the
window, ``Sub_{E+1}`` from the cutoff) and closes the links the plan no longer holds (:func:`stale_links`).

A link the validator closes with ``Goodbye{OverlapExpired}`` stops for good (:class:`EpochLink`): §5.3 "the peer
[...] MUST NOT reconnect under the epoch-E hash". Without this the link's ordinary reconnect (100 ms after a
session that had authenticated) would offer hash(E) again before the daemon's next re-plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.session import Closed, Event
from cowboy_runner.link import Link
from cowboy_runner.sessions_plan import SessionTarget, Snapshot


class EpochLink(Link):
    """A :class:`Link` bound to one ``(validator, subset_epoch)`` that never reconnects after OverlapExpired."""

    overlap_expired = False
    """Set when the validator closed the session with ``Goodbye{OverlapExpired}``; the link then stops."""
    still_planned: Callable[[], bool] | None = None
    """Asked before every *re*connect: does the plan at the current head still hold this ``(validator, epoch)``?
    If not, the link stops instead of reconnecting. This covers a lost ``Goodbye``: a session that merely drops
    at the §5.3 cutoff must not come back offering the epoch-E hash before the next re-plan drops the link."""

    async def _one_session(self) -> bool:
        if self.connects and self.still_planned is not None and not self.still_planned():
            self._stopping = True  # Link.run stops at once (as after stop())
            return False
        return await super()._one_session()

    def _handle(self, events: Sequence[Event]) -> bool:
        authenticated = super()._handle(events)
        if any(isinstance(e, Closed) and e.reason is GoodbyeReason.OVERLAP_EXPIRED for e in events):
            self.overlap_expired = True
            self._stopping = True  # Link.run stops reconnecting once this is set (as after stop())
        return authenticated


def link_key(link: Link) -> tuple[bytes | None, int]:
    """The ``(validator, subset_epoch)`` a link offers."""
    return link.config.expected_validator, link.config.subset_epoch


def stale_links(links: Iterable[Link], targets: Iterable[SessionTarget], snapshot: Snapshot) -> list[Link]:
    """The links the plan no longer holds: their ``(validator, epoch)`` is not a target at the head (an
    epoch-E-only validator past the cutoff; an epoch-E link to a validator now reached under E+1), or they stopped
    on ``OverlapExpired``."""
    wanted = planned_keys(targets, snapshot)
    return [lk for lk in links
            if link_key(lk) not in wanted or (isinstance(lk, EpochLink) and lk.overlap_expired)]


def planned_keys(targets: Iterable[SessionTarget], snapshot: Snapshot) -> set[tuple[bytes | None, int]]:
    """The ``(validator, subset_epoch)`` of every session a plan holds."""
    return {(t.validator, (t.snapshot or snapshot.epoch_snapshot()).epoch) for t in targets}

