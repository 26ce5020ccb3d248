"""Mempool rules: admission, replacement, per-sender and global caps, eviction, block order."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cowboy_node.chain.mempool import EVICTION_REASONS, Mempool, MempoolConfig, MempoolError
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction

KEYS = [(1000 + i).to_bytes(32, "big") for i in range(6)]
ADDRS = [private_key_to_address(k) for k in KEYS]
TO = bytes(range(20))


@cache
def tx(k: int, nonce: int, tip: int = 10, fee: int = 100, cell_tip: int = 10, cell_fee: int = 100,
       amount: int = 1, chain_id: str = "cowboy-test-1") -> Transaction:
    """A signed transfer from KEYS[k] (cached: signing once per distinct tx per module)."""
    return Transaction(chain_id=chain_id, nonce=nonce, sender=ADDRS[k], instruction=Transfer(to=TO, amount=amount),
                       cycles_limit=50_000, cells_limit=2_000, max_fee_per_cycle=fee,
                       max_priority_fee_per_cycle=tip, max_fee_per_cell=cell_fee,
                       max_priority_fee_per_cell=cell_tip).signed(KEYS[k])


def pool(**kw: int) -> Mempool:
    return Mempool(MempoolConfig(**kw))


def zero(_sender: bytes) -> int:
    return 0


def code_of(exc: pytest.ExceptionInfo[MempoolError]) -> str:
    return exc.value.code


def test_ready_orders_each_sender_by_nonce() -> None:
    p = pool()
    for n in (2, 0, 1):
        p.add(tx(0, n, tip=10 + n), 0)
    assert [t.nonce for t in p.ready(zero, 10)] == [0, 1, 2]


def test_ready_prefers_higher_priority_fee_across_senders() -> None:
    p = pool()
    p.add(tx(0, 0, tip=5), 0)
    p.add(tx(0, 1, tip=50), 0)
    p.add(tx(1, 0, tip=20), 0)
    p.add(tx(2, 0, tip=7), 0)
    # Sender 1 (20) beats sender 0's head (5); once sender 2 (7) is taken, sender 0's run follows in nonce order.
    order = [(ADDRS.index(t.sender), t.nonce) for t in p.ready(zero, 10)]
    assert order == [(1, 0), (2, 0), (0, 0), (0, 1)]


def test_ready_tie_breaks_by_max_fee_then_arrival() -> None:
    p = pool()
    p.add(tx(0, 0, tip=10, fee=100), 0)
    p.add(tx(1, 0, tip=10, fee=100), 0)
    p.add(tx(2, 0, tip=10, fee=200), 0)
    assert [ADDRS.index(t.sender) for t in p.ready(zero, 10)] == [2, 0, 1]


def test_ready_respects_max_txs_and_removes_nothing() -> None:
    p = pool()
    for k in range(3):
        for n in range(3):
            p.add(tx(k, n), 0)
    assert len(p.ready(zero, 4)) == 4
    assert p.ready(zero, 0) == []
    assert len(p) == 9


def test_nonce_gap_stops_readiness() -> None:
    p = pool()
    for n in (0, 1, 3, 4):
        p.add(tx(0, n), 0)
    assert [t.nonce for t in p.ready(zero, 10)] == [0, 1]
    assert p.pending_nonce(ADDRS[0], 0) == 2
    assert p.ready(lambda s: 3, 10) == [tx(0, 3), tx(0, 4)]
    assert p.ready(lambda s: 2, 10) == []
    assert p.pending_nonce(ADDRS[1], 7) == 7


def test_replacement_requires_bump_on_every_fee_field() -> None:
    p = pool(replacement_bump_percent=10)
    p.add(tx(0, 0, tip=100, fee=100, cell_tip=100, cell_fee=100), 0)
    bumped = {"tip": 110, "fee": 110, "cell_tip": 110, "cell_fee": 110}
    for name in bumped:
        with pytest.raises(MempoolError) as e:
            p.add(tx(0, 0, **{**bumped, name: 109}), 0)
        assert code_of(e) == "replacement_underpriced"
    assert len(p) == 1 and p.ready(zero, 1) == [tx(0, 0, tip=100, fee=100, cell_tip=100, cell_fee=100)]
    assert p.add(tx(0, 0, **bumped), 0) is False
    assert p.ready(zero, 1) == [tx(0, 0, **bumped)]


def test_replacement_at_exact_bump_accepted() -> None:
    p = pool(replacement_bump_percent=10)
    p.add(tx(0, 0, tip=15, fee=15, cell_tip=15, cell_fee=15), 0)
    with pytest.raises(MempoolError) as e:  # 15 * 1.10 = 16.5 rounds up to 17
        p.add(tx(0, 0, tip=16, fee=17, cell_tip=17, cell_fee=17), 0)
    assert code_of(e) == "replacement_underpriced"
    assert p.add(tx(0, 0, tip=17, fee=17, cell_tip=17, cell_fee=17), 0) is False
    assert len(p) == 1


def test_replacement_keeps_counts_consistent() -> None:
    p = pool()
    old, new = tx(0, 0, tip=10), tx(0, 0, tip=20, fee=200, cell_tip=20, cell_fee=200)
    p.add(old, 0)
    p.add(tx(0, 1), 0)
    p.add(new, 0)
    assert len(p) == 2
    assert p.size_bytes == len(new.body()) + len(tx(0, 1).body())
    assert old.tx_hash() not in p and new.tx_hash() in p and p.get(new.tx_hash()) == new
    assert p.ready(zero, 10) == [new, tx(0, 1)]


def test_full_pool_evicts_lowest_priority_tail() -> None:
    p = pool(max_txs=3)
    p.add(tx(0, 0, tip=30), 0)
    p.add(tx(1, 0, tip=5), 0)
    p.add(tx(2, 0, tip=20), 0)
    assert p.add(tx(3, 0, tip=6), 0) is True
    assert len(p) == 3
    assert tx(1, 0, tip=5).tx_hash() not in p
    assert tx(3, 0, tip=6).tx_hash() in p


def test_full_pool_rejects_when_new_tx_not_better() -> None:
    p = pool(max_txs=2)
    p.add(tx(0, 0, tip=10, fee=100), 0)
    p.add(tx(1, 0, tip=20), 0)
    for cand in (tx(2, 0, tip=10, fee=100), tx(2, 0, tip=9, fee=1000), tx(2, 0, tip=10, fee=99)):
        with pytest.raises(MempoolError) as e:
            p.add(cand, 0)
        assert code_of(e) == "mempool_full"
    assert len(p) == 2 and tx(0, 0, tip=10, fee=100).tx_hash() in p
    p.add(tx(2, 0, tip=10, fee=101), 0)  # same tip, higher max fee: strictly better
    assert tx(0, 0, tip=10, fee=100).tx_hash() not in p


def test_eviction_never_creates_gap() -> None:
    p = pool(max_txs=3)
    p.add(tx(0, 0, tip=1), 0)  # the cheapest tx overall, but not evictable while nonce 1 is pooled
    p.add(tx(0, 1, tip=50), 0)
    p.add(tx(1, 0, tip=40), 0)
    p.add(tx(2, 0, tip=45), 0)  # evicts sender 1 (40 < 50 tail of sender 0)
    assert tx(1, 0, tip=40).tx_hash() not in p
    assert [t.nonce for t in p.ready(zero, 10) if t.sender == ADDRS[0]] == [0, 1]
    with pytest.raises(MempoolError) as e:  # 44 does not beat the lowest tail (45)
        p.add(tx(3, 0, tip=44), 0)
    assert code_of(e) == "mempool_full"


def test_eviction_walks_down_a_senders_nonces() -> None:
    p = pool(max_txs=3)
    p.add(tx(0, 0, tip=2), 0)
    p.add(tx(0, 1, tip=1), 0)
    p.add(tx(1, 0, tip=50), 0)
    p.add(tx(2, 0, tip=3), 0)  # evicts (0, 1)
    p.add(tx(3, 0, tip=4), 0)  # now (0, 0) is the tail and the cheapest
    assert {(ADDRS.index(t.sender), t.nonce) for t in p.ready(zero, 10)} == {(1, 0), (2, 0), (3, 0)}


def test_failed_eviction_plan_keeps_every_tail_evictable() -> None:
    """A rejected admission that had planned a victim must leave that victim evictable afterwards."""
    small, big = tx(0, 0, tip=5), tx(2, 0, tip=20, chain_id="c" * 60)
    s, b = len(small.body()), len(big.body())
    assert b > s
    p = pool(max_txs=2, max_bytes=2 * s + (b - s - 1))  # the big tx needs both pooled txs gone
    p.add(small, 0)
    p.add(tx(1, 0, tip=50), 0)
    with pytest.raises(MempoolError) as e:  # plans to evict the tip-5 tx, then meets the tip-50 one
        p.add(big, 0)
    assert code_of(e) == "mempool_full"
    assert p.add(tx(3, 0, tip=6), 0) is True  # the tip-5 tx is still the lowest evictable tail
    assert small.tx_hash() not in p and len(p) == 2


def test_own_lower_nonce_txs_never_evicted() -> None:
    p = pool(max_txs=2)
    p.add(tx(0, 0, tip=1), 0)
    p.add(tx(1, 0, tip=5), 0)
    p.add(tx(0, 1, tip=100), 0)  # sender 0's own nonce 0 is the cheapest, but sender 1 is evicted instead
    assert p.ready(zero, 10) == [tx(0, 0, tip=1), tx(0, 1, tip=100)]
    with pytest.raises(MempoolError) as e:  # only sender 0's txs remain: nothing evictable for it
        p.add(tx(0, 2, tip=1000), 0)
    assert code_of(e) == "mempool_full"


def test_sender_limit() -> None:
    p = pool(max_txs_per_sender=3)
    for n in range(3):
        p.add(tx(0, n), 0)
    with pytest.raises(MempoolError) as e:
        p.add(tx(0, 3), 0)
    assert code_of(e) == "sender_limit"
    assert p.add(tx(0, 2, tip=20, fee=200, cell_tip=20, cell_fee=200), 0) is False  # replacement still fine
    p.add(tx(1, 0), 0)
    assert p.add(tx(0, 3), 2) is True  # nonces 0 and 1 are stale once the account nonce is 2
    assert len(p) == 3 and p.ready(lambda s: 2 if s == ADDRS[0] else 0, 10)[-1] == tx(0, 3)


def test_remove_committed_drops_stale_nonces() -> None:
    p = pool()
    for n in range(4):
        p.add(tx(0, n), 0)
    p.add(tx(1, 0), 0)
    p.add(tx(1, 1), 0)
    # Block holds sender 0's nonce 0 and a different tx at nonce 1 (ours was replaced elsewhere).
    nonces = {ADDRS[0]: 2, ADDRS[1]: 0}
    p.remove_committed([tx(0, 0), tx(0, 1, amount=2)], lambda s: nonces[s])
    assert [t.nonce for t in p.ready(lambda s: nonces[s], 10) if t.sender == ADDRS[0]] == [2, 3]
    assert len(p) == 4 and p.size_bytes == sum(len(tx(k, n).body()) for k, n in ((0, 2), (0, 3), (1, 0), (1, 1)))
    p.remove_committed([], zero)
    assert len(p) == 4


def test_remove_keeps_higher_nonces() -> None:
    p = pool()
    for n in range(3):
        p.add(tx(0, n), 0)
    p.remove(tx(0, 1).tx_hash())
    p.remove(b"\x00" * 32)
    assert len(p) == 2 and p.ready(zero, 10) == [tx(0, 0)]
    p.add(tx(0, 1), 0)
    assert p.ready(zero, 10) == [tx(0, 0), tx(0, 1), tx(0, 2)]


def test_byte_limit() -> None:
    small, big = tx(0, 0, tip=5), tx(1, 0, tip=50, chain_id="c" * 60)
    s, b = len(small.body()), len(big.body())
    p = pool(max_bytes=2 * s + 4)
    p.add(small, 0)
    p.add(tx(2, 0, tip=6), 0)
    assert p.size_bytes == 2 * s
    p.add(big, 0)  # needs both small txs gone
    assert len(p) == 1 and p.size_bytes == b and b > s + 4


def test_tx_too_large() -> None:
    t = tx(0, 0)
    with pytest.raises(MempoolError) as e:
        pool(max_bytes=len(t.body()) - 1).add(t, 0)
    assert code_of(e) == "tx_too_large"


def test_already_known() -> None:
    p = pool()
    t = tx(0, 0)
    assert p.add(t, 0, tx_hash=t.tx_hash()) is True
    with pytest.raises(MempoolError) as e:
        p.add(t, 0)
    assert code_of(e) == "already_known"
    assert t.tx_hash() in p and p.get(t.tx_hash()) is t and p.get(b"x") is None


def test_nonce_too_low_and_gap_too_large() -> None:
    p = pool(max_nonce_gap=4)
    with pytest.raises(MempoolError) as e:
        p.add(tx(0, 4), 5)
    assert code_of(e) == "nonce_too_low"
    with pytest.raises(MempoolError) as e:
        p.add(tx(0, 10), 5)
    assert code_of(e) == "nonce_gap_too_large"
    assert p.add(tx(0, 9), 5) is True and len(p) == 1


# -- property ------------------------------------------------------------------------------


_Item = tuple[Transaction, int, float | None]  # (tx, arrival, added_at)
_FEE_FIELDS = ("max_fee_per_cycle", "max_priority_fee_per_cycle", "max_fee_per_cell", "max_priority_fee_per_cell")


class _Reference:
    """The documented rules, implemented naively (O(n²)) to cross-check the real pool.

    ``nonces`` (the caller's account nonces) is what the pool was told: the test only advances a sender's nonce
    through ``remove_committed`` naming one of its transactions.
    """

    def __init__(self, cfg: MempoolConfig) -> None:
        self.cfg = cfg
        self.txs: dict[bytes, _Item] = {}
        self.arrivals = 0
        self.clock: float | None = None
        self.evicted = dict.fromkeys(EVICTION_REASONS, 0)

    @staticmethod
    def queued(txs: dict[bytes, _Item], nonces: dict[bytes, int]) -> set[bytes]:
        """Hashes not in their sender's consecutive run from the account nonce."""
        by_sender: dict[bytes, dict[int, bytes]] = {}
        for h, (t, _, _) in txs.items():
            by_sender.setdefault(t.sender, {})[t.nonce] = h
        out: set[bytes] = set()
        for sender, mine in by_sender.items():
            end = nonces.get(sender, 0)
            while end in mine:
                end += 1
            out |= {h for n, h in mine.items() if n > end}
        return out

    def set_clock(self, now: float) -> None:
        if self.clock is None:
            self.txs = {h: (t, a, now if at is None else at) for h, (t, a, at) in self.txs.items()}
            self.clock = now
        self.clock = max(self.clock, now)

    def add(self, t: Transaction, nonces: dict[bytes, int], now: float | None) -> str | None:
        cfg, h, an = self.cfg, t.tx_hash(), nonces.get(t.sender, 0)
        if h in self.txs:
            return "already_known"
        if t.nonce < an:
            return "nonce_too_low"
        if t.nonce > an + cfg.max_nonce_gap:
            return "nonce_gap_too_large"
        mine = {x.nonce: g for g, (x, _, _) in self.txs.items() if x.sender == t.sender}
        end = an
        while end in mine:
            end += 1
        gone: dict[bytes, str] = {}
        if t.nonce in mine:
            old = self.txs[mine[t.nonce]][0]
            pct = 100 + cfg.replacement_bump_percent
            if any(getattr(t, f) * 100 < getattr(old, f) * pct for f in _FEE_FIELDS):
                return "replacement_underpriced"
            gone[mine[t.nonce]] = "replaced"
            pending = t.nonce < end
        else:
            if len(mine) >= cfg.max_txs_per_sender:
                return "sender_limit"
            pending = t.nonce == end
            if not pending and sum(1 for n in mine if n > end) >= cfg.max_queued_per_sender:
                return "sender_queue_full"
        prio = (t.max_priority_fee_per_cycle, t.max_fee_per_cycle)
        while True:
            state = {g: v for g, v in self.txs.items() if g not in gone}
            state[h] = (t, self.arrivals + 1, None)
            queued = self.queued(state, nonces)
            over = len(state) > cfg.max_txs or sum(len(x.body()) for x, _, _ in state.values()) > cfg.max_bytes
            if not over and (pending or len(queued) <= cfg.max_queued):
                break
            lowest_queued = min(((state[g][0].max_priority_fee_per_cycle, state[g][0].max_fee_per_cycle,
                                  state[g][1], g) for g in queued if state[g][0].sender != t.sender), default=None)
            if not pending:
                if lowest_queued is None or lowest_queued[:2] >= prio:
                    return "queued_full"
                gone[lowest_queued[3]] = "queued_cap"
            elif lowest_queued is not None:
                gone[lowest_queued[3]] = "queued_for_pending"
            else:
                tails = []
                for sender in {x.sender for x, _, _ in state.values()} - {t.sender}:
                    run = [g for g, (x, _, _) in state.items() if x.sender == sender and g not in queued]
                    if run:
                        top = max(run, key=lambda g: state[g][0].nonce)
                        tails.append((state[top][0].max_priority_fee_per_cycle, state[top][0].max_fee_per_cycle,
                                      -state[top][1], top))
                if not tails or min(tails)[:2] >= prio:
                    return "mempool_full"
                gone[min(tails)[3]] = "priority"
        for g, reason in gone.items():
            del self.txs[g]
            if reason != "replaced":
                self.evicted[reason] += 1
        if now is not None:
            self.set_clock(now)
        self.arrivals += 1
        self.txs[h] = (t, self.arrivals, self.clock)
        return None

    def ready(self, nonce_of: dict[bytes, int], limit: int) -> list[Transaction]:
        by_key = {(t.sender, t.nonce): (t, a) for t, a, _ in self.txs.values()}
        nxt = {t.sender: nonce_of.get(t.sender, 0) for t, _, _ in self.txs.values()}
        out: list[Transaction] = []
        while len(out) < limit:
            heads = [by_key[(s, n)] for s, n in nxt.items() if (s, n) in by_key]
            if not heads:
                break
            t, _ = max(heads, key=lambda c: (c[0].max_priority_fee_per_cycle, c[0].max_fee_per_cycle, -c[1]))
            out.append(t)
            nxt[t.sender] += 1
        return out

    def remove_committed(self, included: list[Transaction], nonce_of: dict[bytes, int]) -> None:
        senders = {t.sender for t in included}
        hashes = {t.tx_hash() for t in included}
        for h, (t, _, _) in list(self.txs.items()):
            if h in hashes or (t.sender in senders and t.nonce < nonce_of.get(t.sender, 0)):
                del self.txs[h]
                self.evicted["stale"] += h not in hashes

    def remove(self, h: bytes, nonces: dict[bytes, int]) -> None:
        sender = self.txs.pop(h)[0].sender
        while True:  # demotion limits: the sender's highest queued nonces, then the lowest queued overall
            mine = [g for g in self.queued(self.txs, nonces) if self.txs[g][0].sender == sender]
            if len(mine) <= self.cfg.max_queued_per_sender:
                break
            del self.txs[max(mine, key=lambda g: self.txs[g][0].nonce)]
            self.evicted["queued_cap"] += 1
        while len(queued := self.queued(self.txs, nonces)) > self.cfg.max_queued:
            x = {g: self.txs[g] for g in queued}
            del self.txs[min(queued, key=lambda g: (x[g][0].max_priority_fee_per_cycle, x[g][0].max_fee_per_cycle,
                                                    x[g][1]))]
            self.evicted["queued_cap"] += 1

    def expire(self, now: float, nonces: dict[bytes, int]) -> int:
        self.set_clock(now)
        dead = [g for g in self.queued(self.txs, nonces) if now - (self.txs[g][2] or 0.0) >= self.cfg.queued_lifetime_s]
        for g in dead:
            del self.txs[g]
        self.evicted["queued_expired"] += len(dead)
        return len(dead)


_CFGS = (  # a tight queue, a queue that can fill the pool, a per-sender queue of one (demotion limits)
    MempoolConfig(max_txs=5, max_bytes=5 * 185 + 20, max_txs_per_sender=3, max_nonce_gap=4,
                  replacement_bump_percent=10, max_queued=3, max_queued_per_sender=2, queued_lifetime_s=15),
    MempoolConfig(max_txs=5, max_bytes=5 * 185 + 20, max_txs_per_sender=3, max_nonce_gap=4,
                  replacement_bump_percent=10, max_queued=5, max_queued_per_sender=2, queued_lifetime_s=30),
    MempoolConfig(max_txs=6, max_bytes=6 * 185 + 20, max_txs_per_sender=3, max_nonce_gap=3,
                  replacement_bump_percent=10, max_queued=2, max_queued_per_sender=1, queued_lifetime_s=15),
    MempoolConfig(max_txs=4, max_bytes=4 * 185 + 20, max_txs_per_sender=3, max_nonce_gap=4,
                  replacement_bump_percent=10, max_queued=1, max_queued_per_sender=1, queued_lifetime_s=30),
)
# (kind, sender, nonce offset from the account nonce (-1: the sender's next pending nonce), fee level, variant);
# the other kinds reuse the numbers: block limit, index of the removed tx, seconds to expire at, nonce jump.
_op = st.tuples(st.sampled_from(("add",) * 8 + ("block", "remove", "expire", "jump")), st.sampled_from(range(6)),
                st.sampled_from((-1, -1, 0, 1, 2, 3, 4)), st.sampled_from(range(4)), st.sampled_from(range(4)))


def _runs(p: Mempool) -> dict[bytes, list[int]]:
    """Each sender's pending run as the pool holds it."""
    return {a: s.nonces[:s.pend] for a, s in p._senders.items()}


def _check(p: Mempool, ref: _Reference, nonces: dict[bytes, int]) -> None:
    cfg = p.config
    pooled = [p.get(h) for h in list(p._by_hash)]
    assert set(p._by_hash) == set(ref.txs)
    assert len(p) == len(pooled) == sum(len(s.by_nonce) for s in p._senders.values())
    assert p.size_bytes == sum(len(t.body()) for t in pooled if t is not None)
    # The body index (block decoding reuses pooled transactions) holds exactly the pooled ones.
    assert set(p._by_body) == {t.body() for t in pooled if t is not None}
    assert all(p.by_body(t.body()) is t for t in pooled if t is not None)
    assert len(p) <= cfg.max_txs and p.size_bytes <= cfg.max_bytes
    queued = ref.queued(ref.txs, nonces)
    assert {h for h in p._by_hash if p.is_queued(h)} == queued
    assert p.queued_count == len(queued) <= cfg.max_queued and p.pending_count == len(p) - len(queued)
    assert p.evicted == ref.evicted
    assert set(p._ready) == {a for a, s in p._senders.items() if s.pend}
    for addr, s in p._senders.items():
        assert s.nonces == sorted(s.by_nonce) and len(s.nonces) <= cfg.max_txs_per_sender
        assert all(s.by_nonce[n].tx.sender == addr for n in s.nonces)
        assert s.base == nonces.get(addr, 0) and s.nonces[:s.pend] == list(range(s.base, s.base + s.pend))
        assert len(s.nonces) - s.pend <= cfg.max_queued_per_sender
    for limit in (3, 100):
        out = p.ready(lambda a: nonces.get(a, 0), limit)
        assert out == ref.ready(nonces, limit)
        assert len(out) <= limit and len({t.tx_hash() for t in out}) == len(out)
        seen: dict[bytes, int] = {}
        for t in out:
            assert t.nonce == seen.get(t.sender, nonces.get(t.sender, 0))
            seen[t.sender] = t.nonce + 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_CFGS), st.lists(_op, min_size=40, max_size=120))
def test_property_counts_and_ready_order(cfg: MempoolConfig, ops: list[tuple[int | str, ...]]) -> None:
    """Random add / block / remove / expire sequences agree with a naive model of the documented rules."""
    p, ref = Mempool(cfg), _Reference(cfg)
    nonces: dict[bytes, int] = {}
    clock = 0.0
    for op in ops:
        if op[0] == "add":
            k, off, level, variant = (int(x) for x in op[1:])
            an = nonces.get(ADDRS[k], 0)
            nonce = p.pending_nonce(ADDRS[k], an) if off < 0 else an + off
            t = tx(k, nonce, tip=10 + 3 * level, fee=100 + 20 * level, cell_tip=10 + 3 * level,
                   cell_fee=100 + 20 * level, amount=variant % 3,
                   chain_id="c" * 60 if variant == 3 else "cowboy-test-1")  # variant 3: a bigger body
            now = None if variant == 1 else clock  # variant 1: the pool's own clock
            before = {a: list(s.nonces) for a, s in p._senders.items()}
            runs, evicted = _runs(p), dict(p.evicted)
            expected = ref.add(t, nonces, now)
            try:
                assert p.add(t, an, now=now) is (t.nonce not in before.get(t.sender, ()))
                assert expected is None
            except MempoolError as e:
                assert e.code == expected
                assert {a: list(s.nonces) for a, s in p._senders.items()} == before  # rejection changes nothing
                assert _runs(p) == runs and p.evicted == evicted
            for a, run in runs.items():  # other senders' pending runs only ever lose their top
                if a != t.sender:
                    after = _runs(p).get(a, [])
                    assert run[:len(after)] == after
        elif op[0] == "block":
            included = p.ready(lambda a: nonces.get(a, 0), int(op[3]))
            for t in included:
                nonces[t.sender] = t.nonce + 1
            p.remove_committed(included, lambda a: nonces.get(a, 0))
            ref.remove_committed(included, nonces)
            assert all(t.tx_hash() not in p for t in included)
        elif op[0] == "jump":  # the account nonce moves on without the pool's txs (a tx included elsewhere)
            k, j = int(op[1]), 1 + int(op[3]) % 3
            done = tx(k, nonces.get(ADDRS[k], 0) + j - 1)
            nonces[ADDRS[k]] = done.nonce + 1
            p.remove_committed([done], lambda a: nonces.get(a, 0))
            ref.remove_committed([done], nonces)
        elif op[0] == "expire":
            clock += 3 * int(op[3])
            assert p.expire(clock) == ref.expire(clock, nonces)
        else:
            hashes = list(p._by_hash)
            if hashes:
                victim = hashes[(7 * int(op[1]) + int(op[2])) % len(hashes)]
                p.remove(victim)
                ref.remove(victim, nonces)
        _check(p, ref, nonces)
