"""The proposer offers a block no more candidates than it can include (``chain/candidates.py``)."""

from __future__ import annotations

from cowboy_node.chain.admission import admit
from cowboy_node.chain.candidates import candidate_limit
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.execution.system_state import get_account
from cowboy_node.state.memory import MemoryStore
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from tests.helpers import BOB, make_dev_genesis, transfer
from tests.unit.chain.test_admission_pool import _build

# 40,000,000 block_max_cycles (BasefeeConfig default) // 10,000 TX_BASE_CYCLES
CAP = 4_000


def test_limit_is_the_cycle_cap_or_max_block_txs(chain: Chain) -> None:
    assert candidate_limit(chain, 10_000) == CAP
    assert candidate_limit(chain, 100) == 100


def test_a_full_block_is_the_same_with_the_bounded_candidates() -> None:
    keys = [(i + 7_000).to_bytes(32, "big") for i in range(150)]
    dev = make_dev_genesis(balances={private_key_to_address(k): 10**24 for k in keys})
    # 4,200 transfers of cycles_limit 20,000 (12,000 used): the block is full at 3,332, short of both bounds.
    txs = [transfer(k, n, BOB, 1, cycles_limit=20_000, cells_limit=1_000).to_bytes() for n in range(28) for k in keys]
    built = []
    for limit in (10_000, None):
        chain = Chain(MemoryStore(), dev.genesis)
        pool = Mempool(MempoolConfig(max_txs=5_000, max_txs_per_sender=40, max_nonce_gap=40))
        for raw in txs:
            admit(raw, chain, pool)
        n = limit if limit is not None else candidate_limit(chain, 10_000)
        world = chain.world()
        offered = pool.ready(lambda a: get_account(world, a).nonce, n)  # noqa: B023 - used before world changes
        assert len(offered) == (4_200 if limit else CAP)
        built.append(_build(chain, dev, pool, limit=n))
        assert len(chain.head.transactions) == 3_332
    assert built[0] == built[1]
