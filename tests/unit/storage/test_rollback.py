"""``cowboy-node rollback``'s core: the undo record every commit writes puts the store back as before the block."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.rollback import rollback
from cowboy_node.chain.undo import KEY_UNDO, RollbackError, decode_undo
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.execution.system_state import get_account
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.state.memory import MemoryStore
from tests.helpers import BOB
from tests.unit.storage.chain_fixture import commit_transfers, dump, open_chain


def test_rollback_restores_every_key_as_it_was_before_the_head_block(dev_genesis: DevGenesis,
                                                                       tmp_path: Path) -> None:
    chain = open_chain(tmp_path / "data", dev_genesis)
    commit_transfers(chain, dev_genesis, 2)
    before = dump(chain.store)
    bob_before = get_account(chain.world(), BOB).balance
    (third,) = commit_transfers(chain, dev_genesis, 1)
    assert dump(chain.store) != before
    done = rollback(chain.store, dev_genesis.genesis)
    assert (done.height, done.head_height, done.block_hash) == (3, 2, third.block.hash())
    after = dump(chain.store)
    before.pop(KEY_UNDO)  # block 2's undo record is not restored: one block can be undone
    assert after == before
    chain.close()
    reopened = open_chain(tmp_path / "data", dev_genesis)  # the node's open checks the head's root
    assert reopened.height == 2 and get_account(reopened.world(), BOB).balance == bob_before
    assert reopened.blocks.tx_location(third.block.transactions[0].tx_hash()) is None
    reopened.close()


def test_rolled_back_block_re_executes_to_the_same_root_and_hash(dev_genesis: DevGenesis, tmp_path: Path) -> None:
    chain = open_chain(tmp_path / "data", dev_genesis)
    (_first, second) = commit_transfers(chain, dev_genesis, 2)
    committed = dump(chain.store)
    rollback(chain.store, dev_genesis.genesis)
    chain.close()
    chain = open_chain(tmp_path / "data", dev_genesis)
    again = verify_and_prepare(chain, second.block)  # the kept block, executed afresh by "the new binary"
    chain.commit(again)
    assert chain.head.hash() == second.block.hash()
    assert dump(chain.store) == committed
    chain.close()


def test_second_rollback_is_refused_and_changes_nothing(dev_genesis: DevGenesis, chain: Chain) -> None:
    commit_transfers(chain, dev_genesis, 2)
    rollback(chain.store, dev_genesis.genesis)
    before = dump(chain.store)
    with pytest.raises(RollbackError) as e:
        rollback(chain.store, dev_genesis.genesis)
    assert e.value.code == "no_undo_record"
    assert dump(chain.store) == before


def test_rollback_of_genesis_is_refused(dev_genesis: DevGenesis) -> None:
    store = MemoryStore()
    Chain(store, dev_genesis.genesis)
    with pytest.raises(RollbackError) as e:
        rollback(store, dev_genesis.genesis)
    assert e.value.code == "no_undo_record"


def test_truncated_undo_record_is_refused_and_changes_nothing(dev_genesis: DevGenesis, chain: Chain) -> None:
    commit_transfers(chain, dev_genesis, 1)
    raw = chain.store.get(KEY_UNDO)
    assert raw is not None and decode_undo(raw).height == 1
    chain.store.write_batch([(KEY_UNDO, raw[:-3])])
    before = dump(chain.store)
    with pytest.raises(RollbackError) as e:
        rollback(chain.store, dev_genesis.genesis)
    assert e.value.code == "bad_undo_record"
    assert dump(chain.store) == before
