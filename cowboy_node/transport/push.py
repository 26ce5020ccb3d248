"""Push-dispatch bookkeeping and outcome classification (CIP-11 §10.1, §10.2, §10.6, §11.1), sans-I/O.

The node records every JobAssignment it pushes; the runner's framed responses classify the attempt:

| Outcome      | Trigger                                                                      |
|--------------|------------------------------------------------------------------------------|
| Success      | JobAck Accepted, then the required result frame(s) with valid tx_bytes forwarded |
| Duplicate    | JobAck Duplicate                                                             |
| SoftFailure  | JobAck Reject(_) (or another framed response)                                |
| HardFailure  | no framed response within ACK_TIMEOUT_BLOCKS of the push                     |

The ACK_TIMEOUT_BLOCKS deadline itself is kept by the session (``ValidatorSession.tick`` → ``AckTimedOut``).
Only a HardFailure touches routing (the caller clears the runner's local presence). None of these touch chain
state.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from cowboy_protocol.transport.enums import AckKind

ACK_TIMEOUT_BLOCKS = 15
"""CIP-11 §13 default: HardFailure threshold after a JobAssignment."""


class Outcome(Enum):
    """§10.6 dispatch outcome of one push."""

    PENDING = "pending"
    """Pushed, nothing framed back yet."""
    ACCEPTED = "accepted"
    """Acked Accepted; becomes SUCCESS once a result transaction is forwarded."""
    SUCCESS = "success"
    """Accepted and a valid result frame was forwarded."""
    DUPLICATE = "duplicate"
    """Another validator's push arrived first."""
    SOFT_FAILURE = "soft_failure"
    """The runner is alive but refused the job."""
    HARD_FAILURE = "hard_failure"
    """No framed response within ACK_TIMEOUT_BLOCKS."""


@dataclass(slots=True)
class Push:
    """One JobAssignment sent to one runner session."""

    job_id: bytes
    """The job."""
    runner_index: int
    """Registry index of the runner."""
    outcome: Outcome = Outcome.PENDING
    """Classification so far."""


class PushTracker:
    """Pushes in flight, keyed by (job_id, runner index)."""

    def __init__(self) -> None:
        self._pushes: dict[tuple[bytes, int], Push] = {}

    def __len__(self) -> int:
        return len(self._pushes)

    def get(self, job_id: bytes, runner_index: int) -> Push | None:
        """The push of ``job_id`` to ``runner_index``, if any."""
        return self._pushes.get((job_id, runner_index))

    def pushed(self, job_id: bytes, runner_index: int) -> Push:
        """Record a push (a re-push after re-selection replaces the old record)."""
        p = Push(job_id, runner_index)
        self._pushes[(job_id, runner_index)] = p
        return p

    def acked(self, job_id: bytes, runner_index: int, kind: AckKind) -> Outcome:
        """Classify a JobAck; unknown pushes raise KeyError (the session already rejects those)."""
        p = self._pushes[(job_id, runner_index)]
        if p.outcome is Outcome.PENDING:
            p.outcome = {AckKind.ACCEPTED: Outcome.ACCEPTED, AckKind.DUPLICATE: Outcome.DUPLICATE,
                         AckKind.REJECT: Outcome.SOFT_FAILURE}[kind]
        return p.outcome

    def result_forwarded(self, job_id: bytes, runner_index: int) -> Outcome:
        """A valid result frame's transaction was forwarded: Accepted becomes Success."""
        p = self._pushes[(job_id, runner_index)]
        if p.outcome is Outcome.ACCEPTED:
            p.outcome = Outcome.SUCCESS
        return p.outcome

    def hard_failure(self, job_id: bytes, runner_index: int) -> Outcome:
        """The session reported no framed response within ACK_TIMEOUT_BLOCKS (``AckTimedOut``): a pending push
        becomes a HardFailure; one already answered keeps its classification."""
        p = self._pushes[(job_id, runner_index)]
        if p.outcome is Outcome.PENDING:
            p.outcome = Outcome.HARD_FAILURE
        return p.outcome

    def for_job(self, job_id: bytes) -> list[Push]:
        """Every push of ``job_id`` (to cancel them when the job ends or is re-selected)."""
        return [p for (j, _i), p in self._pushes.items() if j == job_id]

    def forget_job(self, job_id: bytes) -> None:
        """Drop the job's pushes (terminal state)."""
        for key in [k for k in self._pushes if k[0] == job_id]:
            del self._pushes[key]

    def forget_runner(self, runner_index: int) -> list[Push]:
        """Drop a runner's pushes (its session ended); returns them."""
        keys = [k for k in self._pushes if k[1] == runner_index]
        return [self._pushes.pop(k) for k in keys]
