"""CIP-11 end to end over loopback QUIC, in one process: a real node (chain, producer, transport service) and
the minimal runner link. Register → connect (Hello/HelloAck bound to the TLS channel) → heartbeats put the
runner in local presence and in the blocks' PresenceInput → JobSubmit → the assignment block commits → the
node pushes a signed JobAssignment → the runner verifies and acks Accepted → executes → sends its signed
JobResultSubmit as a JobResult frame → the node checks and forwards it to the mempool → it is included and the
job settles and pays the runner.
"""

from __future__ import annotations

import asyncio
import json

from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.system_state import get_account, get_basefees
from cowboy_node.node.node import Node
from cowboy_node.transport.service import TransportConfig
from cowboy_node.types.presence import decode_presence
from cowboy_protocol.transport.frames import AckStatus, JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import decode_job_spec, derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.link import Link, LinkConfig
from cowboy_runner.txbuild import Fees, build_result_submit
from tests.helpers import ALICE_SK
from tests.unit.node_harness import JOB_EXAMPLE, RUNNER_SKS, RUNNERS, STAKE, Nonces, example_caps, make_node, produce

RESULT = b'{"price": 42}'


def _metric(node: Node, name: str, **labels: str) -> float:
    value = node.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def _until(predicate: object, timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def test_register_connect_push_ack_execute_result_forwarded_and_settled() -> None:
    node = make_node(phase=2, block_time_ms=200, transport_config=TransportConfig(port=0))
    nonces = Nonces()
    caps, card = example_caps()
    produce(node, [nonces.tx(RUNNER_SKS[0], RunnerRegister(STAKE, caps, card))])
    runner_key = RunnerKey.from_private_key(RUNNER_SKS[0])
    chain_id = node.link.chain_id
    vset = tuple(v.ed25519_public_key for v in node.chain.genesis.validators)
    seen: dict[str, object] = {}

    async def on_assignment(link: Link, a: JobAssignment) -> None:
        seen["assignment"] = a
        link.ack(a.job_id, AckStatus.accepted())
        spec = decode_job_spec(a.job_spec)  # the runner executes exactly the bytes it was sent
        seen["url"] = getattr(spec.job_type, "url", None)
        cycle_bf, cell_bf = get_basefees(node.chain.world())
        tx = build_result_submit(runner_key, chain_id, job_id=a.job_id, result=RESULT, salt=b"", units=0,
                                 nonce=get_account(node.chain.world(), runner_key.address).nonce,
                                 fees=Fees.from_basefees(cycle_bf, cell_bf))
        seen["result_tx"] = tx.tx_hash()
        link.send_result(a.job_id, tx.to_bytes())

    async def main() -> None:
        service = node.transport
        assert service is not None
        await service.start()
        producer = asyncio.get_running_loop().create_task(node.run())
        link = Link(SessionKey(RUNNER_SKS[0]), LinkConfig(host="127.0.0.1", port=service.port, chain_id=chain_id,
                                                          validator_set=vset, expected_validator=vset[0],
                                                          ping_interval_s=0.2),
                    height=lambda: node.chain.height, on_assignment=on_assignment)
        runner_task = asyncio.get_running_loop().create_task(link.run())
        try:
            await _until(lambda: 0 in node.api.local_presence())
            start = node.chain.height
            await _until(lambda: node.chain.height > start + 1)
            header = node.chain.head.header
            assert header.presence_input is not None
            assert decode_presence(header.presence_input, 1) == frozenset({0})  # the proposer wrote it in

            before = get_account(node.chain.world(), RUNNERS[0]).balance
            submit = nonces.tx(ALICE_SK, JobSubmit(parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))))
            node.api.submit_transaction(submit.to_bytes())
            job_id = derive_job_id(submit.tx_hash(), 0)
            await _until(lambda: (node.api.job(job_id) or {}).get("status") == JobStatus.COMPLETED.name.lower())
            job = node.api.job(job_id)
            assert job is not None
            a = seen["assignment"]
            assert isinstance(a, JobAssignment) and a.job_id == job_id
            assert a.assignment_height == job["assignment_height"] and a.deadline_block == job["deadline_block"]
            assert seen["url"] == json.loads(JOB_EXAMPLE.read_text())["job_type"]["url"]
            results = node.api.job_results(job_id)
            assert results is not None and results["outcome"]["result"] == "0x" + RESULT.hex(), results
            receipt = node.api.receipt(seen["result_tx"])  # type: ignore[arg-type]
            assert receipt is not None and receipt["status"] == "success", receipt
            # The reveal is the runner's own forwarded transaction: it paid its fee and got 89% of the price
            # (min(base 1,000 + 0 units, max_price) + tip 0), docs/jobs.md.
            fee = int(receipt["fee_paid"])
            assert get_account(node.chain.world(), RUNNERS[0]).balance == before - fee + 890
            assert _metric(node, "cowboy_transport_events_total", kind="dispatch", label="pushed") == 1.0
            assert _metric(node, "cowboy_transport_events_total", kind="ack", label="accepted") == 1.0
            assert _metric(node, "cowboy_transport_events_total", kind="result", label="result_forwarded") == 1.0
            assert _metric(node, "cowboy_transport_events_total", kind="handshake", label="admitted") >= 1.0
            assert _metric(node, "cowboy_push_latency_seconds_count") == 1.0
        finally:
            link.stop()
            node.request_stop()
            await producer
            await asyncio.wait_for(asyncio.gather(runner_task, return_exceptions=True), 10)
            await service.stop()

    asyncio.run(asyncio.wait_for(main(), 90))


def test_silent_runner_is_reselected_and_gets_a_cancel_while_the_new_runner_gets_the_push() -> None:
    """§10.5/§11.2 over QUIC: the first assignee acks but never answers; at deadline_block the chain re-selects
    (excluding it), the node pushes the new assignment to the other runner and sends the old one JobCancel
    {Reselected}; the other runner's result settles the job."""
    node = make_node(phase=2, block_time_ms=200, transport_config=TransportConfig(port=0))
    nonces = Nonces()
    caps, card = example_caps()
    produce(node, [nonces.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS[:2]])
    chain_id = node.link.chain_id
    vset = tuple(v.ed25519_public_key for v in node.chain.genesis.validators)
    received: dict[int, list[bytes]] = {0: [], 1: []}
    cancelled: dict[int, list[bytes]] = {0: [], 1: []}
    silent: list[int] = []

    def handler(i: int) -> object:
        key = RunnerKey.from_private_key(RUNNER_SKS[i])

        async def on_assignment(link: Link, a: JobAssignment) -> None:
            received[i].append(a.job_id)
            link.ack(a.job_id, AckStatus.accepted())
            if not silent:
                silent.append(i)  # the first runner to get the job stays silent
                return
            cycle_bf, cell_bf = get_basefees(node.chain.world())
            tx = build_result_submit(key, chain_id, job_id=a.job_id, result=RESULT, salt=b"", units=0,
                                     nonce=get_account(node.chain.world(), key.address).nonce,
                                     fees=Fees.from_basefees(cycle_bf, cell_bf))
            link.send_result(a.job_id, tx.to_bytes())

        return on_assignment

    async def main() -> None:
        service = node.transport
        assert service is not None
        await service.start()
        producer = asyncio.get_running_loop().create_task(node.run())
        links = [Link(SessionKey(RUNNER_SKS[i]),
                      LinkConfig(host="127.0.0.1", port=service.port, chain_id=chain_id, validator_set=vset,
                                 ping_interval_s=0.2),
                      height=lambda: node.chain.height, on_assignment=handler(i),  # type: ignore[arg-type]
                      on_cancel=lambda job_id, i=i: cancelled[i].append(job_id))  # type: ignore[misc]
                 for i in range(2)]
        tasks = [asyncio.get_running_loop().create_task(link.run()) for link in links]
        try:
            await _until(lambda: node.api.local_presence() == frozenset({0, 1}))
            doc = json.loads(JOB_EXAMPLE.read_text())
            doc["timeout_blocks"] = 10  # the minimum
            submit = nonces.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))
            node.api.submit_transaction(submit.to_bytes())
            job_id = derive_job_id(submit.tx_hash(), 0)
            await _until(lambda: (node.api.job(job_id) or {}).get("status") == JobStatus.COMPLETED.name.lower())
            job = node.api.job(job_id)
            assert job is not None and job["attempt"] == 1
            [first] = silent
            other = 1 - first
            assert received[first] == [job_id] and received[other] == [job_id]
            assert cancelled[first] == [job_id] and cancelled[other] == []
            assert _metric(node, "cowboy_transport_events_total", kind="dispatch", label="cancel_reselected") == 1.0
            assert _metric(node, "cowboy_transport_events_total", kind="dispatch", label="pushed") == 2.0
        finally:
            for link in links:
                link.stop()
            node.request_stop()
            await producer
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
            await service.stop()

    asyncio.run(asyncio.wait_for(main(), 90))
