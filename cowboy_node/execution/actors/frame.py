"""What one handler run is (its :class:`CallFrame`) and what a whole top-level run shares (:class:`TxScope`).

Kept apart from the host and the invoker so each can import them: the invoker builds hosts, and a host runs
nested ``call_actor`` frames through the :data:`RunFrame` callable the invoker hands it (no import back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cowboy_node.execution.context import BlockContext
    from cowboy_node.execution.meter import Meter
    from cowboy_node.state.world import WorldState
    from cowboy_node.types.receipt import Event


@dataclass(frozen=True, slots=True)
class CallFrame:
    """Who is running and on whose behalf (one per handler run)."""

    actor: bytes
    """The executing actor (``context()["actor_addr"]``)."""
    sender: bytes
    """Immediate caller: the tx signer, the calling actor, or the actor itself for a timer fire."""
    tx_sender: bytes
    """Sender of the originating transaction (allowed as a timer ``fee_payer``); the actor itself in EOB runs."""
    tx_hash: bytes
    """Hash of the originating transaction; 32 zero bytes for EOB-originated and read-only runs."""
    depth: int
    """Call depth: 1 for the outermost handler, +1 per nested ``call_actor``."""


@dataclass(slots=True)
class TxScope:
    """State shared by every frame of one top-level run (a transaction, a fire, a message)."""

    emit_count: int = 0
    """Events emitted so far (``emit_id`` counts from 1 within the run)."""
    frames: list[bytes] = field(default_factory=list)
    """Actors on the call stack, outermost first (for diagnostics and re-entrancy tests)."""
    loaded: set[bytes] = field(default_factory=set)
    """Source hashes whose load cost this run has paid (membership tests only, never iterated)."""


RunFrame = Callable[["WorldState", "BlockContext", CallFrame, str, bytes, "Meter", "list[Event]", TxScope], bytes]
"""Runs one handler frame and returns its result (``invoke.run_frame``); a host runs nested calls with it."""
