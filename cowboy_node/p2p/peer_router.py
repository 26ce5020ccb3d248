"""The validator peer layer's channel table: which part of the node serves each channel.

Consensus registers its channels (votes, block bodies, transactions, sync), the node its gossip (presence,
endpoints, transaction batches) and the snapshot server its channel, all at assembly (``node/assemble.py``). The
peer network hands every authenticated message to :meth:`PeerRouter.dispatch`; one place counts what no handler
serves and what fails to decode, so a peer's garbage never reaches the event loop as an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from cowboy_node.consensus.simplex.engine import ConsensusFault
from cowboy_node.observability.logging import get_logger
from cowboy_protocol.types.validation_errors import DecodeError

log = get_logger("cowboy.consensus")

Handler = Callable[[int, bytes], None]
"""``handler(sender, payload)``, called on the event loop."""


class _Counter(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class _Labeled(Protocol):
    def labels(self, *labelvalues: str, **labelkwargs: str) -> _Counter: ...


class RouterMetrics(Protocol):
    """The two counters the router reports to (``NodeMetrics`` has them)."""

    @property
    def consensus_bad_messages(self) -> _Labeled:
        """Messages refused before any handler acted: ``reason`` unknown_channel / malformed."""
        ...

    @property
    def consensus_faults(self) -> _Labeled:
        """Safety faults (``reason`` safety): conflicting certificates seen while handling a message."""
        ...


def route_peer_message(handlers: Mapping[int, Handler], metrics: RouterMetrics, sender: int, channel: int,
                       payload: bytes) -> None:
    """Hand ``payload`` from authenticated validator ``sender`` to the handler of ``channel``, counting an unknown
    channel, a payload that does not decode and a safety fault (none of them propagates)."""
    try:
        handler = handlers.get(channel)
        if handler is None:
            metrics.consensus_bad_messages.labels(reason="unknown_channel").inc()
            return
        handler(sender, payload)
    except DecodeError as e:
        metrics.consensus_bad_messages.labels(reason="malformed").inc()
        log.debug("malformed peer message", sender=sender, channel=channel, error=str(e))
    except ConsensusFault as e:
        metrics.consensus_faults.labels(reason="safety").inc()
        log.critical("conflicting certificates: more than f validators are faulty", error=str(e))


class PeerRouter:
    """The channel → handler table (see the module docstring); filled at assembly, read for every message."""

    def __init__(self, metrics: RouterMetrics) -> None:
        self._metrics = metrics
        self._handlers: dict[int, Handler] = {}

    def register(self, channel: int, handler: Handler) -> None:
        """Serve ``channel`` with ``handler`` (each channel once: a second registration is a wiring error)."""
        if channel in self._handlers:
            raise ValueError(f"peer channel {channel} already has a handler")
        self._handlers[channel] = handler

    def register_all(self, handlers: Mapping[int, Handler]) -> None:
        """:meth:`register` each of ``handlers``."""
        for channel, handler in handlers.items():
            self.register(channel, handler)

    def dispatch(self, sender: int, channel: int, payload: bytes) -> None:
        """The peer network's ``on_message``: route one authenticated message."""
        route_peer_message(self._handlers, self._metrics, sender, channel, payload)
