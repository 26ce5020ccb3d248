"""CIP-11 §9.2 pending-selection rules that had no test (docs/conformance.md C11-§9.2-15, C11-§9.2-17).

* "verifiers cannot — and MUST NOT — treat an unprocessed due record as a validity fault": a block whose
  proposer commits no seed for a due record is valid for a follower, and the record stays pending.
* On assignment the same state transition MUST "(4) delete both pending_by_job_key and
  pending_due_round_index_key atomically".
"""

from __future__ import annotations

import pytest

from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.crypto import bls
from cowboy_node.execution.jobs import pending
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.types.block import Round
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.jobspec import derive_job_id
from tests.helpers import ALICE_SK, FEE_RECIPIENT, hand_seeds_due
from tests.unit.execution.jobs import test_jobs_e2e as e2e

M3 = {"mode": "majority_vote", "runners": 3, "threshold": 2}


@pytest.fixture(autouse=True)
def phase2() -> None:
    """CIP-11 selection on (phase 2): M > 1 jobs wait for their seed round (the pending path)."""
    e2e._PHASE = 2


def _submit_m3(net: e2e.Net) -> tuple[bytes, pending.PendingSelectionV1]:
    submit = net.tx(ALICE_SK, e2e._request(verification=M3, timeout_blocks=10))
    p = net.block([submit])
    assert p.result.receipts[0].error_code is None
    job_id = derive_job_id(submit.tx_hash(), 0)
    raw = net.chain.world().get(pending.pending_by_job_key(job_id))
    assert raw is not None
    return job_id, pending.PendingSelectionV1.decode(raw)


def test_a_block_that_leaves_a_due_record_pending_is_valid() -> None:
    net = e2e._net()
    job_id, record = _submit_m3(net)
    secret = bls.secret_key_from_bytes(net.dev.validator_key.bls_secret)
    while not hand_seeds_due(net.chain, secret):  # the seed round is revealed: the record is due from now on
        net.block([])
    chain, key = net.chain, net.dev.validator_key
    rnd = Round(0, chain.height + 1)
    env = chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                        beacon=sign_beacon(bls.secret_key_from_bytes(key.bls_secret), chain.head.header.round),
                        presence_input=encode_presence(net.present, registry_size(chain.world())), round_=rnd,
                        consumed_seeds=())  # the proposer "has not observed the seed": it commits none
    p = chain.build([], env=env, round_=rnd, proposer=ed25519.public_key_from_seed(key.ed25519_seed),
                    sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=False)
    chain.commit(p)
    net.follower.commit(verify_and_prepare(net.follower, p.block))  # valid for a verifier
    assert net.follower.head.header.state_root == chain.head.header.state_root
    assert net.job(job_id).status == JobStatus.PENDING_SELECTION  # still pending, under the same keys
    assert chain.world().get(pending.pending_by_job_key(job_id)) == record.encode()
    assert chain.world().get(record.due_key()) is not None


def test_assignment_deletes_both_pending_keys_in_the_same_block() -> None:
    net = e2e._net()
    job_id, record = _submit_m3(net)
    while True:
        p = net.block([])
        if net.job(job_id).status != JobStatus.PENDING_SELECTION:
            break
        assert net.chain.world().get(pending.pending_by_job_key(job_id)) is not None
        assert net.chain.world().get(record.due_key()) is not None
    assert net.job(job_id).status == JobStatus.ASSIGNED and p.block.header.consumed_seeds
    world = net.chain.world()
    assert world.get(pending.pending_by_job_key(job_id)) is None
    assert world.get(record.due_key()) is None
    # Both deletions are writes of the assigning block itself.
    deleted = {k for k, v in p.result.state_ops if v is None}
    assert any(k.endswith(pending.pending_by_job_key(job_id)) for k in deleted)
    assert any(k.endswith(record.due_key()) for k in deleted)
