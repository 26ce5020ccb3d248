"""End-of-Block step 2 "ResolveOffchain" (seeds/000 EOB-2): settle what the runners owe and deliver results.

1. Every live assignment whose ``deadline_block`` is below this block concludes (CIP-11 §11.2): verified
   reveals settle, otherwise the silent runners are penalised and the job is re-selected or fails.
2. Every job that reached a terminal state in this block (in a result transaction or in step 1), in that
   order, with a callback gets a Mailbox entry ``callback.actor.<handler>(payload)`` that ExecuteMailbox runs
   next, paid by the callback actor like any Mailbox entry. The payload is the canonical CBOR map
   ``{0: job_id, 1: ok, 2: result | null, 3: reason, 4: correlation_id, 5: context, 6: callback payload | null}``.
"""

from __future__ import annotations

from cowboy_node.execution import mailbox
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.jobs.results import load_job, process_deadlines
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import encode
from cowboy_protocol.types.jobspec import decode_job_spec


def callback_payload(job_id: bytes, ok: bool, result: bytes | None, reason: str, correlation_id: str,
                     context: bytes, payload: bytes | None) -> bytes:
    """The canonical callback argument (docs/jobs.md "Callbacks")."""
    return encode({0: job_id, 1: ok, 2: result, 3: reason, 4: correlation_id, 5: context, 6: payload})


def resolve_offchain(world: WorldState, ctx: BlockContext) -> None:
    """Conclude expired assignments, then queue the callbacks of every job finished in this block."""
    process_deadlines(world, ctx)
    for job_id in ctx.jobs_finished:
        rec = load_job(world, job_id)
        if rec is None:
            continue
        cb = decode_job_spec(rec.spec).callback
        if not cb.has_callback:
            continue
        data = callback_payload(job_id, rec.status == JobStatus.COMPLETED, rec.outcome, rec.reason,
                                cb.correlation_id, cb.context, cb.payload)
        mailbox.enqueue_job_callback(world, ctx, job_id=job_id, target=cb.actor, handler=cb.handler, payload=data)
