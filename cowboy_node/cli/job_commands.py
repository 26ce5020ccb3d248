"""Job client subcommands: ``tx submit-job`` and ``query job``.

Same conventions as :mod:`cowboy_node.cli.client_commands` (JSON on stdout; exit 0 success, 1 node error /
unreachable / wait timeout, 2 bad input, 3 failed transaction). The spec file is the JSON form of a job request
(docs/jobs.md "JobSpec JSON form"; example ``configs/examples/job-http.json``). It is checked before anything is
sent: a bad file exits 2 with the ``invalid_job_spec`` (shape) or submission-rule code and the field's JSON path.
"""

from __future__ import annotations

import argparse
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

from cowboy_node.cli.client_commands import (
    add_tx_flags,
    failure_of,
    load_key,
    print_failure,
    receipt_failed,
    should_wait,
    submit,
)
from cowboy_node.cli.common import (
    EXIT_TX_FAILED,
    UsageError,
    add_rpc_flag,
    cli_command,
    offline_flags_missing,
    print_error,
    print_json,
    rpc_client,
    uint_arg,
    wait_for_receipt,
)
from cowboy_node.execution.jobs.results import verification_params_of
from cowboy_node.execution.jobs.verification import check_params
from cowboy_protocol.codec import encode
from cowboy_protocol.http_client import ApiError
from cowboy_protocol.jobs.error_result import decode_error_result
from cowboy_protocol.jobs.json_schema import check_schema
from cowboy_protocol.txfees import CELLS_MARGIN
from cowboy_protocol.types.instructions import instruction_to_cbor
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id, validate_request
from cowboy_protocol.types.jobspec_checks import JsonSchemaValidCheck
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.validation_errors import ValidationError

SUBMIT_CYCLES_LIMIT = 1_000_000
"""Default cycles limit of ``tx submit-job``: 20,000 plus 50 per registered runner scanned by selection
(execution/jobs/dispatch.py), so this covers ~19,000 registered runners."""
CELLS_PER_RUNNER = 256
"""Cells charged per committee member (dispatch.py)."""
SNAPSHOT_CELLS_PER_RUNNER = 128
"""Cells per registered runner for the candidate snapshot an M > 1 job stores in block S (a row is ~65 bytes:
address, effective stake, reputation, weight; twice that covers the key and growth of the encodings)."""
OFFLINE_RUNNERS_ASSUMED = 1_000
"""Registry size the default cells limit assumes when signing offline (pass ``--cells-limit`` for more)."""
MAX_SPEC_FILE_BYTES = 256 * 1024
"""Largest spec file read."""

_JOB_ID_RE = re.compile(r"(?:0x)?([0-9a-fA-F]{64})")


def _job_id(text: str) -> str:
    m = _JOB_ID_RE.fullmatch(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"expected a job id: 0x followed by 64 hex digits, got {text!r}")
    return "0x" + m.group(1).lower()


def _read_spec(path: str) -> Any:
    """The JobRequest of a spec file, shape-checked; problems are usage errors naming the JSON path."""

    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"--spec: cannot read {path}: {e.strerror or e}") from None
    if len(raw) > MAX_SPEC_FILE_BYTES:
        raise UsageError(f"--spec: {path} is larger than {MAX_SPEC_FILE_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"--spec: {path} is not valid JSON: {e}") from None
    try:
        return parse_job_request_json(doc)
    except ValidationError as e:
        raise UsageError(f"--spec: {path}: {e.code}: {e.message}") from None


def _check_rules(path: str, request: Any, commit_phase_permille: int) -> None:
    """The chain's submission rules (execution/jobs/executors.validate), so a refused job costs no fee."""

    try:
        validate_request(request, commit_phase_permille=commit_phase_permille)
        for check in request.verification.checks:
            if isinstance(check, JsonSchemaValidCheck):
                check_schema(check.schema)
        check_params(verification_params_of(request.verification))
    except ValidationError as e:
        field = f" ({e.field})" if getattr(e, "field", None) else ""
        raise UsageError(f"--spec: {path}: {e.code}{field}: {e.message}") from None


def _registered_runners(args: argparse.Namespace, client: Any) -> int:
    """How many runners the registry holds (the snapshot of an M > 1 job has at most one row each); offline
    (``--sign-only`` with every offline flag given) the default assumes :data:`OFFLINE_RUNNERS_ASSUMED`."""
    if getattr(args, "sign_only", False) and not offline_flags_missing(args):
        return OFFLINE_RUNNERS_ASSUMED
    body = client.active_runners(limit=1)
    count = body.get("count") if isinstance(body, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ApiError("invalid_response", "/runners/active has no count", 200)
    return count


def _commit_phase_permille(client: Any) -> int:
    params = client.params()
    value = params.get("runners", {}).get("commit_phase_permille") if isinstance(params, dict) else None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError("invalid_response", "/params has no runners.commit_phase_permille", 200)
    return value


def _http_host(request: Any) -> str | None:
    """The host of an HTTP job's URL (for the hint after a refusal), else None."""
    url = getattr(request.job_type, "url", None)
    return urllib.parse.urlsplit(url).hostname if isinstance(url, str) else None


@cli_command
def cmd_tx_submit_job(args: argparse.Namespace) -> int:
    """Submit a job; prints its id (derived from the transaction hash, index 0) and, with ``--wait``, the
    receipt and the job's status. A failed transaction (e.g. ``no_eligible_runner``) exits 3 with its code."""

    request = _read_spec(args.spec)
    sk, sender = load_key(args)
    client = rpc_client(args)
    permille = args.commit_phase_permille
    _check_rules(args.spec, request, permille if permille is not None else _commit_phase_permille(client))
    ins = JobSubmit(request)
    if args.cells_limit is None:
        size = len(encode(instruction_to_cbor(ins)))
        args.cells_limit = 2 * size + CELLS_PER_RUNNER * request.verification.runners + CELLS_MARGIN
        if request.verification.runners > 1:  # block S stores the candidate snapshot, paid by its size (§9.2)
            args.cells_limit += SNAPSHOT_CELLS_PER_RUNNER * _registered_runners(args, client)
    tx_hash = submit(args, client, sk, sender, ins)
    job_id = "0x" + derive_job_id(bytes.fromhex(tx_hash[2:]), 0).hex()
    head = {"job_id": job_id, "tx_hash": tx_hash}
    if not should_wait(args):
        print_json(head)
        return 0
    receipt = wait_for_receipt(client, tx_hash, args.timeout)
    if receipt is None:
        message = f"no receipt for {tx_hash} after {args.timeout:g} s"
        print_json({**head, "error": {"code": "timeout", "message": message}})
        print_error(f"timeout: {message}")
        return 1
    out: dict[str, Any] = {**head, "height": receipt.get("height"), "receipt": receipt}
    if receipt_failed(receipt):
        print_json({**out, "error": failure_of(receipt)})
        print_failure("JobSubmit (no job was created, the escrow is untouched)", receipt, host=_http_host(request))
        return EXIT_TX_FAILED
    out["job"] = client.job_status(job_id)
    print_json(out)
    return 0


@cli_command
def cmd_query_job(args: argparse.Namespace) -> int:
    """The whole job record (``GET /job/{id}``), or with ``--status`` / ``--results`` the smaller views."""
    client = rpc_client(args)
    doc: Any = client.job_status(args.job_id) if args.status else client.job_results(args.job_id) \
        if args.results else client.job(args.job_id)
    if args.results and isinstance(doc, dict):
        _decode_error_results(doc)
    print_json(doc)
    return 0


def _decode_error_results(doc: dict[str, Any]) -> None:
    """Add ``"error": {"code", "detail"}`` beside every revealed error result (docs/jobs.md "Error results"), whose
    bytes the node shows only as hex: a failed job's reason in words."""
    for reveal in doc.get("reveals") or []:
        raw = reveal.get("result") if isinstance(reveal, dict) else None
        if not isinstance(raw, str) or not raw.startswith("0x"):
            continue
        try:
            err = decode_error_result(bytes.fromhex(raw[2:]))
        except ValueError:
            continue
        if err is not None:
            reveal["error"] = {"code": err.code, "detail": err.detail}


def register_tx(tx_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tx submit-job``."""
    tj = tx_sub.add_parser("submit-job", help="submit an off-chain job (prints its job_id)")
    tj.add_argument("--key", required=True, metavar="FILE", help="the submitter's account key file (pays the escrow)")
    tj.add_argument("--spec", required=True, metavar="FILE.json",
                    help="the job request in JSON (docs/jobs.md; e.g. configs/examples/job-http.json)")
    add_tx_flags(tj, cycles_limit=SUBMIT_CYCLES_LIMIT, cells_limit=None,
                 cells_help=f"default 2 × instruction bytes + {CELLS_PER_RUNNER} per committee seat + {CELLS_MARGIN}, "
                            f"+ {SNAPSHOT_CELLS_PER_RUNNER} per registered runner when M > 1")
    tj.add_argument("--commit-phase-permille", type=uint_arg(1000, "permille"), default=None, metavar="N",
                    help="params.runners.commit_phase_permille for the local deadline check (default: from "
                         "/params; give it to --sign-only offline)")
    tj.set_defaults(func=cmd_tx_submit_job, extra_offline_flags=(("commit_phase_permille", "--commit-phase-permille"),))


def register_query(q_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``query job``."""
    qj = q_sub.add_parser("job", help="a job's record (GET /job/{id})")
    qj.add_argument("job_id", type=_job_id, metavar="ID", help="0x + 64 hex digits")
    view = qj.add_mutually_exclusive_group()
    view.add_argument("--status", action="store_true", help="only the status view (GET /job/{id}/status)")
    view.add_argument("--results", action="store_true", help="reveals and outcome (GET /job/{id}/results)")
    add_rpc_flag(qj)
    qj.set_defaults(func=cmd_query_job)
