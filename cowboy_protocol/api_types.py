"""The node HTTP API's answers as types: one TypedDict per response schema of the OpenAPI contract.

``GET /openapi.json`` (``cowboy_node/rpc/openapi.py``) is the contract; each TypedDict here has exactly the
properties that contract marks required as ``Required`` keys, and the properties the project reads beyond them
as optional keys (the contract lets the node add fields). ``tests/unit/protocol/test_api_client_contract.py``
compares every type with its schema in the served document, so a change of the contract breaks a test until the
type follows.

:data:`OPERATIONS` names, for each :class:`~cowboy_protocol.http_client.RpcClient` method that calls the node,
the contract's operation (operationId, method, path template) and the type of its 200 answer; the client builds
every URL from that table.
"""

# No ``from __future__ import annotations``: TypedDict reads Required[...] from evaluated annotations only.
from dataclasses import dataclass
from typing import Any, Literal, Required, TypedDict

__all__ = ["OPERATIONS", "Operation"]


class Status(TypedDict, total=False):
    """``GET /status``."""

    chain_id: Required[str]
    height: Required[int]
    hash: Required[str]
    state_root: Required[str]
    basefee: dict[str, Any]
    block_time_ms: int
    validator: dict[str, Any]


class Height(TypedDict):
    """``GET /height``."""

    height: int


class Params(TypedDict, total=False):
    """``GET /params``: governed parameters (sections as the node gives them)."""

    height: Required[int]
    runners: dict[str, Any]
    limits: dict[str, Any]
    governance: dict[str, Any]
    cip11_params: dict[str, Any]


class Account(TypedDict, total=False):
    """``GET /account/{address}``."""

    address: Required[str]
    balance: Required[str]
    nonce: Required[int]
    next_pending_nonce: Required[int]
    proof: dict[str, Any]
    header: str
    certificate: str | None
    state_root: str


class Block(TypedDict, total=False):
    """``GET /block/{height}``."""

    height: Required[int]
    hash: Required[str]
    parent_hash: Required[str]
    state_root: Required[str]
    transactions: Required[list[str]]
    signature: Required[str]


class Transaction(TypedDict, total=False):
    """``GET /tx/{hash}``."""

    status: Required[Literal["committed", "pending", "evicted"]]
    height: int


class Receipt(TypedDict, total=False):
    """``GET /tx/{hash}/receipt``."""

    status: Required[Literal["success", "failed"]]
    tx_hash: Required[str]
    height: Required[int]
    index: Required[int]
    events: Required[list[dict[str, Any]]]
    error_code: str | None
    error_message: str | None
    cycles_used: int
    cells_used: int
    fee_paid: str


class Submitted(TypedDict):
    """``POST /submit``."""

    tx_hash: str
    status: Literal["pending"]


class SubmittedBatch(TypedDict):
    """``POST /submit/batch``: one answer per transaction, in the order sent: ``{"tx_hash", "status"}`` as
    :class:`Submitted`, or ``{"error": {"code", "message"}}`` with the code ``POST /submit`` would have answered."""

    results: list[dict[str, Any]]


class StateProof(TypedDict, total=False):
    """``GET /state/proof``."""

    root: Required[str]
    height: Required[int]
    proof: Required[dict[str, Any]]
    header: str
    certificate: str | None
    state_root: str


class ActorRead(TypedDict):
    """``POST /actor/read``."""

    result: str | None
    error: str | None
    cycles_used: int
    height: int


class ActorInfo(TypedDict):
    """``GET /actor/{address}``."""

    address: str
    handlers: list[Any]
    height: int


class ActorStateEntry(TypedDict, total=False):
    """``GET /actor/{address}/state?key=``: one entry."""

    address: Required[str]
    key: Required[str]
    value: Required[str | None]
    height: Required[int]
    proof: dict[str, Any]
    header: str
    certificate: str | None
    state_root: str


class ActorStateScan(TypedDict):
    """``GET /actor/{address}/state?prefix=``: a prefix scan."""

    address: str
    prefix: str
    entries: list[Any]
    truncated: bool
    height: int


class ActorTimers(TypedDict, total=False):
    """``GET /actor/{address}/timers``."""

    address: Required[str]
    timers: Required[list[Any]]
    cip1: Required[dict[str, Any]]
    height: Required[int]


class TimerHistory(TypedDict, total=False):
    """``GET /actor/{address}/timers/history``."""

    address: Required[str]
    terminal: Required[list[Any]]
    height: Required[int]
    truncated: bool


class Simulation(TypedDict, total=False):
    """``POST /simulate``."""

    status: Required[Literal["success", "failed"]]
    cycles_used: Required[int]
    height: Required[int]


class EventsPage(TypedDict):
    """``GET /events``."""

    events: list[dict[str, Any]]
    height: int
    next: str | None


class ActiveRunners(TypedDict, total=False):
    """``GET /runners/active``."""

    runners: Required[list[dict[str, Any]]]
    truncated: Required[bool]
    count: int


class Runner(TypedDict, total=False):
    """``GET /runner/{address}`` (the contract fixes no field: the registration as the node renders it)."""

    address: str
    health: str
    capabilities: dict[str, Any]
    last_heartbeat: int
    stake: str
    reputation: int


class RunnerJobs(TypedDict):
    """``GET /runner/{address}/jobs`` (the poll fallback)."""

    runner: str
    jobs: list[dict[str, Any]]
    truncated: bool


class Job(TypedDict, total=False):
    """``GET /job/{id}`` and ``GET /job/{id}/status``."""

    job_id: Required[str]
    status: Required[str]
    committee: list[str]
    job_spec_hash: str
    assignment_height: int
    deadline_block: int
    commit_end: int
    attempt: int
    result: Any
    reason: str | None


class JobResults(TypedDict):
    """``GET /job/{id}/results``."""

    job_id: str
    reveals: list[dict[str, Any]]


class Validators(TypedDict):
    """``GET /validators``."""

    validators: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Operation:
    """One contract operation a client method calls."""

    operation_id: str
    """The contract's ``operationId``."""
    method: Literal["GET", "POST"]
    """HTTP method."""
    path: str
    """Path template, ``{name}`` for a path parameter (as in the contract)."""
    response: type
    """TypedDict of the 200 answer."""


OPERATIONS: dict[str, Operation] = {
    "status": Operation("get_status", "GET", "/status", Status),
    "height": Operation("get_height", "GET", "/height", Height),
    "params": Operation("get_params", "GET", "/params", Params),
    "account": Operation("get_account", "GET", "/account/{address}", Account),
    "block": Operation("get_block", "GET", "/block/{height}", Block),
    "transaction": Operation("get_transaction", "GET", "/tx/{hash}", Transaction),
    "receipt": Operation("get_receipt", "GET", "/tx/{hash}/receipt", Receipt),
    "submit": Operation("submit_transaction", "POST", "/submit", Submitted),
    "submit_batch": Operation("submit_transactions", "POST", "/submit/batch", SubmittedBatch),
    "state_proof": Operation("get_state_proof", "GET", "/state/proof", StateProof),
    "actor_read": Operation("read_actor", "POST", "/actor/read", ActorRead),
    "actor": Operation("get_actor", "GET", "/actor/{address}", ActorInfo),
    "actor_state": Operation("get_actor_state", "GET", "/actor/{address}/state", ActorStateEntry),
    "actor_state_scan": Operation("get_actor_state", "GET", "/actor/{address}/state", ActorStateScan),
    "actor_timers": Operation("get_actor_timers", "GET", "/actor/{address}/timers", ActorTimers),
    "timer_history": Operation("get_timer_history", "GET", "/actor/{address}/timers/history", TimerHistory),
    "simulate": Operation("simulate", "POST", "/simulate", Simulation),
    "events": Operation("get_events", "GET", "/events", EventsPage),
    "active_runners": Operation("get_active_runners", "GET", "/runners/active", ActiveRunners),
    "runner": Operation("get_runner", "GET", "/runner/{address}", Runner),
    "runner_jobs": Operation("get_runner_jobs", "GET", "/runner/{address}/jobs", RunnerJobs),
    "job": Operation("get_job", "GET", "/job/{id}", Job),
    "job_status": Operation("get_job_status", "GET", "/job/{id}/status", Job),
    "job_results": Operation("get_job_results", "GET", "/job/{id}/results", JobResults),
    "validators": Operation("get_validators", "GET", "/validators", Validators),
}
"""RpcClient method name → the operation it calls."""
