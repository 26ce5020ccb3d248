"""``[quic] workers = 2``: QUIC terminated in two real worker processes, sessions in the validator process.

A real node (in-memory chain, block producer) runs :class:`TransportService` with ``workers=2``; real runner links
(``cowboy_runner.link.Link``) connect over loopback to the one UDP port, and the kernel's ``SO_REUSEPORT`` hash
spreads them over both workers. Checked (issue 20 item 3): runners connect through both workers, their heartbeats
are answered, they are in local presence and in the block's PresenceInput, a job pushed to a runner is acked and its
result settles on chain; then one worker is killed with SIGKILL: it is restarted, exactly its runners reconnect
(the other worker's runners keep their first session — the socket group did not change) and all are present again.
Bounded by ``asyncio.wait_for``; the service's stop ends the workers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any

from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.system_state import get_account, get_basefees
from cowboy_node.node.node import Node
from cowboy_node.transport.service import TransportConfig
from cowboy_node.transport.workers.pool import WorkerPool
from cowboy_node.types.presence import decode_presence
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.transport.frames import AckStatus, JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.link import Link, LinkConfig
from cowboy_runner.txbuild import Fees, build_result_submit
from tests.helpers import ALICE_SK
from tests.integration.transport_harness import ROOMY
from tests.unit.node_harness import JOB_EXAMPLE, RUNNER_SKS, STAKE, Nonces, example_caps, make_node, produce

RESULT = b'{"price": 42}'
EXTRA = 5
"""Runners registered besides the harness's three (eight in all: both workers get some)."""
WAIT_S = 60.0


def _metric(node: Node, name: str, **labels: str) -> float:
    value = node.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def _until(predicate: Any, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _register(node: Node, nonces: Nonces) -> list[bytes]:
    """The harness runners plus EXTRA funded by ALICE, all registered; their keys."""
    extra = [(0x7100 + i).to_bytes(32, "big") for i in range(EXTRA)]
    produce(node, [nonces.tx(ALICE_SK, Transfer(private_key_to_address(sk), 10**21)) for sk in extra])
    caps, card = example_caps()
    sks = list(RUNNER_SKS) + extra
    produce(node, [nonces.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in sks])
    return sks


def _worker_of(pool: WorkerPool) -> dict[int, int]:
    """Registry index → worker slot, for the sessions the validator process holds now."""
    out: dict[int, int] = {}
    for slot in pool.slots:
        if slot.channel is None:
            continue
        for rc in slot.channel.conns.values():
            index = getattr(rc.handler, "runner_index", None)
            if index is not None:
                out[index] = slot.index
    return out


def test_two_workers_serve_runners_push_settles_and_a_killed_worker_is_restarted() -> None:
    node = make_node(phase=2, block_time_ms=200, transport_config=TransportConfig(port=0, limits=ROOMY, workers=2))
    nonces = Nonces()
    sks = _register(node, nonces)
    n = len(sks)
    chain_id = node.link.chain_id
    vset = tuple(v.ed25519_public_key for v in node.chain.genesis.validators)
    seen: dict[str, Any] = {}

    def handler(sk: bytes) -> Any:
        key = RunnerKey.from_private_key(sk)

        async def on_assignment(link: Link, a: JobAssignment) -> None:
            seen["assigned_to"] = key.address
            link.ack(a.job_id, AckStatus.accepted())
            cycle_bf, cell_bf = get_basefees(node.chain.world())
            tx = build_result_submit(key, chain_id, job_id=a.job_id, result=RESULT, salt=b"", units=0,
                                     nonce=get_account(node.chain.world(), key.address).nonce,
                                     fees=Fees.from_basefees(cycle_bf, cell_bf))
            link.send_result(a.job_id, tx.to_bytes())
        return on_assignment

    async def main() -> None:
        loop = asyncio.get_running_loop()
        service = node.transport
        assert service is not None
        await service.start()
        pool = service._server
        assert isinstance(pool, WorkerPool)
        producer = loop.create_task(node.run())
        links: dict[int, Link] = {}
        tasks: dict[int, asyncio.Task[None]] = {}

        def start_link(i: int) -> None:
            links[i] = Link(SessionKey(sks[i]), LinkConfig(host="127.0.0.1", port=service.port, chain_id=chain_id,
                                                           validator_set=vset, expected_validator=vset[0],
                                                           ping_interval_s=0.2),
                            height=lambda: node.chain.height, on_assignment=handler(sks[i]))
            tasks[i] = loop.create_task(links[i].run())

        try:
            for i in range(n):
                start_link(i)
            everyone = frozenset(range(n))
            await _until(lambda: node.api.local_presence() == everyone, "every runner present")
            # The kernel hashes each client's 4-tuple onto a worker; in the rare draw that put every runner on one
            # worker, move one runner to a fresh source port until both workers hold sessions.
            for _ in range(20):
                if len(set(_worker_of(pool).values())) == 2:
                    break
                links[0].stop()
                await asyncio.wait_for(tasks[0], 10)
                start_link(0)
                await _until(lambda: node.api.local_presence() == everyone, "runner 0 present again")
            placement = _worker_of(pool)
            assert set(placement.values()) == {0, 1}, placement
            assert sorted(pool.connections_per_worker()) != [0, n]

            # Heartbeats answered through both workers, presence in the block header.
            mark = time.time()
            await _until(lambda: all((lk.last_pong_at or 0) > mark for lk in links.values()), "a pong for all")
            start = node.chain.height
            await _until(lambda: node.chain.height > start + 1, "two blocks")
            header = node.chain.head.header
            assert header.presence_input is not None
            assert decode_presence(header.presence_input, n) == everyone

            # A job is pushed through the runner's worker, acked, and its result forwarded and settled.
            submit = nonces.tx(ALICE_SK, JobSubmit(parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))))
            node.api.submit_transaction(submit.to_bytes())
            job_id = derive_job_id(submit.tx_hash(), 0)
            await _until(lambda: (node.api.job(job_id) or {}).get("status") == JobStatus.COMPLETED.name.lower(),
                         "the job to settle")
            results = node.api.job_results(job_id)
            assert results is not None and results["outcome"]["result"] == "0x" + RESULT.hex(), results
            assert _metric(node, "cowboy_transport_events_total", kind="dispatch", label="pushed") == 1.0
            assert _metric(node, "cowboy_transport_events_total", kind="ack", label="accepted") == 1.0
            assert _metric(node, "cowboy_transport_events_total", kind="result", label="result_forwarded") == 1.0

            # SIGKILL worker 0: it is restarted, its runners (only those) reconnect, all present again.
            placement = _worker_of(pool)
            victims = {i for i, w in placement.items() if w == 0}
            others = set(placement) - victims
            assert victims and others and len(placement) == n, placement
            auth_before = {i: links[i].authentications for i in range(n)}
            old_pid = pool.pids()[0]
            assert old_pid is not None
            os.kill(old_pid, signal.SIGKILL)
            await _until(lambda: pool.slots[0].restarts == 1 and pool.pids()[0] not in (None, old_pid),
                         "worker 0 restarted")
            await _until(lambda: all(links[i].authentications > auth_before[i] for i in victims),
                         "worker 0's runners to reconnect")
            await _until(lambda: node.api.local_presence() == everyone, "every runner present after the restart")
            assert all(links[i].authentications == auth_before[i] for i in others), "a surviving worker's runner " \
                                                                                      "lost its session"
            assert _metric(node, "cowboy_transport_events_total", kind="worker", label="lost") == 1.0
            assert _metric(node, "cowboy_transport_events_total", kind="worker", label="restarted") == 1.0
            assert sum(pool.connections_per_worker()) == n
        finally:
            for lk in links.values():
                lk.stop()
            node.request_stop()
            await producer
            await asyncio.wait_for(asyncio.gather(*tasks.values(), return_exceptions=True), 10)
            pids = [s.proc for s in pool.slots]
            await service.stop()
            assert all(p is None or p.poll() is not None for p in pids), "a worker outlived the service"

    asyncio.run(asyncio.wait_for(main(), 180))
