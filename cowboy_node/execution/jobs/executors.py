"""Executors of JobSubmit (0x30), JobResultCommit (0x31) and JobResultSubmit (0x32), and ``pvm_host.submit_job``.

Submission rules (``validate_request``, ``check_schema``) fail the transaction with their stable code before
anything is written, so a refused job leaves the escrow untouched.
"""

from __future__ import annotations

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs import dispatch, results
from cowboy_node.execution.jobs.verification import check_params
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import get_runner_config
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.jobs.json_schema import check_schema
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import JobRequest, validate_request
from cowboy_protocol.types.jobspec_checks import JsonSchemaValidCheck
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError


def validate(world: WorldState, request: JobRequest) -> None:
    """All submission-time rules; raises ``TxFailed`` with the rule's stable code."""
    try:
        validate_request(request, commit_phase_permille=get_runner_config(world).commit_phase_permille)
        for check in request.verification.checks:
            if isinstance(check, JsonSchemaValidCheck):
                check_schema(check.schema)
        # The verifier's own rules too, so that a job accepted here can always be evaluated at conclusion.
        check_params(results.verification_params_of(request.verification))
    except ValidationError as e:
        raise TxFailed(e.code, e.message) from None


def submit_request(world: WorldState, ctx: BlockContext, meter: Meter, request: JobRequest, *, submitter: bytes,
                   tx_hash: bytes, events: list[Event], reserved: int = 0) -> bytes:
    """Validate and submit one job; returns its id (shared by the transaction and the host call)."""
    validate(world, request)
    return dispatch.submit(world, ctx, meter, request, submitter=submitter, tx_hash=tx_hash, events=events,
                           reserved=reserved)


def execute_job_submit(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                       events: list[Event]) -> None:
    """JobSubmit: the sender pays the escrow (beyond its reserved maximum fee) and owns the job."""
    ins = tx.instruction
    assert isinstance(ins, JobSubmit)
    submit_request(world, ctx, meter, ins.request, submitter=tx.sender, tx_hash=tx.tx_hash(), events=events,
                   reserved=tx.max_fee())


def execute_result_commit(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                          events: list[Event]) -> None:
    """JobResultCommit, signed by a committee member."""
    ins = tx.instruction
    assert isinstance(ins, JobResultCommit)
    results.commit_result(world, ctx, meter, runner=tx.sender, job_id=ins.job_id, commitment=ins.commitment,
                          events=events)


def execute_result_submit(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                          events: list[Event]) -> None:
    """JobResultSubmit, signed by a committee member."""
    ins = tx.instruction
    assert isinstance(ins, JobResultSubmit)
    results.submit_result(world, ctx, meter, runner=tx.sender, job_id=ins.job_id, result=ins.result,
                          salt=ins.salt, units=ins.units, events=events)
