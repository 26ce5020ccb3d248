"""The Job Dispatcher's per-job record and its state keys (system actor 0x…02).

A job lives at ``jobs/j/<job_id>`` from its JobSubmit until it settles or fails (the record stays afterwards
as the job's history; only the indexes are removed). Indexes:

 - ``jobs/deadline/<deadline_be8><job_id>``: live assignments by deadline block (timeout scan, §11.2);
 - ``jobs/runner/<runner 20><job_id>``: live assignments per runner (the poll endpoint, §14).

All values are canonical CBOR with small integer keys (see docs/jobs.md "Job record").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from cowboy_node.execution.system_state import JOB_DISPATCHER
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import (
    ADDRESS_LEN,
    HASH_LEN,
    decode_u128,
    encode_u128,
    expect_bytes,
    expect_map,
    expect_optional_bytes,
    expect_text,
    expect_uint,
)
from cowboy_protocol.types.validation_errors import DecodeError

NS = b"actor/" + JOB_DISPATCHER + b"/kv/"
JOB_PREFIX = NS + b"jobs/j/"
DEADLINE_PREFIX = NS + b"jobs/deadline/"
RUNNER_PREFIX = NS + b"jobs/runner/"
MAX_RESULT_BYTES = 256 * 1024
"""Largest result a JobResultSubmit may reveal."""
MAX_COMMITTEE = 16
"""Largest committee (VerificationConfig.runners upper bound)."""


class JobStatus(IntEnum):
    """Lifecycle state of a job (stored as this byte)."""

    PENDING_SELECTION = 0
    """M > 1: waiting for the seed of r_seed (CIP-11 §9.2)."""
    ASSIGNED = 1
    """A committee is assigned; commits/reveals are being collected."""
    COMPLETED = 2
    """Verified and settled; the callback (if any) has been delivered."""
    FAILED = 3
    """Retries exhausted or verification failed; escrow refunded."""


@dataclass(frozen=True, slots=True)
class Reveal:
    """A runner's accepted reveal."""

    result: bytes
    """The result bytes."""
    units: int
    """Usage units the runner reports (priced by its rate card)."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    """Everything the chain keeps about one job."""

    job_id: bytes
    """32-byte job id (derived from the submitting transaction)."""
    spec: bytes
    """canonical_job_spec (CIP-11 §12.6) as stored at submission."""
    status: JobStatus
    """Lifecycle state."""
    mode_byte: int
    """CIP-11 §9.2 selection mode: 0x00 (M == 1, parent beacon) or 0x01 (M > 1, r_seed); 0xFF: CIP-2 v2 path."""
    seed: bytes
    """The job's base selection seed (32 bytes; empty until the first selection)."""
    committee: tuple[bytes, ...]
    """Selected runners in committee (draw) order; empty while pending."""
    attempt: int
    """0 for the first selection; +1 per timeout re-selection."""
    excluded: tuple[bytes, ...]
    """Runners that timed out on this job (never re-selected for it), ascending."""
    assignment_height: int
    """Block of the current assignment (0 while pending)."""
    deadline_block: int
    """Chain-derived deadline of the current assignment (CIP-11 §10.1)."""
    commit_end: int
    """Last block of the commit phase of the current assignment."""
    commits: tuple[tuple[bytes, bytes], ...]
    """(runner, commitment) pairs of the current assignment, ascending by runner."""
    reveals: tuple[tuple[bytes, Reveal], ...]
    """(runner, reveal) pairs of the current assignment, ascending by runner."""
    escrow: int
    """max_price + tip held by the dispatcher (u128)."""
    payer: bytes
    """Account that paid the escrow and receives refunds (the submitter)."""
    outcome: bytes | None
    """Verified result (COMPLETED) or None."""
    reason: str
    """Stable code of the terminal outcome ("verified", "retries_exhausted", …); "" while live."""
    finished_at: int
    """Block in which the job reached a terminal state (0 while live)."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map."""
        return {
            0: self.job_id, 1: self.spec, 2: int(self.status), 3: self.mode_byte, 4: self.seed,
            5: list(self.committee), 6: self.attempt, 7: list(self.excluded), 8: self.assignment_height,
            9: self.deadline_block, 10: self.commit_end, 11: [[r, c] for r, c in self.commits],
            12: [[r, v.result, v.units] for r, v in self.reveals], 13: encode_u128(self.escrow), 14: self.payer,
            15: self.outcome, 16: self.reason, 17: self.finished_at,
        }

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode(self.to_cbor())

    @classmethod
    def decode(cls, raw: bytes) -> JobRecord:
        """Strict decode."""
        m = expect_map(decode(raw), frozenset(range(18)), "job")

        def addresses(v: object, name: str) -> tuple[bytes, ...]:
            if not isinstance(v, list) or len(v) > 64:
                raise DecodeError(f"{name}: expected an array of addresses", field=name)
            return tuple(expect_bytes(a, name, ADDRESS_LEN) for a in v)

        def pairs(v: object, name: str, width: int) -> list[list[Any]]:
            if not isinstance(v, list) or not all(isinstance(p, list) and len(p) == width for p in v):
                raise DecodeError(f"{name}: expected an array of {width}-tuples", field=name)
            return v

        return cls(
            job_id=expect_bytes(m[0], "job.job_id", HASH_LEN), spec=expect_bytes(m[1], "job.spec", max_len=1 << 20),
            status=JobStatus(expect_uint(m[2], "job.status", 3)), mode_byte=expect_uint(m[3], "job.mode", 0xFF),
            seed=expect_bytes(m[4], "job.seed", max_len=HASH_LEN), committee=addresses(m[5], "job.committee"),
            attempt=expect_uint(m[6], "job.attempt"), excluded=addresses(m[7], "job.excluded"),
            assignment_height=expect_uint(m[8], "job.assignment_height"),
            deadline_block=expect_uint(m[9], "job.deadline_block"), commit_end=expect_uint(m[10], "job.commit_end"),
            commits=tuple((expect_bytes(r, "job.commits", ADDRESS_LEN), expect_bytes(c, "job.commits", HASH_LEN))
                          for r, c in pairs(m[11], "job.commits", 2)),
            reveals=tuple((expect_bytes(r, "job.reveals", ADDRESS_LEN),
                           Reveal(expect_bytes(res, "job.reveals", max_len=MAX_RESULT_BYTES),
                                  expect_uint(u, "job.reveals.units")))
                          for r, res, u in pairs(m[12], "job.reveals", 3)),
            escrow=decode_u128(m[13], "job.escrow"), payer=expect_bytes(m[14], "job.payer", ADDRESS_LEN),
            outcome=expect_optional_bytes(m[15], "job.outcome", MAX_RESULT_BYTES),
            reason=expect_text(m[16], "job.reason", 64), finished_at=expect_uint(m[17], "job.finished_at"),
        )

    def with_commit(self, runner: bytes, commitment: bytes) -> JobRecord:
        """This record with ``runner``'s commitment added (kept sorted by runner)."""
        return replace(self, commits=tuple(sorted((*self.commits, (runner, commitment)))))

    def with_reveal(self, runner: bytes, reveal: Reveal) -> JobRecord:
        """This record with ``runner``'s reveal added (kept sorted by runner)."""
        return replace(self, reveals=tuple(sorted((*self.reveals, (runner, reveal)), key=lambda p: p[0])))

    def commitment_of(self, runner: bytes) -> bytes | None:
        """``runner``'s commitment in the current assignment, if any."""
        return next((c for r, c in self.commits if r == runner), None)

    def reveal_of(self, runner: bytes) -> Reveal | None:
        """``runner``'s reveal in the current assignment, if any."""
        return next((v for r, v in self.reveals if r == runner), None)


def job_key(job_id: bytes) -> bytes:
    """State key of a job record."""
    return JOB_PREFIX + job_id


def deadline_key(deadline: int, job_id: bytes) -> bytes:
    """Deadline index entry (ordered by deadline block, then job id)."""
    return DEADLINE_PREFIX + deadline.to_bytes(8, "big") + job_id


def runner_job_key(runner: bytes, job_id: bytes) -> bytes:
    """Per-runner live-assignment index entry."""
    return RUNNER_PREFIX + runner + job_id


