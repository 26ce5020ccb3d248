"""Default fee fields and limits of the transactions both daemons build (the node's CLI and the runner).

Limits only bound what a transaction may use: unused cycles and cells are refunded (CIP-3), so a margin
costs the sender nothing but a larger maximum fee that its balance must cover at admission. Each margin is
defined once here; the CLI's help texts and the runner's transaction builder read these names.
"""

from __future__ import annotations

DEFAULT_PRIORITY_FEE = 1_000
"""Default tip per cycle and per cell (capped at the max fee per unit)."""

CELLS_MARGIN = 4_096
"""Cells added to twice a *system* instruction's encoded size (runner registry and job transactions) for what
the instruction writes beyond its own bytes: the runner or job record, its indexes, account entries, the
unbonding entry and events. Each of those is a bounded record well under 4 KiB, and a smaller limit leaves
more room in the block's cells budget for other transactions (a block admits a transaction only if its whole
cells limit still fits)."""

ACTOR_CELLS_MARGIN = 16_384
"""Cells added to what an actor deploy or call carries, for the state the actor's handler writes. Unlike a
system instruction, an actor's writes are unknown before it runs, hence a larger allowance (16 KiB); a call
that needs more sets ``--cells-limit``."""

REGISTER_CYCLES_LIMIT = 500_000
"""Default cycles limit of a runner registration (appending re-encodes the active-runner array: 2 cycles per
registered runner, so this covers ~240,000 runners)."""

RUNNER_CYCLES_LIMIT = 50_000
"""Default cycles limit of the other runner transactions (heartbeat, updates, results)."""
