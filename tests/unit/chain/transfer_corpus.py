"""A deterministic corpus of transfers through a producer and a verifying follower, and digests of the outcome.

Used by ``test_transfer_corpus_pinned.py``, whose pinned values were produced by running :func:`run_corpus` on
commit 8cb54ba (before the transfer fast paths): ``PYTHONPATH=<8cb54ba worktree> python -c "from
tests.unit.chain.transfer_corpus import run_corpus; print(run_corpus())"`` from a checkout holding this file.
It therefore uses only APIs that existed there.

The corpus covers what a transfer's fast paths touch: successes, a self-transfer, a zero amount to a new account,
``insufficient_balance``, ``out_of_cells`` and ``out_of_cycles`` (failed, charged, writes reverted), candidates
left out (``nonce_too_high``, ``bad_signature``), balances near u128's maximum, and account nonces crossing the
CBOR head boundaries 23/24 and 255/256 (the account record and the cells charged for it change length there).
(``balance_overflow`` cannot happen: genesis refuses a total supply above u128.)
"""

from __future__ import annotations

from dataclasses import replace

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.crypto import bls
from cowboy_node.node.devgenesis import DevGenesis, create_dev_genesis
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.params import Cip11Flags
from cowboy_protocol.types.transaction import Transaction

CHAIN_ID = "cowboy-corpus-ü"
"""Non-ASCII on purpose: the chain id is a text string in every transaction body."""
U128_MAX = (1 << 128) - 1
KEYS = {name: (i + 11).to_bytes(32, "big") for i, name in enumerate(("alice", "bob", "carol", "dave", "erin"))}
ADDR = {name: private_key_to_address(k) for name, k in KEYS.items()}
FEE_RECIPIENT = private_key_to_address((99).to_bytes(32, "big"))
BALANCES = {ADDR["alice"]: 10**24, ADDR["bob"]: 2 * 10**10, ADDR["carol"]: U128_MAX - 10**25, ADDR["dave"]: 10**24}


def _tx(sender: str, nonce: int, to: bytes, amount: int, *, cycles: int = 50_000, cells: int = 2_000) -> Transaction:
    return Transaction(chain_id=CHAIN_ID, nonce=nonce, sender=ADDR[sender], instruction=Transfer(to=to, amount=amount),
                       cycles_limit=cycles, cells_limit=cells, max_fee_per_cycle=200_000,
                       max_priority_fee_per_cycle=1_000, max_fee_per_cell=200_000,
                       max_priority_fee_per_cell=1_000).signed(KEYS[sender])


def _genesis() -> DevGenesis:
    return create_dev_genesis(chain_id=CHAIN_ID, balances=BALANCES, system_deployers=(),
                              fee_recipient=FEE_RECIPIENT, genesis_time_ms=1_700_000_000_000,
                              cip11=Cip11Flags.for_phase(2), entropy=bytes(range(96)))


def blocks() -> list[list[Transaction]]:
    """The candidates of each block, in order."""
    a, b, c, e = ADDR["alice"], ADDR["bob"], ADDR["carol"], ADDR["erin"]
    # Cells just above the intrinsic cost (body + 64) but below what two account writes need.
    tight = _tx("alice", 5, b, 1, cells=300)
    tight = _tx("alice", 5, b, 1, cells=len(tight.body()) + 64 + 40)
    forged = replace(_tx("alice", 4, b, 3), signature=_tx("bob", 0, a, 3).signature)
    one = [
        _tx("alice", 0, b, 10),
        _tx("alice", 1, a, 7),                                   # to itself
        _tx("alice", 2, c, 10),                                  # to a balance near u128's maximum
        _tx("bob", 0, a, 10**10 + 1),                            # insufficient_balance (max fee stays reserved)
        _tx("alice", 3, e, 0),                                   # zero amount to a new account
        _tx("alice", 9, b, 1),                                   # nonce_too_high: left out
        forged,                                                  # bad_signature: left out
        _tx("alice", 4, b, 3),
        tight,                                                   # out_of_cells
        _tx("alice", 6, b, 1, cycles=11_000),                    # out_of_cycles
        *[_tx("alice", n, b, n) for n in range(7, 30)],          # alice's nonce crosses 23/24
        *[_tx("dave", n, e, 1) for n in range(150)],
    ]
    two = [*[_tx("dave", n, e, 1) for n in range(150, 300)],  # dave's nonce crosses 255/256
           _tx("bob", 1, c, 1),
           _tx("carol", 0, a, U128_MAX // 2)]
    return [one, two, []]


def _produce(chain: Chain, dev: DevGenesis, txs: list[Transaction]) -> PreparedBlock:
    key = dev.validator_key
    secret = bls.secret_key_from_bytes(key.bls_secret)
    env = chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                        beacon=sign_beacon(secret, chain.head.header.round), presence_input=b"\x01\x00")
    return chain.build(txs, env=env, round_=Round(0, chain.height + 1),
                       proposer=ed25519.public_key_from_seed(key.ed25519_seed),
                       sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=False)


def run_corpus() -> dict[str, object]:
    """Produce the corpus' blocks, verify each on a follower, commit both; what came out, as hex digests."""
    dev = _genesis()
    producer_store, follower_store = MemoryStore(), MemoryStore()
    producer, follower = Chain(producer_store, dev.genesis), Chain(follower_store, dev.genesis)
    hashes: list[str] = []
    headers: list[list[object]] = []
    outcomes: list[list[str]] = []
    left_out: list[list[str]] = []
    for txs in blocks():
        p = _produce(producer, dev, txs)
        producer.commit(p)
        follower.commit(verify_and_prepare(follower, p.block))
        if follower.head.hash() != producer.head.hash():
            raise AssertionError("the follower committed another block")
        hashes.append(p.block.hash().hex())
        h = p.block.header
        headers.append([h.tx_root.hex(), h.receipts_root.hex(), h.cycles_used, h.cells_used, h.cycle_basefee,
                        h.cell_basefee])
        outcomes.append([r.error_code or "ok" for r in p.result.receipts])
        left_out.append([e.code for _, e in p.result.rejected])
    return {"block_hashes": hashes, "state_root": producer.head.header.state_root.hex(),
            "store_digest": _digest(producer_store, skip=_ADDED_LATER),
            "follower_store_digest": _digest(follower_store, skip=_ADDED_LATER),
            "headers": headers, "logical_digest": _digest(producer_store, _LOGICAL),
            "follower_logical_digest": _digest(follower_store, _LOGICAL), "outcomes": outcomes,
            "left_out": left_out}


_LOGICAL = (b"s/", b"R/", b"T/", b"X/", b"Y/")
"""Store prefixes whose contents do not depend on the state tree's layout or root definition: state values,
receipts, the tx index and the event index (``B/``, ``H/`` and ``n/`` hold block bytes, block hashes and tree
nodes, which do)."""


_ADDED_LATER = (b"M/undo", b"E/")
"""Local keys every commit writes since issue 34 (the last block's undo record, the event-key record pruning uses),
which 8cb54ba did not: left out of the whole-store digest, so it still pins every key 8cb54ba wrote, byte for byte."""


def _digest(store: MemoryStore, prefixes: tuple[bytes, ...] = (b"",), skip: tuple[bytes, ...] = ()) -> str:
    """keccak256 over the (key, value) pairs under ``prefixes`` (but none starting with one of ``skip``), in key
    order."""
    return keccak256(b"".join(keccak256(k) + keccak256(v) for p in prefixes for k, v in store.iterate(p)
                              if not k.startswith(skip))).hex()
