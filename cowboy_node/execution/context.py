"""Per-block and per-transaction execution context (pure data, no I/O)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags

if TYPE_CHECKING:
    from cowboy_node.execution.timers.timer_record import Timer



Observe = Callable[[str], contextlib.AbstractContextManager[object]]
"""Given a section name, a context manager wrapped around that section (e.g. a timer in the node). Execution
never reads the clock itself; what the observer does cannot change a result."""

@dataclass(frozen=True, slots=True)
class BlockEnv:
    """Everything a block's execution depends on besides the parent state; all of it is committed in the block
    except ``finalized_height``, the executing validator's own finality view (CIP-11 §9.2 "block S is finalized
    and applied to canonical local state")."""

    chain_id: str
    """Chain id (transactions for another chain are invalid)."""
    height: int
    """Height of the block being executed."""
    timestamp_ms: int
    """Header timestamp."""
    fee_recipient: bytes
    """Address credited with the block's tips (the proposer's)."""
    beacon: bytes
    """This round's beacon."""
    parent_beacon: bytes
    """Previous round's beacon (the genesis beacon for height 1)."""
    presence_input: bytes | None = None
    """The block's PresenceInputV1 bytes, if any."""
    parent_state_root: bytes = bytes(32)
    """State root of the parent block (Mailbox ``deliver_id`` input, seeds/000 §10.1)."""
    round: tuple[int, int] = (0, 0)
    """(epoch, view) in which this block is proposed: r_submit of the jobs it includes (CIP-11 §9.2)."""
    parent_round: tuple[int, int] = (0, 0)
    """(epoch, view) of the parent block: the round of ``parent_beacon`` (M == 1 selection seed)."""
    consumed_seeds: tuple[tuple[int, int, bytes], ...] = ()
    """The block's ConsumedSeedsV1 entries (seed_epoch, seed_view, 48-byte seed signature), sorted by round."""
    n_validators: int = 1
    """Size of the validator set (the membership-steering bound applies when > 1, CIP-11 §7.3)."""
    finalized_height: int | None = None
    """Height of the executing validator's finalized (committed) head when the block runs on a parent that is
    notarized but not final yet (Simplex builds on such parents); None: every ancestor is final (the block runs
    on the committed head: single-validator production, replay, commit). A pending M > 1 selection whose
    block S is above it is not assignable in this block (CIP-11 §9.2 first pending-pass condition, §15.9)."""


@dataclass(slots=True)
class EobReport:
    """Counters and facts of one block's End of Block, filled by the steps (read by the node for metrics)."""

    timers_fired: int = 0
    """Timer handlers run (DeliverTimers under FIFO, or timer entries run by ExecuteMailbox)."""
    timers_deferred: int = 0
    """1 if DeliverTimers closed the lane budget with due timers left (FIFO), or the number of due
    Globalbox fires left queued (Globalbox policy)."""
    timers_expired: int = 0
    """Timers removed by TTL expiry."""
    timers_self_destructed: int = 0
    """Timers removed because their fee payer could not cover the fire (CIP-5 §5.4)."""
    timers_gc_deferred: int = 0
    """Expired / unfunded timers left in place because the GC budget was spent."""
    timers_materialized: int = 0
    """Timer fires written to the Mailbox (Globalbox policy)."""
    watch_hits: int = 0
    """State-watch timers whose watched prefix was modified in the block."""
    intervals_rolled: int = 0
    """Interval timers whose next due height SystemHooks wrote back."""
    mailbox_delivered: int = 0
    """Mailbox entries ExecuteMailbox ran (successfully or not)."""
    mailbox_dropped: int = 0
    """Mailbox entries removed unrun because their fee payer could not cover them."""
    mailbox_left: int = 0
    """Mailbox entries still pending after ExecuteMailbox (they run first next block)."""
    modified_keys: tuple[bytes, ...] = ()
    """ModifiedKeySet(h): state keys the block's transactions changed, sorted (set by DeliverTimers)."""
    fired_timers: list[Timer] = field(default_factory=list)
    """Height timers fired (FIFO) or materialised (Globalbox) this block, in order: SystemHooks rolls the
    interval timers among them forward."""
    steps_run: tuple[str, ...] = ()
    """Names of the End-of-Block steps run so far, in order."""
    committed_root: bytes | None = None
    """State root the block's writes produce (set by the Commit step)."""


@dataclass(slots=True)
class BlockContext:
    """Mutable totals accumulated while executing one block."""

    env: BlockEnv
    """The block environment."""
    basefee_config: BasefeeConfig
    """Config read once at the start of the block."""
    limits: ChainLimits
    """Limits read once at the start of the block."""
    flags: Cip11Flags
    """CIP-11 flags read once at the start of the block."""
    system_deployers: tuple[bytes, ...]
    """Senders allowed to use system instructions."""
    cycle_basefee: int
    """Basefee per cycle for this block."""
    cell_basefee: int
    """Basefee per cell for this block."""
    cycles_used: int = 0
    """Cycles charged so far."""
    cells_used: int = 0
    """Cells charged so far."""
    tips: int = 0
    """Tips owed to the fee recipient (credited at End of Block)."""
    burned: int = 0
    """Basefee burned so far in this block."""
    events: list[object] = field(default_factory=list)
    """Block-level events (End of Block steps)."""
    eob: EobReport = field(default_factory=EobReport)
    """What End of Block did (counters for metrics, the block's modified-key set)."""
    present: frozenset[int] = frozenset()
    """Registry indices of PresenceInput(H), decoded once against the parent registry (empty when absent,
    malformed outside active Mode B, or while present-first is off)."""
    registry_size: int = 0
    """|registry(H−1)|: the PresenceInput index basis of this block."""
    hard_exclude: bool = False
    """CIP-11 Mode A effective for this block (§8.3–§8.4, guard included): ``present`` was derived from parent-state
    presence proofs, and runners outside it are not selectable."""
    jobs_per_tx: dict[bytes, int] = field(default_factory=dict)
    """Jobs submitted so far by each transaction (the ``derive_job_id`` index)."""
    jobs_assigned: list[bytes] = field(default_factory=list)
    """Job ids assigned (or re-assigned) in this block, in order: the node pushes them after commit."""
    jobs_finished: list[bytes] = field(default_factory=list)
    """Job ids that reached a terminal state in this block, in order (callbacks, cancels)."""
    observe: Observe | None = None
    """Wraps measured sections (``job_filter``, ``job_draw`` and the End-of-Block steps); None: not measured."""
    internal_errors: list[tuple[bytes, str]] = field(default_factory=list)
    """``(tx_hash, description)`` of every transaction an unexpected exception failed (``internal_error``
    receipt or, while building, rejection): execution does not log, so the node logs and counts these."""
