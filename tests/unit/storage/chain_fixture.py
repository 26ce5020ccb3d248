"""A LevelDB-backed single-validator chain built by hand, for the rollback and pruning tests."""

from __future__ import annotations

from pathlib import Path

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.leveldb import LevelDBStore
from tests.helpers import ALICE_SK, BOB, transfer
from tests.unit.chain.test_chain import produce


def open_chain(path: Path, dev: DevGenesis, *, halt_height: int | None = None) -> Chain:
    """A chain over a LevelDB data directory at ``path`` (created when missing)."""
    return Chain(LevelDBStore(path), dev.genesis, halt_height=halt_height)


def commit_transfers(chain: Chain, dev: DevGenesis, blocks: int, per_block: int = 2) -> list[PreparedBlock]:
    """Commit ``blocks`` blocks of ``per_block`` ALICE → BOB transfers each (every one emits a ``transfer`` event)."""
    out = []
    for _ in range(blocks):
        nonce = _next_nonce(chain)
        p = produce(chain, dev, [transfer(ALICE_SK, nonce + i, BOB, 10 + i) for i in range(per_block)])
        chain.commit(p)
        out.append(p)
    return out


def _next_nonce(chain: Chain) -> int:
    from cowboy_node.execution.system_state import get_account
    from tests.helpers import ALICE

    return get_account(chain.world(), ALICE).nonce


def dump(store: StateStore) -> dict[bytes, bytes]:
    """Every key and value of the store."""
    return dict(store.iterate(b""))
