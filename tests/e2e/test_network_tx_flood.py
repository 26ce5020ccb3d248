"""A flood of transfers submitted to ONE validator of a real 4-validator network (``cowboy-node testnet`` homes,
``cowboy-node run`` processes, loopback) does not stall consensus (issues 14/20): the other validators keep
finalizing blocks while the flood is gossiped to them, every accepted transfer is eventually included, all
validators agree, the transfers reached the others as TxBatch gossip, and no consensus message was dropped by a
full send queue. A correctness test: the only time bounds are generous liveness bounds."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import tomllib
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.e2e.netproc import Testnet

TXS = 3_000
SENDERS = 100
LANES = 16
"""Concurrent POST /submit clients."""
SUBMIT_S = 60.0
"""Submitting every transfer takes at most this (liveness bound, not a performance claim)."""
PROGRESS_BLOCKS = 3
"""Blocks every other validator must finalize ..."""
PROGRESS_S = 30.0
"""... within this long after the flood started."""
INCLUDE_S = 60.0
"""Every accepted transfer is included within this after the last submission."""
SINK = bytes(19) + b"\x55"

pytestmark = pytest.mark.timeout(600)


def _keys() -> list[bytes]:
    return [(i + 70_000).to_bytes(32, "big") for i in range(SENDERS)]


def _sign(chain_id: str) -> list[list[bytes]]:
    """Per sender, its transfers in nonce order (TXS in all)."""
    per = TXS // SENDERS
    return [[Transaction(chain_id=chain_id, nonce=j, sender=private_key_to_address(k),
                         instruction=Transfer(to=SINK, amount=1), cycles_limit=20_000, cells_limit=1_000,
                         max_fee_per_cycle=200_000, max_priority_fee_per_cycle=10, max_fee_per_cell=200_000,
                         max_priority_fee_per_cell=10).signed(k).to_bytes() for j in range(per)] for k in _keys()]


async def _submit(url: str, per_sender: list[list[bytes]], codes: dict[str, int]) -> None:
    """POST every transfer to ``url`` (each sender's in nonce order, LANES senders at a time)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=LANES),
                                     timeout=aiohttp.ClientTimeout(total=30)) as session:
        async def lane(senders: list[int]) -> None:
            for j in range(max(len(per_sender[s]) for s in senders)):
                for s in senders:
                    async with session.post(url + "/submit", data=per_sender[s][j],
                                            headers={"Content-Type": "application/octet-stream"}) as r:
                        body = await r.json()
                        code = "accepted" if r.status == 200 else str(body.get("code", r.status))
                        codes[code] = codes.get(code, 0) + 1

        await asyncio.wait_for(asyncio.gather(*(lane(list(range(i, SENDERS, LANES))) for i in range(LANES))),
                               SUBMIT_S)


def _metrics(net: Testnet, i: int) -> str:
    addr = tomllib.loads((net.validators[i].home / "config.toml").read_text())["metrics"]["addr"]
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        return str(r.read().decode())


def _sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{re.escape(name)}\{{{re.escape(want)}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.mark.parametrize("transport", ["quic", "tcp"])
def test_a_transfer_flood_to_one_validator_does_not_stall_finalization(tmp_path: Path, transport: str) -> None:
    """On either ``[p2p] transport``: the QUIC and the TCP link carry the same peer layer."""
    net = Testnet.create(tmp_path, n=4, block_time_ms=500, proxied=False)
    try:
        net.set_p2p_transport(transport)
        net.fund_in_genesis([private_key_to_address(k) for k in _keys()])
        chain_id = json.loads((net.validators[0].home / "genesis.json").read_text())["chain_id"]
        per_sender = _sign(chain_id)
        net.start(timeout=60)
        net.wait_heights(2, 60)
        others = [1, 2, 3]
        h0 = {i: net.height(i) for i in others}
        start_height = net.height(0)
        codes: dict[str, int] = {}
        errors: list[BaseException] = []

        def flood() -> None:
            try:
                asyncio.run(_submit(net.validators[0].rpc_url, per_sender, codes))
            except BaseException as e:
                errors.append(e)

        submitter = threading.Thread(target=flood, name="flood")
        submitter.start()
        try:
            # Liveness while the flood is being admitted and gossiped: the others keep finalizing.
            net.wait_for(f"{PROGRESS_BLOCKS} blocks finalized on validators 1..3 during the flood",
                         lambda: all(net.height(i) >= h0[i] + PROGRESS_BLOCKS for i in others), PROGRESS_S)
        finally:
            submitter.join(SUBMIT_S + 10)
        assert not submitter.is_alive() and not errors, f"submission failed: {errors}"
        assert codes == {"accepted": TXS}, codes

        def included() -> bool:
            top = net.height(2)
            return sum(len((net.block(2, h) or {}).get("transactions", []))
                       for h in range(start_height + 1, top + 1)) >= TXS

        net.wait_for(f"all {TXS} transfers included", included, INCLUDE_S, interval=1.0)
        for k, txs in zip(_keys(), per_sender, strict=True):  # every sender's every nonce, nothing else
            code, acct = net.get(3, "/account/0x" + private_key_to_address(k).hex())
            assert code == 200 and int(acct["nonce"]) == len(txs), acct
        top = min(h for h in net.heights().values() if h is not None)
        net.assert_agreement(top)
        for i in others:  # the flood reached them as batches and no consensus message lost its place to it
            text = _metrics(net, i)
            assert _sample(text, "cowboy_tx_gossip_total", result="received") > 0
            assert _sample(text, "cowboy_tx_gossip_total", result="malformed") == 0
        for i in range(4):
            text = _metrics(net, i)
            for ch in ("0", "1", "3"):
                assert _sample(text, "cowboy_p2p_messages_dropped_by_channel_total",
                               channel=ch, reason="queue_full") == 0
        assert _sample(_metrics(net, 0), "cowboy_tx_gossip_total", result="sent") == TXS
        for v in net.validators:  # the links were the configured transport's
            started = re.search(r"node started .* p2p='[^']* \((\w+)\)'", v.log_path.read_text())
            assert started is not None and started.group(1) == {"quic": "udp", "tcp": "tcp"}[transport]
    finally:
        net.close()
