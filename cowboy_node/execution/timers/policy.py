"""Governed timer scheduling policy: which CIP-5 extension scheduler runs (docs/timers.md §12).

The default is :data:`MODE_FIFO` — seeds/003, the canonical behaviour, untouched
by the extensions. :data:`MODE_GLOBALBOX` switches height timers to the
seeds/001 Globalbox (scored, quota-limited, order frozen once enqueued).
State-watch and interval timers (seeds/001, seeds/000) work under both modes.

Stored as canonical CBOR at ``actor/<BASEFEE 0x…06>/kv/system:timer_policy``,
next to ``TimerConfig``; absent = :class:`TimerPolicy` defaults. Changed by the
``UpdateTimerPolicy`` system instruction (kind 0x44) or written at genesis.
"""

from __future__ import annotations

from cowboy_node.execution.system_state import KEY_TIMER_CONFIG
from cowboy_node.state.world import WorldState
from cowboy_protocol.types.timer_policy import MODE_FIFO, MODE_GLOBALBOX, TimerPolicy

__all__ = ["E_EXTENSION_DISABLED", "KEY_TIMER_POLICY", "MODE_FIFO", "MODE_GLOBALBOX", "TimerPolicy",
           "get_timer_policy", "set_timer_policy"]

KEY_TIMER_POLICY = KEY_TIMER_CONFIG[: -len(b"timer_config")] + b"timer_policy"
"""``actor/<0x…06>/kv/system:timer_policy``."""
E_EXTENSION_DISABLED = "timer_extension_disabled"
"""``set_state_watch`` / ``set_interval`` while the policy disables that extension (its limit is 0)."""


def get_timer_policy(world: WorldState) -> TimerPolicy:
    """The governed policy (defaults when absent)."""
    raw = world.get(KEY_TIMER_POLICY)
    return TimerPolicy() if raw is None else TimerPolicy.decode(raw)


def set_timer_policy(world: WorldState, policy: TimerPolicy) -> None:
    """Replace the governed policy (validated)."""
    policy.validate()
    world.set(KEY_TIMER_POLICY, policy.encode())
