"""Selection index: what an M = 1 JobSubmit needs, kept between jobs and blocks (docs/selection.md).

A node-local, derived cache of the Runner Registry: never part of the state, never hashed, and every
answer it gives equals the filter chain + CIP-2 v3 weights + present-first weighted draw run over the
whole registry (``dispatch.eligible_for`` / ``weights.base_weights`` / ``dispatch.draw_from``). It only
changes how much work that answer costs:

* :class:`RegistryIndex` holds every decoded record, the addresses in ascending order (a record's
  *position*) and, per request class (job kind, HTTP host, TEE requirement, pool), the per-position
  arrays the chain reduces to once the height-independent filters have run: base weight, last heartbeat
  (a sentinel for non-members) and base price.
* A :class:`_View` adds what one block fixes: the staleness cut ``height − heartbeat_timeout`` and the
  presence set. It holds the present and fallback pools (positions in address order) with the prefix
  sums of their weights, so one draw is two bisections.
* A world keeps its index in ``world.memo`` and re-reads only the records written since (the
  :func:`~cowboy_node.state.world.watch_prefix` log, reverts included). When a world computes a new state
  root the index is remembered under that root, so the next block's world starts from it.

Anything the fast path does not model (M > 1, excluded runners, a runner priced above the job's
``max_price``, an empty eligible set) returns None and the caller runs the exact linear path.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict
from dataclasses import dataclass, replace
from itertools import accumulate, compress, repeat
from operator import and_, ge, gt

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs.draw import draw_hash
from cowboy_node.execution.jobs.filters import SelectionRequest, eligible_with_report
from cowboy_node.execution.jobs.weights import base_weights
from cowboy_node.execution.runners import registry_state as registry
from cowboy_node.execution.system_state import get_runner_config
from cowboy_node.state.world import WorldState, add_prepare_hook, watch_prefix
from cowboy_protocol.types.fields import U128_MAX
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import RunnerRecord
from cowboy_protocol.types.validation_errors import DecodeError

ClassKey = tuple[int, str | None, bool, str | None, bytes | None]
"""(job kind, HTTP host, TEE required, required TEE type, required pool): the request fields the
height-independent filters read, apart from ``max_price`` and ``excluded``."""

MAX_CLASSES = 32
"""Request classes kept per index (least recently used dropped): bounds the work one record change causes."""
MAX_ROOTS = 8
"""State roots whose index is remembered (the head, its candidates and a few forks)."""
_NEVER = -(1 << 80)
"""``last_heartbeat`` of a non-member: below every staleness cut (heights are u64)."""
_NO_STALENESS = 1 << 70
"""A heartbeat timeout that makes every heartbeat fresh: the class filter ignores staleness."""
_ANY_PRICE = 1 << 256
_MEMO = "jobs.selection_index"

watch_prefix(registry.RECORD_PREFIX)


def class_key(req: SelectionRequest) -> ClassKey:
    """The request class of ``req``."""
    return (req.job_kind, req.http_host, req.tee_required, req.required_tee_type, req.required_runner_pool)


def _static_request(key: ClassKey) -> SelectionRequest:
    kind, host, tee_required, tee_type, pool = key
    return SelectionRequest(job_kind=kind, http_host=host, tee_required=tee_required, required_tee_type=tee_type,
                            max_price=_ANY_PRICE, required_runner_pool=pool)


def _price(rec: RunnerRecord, kind: int) -> int:
    for k, rate in rec.rate_card.rates:
        if k == kind:
            return rate.base_price
    return 0  # unreachable for a member: the price filter needs the kind on the rate card


def _members(recs: list[RunnerRecord], key: ClassKey, cfg: RunnerConfig) -> list[RunnerRecord]:
    """The runners passing every filter but staleness, price and exclusion (the real filter code)."""
    return eligible_with_report(recs, _static_request(key), height=0, heartbeat_timeout_blocks=_NO_STALENESS,
                                cfg=cfg)[0]


@dataclass(frozen=True, slots=True)
class _Pool:
    positions: list[int]
    """Positions (address order) of the pool's runners."""
    prefix: list[int]
    """Running sums of their base weights."""


@dataclass(frozen=True, slots=True)
class _View:
    """One class under one block's staleness cut and presence set."""

    stale_before: int
    present: frozenset[int]
    pools: tuple[_Pool, _Pool]
    """(present, fallback)."""
    count: int
    """Eligible runners (both pools)."""
    max_price: int
    """Highest base price among them."""


class _Class:
    """Per-position arrays of one request class (see the module docstring)."""

    __slots__ = ("lhb", "price", "view", "weight")

    def __init__(self, weight: list[int], lhb: list[int], price: list[int]) -> None:
        self.weight = weight
        self.lhb = lhb
        self.price = price
        self.view: _View | None = None

    def copy(self) -> _Class:
        out = _Class(self.weight.copy(), self.lhb.copy(), self.price.copy())
        out.view = self.view  # views are immutable; still valid until a position changes
        return out

    def view_for(self, ridx: list[int], stale_before: int, present: frozenset[int]) -> _View:
        v = self.view
        if v is not None and v.stale_before == stale_before and (v.present is present or v.present == present):
            return v
        n = len(self.weight)
        fresh = list(map(ge, self.lhb, repeat(stale_before, n)))
        marked = list(map(present.__contains__, ridx)) if present else [False] * n
        in_present = list(map(and_, fresh, marked))
        in_fallback = list(map(gt, fresh, marked))  # fresh and not marked
        pools = tuple(_Pool(list(compress(range(n), mask)), list(accumulate(compress(self.weight, mask))))
                      for mask in (in_present, in_fallback))
        count = len(pools[0].positions) + len(pools[1].positions)
        v = _View(stale_before, present, (pools[0], pools[1]), count,
                  max(compress(self.price, fresh), default=0))
        self.view = v
        return v


class RegistryIndex:
    """Decoded registry records in address order plus per-class arrays (see the module docstring)."""

    def __init__(self, cfg: RunnerConfig, recs: dict[bytes, RunnerRecord]) -> None:
        self.cfg = cfg
        self.recs = recs
        self.order = sorted(recs)
        self.pos = {a: i for i, a in enumerate(self.order)}
        self.ridx = [recs[a].index for a in self.order]
        self.classes: OrderedDict[ClassKey, _Class] = OrderedDict()

    @classmethod
    def build(cls, world: WorldState) -> RegistryIndex:
        """Read every record of ``world`` (checked against the active-runner array)."""
        return cls(get_runner_config(world), {r.address: r for r in registry.runners_in_index_order(world)})

    def copy(self) -> RegistryIndex:
        """An independent copy (arrays copied, records and views shared: both are immutable)."""
        out = RegistryIndex.__new__(RegistryIndex)
        out.cfg, out.recs, out.order = self.cfg, dict(self.recs), self.order.copy()
        out.pos, out.ridx = dict(self.pos), self.ridx.copy()
        out.classes = OrderedDict((k, c.copy()) for k, c in self.classes.items())
        return out

    def set_cfg(self, cfg: RunnerConfig) -> None:
        """Adopt a changed runner config (minimum reputation and weights depend on it)."""
        if cfg != self.cfg:
            self.cfg = cfg
            self.classes.clear()

    def klass(self, key: ClassKey) -> _Class:
        """The arrays of class ``key`` (built on first use: one filter pass over the registry)."""
        c = self.classes.get(key)
        if c is not None:
            self.classes.move_to_end(key)
            return c
        n = len(self.order)
        weight, lhb, price = [0] * n, [_NEVER] * n, [0] * n
        members = _members([self.recs[a] for a in self.order], key, self.cfg)
        for r, w in zip(members, base_weights(members, self.cfg), strict=True):
            p = self.pos[r.address]
            weight[p], lhb[p], price[p] = w, r.last_heartbeat, _price(r, key[0])
        c = self.classes[key] = _Class(weight, lhb, price)
        while len(self.classes) > MAX_CLASSES:
            self.classes.popitem(last=False)
        return c

    def update(self, address: bytes, rec: RunnerRecord | None) -> None:
        """Adopt the current record of ``address`` (None: it has none)."""
        p = self.pos.get(address)
        if p is None:
            if rec is None:
                return
            self._insert(address, rec)
            return
        if rec is None:
            self._remove(address, p)
            return
        if rec.index != self.ridx[p]:  # as runners_in_index_order refuses it on the linear path
            raise DecodeError(f"runner registry: record {address.hex()} moved from index {self.ridx[p]} "
                              f"to {rec.index}")
        old = self.recs[address]
        self.recs[address] = rec
        if replace(old, last_heartbeat=rec.last_heartbeat) == rec:
            # Only the heartbeat moved (the common change): class membership ignores staleness, so members
            # stay members with the same weight and price; no filter call needed.
            for c in self.classes.values():
                old_hb = c.lhb[p]
                if old_hb == _NEVER or old_hb == rec.last_heartbeat:
                    continue
                v = c.view
                if v is not None and (old_hb >= v.stale_before) != (rec.last_heartbeat >= v.stale_before):
                    c.view = None
                c.lhb[p] = rec.last_heartbeat
            return
        for key, c in self.classes.items():
            member = _members([rec], key, self.cfg)
            w, hb, pr = ((base_weights(member, self.cfg)[0], rec.last_heartbeat, _price(rec, key[0])) if member
                         else (0, _NEVER, 0))
            old_hb = c.lhb[p]
            if c.weight[p] == w and c.price[p] == pr:
                if old_hb == hb:
                    continue
                v = c.view
                if v is not None and (old_hb >= v.stale_before) == (hb >= v.stale_before):
                    c.lhb[p] = hb  # same side of this block's staleness cut: the view is unchanged
                    continue
            c.weight[p], c.lhb[p], c.price[p] = w, hb, pr
            c.view = None

    def _insert(self, address: bytes, rec: RunnerRecord) -> None:
        insort(self.order, address)
        p = bisect_left(self.order, address)
        self.recs[address] = rec
        self.ridx.insert(p, rec.index)
        self.pos = {a: i for i, a in enumerate(self.order)}
        for key, c in self.classes.items():
            member = _members([rec], key, self.cfg)
            c.weight.insert(p, base_weights(member, self.cfg)[0] if member else 0)
            c.lhb.insert(p, rec.last_heartbeat if member else _NEVER)
            c.price.insert(p, _price(rec, key[0]) if member else 0)
            c.view = None

    def _remove(self, address: bytes, p: int) -> None:
        del self.order[p], self.ridx[p], self.recs[address]
        self.pos = {a: i for i, a in enumerate(self.order)}
        for c in self.classes.values():
            del c.weight[p], c.lhb[p], c.price[p]
            c.view = None


# -- per-world upkeep ---------------------------------------------------------------------------

class _Local:
    """A world's index, the base state (epoch, root) it was derived for and how much of the world's watch log
    it has applied."""

    __slots__ = ("applied", "epoch", "index", "root", "shared")

    def __init__(self, index: RegistryIndex, epoch: int, root: bytes, applied: int) -> None:
        self.index = index
        self.epoch = epoch
        self.root = root
        self.applied = applied
        self.shared = False  # also remembered under a root: copy before changing records

    def current(self, world: WorldState) -> bool:
        # Another world committing on the same store moves the base under this one without a new epoch.
        return self.epoch == world.epoch and self.root == world.tree.root()


_ROOTS: OrderedDict[bytes, RegistryIndex] = OrderedDict()
_LOCK = threading.RLock()


def _remember(root: bytes, index: RegistryIndex) -> None:
    _ROOTS[root] = index
    _ROOTS.move_to_end(root)
    while len(_ROOTS) > MAX_ROOTS:
        _ROOTS.popitem(last=False)


def _apply(world: WorldState, local: _Local) -> None:
    log = world.watch_log
    if local.applied == len(log):
        return
    keys = dict.fromkeys(log[local.applied:])
    local.applied = len(log)
    if local.shared:
        local.index = local.index.copy()
        local.shared = False
    cut = len(registry.RECORD_PREFIX)
    for key in keys:
        if key.startswith(registry.RECORD_PREFIX) and len(key) == cut + 20:
            address = key[cut:]
            local.index.update(address, registry.get_runner(world, address))


def world_index(world: WorldState) -> RegistryIndex:
    """The index of ``world``'s current state (built, copied from its base root's, or brought up to date)."""
    local = world.memo.get(_MEMO)
    if not isinstance(local, _Local) or not local.current(world):
        root = world.tree.root()
        base = _ROOTS.get(root)
        if base is None:  # a full read of the current state: the log so far is already in it
            local = _Local(RegistryIndex.build(world), world.epoch, root, len(world.watch_log))
        else:  # the base state's index plus every record this world has written since (all logged)
            local = _Local(base, world.epoch, root, 0)
            local.shared = True
        world.memo[_MEMO] = local
    _apply(world, local)
    cfg = get_runner_config(world)
    if cfg != local.index.cfg:
        if local.shared:
            local.index = local.index.copy()
            local.shared = False
        local.index.set_cfg(cfg)
    return local.index


def _on_prepare(world: WorldState, base_root: bytes, new_root: bytes) -> None:
    """Remember the index of the state ``new_root`` names (only from an index this world already has or
    its base root has: never a full registry read at commit time)."""
    try:
        with _LOCK:
            local = world.memo.get(_MEMO)
            if not isinstance(local, _Local) or not local.current(world):
                base = _ROOTS.get(base_root)
                if base is None:
                    return
                local = _Local(base, world.epoch, base_root, 0)
                local.shared = True
                world.memo[_MEMO] = local
            _apply(world, local)
            local.shared = True
            _remember(new_root, local.index)
    except Exception:  # a cache that cannot be kept is dropped; the root and the ops do not depend on it
        world.memo.pop(_MEMO, None)


add_prepare_hook(_on_prepare)


# -- the M = 1 selection ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class M1Selection:
    """The eligible set of one M = 1 job, ready for its draw."""

    index: RegistryIndex
    view: _View

    def draw(self, seed: bytes, mru_address: bytes | None, mru_multiplier: int) -> list[RunnerRecord]:
        """The committee (one runner, or none if the active pool's weights sum to 0), exactly as
        ``draw.draw_committee_weighted`` draws it at iteration 0."""
        present, fallback = self.view.pools
        pool = present if present.positions else fallback
        if not pool.positions:
            return []
        prefix = pool.prefix
        total = prefix[-1]
        q = -1
        extra = 0
        if mru_address is not None:
            p = self.index.pos.get(mru_address)
            if p is not None:
                i = bisect_left(pool.positions, p)
                if i < len(pool.positions) and pool.positions[i] == p:
                    q = i
                    w_q = prefix[q] - (prefix[q - 1] if q else 0)
                    extra = w_q * mru_multiplier - w_q
        total += extra
        if total == 0:
            return []
        if total > U128_MAX:
            raise ValueError("total weight exceeds u128")
        ticket = int.from_bytes(draw_hash(seed, 0)[:8], "little") % total
        # First j whose running sum exceeds the ticket, the MRU runner's weight scaled (see docs/selection.md).
        if q < 0 or ticket < (prefix[q - 1] if q else 0):
            j = bisect_right(prefix, ticket)
        elif ticket < prefix[q] + extra:
            j = q
        else:
            j = bisect_right(prefix, ticket - extra)
        return [self.index.recs[self.index.order[pool.positions[j]]]]


def m1_selection(world: WorldState, ctx: BlockContext, req: SelectionRequest,
                 present: frozenset[int]) -> M1Selection | None:
    """The indexed eligible set for an M = 1 job, or None when the caller must run the linear path
    (runners excluded, a member priced above ``max_price``, or nobody eligible: its error report)."""
    if req.excluded:
        return None
    with _LOCK:
        index = world_index(world)
        view = index.klass(class_key(req)).view_for(index.ridx, ctx.env.height - ctx.limits.heartbeat_timeout_blocks,
                                                    present)
    if view.count == 0 or view.max_price > req.max_price:
        return None
    return M1Selection(index, view)


def forget_all() -> None:
    """Drop every remembered root (tests and benchmarks measuring a cold start)."""
    with _LOCK:
        _ROOTS.clear()
