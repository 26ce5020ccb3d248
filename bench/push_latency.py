"""Push latency benchmark (prints JSON): CIP-11 push versus the poll fallback, measured in the same run.

One process runs a real node (in-memory chain, blocks every ``--block-ms``), its TransportService on loopback
QUIC, the RPC server on loopback HTTP, and ``--runners`` registered runners. The run has two segments over the
same node and the same runners, each submitting ``--jobs`` HTTP example jobs (M = 1) through the RPC path
(``node.api.submit_transaction``) at random phases of the block interval (seeded):

* ``push`` — every runner holds a session through :class:`cowboy_runner.link.Link` (present-first, phase 2).
  Per job: (a) RPC accepted → the runner's ``on_assignment`` callback holds the verified JobAssignment;
  (b) assignment block committed (the producer's ``on_block_committed`` call) → that same callback.
* ``poll`` — the baseline: the Links are stopped (Goodbye, presence dropped), and the same runners, now with no
  session, poll ``GET /runner/{address}/jobs`` every ``--poll-s`` seconds over real HTTP, each from a random
  phase. Per job: RPC accepted → the first poll response that lists it (and commit → that response).

In both segments the assigned runner answers with its own signed JobResultSubmit (over the session as a
JobResult frame, or submitted directly when polling) so the jobs settle and no runner fills its concurrency.

With ``--validators N`` (N > 1) a third segment runs in the same invocation: ``push_network`` — a real
N-validator network of ``cowboy-node run`` processes on loopback (``cowboy-node testnet`` homes, the e2e harness
:class:`tests.e2e.netproc.Testnet`), ``--runners`` fresh runners registered through its RPC, each holding a
:class:`~cowboy_runner.link.Link` to every validator of its ``Sub(R)`` (CIP-11 §5.1; k = 3 at N = 4). Jobs are
POSTed to a random validator's ``/submit``; per job: RPC accepted → the first Link of the assigned runner whose
``on_assignment`` holds the verified assignment (the k-fold push, §10.1: whichever subset validator is first).
The runner acks every copy and sends its result once. ``push_network.deliveries_per_job`` counts the copies.

Goals (issue 5): push p50 (a) ≤ block time + 100 ms; poll p50 / push p50 ≥ 3.
The machine is shared (2 cores, other work running): the ratio is the figure to compare across runs.

Usage: python bench/push_latency.py [--block-ms 1000] [--runners 4] [--jobs 30] [--poll-s 2] [--seed 1]
                                    [--validators 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from bench.bench_harness import (
    CAPS_EXAMPLE,
    CELLS_LIMIT,
    CHAIN_ID,
    CYCLES_LIMIT,
    JOB_EXAMPLE,
    STAKE,
    SUBMITTER_SK,
    Nonces,
    make_bench_node,
    quiet_logs,
    register_runners,
    runner_keys,
    summary_ms,
)
from cowboy_node.execution.system_state import get_account, get_basefees
from cowboy_node.node.node import Node
from cowboy_node.rpc.server import start_rpc_server
from cowboy_node.transport.service import TransportService
from cowboy_protocol.crypto.secp256k1 import private_key_to_address, private_key_to_public_key
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.transport.frames import AckStatus, JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.transport.subset import subset
from cowboy_protocol.types.instructions import Instruction, Transfer
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from cowboy_protocol.types.transaction import Transaction
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.link import Link, LinkConfig
from cowboy_runner.txbuild import Fees, build_result_submit
from tests.e2e.netproc import Testnet

RESULT = b'{"price": 42}'


class TimedTransport(TransportService):
    """The real service; additionally notes when each job's assignment block was committed (monotonic s)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.committed_at: dict[bytes, float] = {}

    def on_block_committed(self, jobs_assigned: Iterable[bytes], jobs_finished: Iterable[bytes]) -> None:
        """Record the commit time of the block's assignments, then push as usual."""
        assigned = list(jobs_assigned)
        now = time.monotonic()
        for job_id in assigned:
            self.committed_at.setdefault(job_id, now)
        super().on_block_committed(assigned, jobs_finished)


class Results:
    """Each runner's own result transactions, with its own nonce sequence (registration used nonce 0)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.nonce: dict[bytes, int] = {}
        self.sent = 0

    def tx_bytes(self, sk: bytes, job_id: bytes) -> bytes:
        """A signed JobResultSubmit for ``job_id`` (salt empty: nothing was committed)."""
        addr = private_key_to_address(sk)
        world = self.node.chain.world()
        nonce = max(self.nonce.get(addr, 0), get_account(world, addr).nonce)
        self.nonce[addr] = nonce + 1
        cycle_bf, cell_bf = get_basefees(world)
        tx = build_result_submit(RunnerKey.from_private_key(sk), CHAIN_ID, job_id=job_id, result=RESULT, salt=b"",
                                 units=0, nonce=nonce, fees=Fees.from_basefees(cycle_bf, cell_bf))
        self.sent += 1
        return tx.to_bytes()


async def _until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def submit_jobs(node: Node, nonces: Nonces, n: int, block_s: float, rng: random.Random,
                      accepted: dict[bytes, float]) -> list[bytes]:
    """Submit ``n`` example jobs, one every U(0.6, 1.6) block times (random phase); note RPC-accepted times."""
    request = parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))
    ids = []
    for _ in range(n):
        await asyncio.sleep(rng.uniform(0.6, 1.6) * block_s)
        tx = nonces.tx(SUBMITTER_SK, JobSubmit(request))
        node.api.submit_transaction(tx.to_bytes())
        accepted[derive_job_id(tx.tx_hash(), 0)] = time.monotonic()
        ids.append(derive_job_id(tx.tx_hash(), 0))
    return ids


async def push_segment(node: Node, service: TimedTransport, sks: Sequence[bytes], nonces: Nonces,
                       results: Results, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """Runners on Links; per job: accepted → held, commit → held."""
    vset = tuple(v.ed25519_public_key for v in node.chain.genesis.validators)
    held: dict[bytes, float] = {}
    by_link: dict[int, bytes] = {}

    async def on_assignment(link: Link, a: JobAssignment) -> None:
        held.setdefault(a.job_id, time.monotonic())  # the Link calls back only after verifying the assignment
        link.ack(a.job_id, AckStatus.accepted())
        link.send_result(a.job_id, results.tx_bytes(by_link[id(link)], a.job_id))

    ping_s = args.block_ms / 1000
    links = []
    for sk in sks:
        cfg = LinkConfig(host="127.0.0.1", port=service.port, chain_id=CHAIN_ID, validator_set=vset,
                         expected_validator=vset[0], ping_interval_s=ping_s)
        link = Link(SessionKey(sk), cfg, height=lambda: node.chain.height, on_assignment=on_assignment,
                    rng=random.Random(rng.random()))
        by_link[id(link)] = sk
        links.append(link)
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(link.run()) for link in links]
    try:
        await _until(lambda: len(node.api.local_presence()) == len(sks), 60, "every runner present")
        start = node.chain.height
        await _until(lambda: node.chain.height >= start + 1, 60, "a block with every runner present")
        accepted: dict[bytes, float] = {}
        ids = await submit_jobs(node, nonces, args.jobs, args.block_ms / 1000, rng, accepted)
        await _until(lambda: all(j in held for j in ids), 30 + 5 * args.block_ms / 1000, "every push")
    finally:
        for link in links:
            link.stop()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 15)
    return {"accepted_to_held": summary_ms([held[j] - accepted[j] for j in ids]),
            "commit_to_held": summary_ms([held[j] - service.committed_at[j] for j in ids]), "job_ids": ids}


async def poll_segment(node: Node, service: TimedTransport, url: str, sks: Sequence[bytes], nonces: Nonces,
                       results: Results, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """The same runners without sessions, polling over HTTP; per job: accepted → seen, commit → seen."""
    seen: dict[bytes, float] = {}
    polls = 0
    stop = asyncio.Event()

    async def poller(session: aiohttp.ClientSession, sk: bytes, phase: float) -> None:
        nonlocal polls
        addr = "0x" + private_key_to_address(sk).hex()
        await asyncio.sleep(phase)
        next_at = time.monotonic()
        while not stop.is_set():
            async with session.get(f"{url}/runner/{addr}/jobs") as resp:
                resp.raise_for_status()
                doc = await resp.json()
            now = time.monotonic()
            polls += 1
            for job in doc["jobs"]:
                job_id = bytes.fromhex(job["job_id"][2:])
                if job_id not in seen:
                    seen[job_id] = now
                    node.api.submit_transaction(results.tx_bytes(sk, job_id))
            next_at += args.poll_s
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    await _until(lambda: not node.api.local_presence(), 60, "presence to empty after the Links stopped")
    start = node.chain.height
    await _until(lambda: node.chain.height >= start + 1, 60, "a block without presence")
    async with aiohttp.ClientSession() as http:
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(poller(http, sk, rng.uniform(0, args.poll_s))) for sk in sks]
        try:
            accepted: dict[bytes, float] = {}
            ids = await submit_jobs(node, nonces, args.jobs, args.block_ms / 1000, rng, accepted)
            await _until(lambda: all(j in seen for j in ids) or any(t.done() for t in tasks),
                         30 + 5 * args.block_ms / 1000 + 2 * args.poll_s, "every poll")
        finally:
            stop.set()
            done = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 15)
        errors = [repr(e) for e in done if isinstance(e, BaseException)]
        if errors:
            raise RuntimeError(f"poller failed: {errors[0]}")
    return {"accepted_to_seen": summary_ms([seen[j] - accepted[j] for j in ids]),
            "commit_to_seen": summary_ms([seen[j] - service.committed_at[j] for j in ids]), "polls": polls,
            "job_ids": ids}


def _signed(chain_id: str, sk: bytes, nonce: int, ins: Instruction) -> Transaction:
    """A transaction with the harness's generous limits and fees (as :meth:`Nonces.tx`) on ``chain_id``."""
    return Transaction(chain_id=chain_id, nonce=nonce, sender=private_key_to_address(sk), instruction=ins,
                       cycles_limit=CYCLES_LIMIT, cells_limit=CELLS_LIMIT, max_fee_per_cycle=200_000,
                       max_priority_fee_per_cycle=1_000, max_fee_per_cell=200_000,
                       max_priority_fee_per_cell=1_000).signed(sk)


async def _post(http: aiohttp.ClientSession, url: str, tx: Transaction) -> None:
    async with http.post(f"{url}/submit", data=tx.to_bytes(),
                         headers={"Content-Type": "application/octet-stream"}) as resp:
        body = await resp.text()
        if resp.status != 200:
            raise RuntimeError(f"{url}/submit refused a transaction: {resp.status} {body}")


async def _included(http: aiohttp.ClientSession, url: str, txs: Sequence[Transaction], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for tx in txs:
        while True:
            async with http.get(f"{url}/tx/0x{tx.tx_hash().hex()}/receipt") as resp:
                if resp.status == 200:
                    doc = await resp.json()
                    if doc.get("status") != "success":
                        raise RuntimeError(f"setup transaction failed: {doc}")
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("setup transactions were not included")
            await asyncio.sleep(0.2)


async def network_segment(args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """``--validators`` real validator processes; fresh runners on Links to their Sub(R); accepted → held."""
    tmp = Path(tempfile.mkdtemp(prefix="push-latency-net-"))
    net = Testnet.create(tmp, n=args.validators, block_time_ms=args.block_ms, proxied=False)
    links: list[Link] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        net.start()
        net.wait_heights(2, 60)
        status = net.get(0, "/status")[1]
        chain_id = str(status["chain_id"])
        fees = Fees.from_basefees(int(status["basefee"]["cycle"]), int(status["basefee"]["cell"]))
        vset = tuple(bytes.fromhex(v.public_key[2:]) for v in net.validators)
        quic = {}
        for v in net.validators:
            host, port = tomllib.loads((v.home / "config.toml").read_text())["quic"]["addr"].rsplit(":", 1)
            quic[bytes.fromhex(v.public_key[2:])] = (host, int(port))
        urls = [v.rpc_url for v in net.validators]
        faucet_sk, faucet = load_account_private_key(net.out / "faucet.key")
        sks = runner_keys(args.runners, base=0x7000)
        caps, card = runner_file_from_json(json.loads(CAPS_EXAMPLE.read_text()), require_rate_card=True)
        if card is None:
            raise ValueError(f"{CAPS_EXAMPLE} has no rate card")
        head = {"height": 0}
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{urls[0]}/account/0x{faucet.hex()}") as resp:
                faucet_nonce = int((await resp.json())["next_pending_nonce"])
            funds = [_signed(chain_id, faucet_sk, faucet_nonce + i,
                             Transfer(private_key_to_address(sk), 10**21)) for i, sk in enumerate(sks)]
            faucet_nonce += len(sks)
            for tx in funds:
                await _post(http, urls[0], tx)
            await _included(http, urls[0], funds, 120)
            regs = [_signed(chain_id, sk, 0, RunnerRegister(STAKE, caps, card)) for sk in sks]
            for tx in regs:
                await _post(http, urls[0], tx)
            await _included(http, urls[0], regs, 120)

            held: dict[bytes, float] = {}
            copies: dict[bytes, int] = {}
            result_nonce = {sk: 1 for sk in sks}  # nonce 0 was the registration
            by_link: dict[int, bytes] = {}

            async def on_assignment(link: Link, a: JobAssignment) -> None:
                held.setdefault(a.job_id, time.monotonic())  # the Link calls back only after verifying it
                copies[a.job_id] = copies.get(a.job_id, 0) + 1
                link.ack(a.job_id, AckStatus.accepted())
                if copies[a.job_id] == 1:  # the k-fold push delivers up to k copies; one result is enough
                    sk = by_link[id(link)]
                    tx = build_result_submit(RunnerKey.from_private_key(sk), chain_id, job_id=a.job_id,
                                             result=RESULT, salt=b"", units=0, nonce=result_nonce[sk],
                                             fees=fees)
                    result_nonce[sk] += 1
                    link.send_result(a.job_id, tx.to_bytes())

            async def follow_head() -> None:
                while True:
                    try:
                        async with http.get(f"{urls[0]}/height") as resp:
                            head["height"] = int((await resp.json())["height"])
                    except (aiohttp.ClientError, ValueError, KeyError):
                        pass
                    await asyncio.sleep(0.2)

            loop = asyncio.get_running_loop()
            tasks.append(loop.create_task(follow_head()))
            await _until(lambda: head["height"] > 0, 10, "the head height")
            for sk in sks:
                for member in subset(private_key_to_public_key(sk, compressed=True), vset):
                    host, port = quic[member]
                    cfg = LinkConfig(host=host, port=port, chain_id=chain_id, validator_set=vset,
                                     expected_validator=member, ping_interval_s=args.block_ms / 1000)
                    link = Link(SessionKey(sk), cfg, height=lambda: head["height"], on_assignment=on_assignment,
                                rng=random.Random(rng.random()))
                    by_link[id(link)] = sk
                    links.append(link)
            tasks.extend(loop.create_task(link.run()) for link in links)
            await _until(lambda: all(link.authenticated.is_set() for link in links), 60, "every session")
            # Presence gossip needs a committed block per announcement; give every proposer a few blocks.
            start = head["height"]
            await _until(lambda: head["height"] >= start + 2 * args.validators, 120, "presence to spread")

            request = parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))
            accepted: dict[bytes, float] = {}
            ids: list[bytes] = []
            for _ in range(args.jobs):
                await asyncio.sleep(rng.uniform(0.6, 1.6) * args.block_ms / 1000)
                tx = _signed(chain_id, faucet_sk, faucet_nonce, JobSubmit(request))
                faucet_nonce += 1
                await _post(http, rng.choice(urls), tx)
                job_id = derive_job_id(tx.tx_hash(), 0)
                accepted[job_id] = time.monotonic()
                ids.append(job_id)
            await _until(lambda: all(j in held for j in ids), 60 + 10 * args.block_ms / 1000, "every push")
            await asyncio.sleep(3 * args.block_ms / 1000)  # let the last results land
            completed = 0
            for j in ids:
                async with http.get(f"{urls[0]}/job/0x{j.hex()}") as resp:
                    if resp.status == 200 and (await resp.json()).get("status") == "completed":
                        completed += 1
    finally:
        for link in links:
            link.stop()
        for t in tasks[:1]:
            t.cancel()
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 15)
        net.close()
        shutil.rmtree(tmp, ignore_errors=True)
    per_job = [copies[j] for j in ids]
    return {"accepted_to_held": summary_ms([held[j] - accepted[j] for j in ids]),
            "validators": args.validators, "sessions": len(links),
            "deliveries_per_job": {"mean": round(sum(per_job) / len(per_job), 2), "min": min(per_job),
                                   "max": max(per_job)},
            "jobs_completed": {"completed": completed, "submitted": len(ids)}}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both segments on one node; the JSON document."""
    rng = random.Random(args.seed)
    sks = runner_keys(args.runners)
    node = make_bench_node(sks, block_time_ms=args.block_ms, phase=2, transport=TimedTransport)
    nonces = Nonces()
    await register_runners(node, sks, nonces)
    service = node.transport
    assert isinstance(service, TimedTransport)
    await service.start()
    http = await start_rpc_server(node.api, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{http.addresses[0][1]}"
    results = Results(node)
    producer = asyncio.get_running_loop().create_task(node.run())
    t0 = time.monotonic()
    try:
        push = await push_segment(node, service, sks, nonces, results, args, rng)
        poll = await poll_segment(node, service, url, sks, nonces, results, args, rng)
        # Let the last results land so the settled count is meaningful.
        await asyncio.sleep(3 * args.block_ms / 1000)
    finally:
        node.request_stop()
        await producer
        await http.cleanup()
        await service.stop()
    network = await network_segment(args, rng) if args.validators > 1 else None
    ids = push.pop("job_ids") + poll.pop("job_ids")
    completed = sum(1 for j in ids if (node.api.job(j) or {}).get("status") == "completed")
    forwarded = int(node.metrics.registry.get_sample_value("cowboy_transport_events_total",
                                                         {"kind": "result", "label": "result_forwarded"}) or 0)
    push_p50 = push["accepted_to_held"]["p50_ms"]
    poll_p50 = poll["accepted_to_seen"]["p50_ms"]
    ratio = round(poll_p50 / push_p50, 2) if push_p50 and poll_p50 else None
    return {
        "benchmark": "push_latency",
        "params": {"block_ms": args.block_ms, "runners": args.runners, "jobs_per_path": args.jobs,
                   "poll_s": args.poll_s, "seed": args.seed, "committee_m": 1, "cip11_phase": 2,
                   "validators": args.validators},
        "push": push,
        "poll_baseline": poll,
        "push_network": network,
        "goals": {
            "push_p50_le_block_plus_100ms": {"limit_ms": args.block_ms + 100, "value_ms": push_p50,
                                             "met": push_p50 is not None and push_p50 <= args.block_ms + 100},
            "push_vs_poll_p50_ge_3x": {"ratio": ratio, "met": ratio is not None and ratio >= 3.0},
            **({} if network is None else {"network_push_p50_le_block_plus_100ms": {
                "limit_ms": args.block_ms + 100, "value_ms": network["accepted_to_held"]["p50_ms"],
                "met": (network["accepted_to_held"]["p50_ms"] or 1e18) <= args.block_ms + 100}}),
        },
        "jobs_completed": {"completed": completed, "submitted": len(ids)},
        "results_forwarded_over_sessions": forwarded,
        "results_sent": results.sent,
        "wall_s": round(time.monotonic() - t0, 1),
        "note": "one process (node, transport, runners, pollers) on a shared 2-core machine; compare ratios; "
                "push_network adds N validator processes on the same machine",
    }


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print one JSON object."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--block-ms", type=int, default=1000)
    parser.add_argument("--runners", type=int, default=4, help="K runners (the same ones in both segments)")
    parser.add_argument("--jobs", type=int, default=30, help="N jobs per path")
    parser.add_argument("--poll-s", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--validators", type=int, default=1,
                        help="N > 1 adds the push_network segment on N real validator processes")
    args = parser.parse_args(argv)
    quiet_logs()
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
