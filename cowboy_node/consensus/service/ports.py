"""What the consensus parts need from outside (issue 32): small Protocols, implemented by the node's asyncio shell
(``node/consensus_service.py``), the peer layer, block sync (``node/sync_resolver.py``), the structured log and
:class:`~cowboy_node.observability.metrics.NodeMetrics`. Nothing here reads a clock or does I/O."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from cowboy_node.consensus.simplex.engine import Output
from cowboy_node.execution.context import Observe


class Network(Protocol):
    """The outbox to the other validators (the validator peer layer)."""

    def send(self, to: int, channel: int, payload: bytes) -> bool:
        """Send ``payload`` on ``channel`` to validator ``to`` (False: not connected or over its queue)."""
        ...

    def broadcast(self, channel: int, payload: bytes) -> int:
        """Send ``payload`` on ``channel`` to every connected validator; returns how many."""
        ...

    def connected(self) -> frozenset[int]:
        """Validators with an authenticated connection now."""
        ...

    def penalize(self, peer: int, reason: str) -> None:
        """``peer`` crossed a budget or sent what it cannot back: disconnect it for a back-off (counted by
        ``reason``)."""
        ...


class Clock(Protocol):
    """The clocks consensus reads, passed in (``execution``-style purity: the parts never read one themselves)."""

    def monotonic(self) -> float:
        """Monotonic seconds (engine timers, latency metrics, the view timeline)."""
        ...

    def wall_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (block timestamps, evidence records)."""
        ...

    def perf(self) -> float:
        """High-resolution seconds for durations (build and commit times)."""
        ...


class Signal(Protocol):
    """A flag tasks wait on (``asyncio.Event`` is one)."""

    def set(self) -> None:
        """Raise the flag and wake its waiters."""
        ...

    def clear(self) -> None:
        """Lower the flag."""
        ...

    def is_set(self) -> bool:
        """Whether the flag is raised."""
        ...


class Runtime(Protocol):
    """The event loop and the builder thread, as the parts see them."""

    @property
    def running(self) -> bool:
        """True while the service's loop runs (outside it, the engine is driven by hand: no task is started)."""
        ...

    @property
    def stopping(self) -> bool:
        """True once the node was asked to stop."""
        ...

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as a task owned by the service (cancelled when it stops; a failure is logged)."""
        ...

    def in_builder(self, fn: Callable[[], Any], view: int | None = None, stage: str = "exec_start") -> Awaitable[Any]:
        """Run ``fn`` in the builder thread under the state lock (marking ``stage`` of ``view`` when it starts)."""
        ...

    def sleep(self, seconds: float) -> Awaitable[None]:
        """Wait ``seconds``."""
        ...

    def signal(self) -> Signal:
        """A new flag, lowered."""
        ...

    def wait(self, signal: Signal, timeout_s: float) -> Awaitable[None]:
        """Wait until ``signal`` is raised or ``timeout_s`` passed, whichever comes first."""
        ...

    def wake(self) -> None:
        """Wake the engine's loop (a new deadline or a stop)."""
        ...

    def wake_commit(self) -> None:
        """Wake the commit loop (a finalized block may be ready to commit)."""
        ...


class VoteOutbox(Protocol):
    """The engine's outputs acted on in order, every journaled vote durable first (``node/vote_outbox.py``)."""

    def push(self, outputs: list[Output]) -> None:
        """Act on ``outputs`` in order, behind those still queued."""
        ...

    def run(self, fn: Callable[[], None]) -> Awaitable[None]:
        """Run ``fn`` on the journal's writer thread, in turn with the journal writes."""
        ...

    def background(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` on the writer thread without waiting for it (a failure stops the node)."""
        ...

    def flush(self) -> Awaitable[None]:
        """Wait until everything pushed so far was acted on."""
        ...


class BlockSync(Protocol):
    """Serving and fetching finalized blocks (``node/sync_resolver.py``)."""

    @property
    def syncing(self) -> bool:
        """True while a trusted peer is two or more finalized blocks ahead."""
        ...

    def on_sync(self, sender: int, payload: bytes) -> None:
        """A message of the sync channel (raises DecodeError for a malformed one)."""
        ...

    def allow_fetch(self, sender: int, views: int) -> bool:
        """Whether a Fetch of ``views`` views from ``sender`` is within its budget (refused and counted if not)."""
        ...

    def status(self) -> bytes:
        """This validator's Status message (its finalized height)."""
        ...

    def tick(self, force: bool = False) -> None:
        """Expire late answers and send the requests the window allows (``force``: one block behind is enough)."""
        ...


class EventLog(Protocol):
    """Structured log events (the node's structlog logger is one): an event name and its fields."""

    def info(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at info level."""
        ...

    def warning(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at warning level."""
        ...

    def error(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at error level."""
        ...

    def critical(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at critical level."""
        ...

    def exception(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at error level with the exception being handled."""
        ...


class ConsensusMetrics(Protocol):
    """What consensus reports (``NodeMetrics`` implements it, as it does ``TransportMetrics``): the names are
    those of ``cowboy_consensus_*`` and ``cowboy_block_production_failures_total``."""

    def consensus_message(self, direction: str, kind: str) -> None:
        """One consensus message ``sent`` or ``received``, by message kind."""
        ...

    def consensus_bad_message(self, reason: str) -> None:
        """A peer message refused."""
        ...

    def consensus_fault(self, reason: str) -> None:
        """A protocol violation seen (or the finalized chain conflicting with the committed one: ``safety``)."""
        ...

    def consensus_invalid_block(self, reason: str) -> None:
        """A proposal this validator refused to vote for."""
        ...

    def consensus_certificate(self, kind: str) -> None:
        """A certificate formed or received (``notarization``, ``nullification``; the latter also counts a
        nullified view)."""
        ...

    def consensus_latency(self, stage: str, seconds: float) -> None:
        """From a view's proposal to its ``notarization`` or ``finalization``."""
        ...

    def consensus_gauges(self, *, view: int | None = None, finalized_height: int | None = None,
                         peers: int | None = None, voting: bool | None = None) -> None:
        """Set the gauges given (the others are left as they are)."""
        ...

    def block_production_failed(self) -> None:
        """A build or commit raised outside transaction execution."""
        ...

    def block_observer(self) -> Observe:
        """A fresh timer of one block's End-of-Block steps (recorded when the block commits)."""
        ...


__all__ = ["BlockSync", "Clock", "ConsensusMetrics", "EventLog", "Network", "Runtime", "Signal", "VoteOutbox"]
