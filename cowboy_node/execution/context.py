"""Per-block and per-transaction execution context (pure data, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cowboy_node.types.params import BasefeeConfig, ChainLimits, Cip11Flags


@dataclass(frozen=True, slots=True)
class BlockEnv:
    """Everything a block's execution depends on besides the parent state; all of it is committed in the block."""

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
