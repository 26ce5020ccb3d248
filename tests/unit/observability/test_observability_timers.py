"""Timer and End-of-Block metrics: names, labels, what one block's report adds, the step timer."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cowboy_node.observability import NodeMetrics, StepTimer


def _samples(m: NodeMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, _ = m.exposition()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}


def test_timer_counters_are_exposed_at_zero_before_any_block() -> None:
    s = _samples(NodeMetrics())
    for name in ("cowboy_timers_fired_total", "cowboy_timers_deferred_total", "cowboy_timers_expired_total",
                 "cowboy_timers_self_destructed_total"):
        assert s[(name, ())] == 0, name


def test_observe_timers_adds_one_blocks_counts_and_counts_deferred_blocks() -> None:
    m = NodeMetrics()
    m.observe_timers(fired=3, deferred=True, expired=2, self_destructed=1)
    m.observe_timers(fired=4, deferred=False, expired=0, self_destructed=5)
    s = _samples(m)
    assert s[("cowboy_timers_fired_total", ())] == 7
    assert s[("cowboy_timers_deferred_total", ())] == 1  # blocks whose lane closed, not timers
    assert s[("cowboy_timers_expired_total", ())] == 2
    assert s[("cowboy_timers_self_destructed_total", ())] == 6


def test_eob_step_durations_are_a_histogram_per_step() -> None:
    m = NodeMetrics()
    m.observe_eob_steps([("deliver_timers", 0.0004), ("fees_and_burn", 0.00002)])
    m.observe_eob_steps([("deliver_timers", 0.003)])
    s = _samples(m)
    assert s[("cowboy_eob_step_seconds_count", (("step", "deliver_timers"),))] == 2
    assert s[("cowboy_eob_step_seconds_sum", (("step", "deliver_timers"),))] == pytest.approx(0.0034)
    assert s[("cowboy_eob_step_seconds_count", (("step", "fees_and_burn"),))] == 1
    # 0.0004 s falls in the 0.0005 bucket, 0.003 s does not
    assert s[("cowboy_eob_step_seconds_bucket", (("le", "0.0005"), ("step", "deliver_timers")))] == 1


def test_step_timer_records_each_step_in_order_even_when_a_step_raises() -> None:
    timer = StepTimer()
    with timer("a"):
        pass
    with pytest.raises(RuntimeError), timer("b"):
        raise RuntimeError("step failed")
    with timer("c"):
        pass
    assert [name for name, _ in timer.durations] == ["a", "b", "c"]
    assert all(seconds >= 0 for _, seconds in timer.durations)


def test_observe_eob_reads_the_blocks_report() -> None:
    from cowboy_node.execution.context import EobReport

    m = NodeMetrics()
    m.observe_eob(EobReport(timers_fired=2, timers_deferred=1, timers_expired=3, timers_self_destructed=4,
                            mailbox_delivered=5, mailbox_dropped=6, mailbox_left=7))
    # Globalbox reports how many fires stayed queued: still one deferred *block*
    m.observe_eob(EobReport(timers_deferred=40, mailbox_left=0))
    s = _samples(m)
    assert s[("cowboy_timers_fired_total", ())] == 2
    assert s[("cowboy_timers_deferred_total", ())] == 2
    assert s[("cowboy_timers_expired_total", ())] == 3
    assert s[("cowboy_timers_self_destructed_total", ())] == 4
    assert s[("cowboy_mailbox_delivered_total", ())] == 5
    assert s[("cowboy_mailbox_dropped_total", ())] == 6
    assert s[("cowboy_mailbox_pending", ())] == 0  # a gauge: the last block's leftovers


ACTOR_SOURCE = '''import pvm_host


def arm(payload):
    now = pvm_host.current_block()
    sender = pvm_host.context()["sender"]
    pvm_host.schedule_timer_ex(now + 1, b"paid", fee_payer=sender)
    pvm_host.schedule_timer_ex(now + 2, b"stale", fee_payer=sender, expires_at=now + 1)
    pvm_host.schedule_timer(now + 1, b"broke")
    return b""


def handle_timer(payload):
    pvm_host.set_state(payload, b"1")
    return b""
'''


def test_node_records_each_committed_blocks_timer_counts_and_step_durations() -> None:
    """Block 1 deploys and arms; block 2: "paid" fires, "broke" (actor pays, balance 0) self-destructs;
    block 3: "stale" is past its expires_at."""
    import asyncio

    from cowboy_node.chain.chain import Chain
    from cowboy_node.chain.mempool import Mempool, MempoolConfig
    from cowboy_node.execution.actors.actor_record import derive_actor_address
    from cowboy_node.execution.actors.actor_state import get_state
    from cowboy_node.execution.end_of_block import EOB_STEPS
    from cowboy_node.node.assemble import assemble
    from cowboy_node.state.memory import MemoryStore
    from cowboy_protocol.types.instructions import CallActor, DeployActor
    from tests.helpers import ALICE, ALICE_SK, make_dev_genesis, make_tx

    dev = make_dev_genesis()
    node = assemble(Chain(MemoryStore(), dev.genesis), Mempool(MempoolConfig()), dev.validator_key, block_time_ms=1000)
    actor = derive_actor_address(ALICE, b"", ACTOR_SOURCE)
    try:
        for nonce, ins in enumerate([DeployActor(ACTOR_SOURCE, b"", "", b""), CallActor(actor, "arm", b"")]):
            node.api.submit_transaction(make_tx(ALICE_SK, nonce, ins, cycles_limit=2_000_000,
                                            cells_limit=100_000).to_bytes())
        for _ in range(3):
            asyncio.run(node.produce_block())
    finally:
        node.close()
    assert get_state(node.chain.world(), actor, b"paid") == b"1"
    s = _samples(node.metrics)
    assert s[("cowboy_timers_fired_total", ())] == 1
    assert s[("cowboy_timers_self_destructed_total", ())] == 1
    assert s[("cowboy_timers_expired_total", ())] == 1
    assert s[("cowboy_timers_deferred_total", ())] == 0
    for name, _step in EOB_STEPS:
        assert s[("cowboy_eob_step_seconds_count", (("step", name),))] == 3, name
