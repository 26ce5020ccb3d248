"""The network page's data (``GET /ui/snapshot``): one JSON document built from the node's read facade.

:class:`UiTracker` keeps a small rolling window across refreshes — the last blocks, the jobs their receipts
named, the actors their transactions called — so a refresh reads only what changed since the previous head,
within fixed caps (:data:`MAX_BLOCKS`, :data:`MAX_TXS_PER_BLOCK`, :data:`MAX_JOBS`, :data:`MAX_RUNNERS`,
:data:`MAX_ACTORS`). Its :meth:`UiTracker.refresh` reads state (job records, the runner registry, actor timers)
and runs in the RPC read pool's worker (``rpc/ui_routes.py``); the cheap, loop-only parts (``status()``, the
validator's local runner sessions) are read on the event loop and passed in as :class:`LoopView`.

Blocks are read with ``block_activity`` (``rpc/ui_queries.py``: one decode of the block and its receipts); a
facade without it gives headers only. Jobs are found through the receipts of recent transactions: every Job
Dispatcher event that names a job (``job.submitted``, ``job.result_revealed``, ...) adds the job to the tracked
set; tracked jobs that are not finished are re-read at each refresh. A job's history is the height of each
phase: from those receipt events, and from the record for what End of Block does (no receipt carries its
events): ``assignment_height``, ``finished_at``. A job whose transactions all fell outside the window is not
found (``GET /job/{id}`` still answers for it).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from cowboy_node.execution.system_state import JOB_DISPATCHER
from cowboy_node.rpc.facade import JobFacade, NodeFacade, RunnerFacade
from cowboy_node.types.presence import KIND_BITMAP, decode_presence
from cowboy_protocol.codec import CodecError, decode
from cowboy_protocol.types.validation_errors import DecodeError

SNAPSHOT_VERSION = 1
"""``version`` of the snapshot document (bumped on an incompatible change)."""
MAX_BLOCKS = 20
"""Recent blocks kept (and read at most per refresh, whatever the gap since the previous one)."""
MAX_TXS_PER_BLOCK = 32
"""Transactions of one block whose receipts are read; later ones are not shown nor searched for jobs."""
MAX_TXS = 30
"""Recent transactions listed."""
MAX_JOBS = 50
"""Jobs tracked; when full, the oldest finished job (else the oldest) makes room."""
MAX_RUNNERS = 64
"""Runners listed from the registry's active array (``runners.truncated`` says when there are more)."""
MAX_ACTORS = 8
"""Actors whose timers are listed: the most recently called ones."""
MAX_TIMERS_PER_ACTOR = 10
"""Timers listed per actor (``count`` is the actor's live total)."""
MAX_HISTORY = 8
"""Phase changes kept per job."""

_JOB_TOPICS = frozenset({"job.submitted", "job.assigned", "job.pending_selection", "job.result_committed",
                         "job.result_revealed", "job.completed", "job.failed", "job.reselected"})
"""Job Dispatcher event topics whose data map has the job id at key 0 (``runner.slashed`` has a runner there)."""
_DISPATCHER_HEX = "0x" + JOB_DISPATCHER.hex()
FINISHED_PHASES = frozenset({"settled", "failed"})
"""Phases a job never leaves."""


@runtime_checkable
class SessionFacade(Protocol):
    """A facade that knows which runners hold a live session with this validator (``Node.local_presence``)."""

    def local_presence(self) -> frozenset[int]:
        """Registry indices of runners with a live authenticated, accepting session here."""
        ...


@runtime_checkable
class BlockActivityFacade(Protocol):
    """A facade that reads a block's transactions with their receipts at once (``rpc/ui_queries.UiQueries``)."""

    def block_activity(self, height: int, limit: int) -> dict[str, Any] | None:
        """Header JSON, ``tx_count`` and the first ``limit`` transactions with their receipts; None if no block."""
        ...


@dataclass(frozen=True, slots=True)
class LoopView:
    """What the event loop read for one refresh (facade calls that must not run in a worker thread)."""

    status: dict[str, Any]
    """``facade.status()``."""
    sessions: frozenset[int] | None
    """Registry indices with a live session here; None when the facade has no transport view."""


@dataclass(slots=True)
class _Job:
    """A tracked job: its last status document and the evidence of its phases, each with a height."""

    job_id: str
    first_seen: int
    doc: dict[str, Any] | None = None
    events: list[tuple[str, int]] = field(default_factory=list)
    """(phase, height) from the receipts of the transactions that moved it (submitted, committed, revealed)."""
    assigned_at: set[int] = field(default_factory=set)
    """Every ``assignment_height`` seen (a re-selection gives a new one)."""

    @property
    def phase(self) -> str:
        return "submitted" if self.doc is None else job_phase(self.doc)

    def history(self) -> list[dict[str, Any]]:
        """The phases with the height each was reached at, in order: from receipt events, the assignment
        heights seen, and ``finished_at`` once settled or failed — not from when the page happened to look."""
        steps = set(self.events) | {("assigned", h) for h in self.assigned_at}
        if self.doc is not None and self.phase in FINISHED_PHASES:
            steps.add((self.phase, int(self.doc.get("finished_at") or 0)))
        ordered = sorted(steps, key=lambda s: (s[1], _PHASE_ORDER.get(s[0], 9)))
        return [{"phase": p, "height": h} for p, h in ordered[-MAX_HISTORY:]]


_EVENT_PHASES = {"job.submitted": "submitted", "job.pending_selection": "pending_selection",
                 "job.result_committed": "committed", "job.result_revealed": "revealed",
                 "job.assigned": "assigned", "job.completed": "settled", "job.failed": "failed",
                 "job.reselected": "reselected"}
"""Phase a receipt event shows (only submitted, pending_selection, committed and revealed come from transaction
receipts today; the others are End-of-Block events and are taken from the job record instead)."""
_PHASE_ORDER = {"submitted": 0, "pending_selection": 1, "assigned": 2, "reselected": 3, "committed": 4,
                "revealed": 5, "settled": 6, "failed": 6}
"""Order of phases reached at the same height."""


def job_phase(doc: dict[str, Any]) -> str:
    """The page's name for where a job is (``GET /job/{id}/status`` document in): the event names of
    ``observability/job_activity.TRANSITIONS`` — pending_selection, assigned, committed, revealed, settled,
    failed."""
    status = doc.get("status")
    if status == "completed":
        return "settled"
    if status in ("failed", "pending_selection"):
        return str(status)
    if doc.get("revealed"):
        return "revealed"
    if doc.get("committed"):
        return "committed"
    return "assigned"


def present_indices(presence_input: str | None) -> frozenset[int]:
    """Registry indices a header's ``presence_input`` (hex, or None) marks present; empty when absent or
    malformed. The registry size of the block's parent is not at hand, so the decoder is given the largest
    size the encoding allows (the block was validated against the real one when it was committed)."""
    if not presence_input:
        return frozenset()
    try:
        data = bytes.fromhex(presence_input.removeprefix("0x"))
        size = 8 * (len(data) - 2) if len(data) >= 2 and data[1] == KIND_BITMAP else 2**32
        return decode_presence(data, size)
    except (ValueError, DecodeError):
        return frozenset()


def event_job_id(event: dict[str, Any]) -> str | None:
    """The job a receipt event (``Event.to_json``) names, as ``0x`` hex; None for any other event or bad data."""
    if event.get("emitter") != _DISPATCHER_HEX or event.get("topic") not in _JOB_TOPICS:
        return None
    try:
        data = decode(bytes.fromhex(str(event.get("data", "")).removeprefix("0x")))
    except (ValueError, CodecError):
        return None
    job_id = data.get(0) if isinstance(data, dict) else None
    return "0x" + job_id.hex() if isinstance(job_id, bytes) and len(job_id) == 32 else None


class UiTracker:
    """The rolling window behind the page; one refresh at a time (the caller serialises them)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.scanned_height = -1
        """Highest block whose transactions were read."""
        self._blocks: list[dict[str, Any]] = []  # newest first, at most MAX_BLOCKS
        self._txs: list[dict[str, Any]] = []  # newest first, at most MAX_TXS
        self._jobs: OrderedDict[str, _Job] = OrderedDict()  # oldest first
        self._actors: OrderedDict[str, None] = OrderedDict()  # least recently called first

    # -- reading new blocks -------------------------------------------------------------------------------
    def _scan(self, facade: NodeFacade, head: int, stop: Callable[[], bool]) -> None:
        """Read the blocks above :attr:`scanned_height` up to ``head`` (at most the last MAX_BLOCKS of them)."""
        if head < self.scanned_height:  # a different chain (a test resetting the node): start over
            self._reset()
        start = max(self.scanned_height + 1, head - MAX_BLOCKS + 1, 0)
        for height in range(start, head + 1):
            if stop():
                return  # the next refresh goes on from here
            if isinstance(facade, BlockActivityFacade):
                activity = facade.block_activity(height, MAX_TXS_PER_BLOCK)
                if activity is None:
                    return
                self._add_block(activity["header"], activity["tx_count"], activity["transactions"])
            else:  # headers only: reading transactions one by one would decode the block once per transaction
                header = facade.block(height)
                if header is None:
                    return
                self._add_block(header, len(header.get("transactions", [])), [])
            self.scanned_height = height

    def _add_block(self, header: dict[str, Any], tx_count: int, txs: list[dict[str, Any]]) -> None:
        height = int(header["height"])
        self._blocks.insert(0, {
            "height": height, "hash": header.get("hash"), "view": (header.get("round") or {}).get("view"),
            "proposer": header.get("proposer"), "timestamp_ms": header.get("timestamp_ms"), "txs": tx_count,
            "cycles_used": header.get("cycles_used"), "cells_used": header.get("cells_used"),
            "present": sorted(present_indices(header.get("presence_input")))})
        del self._blocks[MAX_BLOCKS:]
        rows = [self._read_tx(tx, height) for tx in txs[:MAX_TXS_PER_BLOCK]]
        self._txs[:0] = reversed(rows)
        del self._txs[MAX_TXS:]

    def _read_tx(self, tx: dict[str, Any], height: int) -> dict[str, Any]:
        """One ``block_activity`` transaction: the actor it calls and the jobs its events name are noted."""
        if tx.get("kind") == "call_actor":
            self._touch_actor(str((tx.get("instruction") or {}).get("actor")))
        for event in tx.get("events") or []:
            job_id = event_job_id(event)
            if job_id is not None:
                self._track_job(job_id, height).events.append((_EVENT_PHASES[str(event["topic"])], height))
        return {"hash": tx.get("hash"), "height": height, "kind": tx.get("kind"), "sender": tx.get("sender"),
                "status": tx.get("status"), "error_code": tx.get("error_code")}

    def _touch_actor(self, address: str) -> None:
        self._actors.pop(address, None)
        self._actors[address] = None
        while len(self._actors) > MAX_ACTORS:
            self._actors.popitem(last=False)

    def _track_job(self, job_id: str, height: int) -> _Job:
        job = self._jobs.get(job_id)
        if job is not None:
            del job.events[:-MAX_HISTORY]
            return job
        if len(self._jobs) >= MAX_JOBS:
            victim = next((k for k, j in self._jobs.items() if j.phase in FINISHED_PHASES), next(iter(self._jobs)))
            del self._jobs[victim]
        job = self._jobs[job_id] = _Job(job_id, height)
        return job

    # -- re-reading state ---------------------------------------------------------------------------------
    def _refresh_jobs(self, facade: NodeFacade) -> None:
        if not isinstance(facade, JobFacade):
            return
        for job in self._jobs.values():
            if job.phase in FINISHED_PHASES:
                continue
            doc = facade.job_status(bytes.fromhex(job.job_id[2:]))
            if doc is None:
                continue
            job.doc = doc
            if doc.get("assignment_height"):
                job.assigned_at.add(int(doc["assignment_height"]))

    def _runners(self, facade: NodeFacade, sessions: frozenset[int] | None) -> dict[str, Any]:
        if not isinstance(facade, RunnerFacade):
            return {"available": False, "count": 0, "truncated": False, "items": []}
        doc = facade.runners_active(0, MAX_RUNNERS)
        present = set(self._blocks[0]["present"]) if self._blocks else set()
        items = [{"address": r["address"], "index": r["index"], "health": r["health"],
                  "last_heartbeat": r["last_heartbeat"], "active_jobs": r["active_jobs"],
                  "eligible_now": r["eligible_now"], "present": r["index"] in present,
                  "session": None if sessions is None else r["index"] in sessions} for r in doc["runners"]]
        return {"available": True, "count": doc["count"], "truncated": doc["truncated"], "items": items}

    def _timers(self, facade: NodeFacade) -> list[dict[str, Any]]:
        out = []
        for address in reversed(self._actors):  # most recently called first
            try:
                raw = bytes.fromhex(address.removeprefix("0x"))
            except ValueError:
                continue
            doc = facade.actor_timers(raw)
            if doc is None:
                continue
            out.append({"actor": doc["address"], "count": doc["count"],
                        "truncated": doc["truncated"] or len(doc["timers"]) > MAX_TIMERS_PER_ACTOR,
                        "timers": doc["timers"][:MAX_TIMERS_PER_ACTOR]})
        return out

    # -- the document -------------------------------------------------------------------------------------
    def refresh(self, facade: NodeFacade, loop_view: LoopView, stop: Callable[[], bool] = lambda: False
                ) -> dict[str, Any]:
        """Read what changed up to the head ``loop_view.status`` names and return the whole snapshot.

        ``stop()`` true (the read pool's deadline passed) ends the block scan early; the document then
        describes the blocks read so far and ``complete`` is false.
        """
        status = loop_view.status
        head = int(status["height"])
        self._scan(facade, head, stop)
        self._refresh_jobs(facade)
        jobs = [{"job_id": j.job_id, "phase": j.phase, "first_seen": j.first_seen, "history": j.history(),
                 "attempt": (j.doc or {}).get("attempt"), "committee": (j.doc or {}).get("committee", []),
                 "reason": (j.doc or {}).get("reason"), "finished_at": (j.doc or {}).get("finished_at")}
                for j in reversed(self._jobs.values())]
        return {
            "version": SNAPSHOT_VERSION,
            "complete": self.scanned_height >= head,
            "node": node_summary(status),
            "validators": validators_view(status),
            "blocks": list(self._blocks),
            "transactions": list(self._txs),
            "runners": self._runners(facade, loop_view.sessions),
            "jobs": jobs,
            "timers": self._timers(facade),
            "limits": {"blocks": MAX_BLOCKS, "txs_per_block": MAX_TXS_PER_BLOCK, "txs": MAX_TXS, "jobs": MAX_JOBS,
                       "runners": MAX_RUNNERS, "actors": MAX_ACTORS, "timers_per_actor": MAX_TIMERS_PER_ACTOR},
        }


def node_summary(status: dict[str, Any]) -> dict[str, Any]:
    """The head and the node's own figures from ``/status``."""
    return {k: status.get(k) for k in ("chain_id", "height", "hash", "timestamp_ms", "block_time_ms", "basefee",
                                       "mempool", "validator")}


def validators_view(status: dict[str, Any]) -> dict[str, Any]:
    """The validator set of ``/status`` with this node's consensus view of it: which one it is, the leader of
    its current view, which it has a live peer connection to."""
    consensus = status.get("consensus") or {}
    me, leader = consensus.get("me"), consensus.get("leader")
    peers = set(consensus.get("peers") or [])
    members = (status.get("validator_set") or {}).get("validators") or []
    return {
        "view": consensus.get("view"), "finalized_view": consensus.get("finalized_view"),
        "finalized_height": consensus.get("finalized_height"), "leader": leader, "me": me,
        "quorum": consensus.get("quorum"), "syncing": consensus.get("syncing"),
        "peers_connected": len(peers), "evidence": consensus.get("evidence"),
        "timeline": {role: (consensus.get("timeline") or {}).get(role) for role in ("leader", "follower")},
        "members": [{"index": i, "name": v.get("name"), "ed25519_public_key": v.get("ed25519_public_key"),
                     "me": i == me, "leader": i == leader, "connected": i == me or i in peers}
                    for i, v in enumerate(members)],
    }
