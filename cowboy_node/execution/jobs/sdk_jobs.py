"""cowboy-actor-sdk runner jobs: ``runner_job`` messages to the Job Dispatcher, and their replies (docs/actors.md).

An SDK continuation's leg sends ``pvm_host.send_message(JOB_DISPATCHER, cbor({'kind': 'runner_job',
'job_type', 'payload': {'args', 'kwargs'}, 'cid', 'reply_handler'}))`` (SDK codec bytes). The host hands
such a message here instead of to the Mailbox: :func:`submit_runner_job` maps it onto a
``JobRequest`` (JobSpecV1), submits it through the ordinary path (``executors.submit_request``:
validation, escrow charged to the actor, CIP-2/CIP-11 selection) with the actor's ``reply_handler``
as the callback, and records ``sdkjob/<job_id>`` so that the finished job's callback is delivered in
the SDK's reply shape (:func:`reply_for`) rather than the node's ``{0: job_id, 1: ok, …}`` map:

* completed: ``{'cid': hex text, 'result': value, 'reply_handler': h, 'correlation_id': None}`` — byte for
  byte what ``cowboy_sdk.testing.SimulatedChain.reply`` delivers;
* failed or timed out: ``{'cid', 'failure': {'kind': 'failure', 'v': 1, 'job_id': '0x…', 'reason',
  'attempts'}, 'reply_handler', 'correlation_id': None}`` — the SDK's ``JobFailure`` body, whose ``reason``
  is one of the four the SDK knows (:func:`sdk_failure_reason`; the node's own reason is in the job record).

The record is deleted when the reply is built, so a job resumes its continuation at most once; a
reply whose continuation (``__continuation:<cid>`` in the actor's state) is gone — already resumed,
or never saved — is dropped with a ``runner.reply_dropped`` event.

State: ``sdkjob/<job_id 32>`` -> canonical CBOR ``{0: actor, 1: cid, 2: reply_handler, 3: job_type,
4: task_index | null}``. A TaskGroup task's reply also carries its ``task_index``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs.executors import submit_request
from cowboy_node.execution.jobs.results import load_job
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_bytes, expect_map, expect_text
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

PREFIX = b"sdkjob/"
"""``sdkjob/<job_id>`` -> :class:`SdkJob` (pending runner jobs of SDK continuations)."""
CONT_KEY_PREFIX = b"__continuation:"
"""The SDK's continuation store key prefix (``cowboy_sdk.continuation._CONT_KEY_PREFIX``)."""
KIND = "runner_job"
"""``kind`` of an SDK runner request."""
JOB_TYPES = ("http", "llm", "mcp", "agent")
"""SDK job types this node maps onto JobSpecV1 (``container`` has no runtime here; anything else is unknown)."""
DEFAULT_MODEL = "default"
"""Model name of an ``llm`` job that names none (the SDK lets the runner choose)."""
DEFAULT_MAX_PRICE = 1_000_000
"""``max_price`` of a job whose call passes none (the escrow, with ``tip``, debited from the actor)."""
DEFAULT_TIMEOUT_BLOCKS = 100
"""``timeout_blocks`` of a job whose call passes none (the node's JobRequest default)."""
DEFAULT_MAX_TOKENS = 1_024
"""``max_tokens`` of an ``llm`` job whose call passes none."""
MAX_REPLY_HANDLER_BYTES = 256
"""Longest ``reply_handler`` (the JobSpec callback limit)."""
CID_BYTES = 32
"""Length of an SDK continuation id (keccak256)."""
MAX_GROUP_TASKS = 8
"""Most tasks of one TaskGroup (``cowboy_sdk.taskgroup``): ``task_index`` is below this."""
SUBMIT_CELLS = 128
"""Cells charged for the ``sdkjob/`` record (key, actor, cid, handler, type; a handler is at most 256 more)."""
TOPIC_SUBMITTED = "runner.job_submitted"
"""Event ``{0: job_id, 1: cid, 2: job_type}`` emitted by the actor when its runner job is accepted."""
TOPIC_DROPPED = "runner.reply_dropped"
"""Event ``{0: job_id, 1: cid, 2: reason}`` emitted when a reply finds no continuation to resume."""

# Job-level keyword arguments every runner call accepts (cowboy_sdk.runner); the rest belong to the job type.
_JOB_LEVEL = ("max_price", "tip", "timeout_blocks", "resume_cycles", "resume_cells")
# SDK JobFailure reasons (cowboy_sdk.runner._JOB_FAILURE_REASONS) the node's failures map onto.
_NO_RUNNER_REASONS = ("no_eligible_runner", "no_runners", "no_replacement")


@dataclass(frozen=True)
class SdkJob:
    """The pending reply of one SDK runner job (``sdkjob/<job_id>``)."""

    actor: bytes
    """The actor whose continuation sent the job (callback target and escrow payer)."""
    cid: bytes
    """The continuation id (32 bytes), echoed as hex text in the reply."""
    reply_handler: str
    """The resume leg the reply is delivered to."""
    job_type: str
    """The SDK job type (decides how the result bytes are decoded)."""
    task_index: int | None = None
    """The task's index in its TaskGroup (echoed in the reply), None for a single await."""

    def encode(self) -> bytes:
        """Canonical CBOR ``{0: actor, 1: cid, 2: reply_handler, 3: job_type, 4: task_index | null}``."""
        return encode({0: self.actor, 1: self.cid, 2: self.reply_handler, 3: self.job_type, 4: self.task_index})

    @classmethod
    def decode(cls, raw: bytes) -> SdkJob:
        """Strict decode."""
        m = expect_map(decode(raw), frozenset(range(5)), "sdk_job")
        index = m[4]
        if index is not None and (type(index) is not int or not 0 <= index < MAX_GROUP_TASKS):
            raise DecodeError("sdk_job.task_index is not a task index", field="sdk_job.task_index")
        return cls(expect_bytes(m[0], "sdk_job.actor", ADDRESS_LEN), expect_bytes(m[1], "sdk_job.cid", CID_BYTES),
                   expect_text(m[2], "sdk_job.reply_handler"), expect_text(m[3], "sdk_job.job_type"), index)


def _invalid(message: str) -> TxFailed:
    return TxFailed("runner_job_invalid", message)


def _text(value: object, what: str) -> str:
    if type(value) is not str:
        raise _invalid(f"{what} must be a str, got {type(value).__name__}")
    return value


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _invalid(f"{what} must be a non-negative int")
    return int(value)


def _body_hex(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return "0x" + value.encode("utf-8", "surrogatepass").hex()
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    raise _invalid(f"http body must be str or bytes, got {type(value).__name__}")


def _take(kwargs: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {n: kwargs.pop(n) for n in names if n in kwargs}


def _one_arg(args: list[Any], kwargs: dict[str, Any], name: str, job_type: str) -> Any:
    if len(args) > 1 or (args and name in kwargs):
        raise _invalid(f"runner.{job_type}() takes one positional argument ({name})")
    if args:
        return args[0]
    if name not in kwargs:
        raise _invalid(f"runner.{job_type}() needs {name}")
    return kwargs.pop(name)


def model_id(name: str) -> bytes:
    """JobSpec ``model_id`` of an SDK model name: ``keccak256(UTF-8 name)`` (project choice; runners list
    these ids in ``[executors.llm.models]``)."""
    return keccak256(name.encode("utf-8"))


def _job_type_json(job_type: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JobSpec JSON ``job_type`` of one SDK call; consumes the keyword arguments it uses."""
    if job_type == "http":
        url = _text(_one_arg(args, kwargs, "url", "http"), "url")
        out: dict[str, Any] = {"kind": "http", "url": url, "method": _text(kwargs.pop("method", "GET"), "method")}
        headers = kwargs.pop("headers", {})
        if not isinstance(headers, dict):
            raise _invalid("http headers must be a dict")
        out["headers"] = dict(headers)
        out["body"] = _body_hex(kwargs.pop("body", None))
        if "extraction" in kwargs:
            out["extraction"] = kwargs.pop("extraction")
        return out
    if job_type == "llm":
        prompt = _text(_one_arg(args, kwargs, "prompt", "llm"), "prompt")
        name = _text(kwargs.pop("model", DEFAULT_MODEL), "model")
        return {"kind": "llm", "model_id": "0x" + model_id(name).hex(), "prompt": prompt,
                "system_prompt": kwargs.pop("system_prompt", None), "temperature": kwargs.pop("temperature", None),
                "max_tokens": kwargs.pop("max_tokens", DEFAULT_MAX_TOKENS),
                "response_model": kwargs.pop("response_schema", None)}
    if job_type == "mcp":
        if args:
            raise _invalid("runner.mcp() takes the tool arguments as keywords")
        server = kwargs.pop("server", None)
        tool = kwargs.pop("tool", None)
        timeout = kwargs.pop("timeout_seconds", None)
        arguments = dict(kwargs)  # every other keyword is a tool argument
        kwargs.clear()
        return {"kind": "mcp", "server": server, "tool_name": tool, "arguments": arguments,
                "timeout_seconds": timeout}
    if job_type == "agent":
        if args:
            raise _invalid("runner.agent() takes model and query as keywords")
        out = {"kind": "agent", "model": kwargs.pop("model", None), "query": kwargs.pop("query", None),
               "max_iterations": kwargs.pop("max_iterations", 24),
               "max_tool_calls_per_iter": kwargs.pop("max_tool_calls_per_iter", 8),
               "timeout_seconds": kwargs.pop("timeout_seconds", 120)}
        out.update(_take(kwargs, ("system_prompt_path", "system_prompt_inline", "session_id", "session_dir")))
        return out
    if job_type == "container":
        raise TxFailed("runner_job_unsupported", "runner.container (CIP-10) needs a container runtime this node's "
                                                 "runners do not have")
    raise TxFailed("runner_job_unknown_type", f"unknown runner job type {job_type!r}; this node runs "
                                              f"{', '.join(JOB_TYPES)}")


@dataclass(frozen=True)
class RunnerJob:
    """One decoded ``runner_job`` message."""

    job_type: str
    """``http`` / ``llm`` / ``mcp`` / ``agent`` (others are refused when mapped)."""
    args: list[Any]
    """``payload['args']``."""
    kwargs: dict[str, Any]
    """``payload['kwargs']``."""
    cid: bytes
    """Continuation id."""
    reply_handler: str
    """Resume leg to deliver the reply to."""
    task_index: int | None = None
    """Index of the task in its TaskGroup (``task_index``/``total_tasks`` sent together), else None."""


def parse_message(payload: bytes) -> RunnerJob:
    """Decode an SDK ``runner_job`` message (SDK codec bytes); ``runner_job_invalid`` names what is wrong."""
    try:
        msg = sdk_codec.decode(payload)
    except Exception as e:  # the SDK codec raises CodecError and friends
        raise _invalid(f"not a cowboy_sdk canonical CBOR message: {type(e).__name__}: {e}") from None
    if not isinstance(msg, dict) or msg.get("kind") != KIND:
        raise _invalid("messages to the Job Dispatcher must be {'kind': 'runner_job', ...}")
    job_type = _text(msg.get("job_type"), "job_type")
    body = msg.get("payload")
    if not (isinstance(body, dict) and isinstance(body.get("args"), list) and isinstance(body.get("kwargs"), dict)):
        raise _invalid("payload must be {'args': [...], 'kwargs': {...}}")
    cid = msg.get("cid")
    if not isinstance(cid, bytes) or len(cid) != CID_BYTES:
        raise _invalid(f"cid must be {CID_BYTES} bytes")
    handler = _text(msg.get("reply_handler"), "reply_handler")
    if not 1 <= len(handler.encode("utf-8", "surrogatepass")) <= MAX_REPLY_HANDLER_BYTES:
        raise _invalid(f"reply_handler must be 1..{MAX_REPLY_HANDLER_BYTES} bytes")
    index, total = msg.get("task_index"), msg.get("total_tasks")
    if (index is None) != (total is None) or (index is not None and not (
            type(index) is int and type(total) is int and 0 <= index < total <= MAX_GROUP_TASKS)):
        raise _invalid(f"task_index/total_tasks must come together with 0 <= task_index < total_tasks <= "
                       f"{MAX_GROUP_TASKS}")
    return RunnerJob(job_type, list(body["args"]), dict(body["kwargs"]), cid, handler, index)


def job_request_json(job: RunnerJob, actor: bytes) -> dict[str, Any]:
    """The JobSpec JSON form (docs/jobs.md) of ``job``, its callback the actor's ``reply_handler``."""
    kwargs = dict(job.kwargs)
    level = _take(kwargs, _JOB_LEVEL)
    job_type = _job_type_json(job.job_type, list(job.args), kwargs)
    if kwargs:
        raise _invalid(f"runner.{job.job_type}() got unsupported keyword arguments: {', '.join(sorted(kwargs))}")
    return {
        "job_type": job_type,
        "max_price": _int(level.get("max_price", DEFAULT_MAX_PRICE), "max_price"),
        "tip": _int(level.get("tip", 0), "tip"),
        "timeout_blocks": _int(level.get("timeout_blocks", DEFAULT_TIMEOUT_BLOCKS), "timeout_blocks"),
        "callback": {"actor": "0x" + actor.hex(), "handler": job.reply_handler, "context": "0x" + job.cid.hex()},
    }


DEFERRED_DOMAIN = b"cowboy/deferred-job/v1"
"""Domain of :func:`job_tx_hash` for runs no transaction started."""


def job_tx_hash(ctx: BlockContext, tx_hash: bytes) -> bytes:
    """The hash job ids derive from (``derive_job_id(h, index)``): the transaction's, or — for a run no
    transaction started (timer fire, Mailbox message, job callback: ``tx_hash`` is 32 zero bytes) —
    ``keccak256("cowboy/deferred-job/v1" ‖ height u64 BE)``, so such jobs of different blocks never share an
    id (within a block the per-hash index tells them apart)."""
    if tx_hash != bytes(32):
        return tx_hash
    return keccak256(DEFERRED_DOMAIN + ctx.env.height.to_bytes(8, "big"))


def submit_runner_job(world: WorldState, ctx: BlockContext, meter: Meter, *, actor: bytes, payload: bytes,
                      tx_hash: bytes, events: list[Event]) -> bytes:
    """Submit the job a ``runner_job`` message asks for, paid by ``actor``; returns its job id.

    Refusals are ``TxFailed``: ``runner_job_invalid`` (shape), ``runner_job_unknown_type``,
    ``runner_job_unsupported`` (``container``), then the JobRequest rules' own codes
    (``job_type_invalid``, ``insufficient_balance``, ``no_eligible_runner``...).
    """
    job = parse_message(payload)
    try:
        request = parse_job_request_json(job_request_json(job, actor))
    except ValidationError as e:
        raise _invalid(e.message) from None
    job_id = submit_request(world, ctx, meter, request, submitter=actor, tx_hash=job_tx_hash(ctx, tx_hash),
                            events=events)
    record = SdkJob(actor, job.cid, job.reply_handler, job.job_type, job.task_index)
    meter.charge_cells(SUBMIT_CELLS + len(job.reply_handler))
    world.set(PREFIX + job_id, record.encode())
    events.append(Event(actor, TOPIC_SUBMITTED, encode({0: job_id, 1: job.cid, 2: job.job_type})))
    return job_id


# --- replies ------------------------------------------------------------------------------------
def decode_result(job_type: str, data: bytes) -> Any:
    """The reply's ``result`` for a job's verified result bytes.

    ``llm``/``agent``: the reply text (``str``; bytes if not UTF-8). ``http``/``mcp``: the parsed value when
    the bytes are strict JSON (what the SDK's ``.json()``/``.data`` expect of a JSON body), else the UTF-8
    text, else the bytes.
    """
    if job_type in ("http", "mcp"):
        try:
            return parse_json(data)
        except ValidationError:
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def sdk_failure_reason(node_reason: str) -> str:
    """One of the SDK's ``JobFailure`` reasons for a node failure reason: ``no_replacement_available`` when no
    runner could be (re)selected, else ``retries_exhausted`` (timeouts, error results, exhausted re-selection)."""
    return "no_replacement_available" if node_reason.startswith(_NO_RUNNER_REASONS) else "retries_exhausted"


@dataclass(frozen=True)
class Reply:
    """What to deliver for a finished SDK job: the resume payload, or why it is dropped."""

    record: SdkJob
    """The job's record (deleted from state when the reply was built)."""
    payload: bytes | None
    """SDK codec bytes of the reply, or None when dropped."""
    dropped: Event | None
    """The ``runner.reply_dropped`` event when the continuation is gone."""


def reply_for(world: WorldState, callback_payload: bytes, target: bytes) -> Reply | None:
    """The SDK reply for a job callback (``resolve_offchain.callback_payload`` bytes), or None if the job was not
    an SDK runner job. Consumes the job's ``sdkjob/`` record: a job resumes at most once."""
    try:
        m = expect_map(decode(callback_payload), frozenset(range(7)), "callback")
        job_id = expect_bytes(m[0], "callback.job_id", 32)
    except DecodeError:
        return None
    raw = world.get(PREFIX + job_id)
    if raw is None:
        return None
    record = SdkJob.decode(raw)
    if record.actor != target:  # the callback always names the submitting actor; anything else is not its reply
        return None
    world.delete(PREFIX + job_id)
    if store.get_state(world, target, CONT_KEY_PREFIX + record.cid) is None:
        data = encode({0: job_id, 1: record.cid, 2: "no_continuation"})
        return Reply(record, None, Event(target, TOPIC_DROPPED, data))
    reply: dict[str, Any] = {"cid": record.cid.hex(), "reply_handler": record.reply_handler, "correlation_id": None}
    if record.task_index is not None:
        reply["task_index"] = record.task_index
    ok, result, reason = m[1], m[2], m[3]
    if ok is True and isinstance(result, bytes):
        reply["result"] = decode_result(record.job_type, result)
    else:
        rec = load_job(world, job_id)
        attempts = 1 if rec is None else rec.attempt + 1
        reply["failure"] = {"kind": "failure", "v": 1, "job_id": "0x" + job_id.hex(),
                            "reason": sdk_failure_reason(reason if isinstance(reason, str) else ""),
                            "attempts": attempts}
    return Reply(record, sdk_codec.encode(reply), None)


__all__ = [
    "CONT_KEY_PREFIX",
    "PREFIX",
    "Reply",
    "RunnerJob",
    "SdkJob",
    "decode_result",
    "job_request_json",
    "job_tx_hash",
    "model_id",
    "parse_message",
    "reply_for",
    "sdk_failure_reason",
    "submit_runner_job",
]
