"""The narrow interface the HTTP API needs from the node.

The RPC layer never touches storage or execution directly: it calls these
methods, which return JSON-ready values or raise :class:`RpcError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cowboy_node.execution.meter import InterruptHandle


class RpcError(Exception):
    """An error with a stable ``code`` and the HTTP ``status`` to answer with.

    ``retry_after`` (whole seconds, optional) becomes a ``Retry-After`` header: set on 429 ``rate_limited``
    and 503 ``busy``, when trying again later can succeed. ``details`` are further fields of the JSON body
    (410 ``pruned`` carries ``earliest_retained_height``).
    """

    def __init__(self, status: int, code: str, message: str, *, retry_after: int | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.details = details


class NodeFacade(Protocol):
    """What the RPC server calls. Every method is cheap and non-blocking (runs on the event loop), except
    the ``actor*`` methods and :meth:`read_actor`: the server runs those in a worker thread, as they wait
    for the state lock and a read-only call runs actor code."""

    def submit_transaction(self, tx_bytes: bytes) -> dict[str, Any]:
        """Admit ``tx_bytes`` (u32 BE length ‖ canonical CBOR body) to the mempool.

        Returns ``{"tx_hash": "0x..", "status": "pending"}``. Raises RpcError(400, code, msg) for
        bad input, with code one of: malformed, tx_too_large, wrong_chain_id, bad_signature,
        nonce_too_low, nonce_too_high, nonce_gap_too_large, insufficient_funds, fee_below_basefee,
        cycles_limit_too_high, cells_limit_too_high, limits_below_intrinsic, priority_fee_above_max,
        replacement_underpriced, already_known, mempool_full, sender_limit, sender_queue_full, queued_full;
        RpcError(503, "shutting_down")
        while stopping.
        """
        ...

    def health(self) -> dict[str, Any]:
        """``{"ok": bool, "height": int, "last_block_age_ms": int}`` (ok false if no block for 10 block times)."""
        ...

    def status(self) -> dict[str, Any]:
        """chain_id, height, head hash, state_root, timestamp_ms, basefees, mempool size, validator, flags."""
        ...

    def height(self) -> int:
        """Latest committed height."""
        ...

    def block(self, height: int) -> dict[str, Any] | None:
        """Header JSON plus ``transactions`` (hashes) or None if no such block; RpcError(410, "pruned") with
        ``earliest_retained_height`` for a height below the earliest one kept (``[storage] retain_blocks``)."""
        ...

    def transaction(self, tx_hash: bytes) -> dict[str, Any] | None:
        """Committed (with height/index) or pending transaction JSON, or None."""
        ...

    def receipt(self, tx_hash: bytes) -> dict[str, Any] | None:
        """Receipt JSON with ``height`` and ``index`` for a committed transaction, else None."""
        ...

    def account(self, address: bytes) -> dict[str, Any]:
        """``{"address", "balance" (decimal string), "nonce", "next_pending_nonce"}`` at the head."""
        ...

    def state_proof(self, key: bytes) -> dict[str, Any]:
        """Inclusion/exclusion proof for a raw state key against the head state root."""
        ...

    def actor(self, address: bytes) -> dict[str, Any] | None:
        """Deployed actor at the head: ``{"address", "creator", "source_hash", "deployed_at", "handlers",
        "balance", "height"}``, or None if no actor lives at ``address``."""
        ...

    def actor_state(self, address: bytes, key: bytes) -> dict[str, Any] | None:
        """One storage value of an actor: ``{"address", "key", "value" (hex or null), "height"}``; None if no actor."""
        ...

    def actor_state_scan(self, address: bytes, prefix: bytes, limit: int) -> dict[str, Any] | None:
        """Up to ``limit`` storage entries whose key starts with ``prefix``, ascending by key:
        ``{"address", "prefix", "entries": [{"key", "value"}], "truncated", "height"}``; None if no actor."""
        ...

    def actor_timers(self, address: bytes, cip1_after: bytes | None = None) -> dict[str, Any] | None:
        """The actor's live timers in due order: ``{"address", "count", "timers": [...], "truncated", "height",
        "cip1": {...}}`` (``cip1``: one page of its CIP-1 timers after the id ``cip1_after``,
        ``rpc/actor_queries.cip1_timers_view``); None if no actor."""
        ...

    def read_actor(self, actor: bytes, handler: str, payload: bytes, cycles_limit: int, *,
                   interrupt: InterruptHandle | None = None) -> dict[str, Any] | None:
        """Run ``handler(payload)`` read-only on the head state (all writes discarded):
        ``{"result" (hex or null), "error" (code or null), "cycles_used", "height"}``; None if no actor.

        May take as long as ``cycles_limit`` cycles of actor code, unless ``interrupt`` stops it first (the
        server's read pool does at its per-call deadline): then ``error`` is the interrupt's code
        (``read_timeout``).
        """
        ...


@runtime_checkable
class RunnerFacade(Protocol):
    """Runner Registry and parameter reads (``rpc/runner_routes.py``); the server runs them in a worker thread.

    Kept apart from :class:`NodeFacade` so a facade without them still serves everything else: the runner
    routes answer 501 ``not_implemented`` for it. ``chain/runner_queries.RunnerQueries`` implements them.
    """

    def params(self) -> dict[str, Any]:
        """Every governed protocol parameter at the head: ``{"height", "basefee", "basefees", "timer",
        "timer_policy", "limits", "cip11", "runners"}``."""
        ...

    def runners_active(self, offset: int, limit: int) -> dict[str, Any]:
        """Up to ``limit`` entries of the active-runner array from registry index ``offset``, in index order:
        ``{"height", "count", "offset", "heartbeat_timeout_blocks", "runners": [record + "eligible_now"],
        "truncated"}``."""
        ...

    def runner(self, address: bytes) -> dict[str, Any] | None:
        """The registration of ``address`` (record JSON + ``eligible_now`` + ``height``), or None if it never
        registered."""
        ...


@runtime_checkable
class JobFacade(Protocol):
    """Job Dispatcher reads (``rpc/job_routes.py``); the server runs them in a worker thread.

    Kept apart from :class:`NodeFacade` like :class:`RunnerFacade`: without them the job routes answer 501
    ``not_implemented``. ``chain/job_queries.JobQueries`` implements them.
    """

    def job(self, job_id: bytes) -> dict[str, Any] | None:
        """The whole job record as JSON (status name, spec JSON and hash, committee, attempt, windows,
        commits, reveals, escrow, payer, outcome, reason, finished_at, height), or None if no such job."""
        ...

    def job_status(self, job_id: bytes) -> dict[str, Any] | None:
        """``{"job_id", "status", "attempt", "committee", "assignment_height", "commit_end", "deadline_block",
        "committed", "revealed", "reason", "finished_at", "height"}``, or None if no such job."""
        ...

    def job_results(self, job_id: bytes) -> dict[str, Any] | None:
        """``{"job_id", "status", "attempt", "reveals": [{"runner", "units", "result", "is_json",
        "result_json"}], "outcome", "finished_at", "height"}``, or None if no such job."""
        ...

    def runner_jobs(self, runner: bytes, limit: int, after: bytes | None) -> dict[str, Any] | None:
        """The poll fallback: up to ``limit`` live assignments of ``runner`` after job id ``after``, in job-id
        order: ``{"runner", "height", "jobs", "truncated", "next_after"}``; None if the runner never registered.
        Raises ``RpcError(410, "poll_disabled")`` when ``CIP11_POLL_DISABLED`` is set in state."""
        ...
