"""Two processes with different PYTHONHASHSEED compute identical state roots."""

from __future__ import annotations

from tests.helpers import run_under_hash_seeds

SCRIPT = """
import random
from cowboy_node.chain.chain import Chain
from cowboy_node.state.memory import MemoryStore
from tests.helpers import make_dev_genesis, ALICE_SK, transfer
from tests.unit.chain.test_chain import produce
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
dev = make_dev_genesis()
chain = Chain(MemoryStore(), dev.genesis)
rng = random.Random(7)
nonce = 0
for _ in range(4):
    txs = []
    for _ in range(20):
        to = private_key_to_address(rng.randrange(1, 2**200).to_bytes(32, "big"))
        txs.append(transfer(ALICE_SK, nonce, to, rng.randrange(1, 10**9)))
        nonce += 1
    chain.commit(produce(chain, dev, txs, ts=1_700_000_000_000 + 1000 * (chain.height + 1)))
print(chain.head.header.state_root.hex(), chain.head.hash().hex())
"""


def test_state_roots_do_not_depend_on_hash_seed() -> None:
    outs = run_under_hash_seeds(SCRIPT)
    assert outs[0] == outs[1] and len(outs[0].split()) == 2
