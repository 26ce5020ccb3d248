"""The network page's data (``rpc/ui_snapshot.py``) over a hand-made facade: phases, presence bytes, receipt
events, the validator view, and the caps that bound one refresh (transactions per block, jobs, actors, timers)."""

from __future__ import annotations

from typing import Any

import pytest

from cowboy_node.execution.system_state import JOB_DISPATCHER
from cowboy_node.rpc.ui_snapshot import (
    MAX_ACTORS,
    MAX_JOBS,
    MAX_TIMERS_PER_ACTOR,
    MAX_TXS_PER_BLOCK,
    LoopView,
    UiTracker,
    event_job_id,
    job_phase,
    present_indices,
    validators_view,
)
from cowboy_protocol.codec import encode

DISPATCHER = "0x" + JOB_DISPATCHER.hex()


@pytest.mark.parametrize(("doc", "phase"), [
    ({"status": "pending_selection", "committed": [], "revealed": []}, "pending_selection"),
    ({"status": "assigned", "committed": [], "revealed": []}, "assigned"),
    ({"status": "assigned", "committed": ["0xR"], "revealed": []}, "committed"),
    ({"status": "assigned", "committed": ["0xR"], "revealed": ["0xR"]}, "revealed"),
    ({"status": "completed", "committed": [], "revealed": ["0xR"]}, "settled"),
    ({"status": "failed", "committed": [], "revealed": []}, "failed"),
])
def test_job_phase_names_the_step_a_status_document_shows(doc: dict[str, Any], phase: str) -> None:
    assert job_phase(doc) == phase


@pytest.mark.parametrize(("hex_input", "present"), [
    ("0x010005", {0, 2}),                       # bitmap, 0b101
    ("0x01008001", {7, 8}),                     # bitmap over two bytes, LSB first: 0x80 -> 7, 0x01 -> 8
    ("0x0101000000020000000300000009", {3, 9}),  # sparse: count 2, indices 3 and 9
    ("0x0100", set()),                          # empty bitmap (empty registry)
    (None, set()), ("", set()),
    ("0x020005", set()),                        # unknown version
    ("0x0102", set()),                          # unknown kind
    ("0x01010000000200000009000000003", set()),  # odd hex
    ("0x0101000000020000000900000003", set()),  # sparse not ascending
])
def test_present_indices_decodes_presence_input_and_gives_nothing_for_a_bad_one(hex_input: str | None,
                                                                                present: set[int]) -> None:
    assert present_indices(hex_input) == present


def _event(topic: str, data: bytes, emitter: str = DISPATCHER) -> dict[str, Any]:
    return {"emitter": emitter, "topic": topic, "data": "0x" + data.hex()}


def test_event_job_id_reads_key_0_of_a_dispatcher_job_event_only() -> None:
    job = bytes(range(32))
    assert event_job_id(_event("job.submitted", encode({0: job, 1: b"\x01" * 20, 2: b"\x00"}))) == "0x" + job.hex()
    assert event_job_id(_event("job.result_revealed", encode({0: job, 1: b"\x01" * 20}))) == "0x" + job.hex()
    assert event_job_id(_event("runner.slashed", encode({0: job, 1: job}))) is None  # key 0 is a runner there
    assert event_job_id(_event("job.submitted", encode({0: job}), emitter="0x" + "11" * 20)) is None
    assert event_job_id(_event("job.submitted", encode({0: job[:31]}))) is None
    assert event_job_id(_event("job.submitted", encode([job]))) is None
    assert event_job_id(_event("job.submitted", b"\xff\xff")) is None
    assert event_job_id({"emitter": DISPATCHER, "topic": "job.submitted", "data": "0xzz"}) is None


def test_validators_view_marks_this_node_the_leader_and_the_connected_peers() -> None:
    status = {"validator_set": {"validators": [{"name": f"v{i}", "ed25519_public_key": f"0x{i:02x}"}
                                               for i in range(4)]},
              "consensus": {"validators": 4, "quorum": 3, "me": 1, "view": 9, "leader": 2, "finalized_view": 8,
                            "finalized_height": 7, "syncing": False, "peers": [0, 2], "evidence": 0}}
    view = validators_view(status)
    assert [(m["name"], m["me"], m["leader"], m["connected"]) for m in view["members"]] == [
        ("v0", False, False, True), ("v1", True, False, True), ("v2", False, True, True),
        ("v3", False, False, False)]
    assert (view["view"], view["leader"], view["finalized_height"], view["peers_connected"], view["quorum"]) == \
        (9, 2, 7, 2, 3)


# -- a hand-made facade ---------------------------------------------------------------------------------------
def _h(i: int, width: int = 32) -> str:
    return "0x" + i.to_bytes(width, "big").hex()


class FakeFacade:
    """Blocks whose transactions call actors and submit jobs; every read is counted."""

    def __init__(self) -> None:
        self.blocks: dict[int, list[dict[str, Any]]] = {0: []}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.timers: dict[str, list[dict[str, Any]]] = {}
        self.reads = {"block_activity": 0, "job_status": 0, "actor_timers": 0}
        self.limits: list[int] = []

    @property
    def head(self) -> int:
        return max(self.blocks)

    def add_block(self, txs: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
        first = sum(len(b) for b in self.blocks.values()) + 1
        self.blocks[self.head + 1] = [
            {"hash": _h(first + i), "kind": ins["kind"], "sender": "0xS", "instruction": ins, "status": "success",
             "error_code": None, "events": events} for i, (ins, events) in enumerate(txs)]

    def status(self) -> dict[str, Any]:
        return {"height": self.head, "hash": _h(self.head), "consensus": {}, "validator_set": {"validators": []}}

    def block_activity(self, height: int, limit: int) -> dict[str, Any] | None:
        self.reads["block_activity"] += 1
        self.limits.append(limit)
        txs = self.blocks.get(height)
        if txs is None:
            return None
        return {"header": {"height": height, "hash": _h(height)}, "tx_count": len(txs), "transactions": txs[:limit]}

    def job_status(self, job_id: bytes) -> dict[str, Any] | None:
        self.reads["job_status"] += 1
        return self.jobs.get("0x" + job_id.hex())

    def actor_timers(self, address: bytes) -> dict[str, Any] | None:
        self.reads["actor_timers"] += 1
        timers = self.timers.get("0x" + address.hex(), [])
        return {"address": "0x" + address.hex(), "count": len(timers), "timers": timers, "truncated": False}

    # the rest of the JobFacade protocol (isinstance checks method names)
    def job(self, job_id: bytes) -> None:
        return None

    def job_results(self, job_id: bytes) -> None:
        return None

    def runner_jobs(self, runner: bytes, limit: int, after: bytes | None) -> None:
        return None


def _refresh(tracker: UiTracker, facade: FakeFacade) -> dict[str, Any]:
    return tracker.refresh(facade, LoopView(facade.status(), None))  # type: ignore[arg-type]


def _call(actor: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return {"kind": "call_actor", "actor": actor, "handler": "go"}, []


def _submitted(job: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return {"kind": "job_submit"}, [_event("job.submitted", encode({0: bytes.fromhex(job[2:])}))]


def test_only_the_first_max_txs_per_block_transactions_of_a_block_are_asked_for() -> None:
    facade = FakeFacade()
    facade.add_block([_call(_h(1, 20))] * (MAX_TXS_PER_BLOCK + 10))
    doc = _refresh(UiTracker(), facade)
    assert facade.limits == [MAX_TXS_PER_BLOCK, MAX_TXS_PER_BLOCK]  # blocks 0 and 1, one read each
    assert doc["blocks"][0]["txs"] == MAX_TXS_PER_BLOCK + 10  # the count is the block's, not what was read


def test_a_facade_without_block_activity_gives_headers_only() -> None:
    class HeadersOnly:
        def status(self) -> dict[str, Any]:
            return {"height": 1, "hash": _h(1)}

        def block(self, height: int) -> dict[str, Any] | None:
            return {"height": height, "transactions": [_h(7)] * height} if height <= 1 else None

    doc = UiTracker().refresh(HeadersOnly(), LoopView(HeadersOnly().status(), None))  # type: ignore[arg-type]
    assert [(b["height"], b["txs"]) for b in doc["blocks"]] == [(1, 1), (0, 0)]
    assert (doc["transactions"], doc["jobs"], doc["timers"]) == ([], [], [])
    assert doc["runners"] == {"available": False, "count": 0, "truncated": False, "items": []}


def test_timers_are_listed_for_the_most_recently_called_actors_within_the_caps() -> None:
    facade = FakeFacade()
    actors = [_h(i, 20) for i in range(1, MAX_ACTORS + 3)]
    facade.timers[actors[-1]] = [{"id": _h(i), "height": 100 + i, "handler": "handle_timer", "expires_at": None}
                                 for i in range(MAX_TIMERS_PER_ACTOR + 5)]
    facade.add_block([_call(a) for a in actors])
    doc = _refresh(UiTracker(), facade)
    assert [t["actor"] for t in doc["timers"]] == actors[::-1][:MAX_ACTORS]  # newest first, oldest two dropped
    assert facade.reads["actor_timers"] == MAX_ACTORS
    first = doc["timers"][0]
    assert (first["count"], len(first["timers"]), first["truncated"]) == \
        (MAX_TIMERS_PER_ACTOR + 5, MAX_TIMERS_PER_ACTOR, True)


def _job(status: str, finished_at: int = 0) -> dict[str, Any]:
    return {"status": status, "committed": [], "revealed": [], "assignment_height": 1, "finished_at": finished_at}


def test_a_finished_job_is_not_read_again() -> None:
    facade = FakeFacade()
    jobs = [_h(1), _h(2), _h(3)]
    facade.jobs = {jobs[0]: _job("assigned"), jobs[1]: _job("completed", 1), jobs[2]: _job("failed", 1)}
    facade.add_block([_submitted(j) for j in jobs])
    tracker = UiTracker()
    doc = _refresh(tracker, facade)
    assert [(j["job_id"], j["phase"]) for j in doc["jobs"]] == [(jobs[2], "failed"), (jobs[1], "settled"),
                                                                (jobs[0], "assigned")]
    assert facade.reads["job_status"] == 3
    facade.add_block([])
    _refresh(tracker, facade)
    assert facade.reads["job_status"] == 4  # only the live one


def test_when_the_tracked_set_is_full_a_finished_job_makes_room_first() -> None:
    facade = FakeFacade()
    jobs = [_h(i) for i in range(1, MAX_JOBS + 1)]
    facade.jobs = {job: _job("completed", 1) if i == 5 else _job("assigned") for i, job in enumerate(jobs)}
    facade.add_block([_submitted(j) for j in jobs[:MAX_TXS_PER_BLOCK]])
    facade.add_block([_submitted(j) for j in jobs[MAX_TXS_PER_BLOCK:]])
    tracker = UiTracker()
    assert len(_refresh(tracker, facade)["jobs"]) == MAX_JOBS

    newcomer = _h(999)
    facade.jobs[newcomer] = _job("assigned")
    facade.add_block([_submitted(newcomer)])
    ids = [j["job_id"] for j in _refresh(tracker, facade)["jobs"]]
    assert len(ids) == MAX_JOBS and ids[0] == newcomer
    assert set(jobs) - set(ids) == {jobs[5]}  # the settled one, not the oldest

    another = _h(1000)
    facade.jobs[another] = _job("assigned")
    facade.add_block([_submitted(another)])
    ids = [j["job_id"] for j in _refresh(tracker, facade)["jobs"]]
    assert ids[0] == another and set(jobs) - set(ids) == {jobs[5], jobs[0]}  # none finished: the oldest
