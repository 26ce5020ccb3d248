"""Verified reads: the node serves proof + head header + that header's finalization certificate; the client
(``cowboy_protocol/verified_reads.py``, ``http_client.RpcClient.verified_*``) accepts them under the genesis group
key and refuses a forged value, proof or certificate with a typed error."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import pytest

from cowboy_node.consensus.simplex.types import Finalization, decode_message, encode_message
from cowboy_node.crypto import bls
from cowboy_node.node.node import Node
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateProof, StateTree
from cowboy_node.state.tree import verify_proof as node_verify_proof
from cowboy_protocol.http_client import RpcClient
from cowboy_protocol.verified_reads import (
    ACCOUNT_PREFIX,
    BadCertificate,
    BadProof,
    Uncertified,
    ValueMismatch,
    VerificationError,
    actor_state_key,
    decode_account,
    verify_proof,
    verify_read,
)
from tests.helpers import ALICE, BOB
from tests.integration.nodeproc import wait_for
from tests.unit.node_harness import LiveNode, make_node, produce

ALICE_KEY = ACCOUNT_PREFIX + ALICE


@pytest.fixture(scope="module")
def node() -> Node:
    n = make_node()
    produce(n, [])
    produce(n, [])
    return n


def _group(n: Node) -> bytes:
    return n.chain.genesis.group_public_key


def _flip(hex_text: str, at: int = -1) -> str:
    raw = bytearray(bytes.fromhex(hex_text[2:]))
    raw[at] ^= 0x01
    return "0x" + raw.hex()


def test_the_nodes_account_answer_verifies_against_the_genesis_group_key(node: Node) -> None:
    doc = node.api.account_proof(ALICE)
    header, raw = verify_read(doc, _group(node), key=ALICE_KEY)
    assert header.height == node.chain.height and header.digest == node.chain.head.hash()
    assert header.state_root == node.chain.head.header.state_root
    assert decode_account(raw) == (int(doc["balance"]), doc["nonce"])


def test_state_proof_route_carries_the_certificate_of_the_header_it_is_against(node: Node) -> None:
    doc = node.api.state_proof(ALICE_KEY)
    cert = decode_message(bytes.fromhex(doc["certificate"][2:]))
    assert isinstance(cert, Finalization) and cert.proposal.payload == node.chain.head.hash()
    assert doc["root"] == doc["state_root"] == "0x" + node.chain.head.header.state_root.hex()
    verify_read(doc, _group(node), key=ALICE_KEY)


def test_a_forged_certificate_signature_is_refused(node: Node) -> None:
    doc = node.api.account_proof(ALICE)
    cert = decode_message(bytes.fromhex(doc["certificate"][2:]))
    assert isinstance(cert, Finalization)
    other = bls.sign(bls.secret_key_from_seed(b"\x07" * 32), b"not the finalize message")
    doc["certificate"] = "0x" + encode_message(Finalization(cert.proposal, other, cert.seed)).hex()
    with pytest.raises(BadCertificate, match="signature"):
        verify_read(doc, _group(node), key=ALICE_KEY)


def test_a_certificate_of_another_block_is_refused(node: Node) -> None:
    doc = node.api.account_proof(ALICE)
    older = node.consensus.records.finalization_bytes(node.chain.height - 1)
    assert older is not None
    doc["certificate"] = "0x" + older.hex()  # a genuine certificate, of the parent
    with pytest.raises(BadCertificate, match="another block"):
        verify_read(doc, _group(node), key=ALICE_KEY)


def test_a_forged_header_is_refused_even_with_the_genuine_certificate(node: Node) -> None:
    doc = node.api.account_proof(ALICE)
    doc["header"] = _flip(doc["header"])  # last byte: cell_basefee; the digest changes
    with pytest.raises(BadCertificate):
        verify_read(doc, _group(node), key=ALICE_KEY)


def test_a_wrong_group_key_refuses_the_certificate(node: Node) -> None:
    doc = node.api.account_proof(ALICE)
    with pytest.raises(BadCertificate):
        verify_read(doc, bls.public_key(bls.secret_key_from_seed(b"\x09" * 32)), key=ALICE_KEY)


def test_a_forged_value_in_the_proof_is_refused(node: Node) -> None:
    doc = node.api.account_proof(ALICE)
    doc["proof"]["value"] = _flip(doc["proof"]["value"])
    with pytest.raises(BadProof):
        verify_read(doc, _group(node), key=ALICE_KEY)


def test_a_forged_proof_path_is_refused(node: Node) -> None:
    doc = node.api.account_proof(ALICE)
    step = next(s for s in doc["proof"]["steps"] if s["siblings"])
    step["siblings"][0] = _flip(step["siblings"][0])
    with pytest.raises(BadProof, match="state root"):
        verify_read(doc, _group(node), key=ALICE_KEY)


def test_a_proof_of_another_key_is_refused(node: Node) -> None:
    doc = node.api.account_proof(BOB)
    with pytest.raises(ValueMismatch):
        verify_read(doc, _group(node), key=ALICE_KEY)


def test_an_answer_without_certificate_is_uncertified(node: Node) -> None:
    doc = node.api.account_proof(ALICE)
    doc["certificate"] = None
    with pytest.raises(Uncertified):
        verify_read(doc, _group(node), key=ALICE_KEY)


def test_client_proof_check_agrees_with_the_nodes_tree() -> None:
    rng = random.Random(36)
    store = MemoryStore()
    tree = StateTree(store, b"T/")
    keys = [rng.randbytes(rng.randint(1, 40)) for _ in range(300)]
    update = tree.prepare({k: rng.randbytes(rng.randint(0, 50)) for k in keys})
    store.write_batch(update.ops)
    tree.commit(update)
    root = tree.root()
    for k in [*keys[:40], *(rng.randbytes(8) for _ in range(40))]:
        proof = tree.prove(k)
        assert node_verify_proof(root, proof)
        assert verify_proof(root, proof.to_json()) == (k, proof.value)
        bad = copy.deepcopy(proof.to_json())
        if bad["steps"] and bad["steps"][-1]["siblings"]:
            bad["steps"][-1]["siblings"][-1] = _flip(bad["steps"][-1]["siblings"][-1])
            assert not node_verify_proof(root, StateProof.from_json(bad))
            with pytest.raises(BadProof):
                verify_proof(root, bad)


# -- the typed HTTP client against a live node ---------------------------------------------------------------
@pytest.fixture(scope="module")
def live() -> Iterator[LiveNode]:
    ln = LiveNode(block_time_ms=50)
    ln.start()
    try:
        # The genesis head has no certificate (nothing finalizes genesis): wait for block 1.
        wait_for("block 1", lambda: RpcClient(ln.url).height()["height"] >= 1, timeout=30)
        yield ln
    finally:
        ln.stop()


def test_typed_client_verifies_account_state_and_raw_reads(live: LiveNode) -> None:
    client, group = RpcClient(live.url), _group(live.node)
    acct = client.verified_account(ALICE, group)
    assert acct.balance > 0 and acct.header.height >= 1
    raw = client.verified_state(ALICE_KEY, group)
    assert decode_account(raw.value)[0] == acct.balance or raw.header.height != acct.header.height


class _Lying(RpcClient):
    """A client whose node lies: the answer is changed by ``forge`` before it is checked."""

    def __init__(self, url: str, forge: Any) -> None:
        super().__init__(url)
        self.forge = forge

    def _request(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None) -> Any:
        doc = super()._request(method, path, body, content_type)
        self.forge(doc)
        return doc


@pytest.mark.parametrize(("forge", "error"), [
    (lambda d: d.update(balance=str(int(d["balance"]) + 1)), ValueMismatch),
    (lambda d: d["proof"].update(value=_flip(d["proof"]["value"])), BadProof),
    (lambda d: d.update(certificate=_flip(d["certificate"], -60)), BadCertificate),
], ids=["value", "proof", "certificate"])
def test_typed_client_refuses_a_forged_account_answer(live: LiveNode, forge: Any,
                                                      error: type[VerificationError]) -> None:
    with pytest.raises(error):
        _Lying(live.url, forge).verified_account(ALICE, _group(live.node))


def test_typed_client_refuses_a_forged_actor_state_value(live: LiveNode) -> None:
    # No actor lives at ALICE, so the node answers 404; use the raw read of an actor-state key instead, absent.
    key = actor_state_key(BOB, b"count")
    got = RpcClient(live.url).verified_state(key, _group(live.node))
    assert got.value is None
    forged = _Lying(live.url, lambda d: d["proof"].update(value="0x31"))
    with pytest.raises(BadProof):
        forged.verified_state(key, _group(live.node))
