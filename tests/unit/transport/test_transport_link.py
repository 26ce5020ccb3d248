"""The node's side of the transport interface: §6.2 admission from the registry at the head, and the assignment
the transport pushes (read from the committed job record)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_public_key
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.subset import EpochSnapshot, subset
from cowboy_protocol.types.governance_instructions import GovernanceSetParam
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import canonical_job_spec, decode_job_spec, derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerDeregister, RunnerRegister
from cowboy_runner.sessions_plan import plan_sessions, snapshot_from_status
from tests.helpers import ALICE_SK
from tests.unit.node_harness import JOB_EXAMPLE, RUNNER_SKS, RUNNERS, STAKE, Nonces, example_caps, make_node, produce


def _pub(sk: bytes) -> PubKey:
    return PubKey.runner(private_key_to_public_key(sk, compressed=True))


def test_admission_follows_the_registry_at_the_head() -> None:
    node = make_node(phase=2)
    n = Nonces()
    caps, card = example_caps()
    assert node.link.admission(_pub(RUNNER_SKS[0])).reason is GoodbyeReason.NOT_REGISTERED
    produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS[:2]])
    ok = node.link.admission(_pub(RUNNER_SKS[1]))
    assert (ok.ok, ok.runner_index, ok.address) == (True, 1, RUNNERS[1])  # index = registration order
    produce(node, [n.tx(RUNNER_SKS[0], RunnerDeregister())])
    gone = node.link.admission(_pub(RUNNER_SKS[0]))
    assert (gone.ok, gone.reason) == (False, GoodbyeReason.DEREGISTERED)
    assert node.link.admission(_pub(RUNNER_SKS[2])).reason is GoodbyeReason.NOT_REGISTERED


def test_admission_refuses_a_runner_whose_subset_does_not_hold_this_validator() -> None:
    # §5.2 validator-side DoS gate: with 20 validators in the snapshot (k = 6) a registered runner is admitted
    # only by the validators in its Sub(R).
    node = make_node(phase=2)
    n = Nonces()
    caps, card = example_caps()
    produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS[:4]])
    me = node.chain.genesis.validators[0]
    others = [dataclasses.replace(me, ed25519_public_key=bytes([i]) * 32) for i in range(1, 20)]
    snapshot = [v.ed25519_public_key for v in (me, *others)]
    node.link._genesis_snapshot = EpochSnapshot(0, tuple(snapshot))  # a 20-validator snapshot without dealing 20 shares
    verdicts = {}
    for sk in RUNNER_SKS[:4]:
        key = private_key_to_public_key(sk, compressed=True)
        verdicts[sk] = (me.ed25519_public_key in subset(key, snapshot), node.link.admission(_pub(sk)))
    for inside, adm in verdicts.values():
        assert adm.ok is inside
        assert adm.reason is (None if inside else GoodbyeReason.NOT_IN_SUBSET)
    assert {inside for inside, _ in verdicts.values()} == {True, False}  # the fixture exercises both branches


def test_validator_key_is_not_a_runner_identity() -> None:
    node = make_node(phase=2)
    assert node.link.admission(PubKey.validator(bytes(32))).reason is GoodbyeReason.NOT_REGISTERED


def test_assignment_for_reads_the_committed_job() -> None:
    node = make_node(phase=2)
    n = Nonces()
    caps, card = example_caps()
    produce(node, [n.tx(RUNNER_SKS[0], RunnerRegister(STAKE, caps, card))])
    submit = n.tx(ALICE_SK, JobSubmit(parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))))
    produce(node, [submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    info = node.link.assignment_for(job_id)
    assert info is not None and info.live and info.committee == (0,)  # RUNNERS[0], registry index 0
    job = node.api.job(job_id)
    assert job is not None
    assert (info.assignment_height, info.deadline_block) == (job["assignment_height"], job["deadline_block"])
    # The pushed bytes are the canonical spec the chain hashed (the runner recomputes job_spec_hash from them).
    assert "0x" + keccak256(info.job_spec).hex() == job["job_spec_hash"]
    assert canonical_job_spec(decode_job_spec(info.job_spec)) == info.job_spec
    assert node.link.assignment_for(b"\x00" * 32) is None


def test_status_publishes_the_validator_set_snapshot_runners_compute_subsets_from() -> None:
    node = make_node(phase=2)
    vs = node.api.status()["validator_set"]
    keys = [v.ed25519_public_key for v in node.chain.genesis.validators]
    assert vs == {"subset_epoch": 0, "validator_set_hash": "0x" + keccak256(b"".join(keys)).hex(),
                  "validators": [{"name": v.name, "ed25519_public_key": "0x" + v.ed25519_public_key.hex()}
                                 for v in node.chain.genesis.validators]}


# -- §5.3 reconfiguration: epoch-paired admission against two snapshots -------------------------------------------
def _schedule_overlap(node: Any, n: Nonces, blocks: int) -> None:
    """Governance sets OVERLAP_BLOCKS = ``blocks`` (active two blocks later) and the chain reaches it."""
    produce(node, [n.tx(ALICE_SK, GovernanceSetParam("OVERLAP_BLOCKS", blocks, node.chain.height + 2))])
    produce(node, [])
    assert blocks == node.link.cip11_params().OVERLAP_BLOCKS


def test_admission_during_a_reconfiguration_overlap_is_epoch_paired() -> None:
    # ValidatorSetActivated(1, h): E = the genesis set {me}; E+1 = me and 19 others (k = 6), where me is in
    # Sub_1 of runner 2 only. OVERLAP_BLOCKS = 3 by governance.
    node = make_node(phase=2)
    n = Nonces()
    caps, card = example_caps()
    produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS])
    _schedule_overlap(node, n, 3)
    me = node.chain.genesis.validators[0].ed25519_public_key
    old = node.link.genesis_snapshot()
    new = EpochSnapshot(1, (me, *(bytes([i]) * 32 for i in range(1, 20))))
    assert [me in new.sub(_pub(sk).key) for sk in RUNNER_SKS] == [False, False, True]
    h = node.chain.height + 2
    node.link.activate_validator_set(new, h)
    e, e1 = (0, old.set_hash), (1, new.set_hash)

    def verdict(sk: bytes, pair: tuple[int, bytes]) -> GoodbyeReason | None:
        adm = node.link.admission(_pub(sk), *pair)
        return None if adm.ok else adm.reason

    # H < h: only epoch E.
    assert node.chain.height == h - 2
    assert [verdict(sk, e) for sk in RUNNER_SKS] == [None, None, None]
    assert verdict(RUNNER_SKS[2], e1) is GoodbyeReason.WRONG_VALIDATOR_SET
    assert node.link.admission(_pub(RUNNER_SKS[0])).ok  # no pair: the newest valid snapshot (E)
    produce(node, [])
    produce(node, [])
    # h ≤ H < h + OVERLAP: either epoch, each with its own membership; never mixed.
    for _ in range(3):
        assert h <= node.chain.height < h + 3
        assert [verdict(sk, e) for sk in RUNNER_SKS] == [None, None, None]
        assert [verdict(sk, e1) for sk in RUNNER_SKS] == [GoodbyeReason.NOT_IN_SUBSET] * 2 + [None]
        assert verdict(RUNNER_SKS[2], (0, new.set_hash)) is GoodbyeReason.WRONG_VALIDATOR_SET
        assert verdict(RUNNER_SKS[2], (1, old.set_hash)) is GoodbyeReason.WRONG_VALIDATOR_SET
        produce(node, [])
    # H ≥ h + OVERLAP: only E+1; "a Hello offering validator_set_hash(E) past the cutoff is rejected".
    assert node.chain.height == h + 3
    assert [verdict(sk, e) for sk in RUNNER_SKS] == [GoodbyeReason.WRONG_VALIDATOR_SET] * 3
    assert [verdict(sk, e1) for sk in RUNNER_SKS] == [GoodbyeReason.NOT_IN_SUBSET] * 2 + [None]
    assert node.link.admission(_pub(RUNNER_SKS[0])).reason is GoodbyeReason.NOT_IN_SUBSET


def test_status_publishes_the_reconfiguration_the_runner_plans_from() -> None:
    node = make_node(phase=2)
    n = Nonces()
    assert "reconfiguration" not in node.api.status()
    me = node.chain.genesis.validators[0].ed25519_public_key
    new = EpochSnapshot(1, (me, bytes([1]) * 32))
    h = node.chain.height + 2
    node.link.activate_validator_set(new, h)
    _schedule_overlap(node, n, 5)
    status = json.loads(json.dumps(node.api.status()))  # as the runner receives it
    rc = status["reconfiguration"]
    assert (rc["activation_height"], rc["overlap_blocks"], rc["cutoff_height"]) == (h, 5, h + 5)
    assert status["validator_set"]["subset_epoch"] == 1  # the newest snapshot valid at the head (H = h)
    snap = snapshot_from_status(status)
    runner = _pub(RUNNER_SKS[0]).key
    plan = {H: [(t.validator, t.snapshot.epoch if t.snapshot else None)
                for t in plan_sessions(runner, snap, ("rpc", 1), {bytes([1]) * 32: ("other", 2)}, height=H)[0]]
            for H in (h - 1, h, h + 5)}
    assert plan[h - 1] == [(me, 0)]
    assert plan[h] == plan[h + 5] == [(me, 1), (bytes([1]) * 32, 1)]  # me in both: reached under E+1
