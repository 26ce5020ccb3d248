"""The node's TransportService driven without sockets: a real in-memory node (the NodeLink, producing blocks that
call ``on_block_committed``) and runner sessions wired to the service's connection handlers through an in-memory
stand-in for the QUIC connection.

- §10.3: a JobResult of a multi-runner job that arrives before its reveal window opens is held (never forwarded
  early) and forwarded once the block that opens the window is committed; holding is bounded, and a frame beyond
  the bound is refused with ``Goodbye{ProtocolError}``.
- §5.3: across ValidatorSetActivated(1, h), sessions under either epoch are admitted and count for presence during
  the OVERLAP_BLOCKS window; at ``h + OVERLAP_BLOCKS`` an epoch-E session gets ``Goodbye{OverlapExpired}``.
- §13 governed constants: PRESENCE_TIMEOUT_BLOCKS, ACK_TIMEOUT_BLOCKS and OVERLAP_BLOCKS changed by governance
  take effect in the transport from the block they activate at.
- §6.2/§7.4: a runner whose registration is deregistered at a committed block loses its local presence and its
  session (``Goodbye{Deregistered}``) right after that block; a paused runner (on-chain ``accepting = false``)
  stays connected but leaves local presence until the registry says healthy again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
import time
from typing import Any

from cowboy_node.execution.jobs.job_record import JobRecord, JobStatus, job_key
from cowboy_node.execution.jobs.results import TOPIC_REVEALED
from cowboy_node.node.node import Node
from cowboy_node.transport.reveal_hold import RevealHold
from cowboy_node.transport.service import TransportConfig, TransportService, _RunnerConnection
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.quic.stream import GoodbyeSigner
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import AckStatus, Frame, Goodbye
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import AssignmentReceived, Authenticated, Closed, Event
from cowboy_protocol.transport.subset import EpochSnapshot
from cowboy_protocol.types.governance_instructions import GovernanceSetParam
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerDeregister, RunnerHeartbeat, RunnerRegister
from tests.helpers import ALICE_SK
from tests.unit.node_harness import JOB_EXAMPLE, RUNNER_SKS, RUNNERS, STAKE, Nonces, example_caps, make_node, produce


class FakeConn:
    """The server-side QUIC connection as the service sees it (``FrameConnection``), in memory."""

    def __init__(self) -> None:
        self.channel_binding = secrets.token_bytes(32)
        self.sent: list[Frame] = []
        self.goodbye: Goodbye | None = None
        self.closed = False
        self.connection_number = 1

    def send(self, frame: Frame) -> None:
        self.sent.append(frame)

    def close(self, goodbye: Goodbye | None = None) -> None:
        self.goodbye, self.closed = goodbye, True

    def mark_authenticated(self, goodbye_signer: GoodbyeSigner | None = None) -> None:
        del goodbye_signer


class Pipe:
    """One runner session ↔ one service connection handler."""

    def __init__(self, service: TransportService, node: Node, sk: bytes, snapshot: EpochSnapshot | None = None,
                 *, expect_auth: bool = True) -> None:
        self.node = node
        self.fake = FakeConn()
        self.handler = _RunnerConnection(service, self.fake)  # type: ignore[arg-type]
        self.handler.on_open(self.fake)  # type: ignore[arg-type]
        snapshot = snapshot or node.link.genesis_snapshot()
        me = node.chain.genesis.validators[0].ed25519_public_key
        self.runner = RunnerSession(chain_id=node.link.chain_id, key=SessionKey(sk),
                                    expected_validator=PubKey.validator(me), validator_set=snapshot.validators,
                                    subset_epoch=snapshot.epoch, channel_binding=self.fake.channel_binding,
                                    challenge_nonce=secrets.token_bytes(32))
        self.events: list[Event] = []
        self.runner.start(time.monotonic(), node.chain.height)
        self.pump()
        if expect_auth:
            assert any(isinstance(e, Authenticated) for e in self.events), self.events

    def pump(self) -> None:
        """Move frames both ways until both sides are quiet."""
        while True:
            out = self.runner.take_outbound()
            back, self.fake.sent = self.fake.sent, []
            if not out and not back:
                return
            for frame in out:
                if not self.fake.closed:
                    self.handler.on_frame(frame)
            for frame in back:
                self.events += self.runner.receive(frame, time.monotonic())

    def ping(self) -> None:
        self.runner.ping(time.monotonic(), self.node.chain.height)
        self.pump()

    def assignments(self) -> list[bytes]:
        return [e.frame.job_id for e in self.events if isinstance(e, AssignmentReceived)]


def _world(*, registered: int = len(RUNNER_SKS)) -> tuple[Node, TransportService, Nonces]:
    """A node with the first ``registered`` runners registered and a transport service it notifies per block."""
    node = make_node(phase=2, transport_config=TransportConfig())
    n = Nonces()
    caps, card = example_caps()
    produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS[:registered]])
    service = node.transport
    assert service is not None
    return node, service, n


def _block(node: Node) -> None:
    """One block of whatever the mempool holds (forwarded result transactions included)."""
    asyncio.run(node.produce_block())


def _job(node: Node, job_id: bytes) -> JobRecord:
    raw = node.chain.world().get(job_key(job_id))
    assert raw is not None
    return JobRecord.decode(raw)


def _multi_runner_job(node: Node, n: Nonces, pipes: list[Pipe], *, m: int = 3) -> bytes:
    """A job of M = ``m`` runners (a strict-majority vote when M > 1), assigned, pushed and acked by ``pipes``."""
    doc: dict[str, Any] = json.loads(JOB_EXAMPLE.read_text())
    doc.update(verification={"mode": "majority_vote" if m > 1 else "none", "runners": m, "threshold": m // 2 + 1},
               timeout_blocks=20)
    submit = n.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))
    produce(node, [submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    while _job(node, job_id).status != JobStatus.ASSIGNED:
        for p in pipes:
            p.ping()  # keep local presence fresh
        _block(node)
    pushed = 0
    for p in pipes:
        p.pump()
        if job_id in p.assignments():  # every seat drawn is pushed (the pipes are its only sessions)
            pushed += 1
            p.runner.ack(job_id, AckStatus.accepted())
            p.pump()
    assert pushed == len(_job(node, job_id).committee)
    return job_id


def _metric(node: Node, label: str) -> float:
    v = node.metrics.registry.get_sample_value("cowboy_transport_events_total", {"kind": "result", "label": label})
    return 0.0 if v is None else v


def _in_mempool(node: Node, tx_hash: bytes) -> bool:
    return any(t.tx_hash() == tx_hash for t in node.mempool.transactions())


def test_early_reveal_frame_is_held_until_the_window_opens_then_forwarded() -> None:
    node, service, n = _world()
    pipes = [Pipe(service, node, sk) for sk in RUNNER_SKS]
    for p in pipes:
        p.ping()
    job_id = _multi_runner_job(node, n, pipes)
    p, sk, runner = pipes[0], RUNNER_SKS[0], RUNNERS[0]
    commit = n.tx(sk, JobResultCommit(job_id, result_commitment(job_id, runner, b"A", b"salt")))
    p.runner.send_commit(job_id, commit.to_bytes())
    p.pump()
    assert _in_mempool(node, commit.tx_hash())  # commits are forwarded at once
    _block(node)
    rec = _job(node, job_id)
    assert rec.commitment_of(runner) is not None and node.chain.height + 1 <= rec.commit_end
    reveal = n.tx(sk, JobResultSubmit(job_id, b"A", b"salt", 0))
    p.runner.send_result(job_id, reveal.to_bytes())
    p.pump()
    assert not _in_mempool(node, reveal.tx_hash())  # not submitted early (§10.3)
    assert len(service.reveals) == 1 and not p.fake.closed  # held, session kept
    assert _metric(node, "reveal_held") == 1
    while node.chain.height + 1 <= rec.commit_end:
        assert not _in_mempool(node, reveal.tx_hash())
        _block(node)
    # The block that made head + 1 = commit_end + 1 released it into the mempool, verbatim.
    assert _in_mempool(node, reveal.tx_hash()) and len(service.reveals) == 0
    assert _metric(node, "reveal_released") == 1 and _metric(node, "result_forwarded") >= 1
    _block(node)
    assert _job(node, job_id).reveal_of(runner) is not None  # included, no reveal_window_not_open


def test_an_under_filled_committee_of_a_multi_runner_job_holds_its_early_reveal() -> None:
    # M = 3 with one runner registered: one seat is drawn (§9.2 under-fill), but the job is still multi-runner —
    # execution decides by the job's M, not the seats drawn (results.py) — so a reveal before its window is held
    # (§10.3: "MUST NOT submit an early reveal"), kept while head + 1 <= commit_end, and released after.
    node, service, n = _world(registered=1)
    p, sk, runner = Pipe(service, node, RUNNER_SKS[0]), RUNNER_SKS[0], RUNNERS[0]
    p.ping()
    job_id = _multi_runner_job(node, n, [p])
    p.runner.send_commit(job_id, n.tx(sk, JobResultCommit(job_id, result_commitment(job_id, runner, b"A",
                                                                                      b"salt"))).to_bytes())
    p.pump()
    _block(node)
    rec = _job(node, job_id)
    assert rec.committee == (runner,) and rec.commitment_of(runner) is not None
    assert node.chain.height + 1 <= rec.commit_end
    reveal = n.tx(sk, JobResultSubmit(job_id, b"A", b"salt", 0))
    p.runner.send_result(job_id, reveal.to_bytes())
    p.pump()
    assert len(service.reveals) == 1 and not _in_mempool(node, reveal.tx_hash()) and not p.fake.closed
    assert _metric(node, "reveal_held") == 1 and _metric(node, "result_forwarded") == 0
    while node.chain.height + 1 < rec.commit_end:
        _block(node)  # each committed block sweeps the hold: KEEP while head + 1 <= commit_end
        assert len(service.reveals) == 1 and not _in_mempool(node, reveal.tx_hash())
    _block(node)  # head + 1 == commit_end + 1: the window is open, the reveal is released verbatim
    assert _in_mempool(node, reveal.tx_hash()) and len(service.reveals) == 0
    assert _metric(node, "reveal_released") == 1
    _block(node)
    # Included and revealed, not refused with reveal_window_not_open (the one reveal of the one seat concludes the
    # attempt, so the record's reveals are not where to look).
    assert any(r.error_code is None and any(e.topic == TOPIC_REVEALED for e in r.events)
               for r in node.chain.receipts_at(node.chain.height))


def test_a_single_runner_jobs_reveal_is_forwarded_at_once() -> None:
    # §10.3: for verification.runners == 1 the runner MAY skip the commit and send JobResult directly; there is no
    # window to wait for (commit_end is set for every job, so holding it would delay the result to commit_end + 1).
    node, service, n = _world()
    pipes = [Pipe(service, node, sk) for sk in RUNNER_SKS]
    for p in pipes:
        p.ping()
    job_id = _multi_runner_job(node, n, pipes, m=1)
    rec = _job(node, job_id)
    [runner] = rec.committee
    assert node.chain.height + 1 <= rec.commit_end
    i = RUNNERS.index(runner)
    reveal = n.tx(RUNNER_SKS[i], JobResultSubmit(job_id, b"A", b"salt", 0))
    pipes[i].runner.send_result(job_id, reveal.to_bytes())
    pipes[i].pump()
    assert _in_mempool(node, reveal.tx_hash()) and len(service.reveals) == 0
    assert _metric(node, "reveal_held") == 0 and _metric(node, "result_forwarded") == 1


def test_early_reveals_beyond_the_hold_bound_close_the_session_with_protocol_error() -> None:
    node, service, n = _world()
    service.reveals = RevealHold(per_connection=1)
    pipes = [Pipe(service, node, sk) for sk in RUNNER_SKS]
    for p in pipes:
        p.ping()
    first = _multi_runner_job(node, n, pipes)
    second = _multi_runner_job(node, n, pipes)
    p, sk = pipes[0], RUNNER_SKS[0]
    for job_id in (first, second):
        p.runner.send_result(job_id, n.tx(sk, JobResultSubmit(job_id, b"A", b"salt", 0)).to_bytes())
    p.pump()
    assert p.fake.goodbye is not None and p.fake.goodbye.reason is GoodbyeReason.PROTOCOL_ERROR
    assert p.fake.goodbye.detail == "early_reveal_hold_full"
    assert len(service.reveals) == 0  # the closed connection's held reveal is dropped with it
    assert 0 not in service.local_presence(node.chain.height)


def test_deregistered_runner_loses_presence_and_session_after_the_block() -> None:
    node, service, n = _world()
    pipes = [Pipe(service, node, sk) for sk in RUNNER_SKS]
    for p in pipes:
        p.ping()
    assert service.local_presence(node.chain.height) == frozenset({0, 1, 2})
    produce(node, [n.tx(RUNNER_SKS[1], RunnerDeregister())])
    bye = pipes[1].fake.goodbye
    assert bye is not None and bye.reason is GoodbyeReason.DEREGISTERED and pipes[1].fake.closed
    assert service.local_presence(node.chain.height) == frozenset({0, 2})
    assert 1 not in service._by_index
    events = pipes[1].runner.receive(bye, time.monotonic())  # signed after mutual auth (§12.5): it verifies
    assert any(isinstance(e, Closed) and e.reason is GoodbyeReason.DEREGISTERED and e.by_peer for e in events)
    assert not pipes[0].fake.closed and not pipes[2].fake.closed


def test_paused_runner_stays_connected_but_leaves_presence_until_healthy_again() -> None:
    node, service, n = _world()
    pipes = [Pipe(service, node, sk) for sk in RUNNER_SKS]
    for p in pipes:
        p.ping()
    produce(node, [n.tx(RUNNER_SKS[2], RunnerHeartbeat(False))])  # on-chain: not accepting (PAUSED)
    assert service.local_presence(node.chain.height) == frozenset({0, 1})
    pipes[2].ping()  # a QUIC ping does not bring it back while the registry says paused
    assert service.local_presence(node.chain.height) == frozenset({0, 1})
    assert not pipes[2].fake.closed
    produce(node, [n.tx(RUNNER_SKS[2], RunnerHeartbeat(True))])
    pipes[2].ping()
    assert service.local_presence(node.chain.height) == frozenset({0, 1, 2})


def _govern(node: Node, n: Nonces, name: str, value: int) -> None:
    """Schedule ``name = value`` two blocks ahead and produce until it is active at the head."""
    produce(node, [n.tx(ALICE_SK, GovernanceSetParam(name, value, node.chain.height + 2))])
    produce(node, [])
    assert getattr(node.link.cip11_params(), name) == value


def test_reconfiguration_overlap_admits_both_epochs_then_expires_the_old_one() -> None:
    node, service, n = _world()
    _govern(node, n, "OVERLAP_BLOCKS", 3)
    old_session = Pipe(service, node, RUNNER_SKS[0])  # epoch 0: the genesis set {me}
    me = node.chain.genesis.validators[0].ed25519_public_key
    new = EpochSnapshot(1, (me, bytes([1]) * 32))  # k = 2: me is in every runner's Sub_1
    h = node.chain.height + 2
    node.link.activate_validator_set(new, h)
    refused = Pipe(service, node, RUNNER_SKS[1], new, expect_auth=False)  # H < h: epoch 1 not valid yet
    assert refused.fake.goodbye is not None and refused.fake.goodbye.reason is GoodbyeReason.WRONG_VALIDATOR_SET
    produce(node, [])
    produce(node, [])
    assert node.chain.height == h
    new_session = Pipe(service, node, RUNNER_SKS[1], new)  # during the window: epoch 1 admitted
    also_old = Pipe(service, node, RUNNER_SKS[2])  # ... and epoch 0 still
    assert new_session.handler.session is not None and new_session.handler.session.subset_epoch == 1
    while node.chain.height < h + 2:  # both epochs' sessions count for presence during the window
        for p in (old_session, new_session, also_old):
            p.ping()
        assert service.local_presence(node.chain.height) == frozenset({0, 1, 2})
        produce(node, [])
    for p in (old_session, new_session, also_old):
        p.ping()
    produce(node, [])  # block h + 3 = h + OVERLAP_BLOCKS: the cutoff
    for p in (old_session, also_old):
        assert p.fake.closed and p.fake.goodbye is not None
        assert p.fake.goodbye.reason is GoodbyeReason.OVERLAP_EXPIRED
    assert not new_session.fake.closed
    assert service.local_presence(node.chain.height) == frozenset({1})
    late = Pipe(service, node, RUNNER_SKS[0], expect_auth=False)  # must not reconnect under the epoch-0 hash
    assert late.fake.goodbye is not None and late.fake.goodbye.reason is GoodbyeReason.WRONG_VALIDATOR_SET
    Pipe(service, node, RUNNER_SKS[0], new)  # reconnects under epoch 1


def test_governed_presence_timeout_takes_effect_in_the_transport() -> None:
    node, service, n = _world()
    pipe = Pipe(service, node, RUNNER_SKS[0])
    assert service.presence.timeout_blocks == 15
    pipe.ping()
    for _ in range(3):  # default PRESENCE_TIMEOUT_BLOCKS = 15: three silent blocks keep it present
        produce(node, [])
    assert 0 in service.local_presence(node.chain.height)
    _govern(node, n, "PRESENCE_TIMEOUT_BLOCKS", 2)
    assert service.presence.timeout_blocks == 2
    pipe.ping()
    produce(node, [])
    produce(node, [])
    assert 0 in service.local_presence(node.chain.height)  # 2 blocks silent: still within the timeout
    produce(node, [])
    assert 0 not in service.local_presence(node.chain.height)  # 3 > PRESENCE_TIMEOUT_BLOCKS = 2: dropped


def test_governed_ack_timeout_takes_effect_in_the_transport() -> None:
    node, service, n = _world()
    pipes = [Pipe(service, node, sk) for sk in RUNNER_SKS]
    _govern(node, n, "ACK_TIMEOUT_BLOCKS", 2)
    assert all(p.handler.session is not None and p.handler.session.ack_timeout_blocks == 2 for p in pipes)
    doc: dict[str, Any] = json.loads(JOB_EXAMPLE.read_text())
    doc.update(verification={"mode": "majority_vote", "runners": 3, "threshold": 2}, timeout_blocks=20)
    submit = n.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))
    produce(node, [submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    while _job(node, job_id).status != JobStatus.ASSIGNED:
        for p in pipes:
            p.ping()
        _block(node)
    pushed_at = node.chain.height
    for p in pipes:
        p.pump()
        assert job_id in p.assignments()  # pushed; nobody acks
    for p in pipes:
        p.ping()
    produce(node, [])
    service.tick()
    assert all(service.pushes.get(job_id, i).outcome.name == "PENDING" for i in range(3))  # type: ignore[union-attr]
    produce(node, [])
    assert node.chain.height == pushed_at + 2
    service.tick()  # ACK_TIMEOUT_BLOCKS = 2 (default 15): HardFailure now
    assert all(service.pushes.get(job_id, i).outcome.name == "HARD_FAILURE" for i in range(3))  # type: ignore[union-attr]
    assert service.local_presence(node.chain.height) == frozenset()


def test_governed_max_subset_takes_effect_in_the_subset_gate() -> None:
    # 20 validators (k = 6): this validator is in runner 2's Sub(R); MAX_SUBSET = 5 by governance shrinks k to 5
    # and drops it: the session is closed with Goodbye{NotInSubset} at the activating block, and refused again.
    node, service, n = _world()
    me = node.chain.genesis.validators[0]
    others = [dataclasses.replace(me, ed25519_public_key=bytes([i]) * 32) for i in range(1, 20)]
    node.link._genesis_snapshot = EpochSnapshot(0, tuple(v.ed25519_public_key for v in (me, *others)))
    pipe = Pipe(service, node, RUNNER_SKS[2])
    pipe.ping()
    assert 2 in service.local_presence(node.chain.height)
    _govern(node, n, "MAX_SUBSET", 5)
    assert pipe.fake.goodbye is not None and pipe.fake.goodbye.reason is GoodbyeReason.NOT_IN_SUBSET
    assert 2 not in service.local_presence(node.chain.height)
    again = Pipe(service, node, RUNNER_SKS[2], expect_auth=False)
    assert again.fake.goodbye is not None and again.fake.goodbye.reason is GoodbyeReason.NOT_IN_SUBSET
