"""A real node whose mempool is full of nonce-gapped transactions still takes and includes an executable one,
and a kill -9 + restart keeps the pooled transactions (mempool journal), which are then included (issue 22 item 5).
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.integration.nodeproc import NodeProcess, wait_for

JAMMERS = 13
QUEUED_EACH = 16  # = the default mempool.max_queued_per_sender
POOL = 200  # mempool.max_txs = mempool.max_queued: gapped txs alone can fill the pool (the worst case)
KEYS = [(0x5A5A00 + i).to_bytes(32, "big") for i in range(JAMMERS + 1)]
FRESH = JAMMERS  # index of the account that sends nothing until the pool is jammed



def _metric(node: NodeProcess, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_gapped_flood_cannot_jam_and_restart_keeps_the_pool(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home", block_time_ms=250)
    cfg = node.home / "config.toml"
    cfg.write_text(cfg.read_text().replace("max_txs = 10000", f"max_txs = {POOL}")
                   .replace("max_queued = 1024", f"max_queued = {POOL}"))
    faucet, _ = load_account_private_key(node.home / "keys" / "faucet.key")
    node.start()
    try:
        status = node.get("/status")

        bf = status["basefee"]

        def send(sk: bytes, nonce: int, to: bytes = bytes(19) + b"\x77", amount: int = 1) -> tuple[int, Any]:
            """A transfer at the minimal priority fee (1)."""
            tx = Transaction(chain_id=status["chain_id"], nonce=nonce, sender=private_key_to_address(sk),
                             instruction=Transfer(to=to, amount=amount), cycles_limit=50_000, cells_limit=2_000,
                             max_fee_per_cycle=2 * bf["cycle"], max_priority_fee_per_cycle=1,
                             max_fee_per_cell=2 * bf["cell"], max_priority_fee_per_cell=1).signed(sk)
            return node.post_tx(tx.to_bytes())

        for i, sk in enumerate(KEYS):
            assert send(faucet, i, private_key_to_address(sk), 10**20)[0] == 200
        faucet_path = "/account/0x" + private_key_to_address(faucet).hex()
        wait_for("funding", lambda: node.get(faucet_path)["nonce"] == len(KEYS))

        # Every jammer's nonce 0 "was lost": nonces 1..16 are all gapped, at the minimum priority fee.
        accepted, codes = [], set()
        for k in range(JAMMERS):
            for n in range(1, QUEUED_EACH + 1):
                code, body = send(KEYS[k], n)
                if code == 200:
                    accepted.append(body["tx_hash"])
                else:
                    codes.add(body["code"])
        assert len(accepted) == POOL and codes == {"queued_full"}
        h0 = node.get("/height")["height"]
        wait_for("two more blocks", lambda: node.get("/height")["height"] >= h0 + 2)
        assert node.get("/status")["mempool"]["txs"] == POOL  # nothing in it can be included
        assert _metric(node, "cowboy_mempool_queued") == POOL and _metric(node, "cowboy_mempool_pending") == 0
        assert _metric(node, "cowboy_mempool_full_total") >= JAMMERS * QUEUED_EACH - POOL
        assert "mempool full" in node.read_log()

        # A valid transaction of an unaffected account, same minimal fee: admitted and included.
        code, body = send(KEYS[FRESH], 0)
        assert code == 200, body
        fresh = body["tx_hash"]
        wait_for("the fresh account's tx included", lambda: "height" in node.get(f"/tx/{fresh}/receipt"), 30)
        pooled = [h for h in accepted if node.get(f"/tx/{h}").get("status") == "pending"]
        assert len(pooled) == POOL - 1  # one queued tx made room for it

        node.kill()  # SIGKILL; the journal was synced with the last block
        node.start()
        assert all(node.get(f"/tx/{h}").get("status") == "pending" for h in pooled)
        assert node.get(f"/tx/{fresh}/receipt")["status"] == "success"
        # The first jammer's missing nonce arrives: its queued txs, kept across the crash, are included.
        code, body = send(KEYS[0], 0)
        assert code == 200, body
        mine = [h for h in accepted[:QUEUED_EACH] if h in pooled] + [body["tx_hash"]]
        wait_for("the first jammer's txs included",
              lambda: all("height" in node.get(f"/tx/{h}/receipt") for h in mine), 10)
    finally:
        rc = node.terminate()
    assert rc == 0
