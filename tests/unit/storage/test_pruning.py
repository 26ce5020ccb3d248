"""``[storage] retain_blocks``: blocks, receipts, indexes and certificates below the window are deleted in bounded
batches; state and the retained blocks are untouched."""

from __future__ import annotations

import struct
from pathlib import Path

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.pruning import KEY_EARLIEST, earliest_height, prune_step, prune_target
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_node.state.kv_store import StateStore
from tests.unit.storage.chain_fixture import commit_transfers, dump, open_chain

_BE8 = struct.Struct(">Q")


def _heights_left(store: StateStore) -> dict[str, set[int]]:
    """Heights still referenced by each per-block key family."""
    out: dict[str, set[int]] = {}
    for prefix, where in ((b"B/", 2), (b"R/", 2), (b"E/", 2), (b"C/f/", 4), (b"X/", 22), (b"Y/", 30)):
        out[prefix.decode()] = {_BE8.unpack_from(k, where)[0] for k, _ in store.iterate(prefix)}
    out["T/"] = {_BE8.unpack_from(v, 0)[0] for _, v in store.iterate(b"T/")}
    out["H/"] = {_BE8.unpack(v)[0] for _, v in store.iterate(b"H/")}
    return out


def test_prune_steps_delete_at_most_a_batch_and_stop_at_the_window(dev_genesis: DevGenesis, tmp_path: Path) -> None:
    chain = open_chain(tmp_path / "data", dev_genesis)
    commit_transfers(chain, dev_genesis, 12)
    store = chain.store
    heights = _heights_left(store)
    assert heights["X/"] == heights["Y/"] == heights["E/"] == set(range(1, 13))  # every block has transfer events
    step = prune_step(store, head=chain.height, retain_blocks=4, max_blocks=3)
    assert (step.pruned_from, step.earliest) == (0, 3) and earliest_height(store) == 3
    assert _heights_left(store)["B/"] == set(range(3, 13))
    while prune_step(store, head=chain.height, retain_blocks=4, max_blocks=3).deleted_keys:
        pass
    assert earliest_height(store) == prune_target(12, 4) == 9
    left = _heights_left(store)
    for family in ("B/", "R/", "T/", "H/"):
        assert left[family] == set(range(9, 13)), family
    for family in ("X/", "Y/", "E/"):
        assert left[family] == set(range(9, 13)), family
    chain.close()
    reopened = open_chain(tmp_path / "data", dev_genesis)  # the head and its state are intact
    assert reopened.height == 12 and reopened.earliest_height() == 9
    reopened.close()


def test_pruning_keeps_state_and_retained_blocks_byte_for_byte(dev_genesis: DevGenesis, chain: Chain) -> None:
    commit_transfers(chain, dev_genesis, 8)
    before = dump(chain.store)
    prune_step(chain.store, head=chain.height, retain_blocks=3, max_blocks=100)
    after = dump(chain.store)
    kept = {k: v for k, v in before.items() if k in after}
    assert kept == {k: v for k, v in after.items() if k != KEY_EARLIEST}
    for prefix in (b"s/", b"n/"):
        assert {k: v for k, v in before.items() if k.startswith(prefix)} == \
               {k: v for k, v in after.items() if k.startswith(prefix)}
    for h in range(6, 9):
        assert chain.blocks.block_bytes(h) is not None and chain.blocks.receipts(h) is not None
    assert chain.blocks.block_bytes(5) is None


def test_archive_setting_prunes_nothing(dev_genesis: DevGenesis, chain: Chain) -> None:
    commit_transfers(chain, dev_genesis, 5)
    before = dump(chain.store)
    step = prune_step(chain.store, head=chain.height, retain_blocks=0)
    assert step.deleted_keys == 0 and dump(chain.store) == before and chain.earliest_height() == 0


def test_finalization_certificates_and_round_seeds_below_the_window_are_pruned(dev_genesis: DevGenesis,
                                                                               chain: Chain) -> None:
    from cowboy_node.consensus.records import seed_op
    from cowboy_node.types.block import Round

    commit_transfers(chain, dev_genesis, 6)
    fake_cert_key = b"C/f/" + _BE8.pack(2)  # consensus/records.py's certificate key of height 2
    chain.store.write_batch([(fake_cert_key, b"x"), seed_op(Round(0, 1), b"\x01" * 48),
                             seed_op(Round(0, 6), b"\x06" * 48)])
    prune_step(chain.store, head=chain.height, retain_blocks=2)
    assert chain.store.get(fake_cert_key) is None
    assert chain.store.get(seed_op(Round(0, 1), b"")[0]) is None
    assert chain.store.get(seed_op(Round(0, 6), b"")[0]) is not None  # the head's round (view = height here)


def test_event_queries_of_retained_heights_still_answer(dev_genesis: DevGenesis, chain: Chain) -> None:
    from tests.helpers import ALICE

    commit_transfers(chain, dev_genesis, 6)
    prune_step(chain.store, head=chain.height, retain_blocks=2)
    found = [e for _, e in chain.store.iterate(b"X/" + ALICE)]
    assert len(found) == 2 * 2  # two transfers in each of blocks 5 and 6
