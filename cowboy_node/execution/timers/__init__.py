"""CIP-5 timers (seeds/003): one-shot height timers, FIFO per height, fee_payer model.

``timer_record`` — the Timer record and timer id; ``timer_state`` — state layout and indexes;
``schedule`` — host calls and system instructions; ``deliver`` — the End-of-Block
DeliverTimers step. The layout, codes and events are documented in docs/timers.md.
"""

from cowboy_node.execution.timers.deliver import (
    GC_CYCLES_PER_TIMER,
    LANE_TIMER_CYCLES,
    DeliveryReport,
    FireOutcome,
    RunHandler,
    deliver_timers,
)
from cowboy_node.execution.timers.schedule import (
    cancel_timer,
    extend_timer,
    schedule_timer,
    system_cancel_timer,
    system_extend_timer,
)
from cowboy_node.execution.timers.timer_record import DEFAULT_HANDLER, Timer, derive_timer_id

__all__ = [
    "DEFAULT_HANDLER",
    "GC_CYCLES_PER_TIMER",
    "LANE_TIMER_CYCLES",
    "DeliveryReport",
    "FireOutcome",
    "RunHandler",
    "Timer",
    "cancel_timer",
    "deliver_timers",
    "derive_timer_id",
    "extend_timer",
    "schedule_timer",
    "system_cancel_timer",
    "system_extend_timer",
]
