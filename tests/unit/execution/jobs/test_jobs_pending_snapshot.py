"""CIP-11 §9.2 pending selection: the block-S candidate snapshot is verified against the committed
``candidates_snapshot_root`` at the pending-selection pass, and its write is metered by its size.

The pending path exists only while CIP-11 selection is on (phases 2 and 3; phases 0 and 1 select every job in
block S with CIP-2 v2 and store no snapshot), so these tests run in those two phases.
"""

from __future__ import annotations

from typing import Any

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.crypto import bls
from cowboy_node.execution.block import build_block, execute_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.jobs import dispatch, pending
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Round
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.fields import decode_u128, encode_u128
from cowboy_protocol.types.jobspec import derive_job_id
from tests.helpers import ALICE_SK, FEE_RECIPIENT, hand_seeds_due
from tests.unit.execution.jobs import test_jobs_e2e as e2e

CIP11_PHASES = (2, 3)
SKS = [(0x2000 + i).to_bytes(32, "big") for i in range(8)]


@pytest.fixture(params=CIP11_PHASES, autouse=True, ids=[f"phase{p}" for p in CIP11_PHASES])
def phase(request: pytest.FixtureRequest) -> int:
    """The CIP-11 phase the e2e harness builds its genesis for."""
    e2e._PHASE = request.param
    return int(request.param)


def _env(chain: Chain, net: e2e.Net) -> BlockEnv:
    rnd = Round(0, chain.height + 1)
    secret = bls.secret_key_from_bytes(net.dev.validator_key.bls_secret)
    return chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                         beacon=sign_beacon(secret, chain.head.header.round),
                         presence_input=encode_presence(net.present, registry_size(chain.world())),
                         round_=rnd,
                         consumed_seeds=hand_seeds_due(chain, secret))


def _pending_job(sks: list[bytes], runners: int = 3) -> tuple[e2e.Net, bytes, int]:
    """A net with ``sks`` registered and one M = ``runners`` job pending; returns (net, job_id, cells used)."""
    net = e2e._net(sks)
    submit = net.tx(ALICE_SK, e2e._request(verification={"mode": "majority_vote", "runners": runners,
                                                         "threshold": 2}, timeout_blocks=10))
    p = net.block([submit])
    receipt = p.result.receipts[0]
    assert receipt.error_code is None, receipt
    job_id = derive_job_id(submit.tx_hash(), 0)
    assert net.job(job_id).status == JobStatus.PENDING_SELECTION
    return net, job_id, receipt.cells_used


def _advance_to_seed_block(net: e2e.Net) -> None:
    """Commit blocks until the next one consumes the pending record's seed."""
    secret = bls.secret_key_from_bytes(net.dev.validator_key.bls_secret)
    while not hand_seeds_due(net.chain, secret):
        net.block([])


def _corrupt_snapshot(world: WorldState, job_id: bytes) -> None:
    """Change one committed base weight of the stored block-S snapshot (still a well-formed row)."""
    key = dispatch.SNAPSHOT_PREFIX + job_id
    raw = world.get(key)
    assert raw is not None
    rows: Any = decode(raw)
    assert isinstance(rows, list)
    rows[0][3] = encode_u128(decode_u128(rows[0][3], "w") + 1)
    world.set(key, encode(rows))


def test_a_changed_snapshot_does_not_match_the_committed_root_and_the_block_is_invalid() -> None:
    net, job_id, _ = _pending_job(SKS[:3])
    _advance_to_seed_block(net)
    env = _env(net.chain, net)
    assert env.consumed_seeds
    world = net.chain.world()
    committed = pending.PendingSelectionV1.decode(world.get(pending.pending_by_job_key(job_id)) or b"")
    _corrupt_snapshot(world, job_id)
    assert committed.candidates_snapshot_root != b""
    # A verifier executing a block that consumes this seed over the changed snapshot rejects it (§9.2 "if they
    # differ, the block is invalid"); the honest block built over canonical state is what the header commits.
    honest = net.chain.build([], env=env, round_=Round(0, env.height), proposer=b"\x00" * 32,
                             sign=lambda d: b"\x00" * 64, signatures_checked=False)
    with pytest.raises(InvalidBlock) as info:
        execute_block(world, env, honest.block.header, [])
    assert info.value.code == "snapshot_root_mismatch"


def test_a_corrupted_snapshot_row_is_an_invalid_block_too() -> None:
    net, job_id, _ = _pending_job(SKS[:3])
    _advance_to_seed_block(net)
    env = _env(net.chain, net)
    world = net.chain.world()
    world.set(dispatch.SNAPSHOT_PREFIX + job_id, encode([[b"\x01" * 20]]))
    with pytest.raises(InvalidBlock) as info:
        build_block(world, env, [])
    assert info.value.code in ("pending_snapshot_invalid", "snapshot_root_mismatch")


def test_the_proposer_leaves_a_record_whose_snapshot_does_not_verify_pending() -> None:
    """The proposer never builds the invalid block: it does not commit the seed of a round whose records
    cannot be assigned (§9.2: a record whose seed is not committed in H simply stays pending)."""
    net, job_id, _ = _pending_job(SKS[:3])
    _advance_to_seed_block(net)
    world = net.chain.world()
    due = dispatch.due_seed_rounds(world, net.chain.height)
    assert due
    _corrupt_snapshot(world, job_id)
    assert dispatch.due_seed_rounds(world, net.chain.height) == []
    # Over the canonical state the seed is due and the block assigns the job.
    net.block([])
    assert net.job(job_id).status == JobStatus.ASSIGNED


def test_the_snapshot_write_is_charged_by_its_size() -> None:
    """The JobSubmit pays the cells of the block-S snapshot it writes: the cells used grow with the eligible
    set (same job, same M, only the number of registered eligible runners differs)."""
    _, _, small = _pending_job(SKS[:2], runners=2)
    net, big_job, big = _pending_job(SKS[:8], runners=2)
    raw = net.chain.world().get(dispatch.SNAPSHOT_PREFIX + big_job)
    assert raw is not None
    rows: Any = decode(raw)
    assert len(rows) == 8
    row_bytes = len(raw) // 8
    assert big - small >= 6 * row_bytes
    assert {private_key_to_address(sk) for sk in SKS[:8]} == {r[0] for r in rows}
