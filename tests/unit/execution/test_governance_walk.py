"""A live chain walked from CIP-11 phase 0 to phase 3 by governance, jobs settling in every phase.

Producer and follower (``test_jobs_e2e.Net``: real Chain build → commit, follower verifies every block to the same
root). Three scripted runners register in phase 0; in each phase an M == 1 job is submitted, selected (v2 in
phases 0–1, v3 present-first from 2), revealed and settled; then ALICE (the system deployer) schedules the next
phase two blocks ahead and the chain crosses the activation height.
"""

from __future__ import annotations

import json

from cowboy_node.execution import governance as gov
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.system_state import get_chain_limits, get_cip11_flags
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.governance_instructions import GovernanceSetParam, GovernanceSetPhase
from cowboy_protocol.types.job_instructions import JobResultSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.params import Cip11Flags
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis, run_under_hash_seeds
from tests.unit.execution.jobs.test_jobs_e2e import EXAMPLES, RUNNER_SKS, RUNNERS, STAKE, Net, _request


def _settle_one_job(net: Net, phase: int) -> None:
    submit = net.tx(ALICE_SK, _request())
    p = net.block([submit])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    job_id = derive_job_id(submit.tx_hash(), 0)
    rec = net.job(job_id)
    assert rec.status == JobStatus.ASSIGNED and len(rec.committee) == 1
    assert (rec.mode_byte == 0xFF) == (phase < 2)  # CIP-2 v2 until present-first, v3 mode 0x00 after
    sk = RUNNER_SKS[RUNNERS.index(rec.committee[0])]
    p = net.block([net.tx(sk, JobResultSubmit(job_id, b'{"v": 1}', b"", 0))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    done = net.job(job_id)
    assert (done.status, done.reason) == (JobStatus.COMPLETED, "verified")


def walk() -> Net:
    """The walk of the test below; returns the network at its end."""
    balances = {ALICE: 10**24, **{private_key_to_address(sk): 10**21 for sk in RUNNER_SKS}}
    net = Net(make_dev_genesis(Cip11Flags.for_phase(0), balances=balances))
    caps, card = runner_file_from_json(json.loads((EXAMPLES / "runner-capabilities.json").read_text()),
                                       require_rate_card=True)
    assert card is not None
    net.block([net.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS])
    net.present = frozenset(range(len(RUNNER_SKS)))
    for phase in range(4):
        assert get_cip11_flags(net.chain.world()) == Cip11Flags.for_phase(phase)
        _settle_one_job(net, phase)
        if phase == 3:
            break
        at = net.chain.height + 4  # scheduled in at − 3, pending in at − 2, activated by at − 1
        p = net.block([net.tx(ALICE_SK, GovernanceSetPhase(phase + 1, at))])
        [ev] = p.result.receipts[0].events
        assert ev.topic == gov.TOPIC_SCHEDULED
        net.block([])
        assert get_cip11_flags(net.chain.world()).phase() == phase  # still pending
        net.block([])  # block at − 1: its SystemHooks activate the change
        assert net.chain.height == at - 1
        assert get_cip11_flags(net.chain.world()).phase() == phase + 1
        assert gov.get_pending(net.chain.world()) == []
    # Phase 3: governance may now widen the heartbeat floor (§14); jobs still settle afterwards.
    at = net.chain.height + 2
    net.block([net.tx(ALICE_SK, GovernanceSetParam("HEARTBEAT_TIMEOUT_BLOCKS", 300, at))])
    net.block([])
    assert get_chain_limits(net.chain.world()).heartbeat_timeout_blocks == 300
    _settle_one_job(net, 3)
    return net


def test_chain_walks_phase_0_to_3_by_governance_with_jobs_settling_in_every_phase() -> None:
    net = walk()
    assert net.follower.head.header.state_root == net.chain.head.header.state_root


SCRIPT = """
from tests.unit.execution.test_governance_walk import walk
net = walk()
print(net.chain.head.header.state_root.hex(), net.chain.head.hash().hex())
"""


def test_governance_walk_roots_do_not_depend_on_hash_seed() -> None:
    outs = run_under_hash_seeds(SCRIPT, timeout=300)
    assert outs[0] == outs[1] and len(outs[0].split()) == 2
