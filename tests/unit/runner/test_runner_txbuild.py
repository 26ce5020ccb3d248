"""Runner transaction builder: golden bytes, the node's decoder accepts them, and the chain itself includes
them — registration, heartbeat, commit, matching reveal, deregistration — in real blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from Crypto.Hash import keccak as ref_keccak

from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.runners.registry_state import get_runner
from cowboy_node.execution.system_state import get_basefees
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner import Health
from cowboy_protocol.types.runner_instructions import RunnerDeregister, RunnerHeartbeat
from cowboy_protocol.types.runner_json import runner_file_from_json
from cowboy_protocol.types.transaction import Transaction
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.txbuild import (
    Fees,
    TxBuildError,
    build_deregister,
    build_heartbeat,
    build_register,
    build_result_commit,
    build_result_submit,
    cells_limit_for,
    commitment_for,
    new_salt,
)
from tests.helpers import ALICE, ALICE_SK, CHAIN_ID, make_dev_genesis
from tests.unit.execution.jobs.test_jobs_e2e import Net

EXAMPLES = Path(__file__).resolve().parents[3] / "configs" / "examples"
KEY = RunnerKey.from_private_key(bytes.fromhex("11" * 32))
ADDRESS_HEX = "19e7e376e7c213b7e7e7e46cc70a5dd086daff2a"  # keccak256(pubkey(0x11…11))[12:]
FEES = Fees(max_fee_per_cycle=200_000, max_priority_fee_per_cycle=1_000, max_fee_per_cell=200_000,
            max_priority_fee_per_cell=1_000)
JOB_ID = bytes(range(32))
RESULT = b'{"v":1}'
SALT = b"\xaa" * 32
COMMITMENT_HEX = "8970fdb77f9850c4eb2163dabf3cde77397cfd38698ed4ff8b3ef41e679bb21d"

# Shared tail of every golden tx: limits and fees. 04: cycles 50,000 (0x19c350); 06/08: 200,000 (0x1a00030d40);
# 07/09: 1,000 (0x1903e8).
_FEES_HEX = "061a00030d40" "071903e8" "081a00030d40" "091903e8"
_HEAD = "ab" "00" "6d" + b"cowboy-test-1".hex()  # map(11); 0: text(13) chain id

GOLDEN_COMMIT = (
    "000000d3" + _HEAD                        # u32 body length 211
    + "0107"                                  # 1: nonce 7
    + "0254" + ADDRESS_HEX                    # 2: sender bytes(20)
    + "03a3" "001831"                         # 3: instruction map(3), 0: kind 0x31
    + "015820" + JOB_ID.hex()                 #    1: job_id bytes(32)
    + "025820" + COMMITMENT_HEX               #    2: commitment bytes(32)
    + "0419c350" "05191094"                   # 4: cycles 50,000; 5: cells 2·74 + 4096 = 4244
    + _FEES_HEX
    + "0a5841"                                # 10: signature bytes(65)
    + "bd27077c08e86fff06aba4abcdeaa3dab4faf341aa2b88fd29cfd38aac9bfbc5"
      "463b57794bf71ef9886dd31ae906d732c3aced2662997f644a4b02505760bcd000"
)
GOLDEN_REVEAL = (
    "000000de" + _HEAD                        # body length 222
    + "0108" + "0254" + ADDRESS_HEX           # nonce 8, sender
    + "03a5" "001832"                         # instruction map(5), kind 0x32
    + "015820" + JOB_ID.hex()
    + "0247" + RESULT.hex()                   # 2: result bytes(7)
    + "035820" + SALT.hex()                   # 3: salt bytes(32)
    + "0403"                                  # 4: units 3
    + "0419c350" "051910aa"                   # cells 2·85 + 4096 = 4266
    + _FEES_HEX
    + "0a5841"
    + "03eddee7003aeac418f8cc39782112bff28b214fc77fb69da3d2628b8ace6585"
      "07c60b09c8f1677f6a3258adf95544609319cccc1842a573bf7b5cb40b67821c01"
)
GOLDEN_HEARTBEAT = (
    "0000008f" + _HEAD + "0109" + "0254" + ADDRESS_HEX
    + "03a2" "001821" "01f5"                  # {0: 0x21, 1: true}
    + "0419c350" "0519100c"                   # cells 2·6 + 4096 = 4108
    + _FEES_HEX + "0a5841"
    + "353ddb8431e67afd44a15feac4291c583b13e770696128dcb0d70b4ad2b8f679"
      "4b0980661e40b1a38b6b97f35a098bb1ff0169988e330984b48e67547a96737901"
)
GOLDEN_DEREGISTER = (
    "0000008d" + _HEAD + "010a" + "0254" + ADDRESS_HEX
    + "03a1" "001824"                         # {0: 0x24}
    + "0419c350" "05191008"                   # cells 2·4 + 4096 = 4104
    + _FEES_HEX + "0a5841"
    + "589b2e3852946eaeaced5b5737be6e48ab52584c45c604d0b5856ad14fb1a17b"
      "116bc3213efd64a024a745f6aff30f46fd1f2259a0353778f2cc20338932b55f01"
)


def _ref_keccak(data: bytes) -> bytes:
    return ref_keccak.new(digest_bits=256, data=data).digest()


def test_key_address_is_derived_as_the_node_derives_it() -> None:
    pub = KEY.public_key
    assert len(pub) == 33
    import coincurve

    uncompressed = coincurve.PublicKey(pub).format(compressed=False)
    assert _ref_keccak(uncompressed[1:])[12:].hex() == ADDRESS_HEX == KEY.address.hex()


def test_commitment_is_keccak_of_domain_job_runner_length_result_salt() -> None:
    preimage = b"cowboy-result-commit-v1:" + JOB_ID + KEY.address + (7).to_bytes(4, "big") + RESULT + SALT
    assert _ref_keccak(preimage).hex() == COMMITMENT_HEX
    assert commitment_for(KEY, JOB_ID, RESULT, SALT).hex() == COMMITMENT_HEX


@pytest.mark.parametrize(("built", "golden"), [
    (lambda: build_result_commit(KEY, CHAIN_ID, job_id=JOB_ID, result=RESULT, salt=SALT, nonce=7, fees=FEES),
     GOLDEN_COMMIT),
    (lambda: build_result_submit(KEY, CHAIN_ID, job_id=JOB_ID, result=RESULT, salt=SALT, units=3, nonce=8,
                                 fees=FEES), GOLDEN_REVEAL),
    (lambda: build_heartbeat(KEY, CHAIN_ID, accepting=True, nonce=9, fees=FEES), GOLDEN_HEARTBEAT),
    (lambda: build_deregister(KEY, CHAIN_ID, nonce=10, fees=FEES), GOLDEN_DEREGISTER),
], ids=["commit", "reveal", "heartbeat", "deregister"])
def test_golden_bytes_of_runner_transactions(built: object, golden: str) -> None:
    tx = built()  # type: ignore[operator]
    raw = tx.to_bytes()
    assert raw.hex() == golden
    assert int(golden[:8], 16) == len(raw) - 4
    decoded = Transaction.from_bytes(bytes.fromhex(golden))  # the node's decoder
    decoded.verify_signature()
    assert decoded.sender == KEY.address
    assert decoded.instruction == tx.instruction
    assert decoded.to_bytes() == raw


def test_golden_instructions_decode_to_what_was_asked() -> None:
    commit = Transaction.from_bytes(bytes.fromhex(GOLDEN_COMMIT)).instruction
    reveal = Transaction.from_bytes(bytes.fromhex(GOLDEN_REVEAL)).instruction
    assert commit == JobResultCommit(JOB_ID, bytes.fromhex(COMMITMENT_HEX))
    assert reveal == JobResultSubmit(JOB_ID, RESULT, SALT, 3)
    assert Transaction.from_bytes(bytes.fromhex(GOLDEN_HEARTBEAT)).instruction == RunnerHeartbeat(True)
    assert Transaction.from_bytes(bytes.fromhex(GOLDEN_DEREGISTER)).instruction == RunnerDeregister()


def test_fees_from_basefees_follow_the_node_cli_defaults() -> None:
    assert Fees.from_basefees(100_000, 50_000) == Fees(200_000, 1_000, 100_000, 1_000)
    assert Fees.from_basefees(300, 0) == Fees(600, 600, 0, 0)  # tip capped at the max fee
    with pytest.raises(TxBuildError):
        Fees(10, 11, 10, 0)


def test_salt_and_result_rules() -> None:
    assert len(new_salt()) == 32 and new_salt() != new_salt()
    with pytest.raises(TxBuildError, match="invalid_salt"):
        build_result_commit(KEY, CHAIN_ID, job_id=JOB_ID, result=RESULT, salt=b"", nonce=0, fees=FEES)
    with pytest.raises(TxBuildError, match="invalid_salt"):
        build_result_submit(KEY, CHAIN_ID, job_id=JOB_ID, result=RESULT, salt=b"x" * 33, units=0, nonce=0, fees=FEES)
    with pytest.raises(TxBuildError, match="result_too_large"):
        build_result_submit(KEY, CHAIN_ID, job_id=JOB_ID, result=b"x" * (256 * 1024 + 1), salt=b"", units=0,
                            nonce=0, fees=FEES)
    with pytest.raises(TxBuildError, match="tx_too_large"):
        build_result_submit(KEY, CHAIN_ID, job_id=JOB_ID, result=b"x" * 2_000, salt=b"", units=0, nonce=0,
                            fees=FEES, max_tx_bytes=1_000)


def _caps() -> tuple[object, object]:
    caps, card = runner_file_from_json(json.loads((EXAMPLES / "runner-capabilities.json").read_text()),
                                       require_rate_card=True)
    return caps, card


def _chain_with_job() -> tuple[Net, Fees, bytes]:
    """A chain where KEY registered (built here), heartbeat (built here) and is the only runner of a new job."""
    net = Net(make_dev_genesis(balances={ALICE: 10**24, KEY.address: 10**21}))
    fees = Fees.from_basefees(*get_basefees(net.chain.world()))
    caps, card = _caps()
    reg = build_register(KEY, CHAIN_ID, stake=10**18, capabilities=caps, rate_card=card,  # type: ignore[arg-type]
                         nonce=0, fees=fees)
    p = net.block([reg])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    rec = get_runner(net.chain.world(), KEY.address)
    assert rec is not None and rec.stake == 10**18
    p = net.block([build_heartbeat(KEY, CHAIN_ID, accepting=True, nonce=1, fees=fees)])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    assert get_runner(net.chain.world(), KEY.address).last_heartbeat == p.block.header.height  # type: ignore[union-attr]
    net.present = frozenset({0})
    submit = net.tx(ALICE_SK, JobSubmit(parse_job_request_json(json.loads((EXAMPLES / "job-http.json").read_text()))))
    p = net.block([submit])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    job_id = derive_job_id(submit.tx_hash(), 0)
    assert net.job(job_id).committee == (KEY.address,)
    return net, fees, job_id


def test_chain_includes_built_register_heartbeat_commit_reveal_and_deregister() -> None:
    net, fees, job_id = _chain_with_job()
    salt = new_salt()
    commit = build_result_commit(KEY, CHAIN_ID, job_id=job_id, result=RESULT, salt=salt, nonce=2, fees=fees)
    p = net.block([commit])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    assert net.job(job_id).commitment_of(KEY.address) == commit.instruction.commitment  # type: ignore[union-attr]
    # The Result Verifier recomputes the commitment from the reveal and settles the job on a match.
    reveal = build_result_submit(KEY, CHAIN_ID, job_id=job_id, result=RESULT, salt=salt, units=0, nonce=3, fees=fees)
    p = net.block([reveal])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    done = net.job(job_id)
    assert (done.status, done.outcome) == (JobStatus.COMPLETED, RESULT)
    p = net.block([build_deregister(KEY, CHAIN_ID, nonce=4, fees=fees)])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    assert get_runner(net.chain.world(), KEY.address).health == Health.DEREGISTERED  # type: ignore[union-attr]


def test_chain_refuses_a_reveal_whose_salt_differs_from_the_commitment() -> None:
    net, fees, job_id = _chain_with_job()
    commit = build_result_commit(KEY, CHAIN_ID, job_id=job_id, result=RESULT, salt=b"\x01" * 32, nonce=2, fees=fees)
    net.block([commit])
    reveal = build_result_submit(KEY, CHAIN_ID, job_id=job_id, result=RESULT, salt=b"\x02" * 32, units=0, nonce=3,
                                 fees=fees)
    p = net.block([reveal])
    assert p.result.receipts[0].error_code == "reveal_mismatch"


def test_cells_limit_covers_what_a_maximal_reveal_is_charged() -> None:
    ins = JobResultSubmit(JOB_ID, b"x" * (256 * 1024), SALT, 2**64 - 1)
    body = build_result_submit(KEY, CHAIN_ID, job_id=JOB_ID, result=ins.result, salt=SALT, units=ins.units, nonce=0,
                               fees=FEES).body()
    # Intrinsic (body + 64) plus what submit_result charges (result + 64).
    assert cells_limit_for(ins) >= len(body) + 64 + len(ins.result) + 64
