"""The CIP-1 End-of-Block step (seeds/004 §3): maintenance, collection, bids, ordering, budgeted execution.

For block ``h`` (epoch ``e``), with the policy and ``TimerConfig`` read once:

1. **Epoch maintenance** (``queue.maintain``) and **collection** of the due ring buckets into the backlog
   (``queue.collect``), each at most ``cip1_maint_per_block`` moves.
2. **Bids**: the first ``cip1_max_bids_per_block`` backlog entries, oldest trigger first. A timer past its
   ``expires_at`` is removed (``timer.expired``). Otherwise, if the owner can pay ``cip1_gba_cycles`` at the
   cycle basefee, its GBA is called read-only under that cap and the cycles used are charged to the owner
   (burned; they count in the block's cycles). A broken GBA (:data:`bidding.BAD_GBA_CODES`) drops the timer; a
   market refusal (:data:`bidding.DEFER_CODES`) leaves it due; both emit ``cip1.bid_refused``.
3. **Order** by effective tip (descending), then the actor's weight (descending), trigger height, insertion.
4. **Execute** under ``cip1_budget_cycles``: each actor first gets a slice ``budget · w_a / Σw`` (its timers
   past its slice wait for the second pass); the second pass gives what is left to the postponed timers in the
   same order. A timer whose ``gas_limit`` does not fit the remaining budget ends its pass (the first execution
   of a block is always admitted). An execution pre-charges ``gas_limit·(basefee + tip) + max_cells_per_fire ·
   cell basefee`` to the owner (if its balance is short the timer is deferred), runs the handler in a
   checkpoint, burns the basefee part of what it used, pays ``cycles · tip`` to the proposer and refunds the
   rest (``timer.fired``, fee = burn + tip).
5. **Carry-over**: every timer attempted and not run moves to ``(h + 1, seq)`` in the backlog, behind the due
   timers the bid window did not reach, so each due timer is bid on in turn however many others are deferred
   block after block (a deferring actor cannot hold the window).
6. **Weights**: each actor with timers attempted adds this block's score (``weights.py``).

A timer whose handler fails is not retried (it was removed before running, as in seeds/003).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.scheduler import bidding, queue, weights
from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.execution.scheduler.bidding import Bid, BidCall
from cowboy_node.execution.scheduler.timer_layout import Cip1Timer
from cowboy_node.execution.system_state import get_account, get_timer_config, put_account
from cowboy_node.execution.timers.deliver import TOPIC_EXPIRED, TOPIC_FIRED, FireOutcome, run_checkpointed
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import encode_u128, expect_uint
from cowboy_protocol.types.params import TimerConfig
from cowboy_protocol.types.timer_policy import TimerPolicy

RunFire = Callable[[WorldState, BlockContext, Timer, Meter], FireOutcome]
"""Runs one handler: ``actors.invoke.run_timer_fire`` in the node, fakes in tests."""
TOPIC_BID_REFUSED = "cip1.bid_refused"
"""``{0: timer_id, 1: code, 2: gba_cycles, 3: gba_fee (u128 bytes), 4: dropped (bool)}``, emitter = owner."""
TOPIC_BID = "cip1.bid"
"""An accepted bid: ``{0: timer_id, 1: effective tip per cycle, 2: gba_cycles, 3: gba_fee (u128 bytes)}``,
emitter = owner (the execution, if the budget admits it this block, follows as ``timer.fired``)."""


@dataclass(slots=True)
class Cip1Report:
    """What one CIP-1 step did."""

    moved: int = 0
    """Queue entries moved by maintenance and collection."""
    bids: int = 0
    """GBA calls made."""
    executed: int = 0
    """Timers whose handler ran (successfully or not)."""
    deferred: int = 0
    """Timers attempted and left due (budget, balance, bid below basefee)."""
    dropped: int = 0
    """Timers removed because their GBA is broken."""
    expired: int = 0
    """Timers removed past ``expires_at``."""
    budget_used: int = 0
    """Cycles the executed handlers used (≤ budget, except a first execution larger than it)."""
    gba_cycles: int = 0
    """Cycles the GBA calls used."""
    order: list[bytes] = field(default_factory=list)
    """Ids of the executed timers, in execution order."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    timer_id: bytes
    timer: Cip1Timer
    tip: int
    max_cost: int


def last_usage(world: WorldState) -> int:
    raw = world.get(model.KEY_USAGE)
    return 0 if raw is None else expect_uint(decode(raw), "cip1_usage")


def deliver(world: WorldState, ctx: BlockContext, policy: TimerPolicy, run_fire: RunFire, *,
            bid_call: BidCall | None = None) -> Cip1Report:
    """Run the CIP-1 step for block ``ctx.env.height`` (module docstring)."""
    call = bid_call or bidding.default_bid_call()
    h = ctx.env.height
    epoch = model.epoch_of(h)
    cfg = get_timer_config(world)
    rep = Cip1Report()
    rep.moved = queue.maintain(world, h, policy.cip1_maint_per_block)
    rep.moved += queue.collect(world, h, policy.cip1_maint_per_block)
    usage = last_usage(world)
    stats: dict[bytes, weights.BlockStats] = {}
    events: list[Event] = []
    candidates: list[_Candidate] = []
    visited: list[tuple[bytes, bytes, int]] = []
    for key, timer_id in queue.backlog_head(world, policy.cip1_max_bids_per_block):
        t = queue.get_timer(world, timer_id)
        if t is None:
            world.delete(key)  # cannot happen (removal deletes both); keeps the backlog clean if it did
            continue
        if h > t.expires_at:
            queue.remove(world, timer_id, t)
            rep.expired += 1
            events.append(Event(t.actor, TOPIC_EXPIRED, encode({0: timer_id, 1: t.expires_at, 2: h})))
            continue
        visited.append((key, timer_id, t.seq))
        st = stats.setdefault(t.actor, weights.BlockStats())
        st.attempted += 1
        st.max_lateness = max(st.max_lateness, h - t.height)
        got, cycles, fee = _bid(world, ctx, policy, cfg, call, t, usage, rep)
        if isinstance(got, _Candidate):
            st.best_tip = max(st.best_tip, got.tip)
            candidates.append(_Candidate(timer_id, t, got.tip, got.max_cost))
            events.append(Event(t.actor, TOPIC_BID, encode({0: timer_id, 1: got.tip, 2: cycles,
                                                            3: encode_u128(fee)})))
            continue
        code = got
        dropped = code in bidding.BAD_GBA_CODES
        if dropped:
            queue.remove(world, timer_id, t)
            rep.dropped += 1
        else:
            st.deferred += 1
            rep.deferred += 1
        events.append(Event(t.actor, TOPIC_BID_REFUSED,
                            encode({0: timer_id, 1: code, 2: cycles, 3: encode_u128(fee), 4: dropped})))
    _execute(world, ctx, policy, cfg, run_fire, epoch, candidates, stats, events, rep)
    for key, timer_id, seq in visited:  # still due: carried over behind the entries not visited this block
        if world.get(key) == timer_id:
            queue.carry_over(world, key, timer_id, seq, h + 1)
    for actor in sorted(stats):
        if stats[actor].attempted:
            weights.record_block(world, actor, epoch, policy, stats[actor], cycle_basefee=ctx.cycle_basefee)
    if ctx.cycles_used != usage:
        world.set(model.KEY_USAGE, encode(ctx.cycles_used))
    ctx.events.extend(events)
    return rep


def _bid(world: WorldState, ctx: BlockContext, policy: TimerPolicy, cfg: TimerConfig, call: BidCall,
         t: Cip1Timer, usage: int, rep: Cip1Report) -> tuple[_Candidate | str, int, int]:
    """Ask ``t``'s GBA: ``(candidate or refusal code, gba_cycles, gba_fee)``."""
    cap = policy.cip1_gba_cycles
    bf = ctx.cycle_basefee
    acct = get_account(world, t.actor)
    if acct.balance < cap * bf:
        return bidding.E_INSUFFICIENT_BALANCE, 0, 0
    context = bidding.context_bytes(trigger=t.height, current=ctx.env.height, basefee_cycle=bf,
                                    basefee_cell=ctx.cell_basefee, last_usage=usage, balance=acct.balance)
    result, error, used = call(world, ctx, t.gba, context, cap)
    cycles = min(max(used, 0), cap)
    fee = cycles * bf
    acct = get_account(world, t.actor)  # the call reverted its writes; read again all the same
    put_account(world, t.actor, Account(acct.balance - fee, acct.nonce))
    ctx.burned += fee
    ctx.cycles_used += cycles
    rep.bids += 1
    rep.gba_cycles += cycles
    got = bidding.classify_call(result, error)
    if not isinstance(got, Bid):
        return got, cycles, fee
    if got.max_fee_per_cycle < bf:
        return bidding.E_BID_BELOW_BASEFEE, cycles, fee
    tip = got.effective_tip(bf)
    max_cost = t.gas_limit * (bf + tip) + cfg.max_cells_per_fire * ctx.cell_basefee
    if acct.balance - fee < max_cost:
        return bidding.E_BID_EXCEEDS_BALANCE, cycles, fee
    return _Candidate(b"", t, tip, max_cost), cycles, fee


def _execute(world: WorldState, ctx: BlockContext, policy: TimerPolicy, cfg: TimerConfig, run_fire: RunFire,
             epoch: int, candidates: list[_Candidate], stats: dict[bytes, weights.BlockStats],
             events: list[Event], rep: Cip1Report) -> None:
    budget = policy.cip1_budget_cycles
    w = {a: weights.effective(weights.get_record(world, a, epoch, policy), policy)
         for a in sorted({c.timer.actor for c in candidates})}
    order = sorted(candidates, key=lambda c: (-c.tip, -w[c.timer.actor], c.timer.height, c.timer.seq))
    total = sum(w.values())
    slices = {a: budget * wa // max(total, 1) for a, wa in w.items()}
    spent: dict[bytes, int] = dict.fromkeys(w, 0)
    postponed: list[_Candidate] = []
    waiting: list[_Candidate] = []
    closed = False

    def admit(c: _Candidate) -> None:
        nonlocal closed
        if closed or (rep.executed and rep.budget_used + c.timer.gas_limit > budget):
            closed = True  # the first that does not fit ends the pass: no lower bid jumps ahead of it
            waiting.append(c)
            return
        cycles = _run(world, ctx, cfg, run_fire, c, events)
        if cycles is None:
            waiting.append(c)
            return
        a = c.timer.actor
        spent[a] += cycles
        rep.budget_used += cycles
        rep.executed += 1
        rep.order.append(c.timer_id)
        stats[a].executed += 1
        stats[a].cycles += cycles

    for c in order:  # pass 1: price order within each actor's slice
        if not closed and spent[c.timer.actor] + c.timer.gas_limit > slices[c.timer.actor]:
            postponed.append(c)
        else:
            admit(c)
    for c in postponed:  # pass 2: what is left of the budget, same order
        admit(c)
    for c in waiting:
        if queue.get_timer(world, c.timer_id) is not None:  # a handler may have cancelled it
            stats[c.timer.actor].deferred += 1
            rep.deferred += 1


def _run(world: WorldState, ctx: BlockContext, cfg: TimerConfig, run_fire: RunFire, c: _Candidate,
         events: list[Event]) -> int | None:
    """Execute one timer (pre-charge, handler, settle); None if it is gone or its owner can no longer pay."""
    t, timer_id = c.timer, c.timer_id
    if queue.get_timer(world, timer_id) is None:
        return None
    acct = get_account(world, t.actor)
    if acct.balance < c.max_cost:
        events.append(Event(t.actor, TOPIC_BID_REFUSED, encode({0: timer_id, 1: bidding.E_INSUFFICIENT_BALANCE,
                                                                2: 0, 3: encode_u128(0), 4: False})))
        return None
    queue.remove(world, timer_id, t)  # before the handler: it never sees (or resurrects) its own timer
    put_account(world, t.actor, Account(acct.balance - c.max_cost, acct.nonce))
    cells_limit = cfg.max_cells_per_fire
    meter = Meter(t.gas_limit, cells_limit)
    outcome = run_checkpointed(world, meter, lambda m: run_fire(world, ctx, t.as_fire(timer_id), m))
    cycles = min(max(outcome.cycles_used, 0), t.gas_limit)
    cells = min(max(outcome.cells_used, 0), cells_limit)
    burn = cycles * ctx.cycle_basefee + cells * ctx.cell_basefee
    tip = cycles * c.tip
    acct = get_account(world, t.actor)
    put_account(world, t.actor, Account(acct.balance + c.max_cost - burn - tip, acct.nonce))
    ctx.burned += burn
    ctx.tips += tip
    ctx.cycles_used += cycles
    ctx.cells_used += cells
    if outcome.ok:
        events.extend(outcome.events)
    events.append(Event(t.actor, TOPIC_FIRED, encode({0: timer_id, 1: outcome.ok, 2: cycles, 3: cells,
                                                      4: encode_u128(burn + tip), 5: outcome.error_code})))
    return cycles
