"""Mempool pending/queued rules (issue 22 item 5): a pool full of nonce-gapped transactions cannot keep an
executable one out; queued caps, expiry, promotion, demotion, eviction order; config keys and metrics."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from cowboy_node.chain.mempool import EVICTION_REASONS, Mempool, MempoolConfig, MempoolError
from cowboy_node.node.config import ConfigError, load_config
from cowboy_node.observability.metrics import MEMPOOL_EVICTION_REASONS, NodeMetrics
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.unit.node_harness import make_node

KEYS = [(7000 + i).to_bytes(32, "big") for i in range(40)]
ADDRS = [private_key_to_address(k) for k in KEYS]


@cache
def tx(k: int, nonce: int, tip: int = 1, fee: int = 100, bump: int = 0) -> Transaction:
    """A signed transfer from KEYS[k]; ``bump`` raises every fee field by that many percent (a replacement)."""
    m = 100 + bump
    return Transaction(chain_id="cowboy-test-1", nonce=nonce, sender=ADDRS[k], instruction=Transfer(to=bytes(20),
                       amount=1), cycles_limit=50_000, cells_limit=2_000, max_fee_per_cycle=fee * m // 100,
                       max_priority_fee_per_cycle=tip * m // 100, max_fee_per_cell=fee * m // 100,
                       max_priority_fee_per_cell=tip * m // 100).signed(KEYS[k])


def zero(_sender: bytes) -> int:
    return 0


def refused(p: Mempool, t: Transaction, account_nonce: int = 0) -> str:
    """Add ``t`` expecting a refusal that changes nothing; returns its code."""
    before = (set(p._by_hash), dict(p.evicted), p.pending_count, p.queued_count)
    with pytest.raises(MempoolError) as e:
        p.add(t, account_nonce)
    assert (set(p._by_hash), dict(p.evicted), p.pending_count, p.queued_count) == before
    return e.value.code


# -- the jam ------------------------------------------------------------------------------------


def test_pool_full_of_gapped_txs_still_admits_and_includes_an_executable_tx() -> None:
    """The issue: many senders fill the pool with nonce-gapped min-fee txs; a valid tx of an unaffected account
    must still get in (same minimal fee) and be the next block's content."""
    p = Mempool(MempoolConfig(max_txs=48, max_queued=48, max_queued_per_sender=8))
    for k in range(6):
        for n in range(1, 9):  # nonce 0 never arrives (lost in a crash)
            p.add(tx(k, n), 0)
    assert len(p) == p.queued_count == 48 and p.pending_count == 0
    assert p.ready(zero, 100) == []  # nothing here can ever be included
    assert refused(p, tx(6, 1)) == "queued_full"  # another gapped one cannot push in at the same fee
    fresh = tx(7, 0)
    assert p.add(fresh, 0) is True
    assert len(p) == 48 and p.pending_count == 1 and p.evicted["queued_for_pending"] == 1
    assert p.ready(zero, 100) == [fresh]


def test_queued_cap_bounds_the_jam_below_max_txs() -> None:
    """With the default ratio (max_queued ~10% of max_txs) gapped txs never take more than max_queued slots, so
    executable ones are admitted without evicting anything."""
    p = Mempool(MempoolConfig(max_txs=100, max_queued=10, max_queued_per_sender=4))
    codes = []
    for k in range(6):
        for n in range(1, 6):
            try:
                p.add(tx(k, n), 0)
            except MempoolError as e:
                codes.append(e.code)
    assert p.queued_count == 10 and len(p) == 10
    assert set(codes) == {"sender_queue_full", "queued_full"}
    for k in range(20, 30):
        p.add(tx(k, 0), 0)
    assert p.pending_count == 10 and p.queued_count == 10 and sum(p.evicted.values()) == 0
    assert {t.sender for t in p.ready(zero, 100)} == {ADDRS[k] for k in range(20, 30)}


def test_executable_tx_admitted_over_higher_fee_queued_ones() -> None:
    p = Mempool(MempoolConfig(max_txs=3, max_queued=3))
    for k in range(3):
        p.add(tx(k, 5, tip=1000, fee=5000), 0)
    low = tx(3, 0, tip=1, fee=100)
    assert p.add(low, 0) is True  # fee priority does not matter: a queued tx never keeps out an executable one
    assert p.evicted["queued_for_pending"] == 1 and p.queued_count == 2 and p.ready(zero, 10) == [low]


def test_queued_tx_never_evicts_a_pending_one() -> None:
    p = Mempool(MempoolConfig(max_txs=3, max_queued=3))
    for k in range(3):
        p.add(tx(k, 0, tip=1), 0)
    assert refused(p, tx(3, 1, tip=10_000, fee=100_000)) == "queued_full"
    p.add(tx(3, 0, tip=2), 0)  # a better-paying executable one still outbids the cheapest pending tail
    assert p.evicted["priority"] == 1 and p.queued_count == 0 and len(p) == 3


def test_eviction_order_queued_lowest_first_then_pending_by_priority() -> None:
    p = Mempool(MempoolConfig(max_txs=4, max_queued=4))
    p.add(tx(0, 0, tip=1), 0)
    p.add(tx(1, 0, tip=2), 0)
    p.add(tx(2, 2, tip=100), 0)  # queued
    p.add(tx(3, 3, tip=90), 0)  # queued, lower priority
    p.add(tx(4, 0, tip=1), 0)  # full: the lowest queued goes, although it outbids every pending tx
    assert tx(3, 3, tip=90).tx_hash() not in p and tx(2, 2, tip=100).tx_hash() in p
    p.add(tx(5, 0, tip=1), 0)  # then the other queued one
    assert p.queued_count == 0 and p.evicted["queued_for_pending"] == 2
    assert refused(p, tx(6, 0, tip=1)) == "mempool_full"  # no queued left; tip 1 does not beat tip 1
    p.add(tx(6, 0, tip=3), 0)
    assert p.evicted["priority"] == 1 and len(p) == 4
    assert tx(1, 0, tip=2).tx_hash() in p and tx(6, 0, tip=3).tx_hash() in p


def test_a_senders_own_queued_txs_are_not_evicted_for_it() -> None:
    p = Mempool(MempoolConfig(max_txs=2, max_queued=2))
    p.add(tx(0, 2), 0)
    p.add(tx(1, 0), 0)
    assert refused(p, tx(0, 0)) == "mempool_full"  # its own queued nonce 2 would be the only queued victim


# -- caps ---------------------------------------------------------------------------------------


def test_per_sender_queue_cap() -> None:
    p = Mempool(MempoolConfig(max_queued_per_sender=2))
    p.add(tx(0, 2), 0)
    p.add(tx(0, 3), 0)
    assert refused(p, tx(0, 5)) == "sender_queue_full"
    assert refused(p, tx(0, 1)) == "sender_queue_full"  # still gapped (nonce 0 missing)
    assert p.add(tx(0, 3, bump=100), 0) is False  # a replacement never hits the cap
    p.add(tx(0, 0), 0)  # pending; nonce 1 is still missing
    p.add(tx(0, 1), 0)  # fills the gap: 2 and 3 are promoted
    assert p.pending_count == 4 and p.queued_count == 0
    p.add(tx(0, 5), 0)
    p.add(tx(0, 6), 0)
    assert refused(p, tx(0, 7)) == "sender_queue_full"
    assert p.add(tx(1, 1), 0) is True  # the cap is per sender


def test_total_queue_cap_evicts_lowest_priority_oldest_first() -> None:
    p = Mempool(MempoolConfig(max_queued=3))
    first, second, third = tx(0, 1, tip=10), tx(1, 1, tip=20), tx(2, 1, tip=10)
    for t in (first, second, third):
        p.add(t, 0)
    assert refused(p, tx(3, 1, tip=10)) == "queued_full"  # must be strictly better than the lowest queued
    p.add(tx(3, 1, tip=11), 0)
    assert first.tx_hash() not in p and third.tx_hash() in p  # equal priorities: the oldest goes first
    assert p.queued_count == 3 and p.evicted["queued_cap"] == 1
    p.add(tx(4, 0, tip=1), 0)  # pending txs do not count against max_queued
    assert p.queued_count == 3 and p.pending_count == 1


# -- promotion and demotion ------------------------------------------------------------------------


def test_gap_fill_promotes_queued() -> None:
    p = Mempool(MempoolConfig())
    for n in (3, 1, 2):
        p.add(tx(0, n), 0)
    assert p.queued_count == 3 and p.ready(zero, 10) == []
    p.add(tx(0, 0), 0)
    assert p.queued_count == 0 and p.pending_count == 4
    assert [t.nonce for t in p.ready(zero, 10)] == [0, 1, 2, 3]


def test_account_nonce_advance_promotes_queued() -> None:
    p = Mempool(MempoolConfig())
    p.add(tx(0, 0), 0)
    p.add(tx(0, 1), 0)
    p.add(tx(0, 3), 0)
    p.add(tx(0, 4), 0)
    nonce = {ADDRS[0]: 2}
    p.remove_committed([tx(0, 0), tx(0, 1)], nonce.__getitem__)
    assert p.pending_count == 0 and p.queued_count == 2 and p.evicted["stale"] == 0
    # Nonce 2 was included from elsewhere (another validator, a resubmission): the queued run becomes executable.
    nonce[ADDRS[0]] = 3
    p.remove_committed([tx(0, 2)], nonce.__getitem__)
    assert p.pending_count == 2 and p.queued_count == 0
    assert [t.nonce for t in p.ready(nonce.__getitem__, 10)] == [3, 4]


def test_add_with_a_higher_account_nonce_drops_stale_and_promotes() -> None:
    p = Mempool(MempoolConfig())
    p.add(tx(0, 0), 0)
    p.add(tx(0, 2), 0)
    p.add(tx(0, 3), 0)
    p.add(tx(0, 4), 2)  # the account nonce is now 2: nonce 0 is stale, 2.. are executable
    assert tx(0, 0).tx_hash() not in p and p.evicted["stale"] == 1
    assert p.queued_count == 0 and [t.nonce for t in p.ready(lambda a: 2, 10)] == [2, 3, 4]


def test_remove_of_a_middle_pending_tx_demotes_the_rest() -> None:
    p = Mempool(MempoolConfig())
    for n in range(4):
        p.add(tx(0, n), 0)
    p.remove(tx(0, 1).tx_hash())
    assert p.pending_count == 1 and p.queued_count == 2 and p.ready(zero, 10) == [tx(0, 0)]
    assert p.is_queued(tx(0, 2).tx_hash()) is True and p.is_queued(tx(0, 0).tx_hash()) is False
    p.add(tx(0, 1), 0)
    assert p.queued_count == 0 and len(p.ready(zero, 10)) == 4


def test_demotion_beyond_the_queue_caps_drops_the_highest_nonces() -> None:
    p = Mempool(MempoolConfig(max_queued_per_sender=1))
    for n in range(4):
        p.add(tx(0, n), 0)
    p.remove(tx(0, 1).tx_hash())  # 2 and 3 would be queued; only one may be
    assert tx(0, 3).tx_hash() not in p and tx(0, 2).tx_hash() in p
    assert p.queued_count == 1 and p.evicted["queued_cap"] == 1


# -- expiry -------------------------------------------------------------------------------------


def test_expire_drops_only_queued_txs_past_their_lifetime() -> None:
    p = Mempool(MempoolConfig(queued_lifetime_s=100))
    old, young, pending = tx(0, 1), tx(1, 1), tx(2, 0)
    p.add(old, 0, now=1000)
    p.add(pending, 0, now=1000)
    p.add(young, 0, now=1050)
    assert p.expire(1099) == 0
    assert p.expire(1100) == 1 and old.tx_hash() not in p
    assert p.expire(10_000) == 1 and young.tx_hash() not in p
    assert pending.tx_hash() in p and p.evicted["queued_expired"] == 2


def test_promoted_txs_do_not_expire() -> None:
    p = Mempool(MempoolConfig(queued_lifetime_s=10))
    p.add(tx(0, 1), 0, now=0)
    p.add(tx(0, 0), 0, now=0)
    assert p.expire(1000) == 0 and len(p.ready(zero, 10)) == 2


def test_expiry_without_explicit_now_uses_the_pools_clock() -> None:
    p = Mempool(MempoolConfig(queued_lifetime_s=10))
    early = tx(0, 1)
    p.add(early, 0)  # the pool has no time yet: stamped by the first expire
    assert p.expire(500) == 0
    later = tx(1, 1)
    p.add(later, 0)  # stamped with the pool's clock (500)
    p.expire(505)
    p.add(tx(2, 1), 0)  # stamped 505
    assert p.expire(509) == 0
    assert p.expire(510) == 2 and early.tx_hash() not in p and later.tx_hash() not in p
    assert p.expire(515) == 1 and p.queued_count == 0


# -- wiring -------------------------------------------------------------------------------------


def test_metric_reason_labels_match_the_pool() -> None:
    assert MEMPOOL_EVICTION_REASONS == EVICTION_REASONS
    p = Mempool(MempoolConfig(max_txs=1, max_queued=1))
    p.add(tx(0, 1), 0)
    p.add(tx(1, 0), 0)
    m = NodeMetrics()
    m.observe_mempool(p)
    m.observe_mempool(p)  # cumulative counts are not counted twice
    get = m.registry.get_sample_value
    assert get("cowboy_mempool_pending") == 1 and get("cowboy_mempool_queued") == 0
    assert get("cowboy_mempool_evicted_total", {"reason": "queued_for_pending"}) == 1
    assert get("cowboy_mempool_evicted_total", {"reason": "priority"}) == 0
    assert m.mempool_refused_full() is True and m.mempool_refused_full() is False  # the log line is rate-limited
    assert get("cowboy_mempool_full_total") == 2


def test_config_keys(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("")
    cfg = load_config(tmp_path)
    assert (cfg.mempool_max_queued, cfg.mempool_max_queued_per_sender, cfg.mempool_queued_lifetime_s,
            cfg.mempool_journal) == (1024, 16, 600, True)
    (tmp_path / "config.toml").write_text("[mempool]\nmax_queued = 50\nmax_queued_per_sender = 4\n"
                                          "queued_lifetime_s = 30\njournal = false\n")
    cfg = load_config(tmp_path)
    assert (cfg.mempool_max_queued, cfg.mempool_max_queued_per_sender, cfg.mempool_queued_lifetime_s,
            cfg.mempool_journal) == (50, 4, 30, False)
    for bad in ("queued_lifetime_s = 86401", "max_queued = 0", "journal = 1"):
        (tmp_path / "config.toml").write_text(f"[mempool]\n{bad}\n")
        with pytest.raises(ConfigError) as e:
            load_config(tmp_path)
        assert e.value.key == "mempool." + bad.split()[0]


# -- what a client sees of an evicted transaction ------------------------------------------------
def test_an_evicted_tx_is_remembered_with_its_reason_until_admitted_again() -> None:
    """Issue 22: "every accepted transaction included or explicitly evicted with a reason"."""
    p = Mempool(MempoolConfig(max_txs=8, max_queued=8, max_queued_per_sender=8, queued_lifetime_s=100))
    gapped = [tx(0, n) for n in range(1, 9)]
    for t in gapped:
        p.add(t, 0, now=0)
    assert p.evicted_reason(gapped[0].tx_hash()) is None  # pooled: not evicted
    p.add(tx(1, 0), 0, now=1)  # an executable tx pushes the lowest queued one out
    out = [t for t in gapped if t.tx_hash() not in p]
    assert len(out) == 1 and p.evicted_reason(out[0].tx_hash()) == "queued_for_pending"
    assert p.expire(1000) == 7
    assert {p.evicted_reason(t.tx_hash()) for t in gapped if t is not out[0]} == {"queued_expired"}
    p.add(out[0], 0, now=1000)  # sent again and admitted: no longer reported as evicted
    assert p.evicted_reason(out[0].tx_hash()) is None
    assert p.evicted_reason(tx(2, 0).tx_hash()) is None  # never seen


def test_the_node_reports_an_evicted_tx_at_get_tx() -> None:
    node = make_node()
    node.mempool.config = MempoolConfig(max_txs=4, max_queued=4, max_queued_per_sender=4)
    gapped = [tx(0, n) for n in range(1, 5)]
    for t in gapped:
        node.mempool.add(t, 0)
    node.mempool.add(tx(1, 0), 0)
    [out] = [t for t in gapped if t.tx_hash() not in node.mempool]
    assert node.api.transaction(out.tx_hash()) == {"tx_hash": "0x" + out.tx_hash().hex(), "status": "evicted",
                                               "reason": "queued_for_pending"}
    assert node.api.transaction(tx(2, 0).tx_hash()) is None
    node.close()


def test_a_tx_made_stale_by_a_committed_block_is_remembered_as_stale() -> None:
    p = Mempool(MempoolConfig())
    pooled, other_same_nonce, next_one = tx(0, 0), tx(0, 0, bump=20), tx(0, 1)
    p.add(pooled, 0)
    p.add(next_one, 0)
    p.remove_committed([other_same_nonce], lambda _s: 1)  # another tx of the sender used nonce 0
    assert pooled.tx_hash() not in p and p.evicted_reason(pooled.tx_hash()) == "stale"
    assert p.evicted["stale"] == 1 and next_one.tx_hash() in p
    p.remove_committed([next_one], lambda _s: 2)  # included itself: not an eviction
    assert p.evicted_reason(next_one.tx_hash()) is None and p.evicted["stale"] == 1
