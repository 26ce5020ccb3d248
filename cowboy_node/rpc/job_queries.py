"""Read-only views of the Job Dispatcher for the HTTP API.

Each view reads one :class:`WorldState`; the caller holds the node's state lock so the view and ``height``
belong to the same head. :class:`JobQueries` gives a node the facade methods of
:class:`~cowboy_node.rpc.facade.JobFacade` on top of these views.

What a block did to jobs (for metrics) is :mod:`cowboy_node.observability.job_activity`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from cowboy_node.execution.jobs.job_record import RUNNER_PREFIX, JobRecord, JobStatus, job_key
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.system_state import get_cip11_flags
from cowboy_node.rpc.facade import RpcError
from cowboy_node.state.world import WorldState
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.jobspec import decode_job_spec
from cowboy_protocol.types.jobspec_json import job_spec_to_json
from cowboy_protocol.types.validation_errors import ValidationError

if TYPE_CHECKING:
    from cowboy_node.chain.chain import Chain

STATUS_NAMES: dict[JobStatus, str] = {
    JobStatus.PENDING_SELECTION: "pending_selection",
    JobStatus.ASSIGNED: "assigned",
    JobStatus.COMPLETED: "completed",
    JobStatus.FAILED: "failed",
}
"""JSON name of each job status."""


class PollDisabled(Exception):
    """``CIP11_POLL_DISABLED`` is set: the poll endpoint is gone (CIP-11 §13, phase 3)."""


def _h(data: bytes) -> str:
    return "0x" + data.hex()


def _load(world: WorldState, job_id: bytes) -> JobRecord | None:
    raw = world.get(job_key(job_id))
    return None if raw is None else JobRecord.decode(raw)


def _result(result: bytes) -> dict[str, Any]:
    """``{"result": hex, "is_json", "result_json"}``: the bytes, and their value when they are strict JSON
    (docs/verification.md §2)."""
    try:
        return {"result": _h(result), "is_json": True, "result_json": parse_json(result)}
    except ValidationError:
        return {"result": _h(result), "is_json": False, "result_json": None}


def job_view(world: WorldState, job_id: bytes, *, height: int) -> dict[str, Any] | None:
    """The whole job record as JSON, or None if no job has this id (docs/api.md ``GET /job/{id}``)."""
    rec = _load(world, job_id)
    if rec is None:
        return None
    spec = decode_job_spec(rec.spec)
    return {
        "job_id": _h(rec.job_id),
        "status": STATUS_NAMES[rec.status],
        "spec": job_spec_to_json(spec),
        "job_spec": _h(rec.spec),
        "job_spec_hash": _h(keccak256(rec.spec)),
        "mode_byte": rec.mode_byte,
        "seed": _h(rec.seed) if rec.seed else None,
        "committee": [to_checksum_address(a) for a in rec.committee],
        "attempt": rec.attempt,
        "excluded": [to_checksum_address(a) for a in rec.excluded],
        "assignment_height": rec.assignment_height,
        "deadline_block": rec.deadline_block,
        "commit_end": rec.commit_end,
        "commits": [{"runner": to_checksum_address(r), "commitment": _h(c)} for r, c in rec.commits],
        "reveals": [{"runner": to_checksum_address(r), "result": _h(v.result), "units": v.units}
                    for r, v in rec.reveals],
        "escrow": str(rec.escrow),
        "payer": to_checksum_address(rec.payer),
        "outcome": None if rec.outcome is None else _h(rec.outcome),
        "reason": rec.reason,
        "finished_at": rec.finished_at,
        "height": height,
    }


def job_status_view(world: WorldState, job_id: bytes, *, height: int) -> dict[str, Any] | None:
    """The small status document of a job, or None (docs/api.md ``GET /job/{id}/status``)."""
    rec = _load(world, job_id)
    if rec is None:
        return None
    return {
        "job_id": _h(rec.job_id),
        "status": STATUS_NAMES[rec.status],
        "attempt": rec.attempt,
        "committee": [to_checksum_address(a) for a in rec.committee],
        "assignment_height": rec.assignment_height,
        "commit_end": rec.commit_end,
        "deadline_block": rec.deadline_block,
        "committed": [to_checksum_address(r) for r, _ in rec.commits],
        "revealed": [to_checksum_address(r) for r, _ in rec.reveals],
        "reason": rec.reason,
        "finished_at": rec.finished_at,
        "height": height,
    }


def job_results_view(world: WorldState, job_id: bytes, *, height: int) -> dict[str, Any] | None:
    """The reveals of the current assignment and, once concluded, the verified outcome; None if no such job.

    ``outcome`` is null while the job is live, ``{"ok": true, "reason", "result", "result_json", "is_json"}``
    once COMPLETED and ``{"ok": false, "reason", "result": null, ...}`` once FAILED.
    """
    rec = _load(world, job_id)
    if rec is None:
        return None
    outcome: dict[str, Any] | None = None
    if rec.status == JobStatus.COMPLETED:
        outcome = {"ok": True, "reason": rec.reason, **_result(rec.outcome or b"")}
    elif rec.status == JobStatus.FAILED:
        outcome = {"ok": False, "reason": rec.reason, "result": None, "result_json": None, "is_json": False}
    return {
        "job_id": _h(rec.job_id),
        "status": STATUS_NAMES[rec.status],
        "attempt": rec.attempt,
        "reveals": [{"runner": to_checksum_address(r), "units": v.units, **_result(v.result)}
                    for r, v in rec.reveals],
        "outcome": outcome,
        "finished_at": rec.finished_at,
        "height": height,
    }


def runner_jobs_view(world: WorldState, runner: bytes, *, height: int, limit: int,
                     after: bytes | None = None) -> dict[str, Any] | None:
    """The poll fallback (CIP-11 §14): the live assignments of ``runner`` from the ``jobs/runner/`` index, in
    job-id order, at most ``limit`` of them after the job id ``after``.

    Returns None if ``runner`` never registered; raises :class:`PollDisabled` when ``CIP11_POLL_DISABLED``
    is set in state.
    """
    if get_cip11_flags(world).CIP11_POLL_DISABLED:
        raise PollDisabled("the poll endpoint is disabled (CIP11_POLL_DISABLED); use the QUIC transport")
    if store.get_runner(world, runner) is None:
        return None
    prefix = RUNNER_PREFIX + runner
    # Job ids are 32 bytes, so the key of ``after`` plus one zero byte is the first key strictly after it.
    start = None if after is None else prefix + after + b"\x00"
    jobs: list[dict[str, Any]] = []
    truncated = False
    for key, _ in world.iterate(prefix, start=start):
        if len(jobs) == limit:
            truncated = True
            break
        rec = _load(world, key[len(prefix):])
        if rec is None or rec.status != JobStatus.ASSIGNED:
            raise ValueError(f"jobs/runner index entry 0x{key[len(prefix):].hex()} has no live job")
        spec = decode_job_spec(rec.spec)
        jobs.append({
            "job_id": _h(rec.job_id), "job_spec": _h(rec.spec), "spec": job_spec_to_json(spec),
            "job_spec_hash": _h(keccak256(rec.spec)), "assignment_height": rec.assignment_height,
            "deadline_block": rec.deadline_block, "commit_end": rec.commit_end, "attempt": rec.attempt,
            "committee_size": len(rec.committee), "committed": rec.commitment_of(runner) is not None,
            "revealed": rec.reveal_of(runner) is not None,
        })
    return {"runner": to_checksum_address(runner), "height": height, "jobs": jobs, "truncated": truncated,
            "next_after": jobs[-1]["job_id"] if truncated else None}


class JobQueries:
    """The job methods of :class:`~cowboy_node.rpc.facade.JobFacade`, for a node holding ``chain`` and the
    state lock (composed into ``node/api.py``'s ``NodeApi``)."""

    def __init__(self, chain: Chain, tree_lock: threading.Lock) -> None:
        self.chain = chain
        """The node's chain (head state and height)."""
        self._tree_lock = tree_lock
        """Held while a block is built; reads take it so a view and its height belong to one head."""

    def job(self, job_id: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.JobFacade`."""
        with self._tree_lock:
            return job_view(self.chain.world(), job_id, height=self.chain.height)

    def job_status(self, job_id: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.JobFacade`."""
        with self._tree_lock:
            return job_status_view(self.chain.world(), job_id, height=self.chain.height)

    def job_results(self, job_id: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.JobFacade`."""
        with self._tree_lock:
            return job_results_view(self.chain.world(), job_id, height=self.chain.height)

    def runner_jobs(self, runner: bytes, limit: int, after: bytes | None) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.JobFacade`."""

        try:
            with self._tree_lock:
                return runner_jobs_view(self.chain.world(), runner, height=self.chain.height, limit=limit,
                                        after=after)
        except PollDisabled as e:
            raise RpcError(410, "poll_disabled", str(e)) from None
