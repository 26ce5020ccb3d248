"""Transaction gossip (cowboy_node/node/tx_gossip.py) and its TxBatch message (consensus/sync_messages.py):
golden bytes derived by hand from the layout in docs/protocol.md, the strict decoder's refusals, batching on send,
the bounded receive queue, admission in slices that yield to the event loop, the signature pool's results used."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, cast

import pytest

from cowboy_node.chain.signature_pool import PreparedOrUndecodable, SignaturePool
from cowboy_node.consensus.sync_messages import (
    CH_TX_BATCH,
    MAX_TX_BATCH_TXS,
    TxBatch,
    decode_tx_batch,
    encode_tx_batch,
)
from cowboy_node.node.tx_gossip import TxGossip, TxGossipConfig
from cowboy_protocol.types.validation_errors import DecodeError

pytestmark = pytest.mark.timeout(300)

# {0: 0, 1: [h'6162', h'63']}: a2 = map of 2 pairs; 00 00 = kind 0; 01 82 = key 1, array of 2; 42 6162, 41 63
GOLDEN = "a2" "0000" "01" "82" "426162" "4163"


def test_tx_batch_golden_bytes() -> None:
    assert encode_tx_batch(TxBatch((b"ab", b"c"))).hex() == GOLDEN
    assert decode_tx_batch(bytes.fromhex(GOLDEN)) == TxBatch((b"ab", b"c"))
    assert CH_TX_BATCH == 6


def test_docs_protocol_md_pins_the_same_golden_bytes() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```tx-batch-golden\n(.*?)^```", doc, re.M | re.S)
    assert ["".join(b.split()) for b in blocks] == [GOLDEN]


@pytest.mark.parametrize("hex_", [
    "a2000001" "80",  # empty list
    "a2000101" "8141" "61",  # kind 1
    "a1000001",  # a map of 1 ({0: 0}, key 1 missing) then a trailing byte
    "a3000001814161" "0200",  # an extra key
    "a2000001" "8101",  # a list item that is not bytes
    "a2000001" "8140",  # an empty transaction
    "82" "4161" "4162",  # a bare list
    "a2000001" "8241614161ff",  # trailing bytes
])
def test_tx_batch_decoder_refuses(hex_: str) -> None:
    with pytest.raises(DecodeError):
        decode_tx_batch(bytes.fromhex(hex_))


def test_tx_batch_size_bound_is_inclusive() -> None:
    full = TxBatch(tuple(b"x" for _ in range(MAX_TX_BATCH_TXS)))
    assert decode_tx_batch(encode_tx_batch(full)) == full
    with pytest.raises(DecodeError):
        decode_tx_batch(encode_tx_batch(TxBatch((*full.txs, b"y"))))


class Sent:
    def __init__(self) -> None:
        self.messages: list[tuple[int, bytes]] = []

    def __call__(self, channel: int, payload: bytes) -> int:
        self.messages.append((channel, payload))
        return 3

    def batches(self) -> list[tuple[bytes, ...]]:
        assert all(ch == CH_TX_BATCH for ch, _ in self.messages)
        return [decode_tx_batch(p).txs for _, p in self.messages]


def no_admit(tx: bytes, prepared: PreparedOrUndecodable) -> str | None:
    raise AssertionError("nothing should be admitted")


async def test_transactions_added_in_one_turn_travel_as_one_batch_after_the_interval() -> None:
    sent = Sent()
    g = TxGossip(broadcast=lambda: sent, admit=no_admit, config=TxGossipConfig(flush_interval_s=0.001))
    for k in range(3):
        g.add(bytes([k + 1]))
    assert sent.messages == []  # waits for more
    while not sent.messages:
        await asyncio.sleep(0.001)
    assert sent.batches() == [(b"\x01", b"\x02", b"\x03")]
    assert g.stats()["sent"] == 3 and g.stats()["batches_sent"] == 1


async def test_a_full_batch_is_sent_at_once_and_batches_are_bounded_in_count_and_bytes() -> None:
    sent = Sent()
    g = TxGossip(broadcast=lambda: sent, admit=no_admit,
                 config=TxGossipConfig(flush_interval_s=60.0, max_batch_txs=4, max_batch_bytes=10))
    for k in range(9):
        g.add(bytes([k + 1]))
    assert sent.batches() == [(b"\x01", b"\x02", b"\x03", b"\x04"), (b"\x05", b"\x06", b"\x07", b"\x08")]
    g.add(b"z" * 12)  # over the byte bound with the pending \x09: sent at once
    assert sent.batches()[-1] == (b"\x09", b"z" * 12)
    g.close()


async def test_without_peers_nothing_is_pending() -> None:
    g = TxGossip(broadcast=lambda: None, admit=no_admit)
    g.add(b"tx")
    assert g.stats()["sent"] == 0 and g._pending == []


async def drained(g: TxGossip) -> None:
    while g.backlog or (g._task is not None and not g._task.done()):
        await asyncio.sleep(0)


async def test_received_transactions_are_admitted_later_in_slices_that_yield_to_the_loop() -> None:
    events: list[str] = []
    loop = asyncio.get_running_loop()

    def admit(tx: bytes, prepared: PreparedOrUndecodable) -> str | None:
        events.append(tx.decode())
        if tx == b"t0":  # a consensus message arrives while the first slice is admitted
            loop.call_soon(events.append, "consensus")
        return None

    g = TxGossip(broadcast=lambda: None, admit=admit, config=TxGossipConfig(slice_txs=2))
    g.receive(1, encode_tx_batch(TxBatch(tuple(f"t{k}".encode() for k in range(6)))))
    assert events == []  # the peer callback only queues
    assert g.backlog == 6
    await drained(g)
    assert events == ["t0", "t1", "consensus", "t2", "t3", "t4", "t5"]
    assert g.stats()["received"] == 6 and g.stats()["admitted"] == 6


async def test_the_receive_queue_is_bounded_and_drops_the_newest() -> None:
    admitted: list[bytes] = []

    def admit(tx: bytes, prepared: PreparedOrUndecodable) -> str | None:
        admitted.append(tx)
        return None

    g = TxGossip(broadcast=lambda: None, admit=admit, config=TxGossipConfig(max_received=3, max_received_bytes=100))
    g.receive(1, encode_tx_batch(TxBatch((b"a", b"b", b"c", b"d", b"e"))))
    g.receive_single(b"f")  # the old one-transaction message joins the same queue
    assert g.backlog == 3
    assert g.stats()["queue_full"] == 3
    await drained(g)
    assert admitted == [b"a", b"b", b"c"]
    g.receive(1, encode_tx_batch(TxBatch((b"x" * 60, b"y" * 60))))  # the byte bound
    assert g.backlog == 1 and g.stats()["queue_full"] == 4
    await drained(g)
    assert admitted[-1] == b"x" * 60


async def test_malformed_batches_and_invalid_transactions_change_nothing_and_are_counted() -> None:
    counted: list[tuple[str, int]] = []

    def admit(tx: bytes, prepared: PreparedOrUndecodable) -> str | None:
        return "bad_signature" if tx == b"bad" else None

    g = TxGossip(broadcast=lambda: None, admit=admit, on_count=lambda r, n: counted.append((r, n)))
    g.receive(1, b"\xff\x00")
    g.receive(1, bytes.fromhex("a2000001" "80"))
    assert g.backlog == 0 and g._task is None
    g.receive(2, encode_tx_batch(TxBatch((b"ok", b"bad"))))
    await drained(g)
    s = g.stats()
    assert (s["malformed"], s["received"], s["admitted"], s["rejected"]) == (2, 2, 1, 1)
    assert ("malformed", 1) in counted and ("rejected", 1) in counted


class FakePool:
    def __init__(self) -> None:
        self.batches: list[list[bytes]] = []

    async def recover_async(self, batch: list[bytes], max_body: int | None = None) -> list[Any]:
        self.batches.append(list(batch))
        return [b"prepared:" + t for t in batch]


async def test_signers_are_recovered_by_the_pool_when_the_node_has_one() -> None:
    got: list[tuple[bytes, object]] = []

    def admit(tx: bytes, prepared: PreparedOrUndecodable) -> str | None:
        got.append((tx, prepared))
        return None

    pool = FakePool()
    g = TxGossip(broadcast=lambda: None, admit=admit, pool=lambda: cast(SignaturePool, pool),
                 config=TxGossipConfig(slice_txs=2, pool_batch_txs=3))
    g.receive(1, encode_tx_batch(TxBatch((b"a", b"b", b"c", b"d"))))
    await drained(g)
    assert pool.batches == [[b"a", b"b", b"c"], [b"d"]]
    assert got == [(t, b"prepared:" + t) for t in (b"a", b"b", b"c", b"d")]


async def test_close_drops_the_backlog_and_stops_admitting() -> None:
    admitted: list[bytes] = []

    def admit(tx: bytes, prepared: PreparedOrUndecodable) -> str | None:
        admitted.append(tx)
        return None

    g = TxGossip(broadcast=lambda: None, admit=admit, config=TxGossipConfig(slice_txs=1))
    g.receive(1, encode_tx_batch(TxBatch((b"a", b"b", b"c"))))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    g.close()
    await asyncio.sleep(0)
    assert g.backlog == 0 and len(admitted) < 3
    g.receive(1, encode_tx_batch(TxBatch((b"d",))))
    assert g.backlog == 0
