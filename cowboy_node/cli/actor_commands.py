"""Actor and timer client subcommands: ``tx deploy|call|update-timer-config|cancel-timer|extend-timer``
and ``query actor|timers|read``.

Same conventions as :mod:`cowboy_node.cli.client_commands` (JSON on stdout; exit 0 success, 1 node
error / unreachable / wait timeout, 2 bad input). Byte arguments (salt, payload, state keys, timer
ids) are hex with an optional ``0x``; a ``--key``/``--prefix`` state key that does not start with
``0x`` is taken as UTF-8 text.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cowboy_node.cli import workflow_commands
from cowboy_node.cli.client_commands import add_tx_flags, load_key, report, should_wait, submit
from cowboy_node.cli.common import (
    U64_MAX,
    UsageError,
    add_rpc_flag,
    address_arg,
    cli_command,
    print_json,
    rpc_client,
    uint_arg,
)
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.codecache import CODE_CACHE
from cowboy_node.execution.actors.rejection import PARSER_LINE, PARSER_RULES, rejected_code
from cowboy_node.execution.pvm import ActorRejected
from cowboy_protocol.codec import CodecError, decode
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.http_client import RpcClient
from cowboy_protocol.txfees import ACTOR_CELLS_MARGIN
from cowboy_protocol.types.instructions import CallActor, CancelTimer, DeployActor, ExtendTimer, UpdateTimerConfig
from cowboy_protocol.types.params import TimerConfig
from cowboy_protocol.types.validation_errors import ValidationError

DEPLOY_CYCLES_LIMIT = 5_000_000
"""Default cycles limit of ``tx deploy`` (compiling and the init handler)."""
CALL_CYCLES_LIMIT = 1_000_000
"""Default cycles limit of ``tx call``."""
READ_CYCLES_LIMIT = 1_000_000
"""Default cycles limit of ``query read`` (the node caps it at 10,000,000)."""
MAX_SOURCE_BYTES = 128 * 1024
MAX_SALT_BYTES = 32
MAX_HANDLER_BYTES = 256
MAX_STATE_KEY_BYTES = 1024

_HEX_RE = re.compile(r"(?:0x)?((?:[0-9a-fA-F]{2})*)")


# -- argument types --------------------------------------------------------------------
def _hex(max_bytes: int | None = None, exact: int | None = None) -> Callable[[str], bytes]:
    def parse(text: str) -> bytes:
        m = _HEX_RE.fullmatch(text.strip())
        if m is None:
            raise argparse.ArgumentTypeError(f"expected hex bytes (optional 0x, even number of digits), got {text!r}")
        data = bytes.fromhex(m.group(1))
        if exact is not None and len(data) != exact:
            raise argparse.ArgumentTypeError(f"expected exactly {exact} bytes, got {len(data)}")
        if max_bytes is not None and len(data) > max_bytes:
            raise argparse.ArgumentTypeError(f"at most {max_bytes} bytes, got {len(data)}")
        return data
    return parse


def _handler(text: str) -> str:
    try:
        n = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        n = 0
    if not 0 < n <= MAX_HANDLER_BYTES:
        raise argparse.ArgumentTypeError(f"handler must be 1..{MAX_HANDLER_BYTES} UTF-8 bytes, got {text!r}")
    return text


def _history_limit(text: str) -> int:
    value = uint_arg(200, "the history maximum")(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _cip1_pages(text: str) -> int:
    value = uint_arg(64, "the page maximum")(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _scan_limit(text: str) -> int:
    value = uint_arg(1000, "the scan maximum")(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _state_key(text: str, *, allow_empty: bool = False) -> bytes:
    """``0x…`` is hex; anything else is the UTF-8 bytes of the text."""
    try:
        key = _hex()(text) if text.startswith("0x") else text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"state key is not valid text: {text!r}") from None
    if not key and not allow_empty:
        raise argparse.ArgumentTypeError("state key must not be empty")
    if len(key) > MAX_STATE_KEY_BYTES:
        raise argparse.ArgumentTypeError(f"state key longer than {MAX_STATE_KEY_BYTES} bytes")
    return key


def _read_source(path: str) -> str:
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"--source: cannot read {path}: {e.strerror or e}") from None
    if len(raw) > MAX_SOURCE_BYTES:
        raise UsageError(f"--source: {path} is {len(raw)} bytes; the limit is {MAX_SOURCE_BYTES}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"--source: {path} is not UTF-8 ({e.reason} at byte {e.start})") from None


# -- tx commands -----------------------------------------------------------------------
def _check_dry_run_flags(args: argparse.Namespace, default_cycles: int) -> None:
    """``--simulate`` sends nothing (no ``--sign-only``/waiting flags); without it ``--key`` is required."""
    if args.simulate:
        if args.sign_only or args.gas is not None:
            raise UsageError("--simulate sends nothing: it cannot be combined with --sign-only or --gas")
    else:
        if args.key is None:
            raise UsageError("--key is required (only --simulate runs without a key)")
        if args.sender is not None:
            raise UsageError("--from is only for --simulate (a transaction's sender is its --key)")
        workflow_commands.check_gas_flags(args, default_cycles)


@cli_command
def cmd_tx_deploy(args: argparse.Namespace) -> int:
    """Deploy an actor; prints its address (derived locally) and, unless ``--no-wait``, the receipt.
    ``--simulate``: a dry run only; ``--gas auto``: limits from a dry run."""

    source = _read_source(args.source)
    if args.payload and not args.init:
        raise UsageError("--payload needs --init (the payload is passed to the init handler)")
    _check_dry_run_flags(args, DEPLOY_CYCLES_LIMIT)
    ins = DeployActor(source=source, salt=args.salt, init_handler=args.init or "", init_payload=args.payload)
    client = rpc_client(args)
    if args.simulate:
        sim = workflow_commands.simulate(client, ins, workflow_commands.dry_run_sender(args), args.cycles_limit)
        return workflow_commands.report_simulation(sim, {"address": sim.get("address")})
    sk, sender = load_key(args)
    if args.gas == "auto":
        stop = workflow_commands.apply_gas_auto(args, client, ins, sender)
        if stop is not None:
            return stop
    if args.cells_limit is None:
        args.cells_limit = 2 * len(source.encode("utf-8")) + len(args.payload) + ACTOR_CELLS_MARGIN
    address = to_checksum_address(derive_actor_address(sender, args.salt, source))
    tx_hash = submit(args, client, sk, sender, ins)
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout, extra={"address": address},
                  explain=lambda receipt: _parser_detail(receipt, source))


def _parser_detail(receipt: Mapping[str, Any], source: str) -> str | None:
    """Where this machine's parser puts a refusal the receipt reports without a line (``PARSER_RULES``)."""

    code = str(receipt.get("error_code") or "")
    if not any(code == rejected_code(rule, PARSER_LINE) for rule in PARSER_RULES):
        return None
    try:
        CODE_CACHE.compile(source)
    except ActorRejected as e:
        where = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
        return f"line {e.line}: {e.rule}: {e.message} (this machine's parser, {where})"
    return None


@cli_command
def cmd_tx_call(args: argparse.Namespace) -> int:
    """Call ``handler(payload)`` on an actor; waits for and prints the receipt and the handler's result.
    ``--simulate``: a dry run only; ``--gas auto``: limits from a dry run."""

    _check_dry_run_flags(args, CALL_CYCLES_LIMIT)
    ins = CallActor(actor=args.actor, handler=args.handler, payload=args.payload)
    client = rpc_client(args)
    if args.simulate:
        return workflow_commands.report_simulation(
            workflow_commands.simulate(client, ins, workflow_commands.dry_run_sender(args), args.cycles_limit))
    sk, sender = load_key(args)
    if args.gas == "auto":
        stop = workflow_commands.apply_gas_auto(args, client, ins, sender)
        if stop is not None:
            return stop
    if args.cells_limit is None:
        args.cells_limit = len(args.payload) + ACTOR_CELLS_MARGIN
    tx_hash = submit(args, client, sk, sender, ins)
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout, from_receipt=_returned)


def _returned(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """``{"result": "0x…"}`` from the receipt's ``actor.returned`` event (CBOR byte string), if any."""

    for event in receipt.get("events") or ():
        if isinstance(event, dict) and event.get("topic") == "actor.returned":
            try:
                value = decode(bytes.fromhex(str(event.get("data", ""))[2:]))
            except (ValueError, CodecError):
                return {}
            return {"result": "0x" + value.hex()} if isinstance(value, bytes) else {}
    return {}


@cli_command
def cmd_tx_update_timer_config(args: argparse.Namespace) -> int:
    """System deployers only: replace the governed TimerConfig (every field must be given)."""

    cfg = TimerConfig(max_ttl_blocks=args.max_ttl_blocks, max_cycles_per_fire=args.max_cycles_per_fire,
                      max_cells_per_fire=args.max_cells_per_fire, max_timers_per_actor=args.max_timers_per_actor,
                      gc_cycles_per_block=args.gc_cycles_per_block)
    try:
        cfg.validate()
    except ValidationError as e:
        raise UsageError(e.message) from None
    sk, sender = load_key(args)
    client = rpc_client(args)
    tx_hash = submit(args, client, sk, sender, UpdateTimerConfig(cfg))
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout)


@cli_command
def cmd_tx_cancel_timer(args: argparse.Namespace) -> int:
    """System deployers only: remove any actor's timer (idempotent)."""

    sk, sender = load_key(args)
    client = rpc_client(args)
    tx_hash = submit(args, client, sk, sender, CancelTimer(args.timer_id))
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout)


@cli_command
def cmd_tx_extend_timer(args: argparse.Namespace) -> int:
    """System deployers only: raise a timer's expires_at (clamped to current + max_ttl_blocks)."""

    sk, sender = load_key(args)
    client = rpc_client(args)
    tx_hash = submit(args, client, sk, sender, ExtendTimer(args.timer_id, args.expires_at))
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout)


# -- query commands --------------------------------------------------------------------
def _checksum(address: bytes) -> str:
    return to_checksum_address(address)


@cli_command
def cmd_query_actor(args: argparse.Namespace) -> int:
    """The actor record, one storage value (``--key``) or an ordered scan (``--prefix``/``--limit``)."""
    client = rpc_client(args)
    doc: Mapping[str, Any]
    if args.key is not None:
        if args.prefix is not None or args.limit is not None:
            raise UsageError("--key cannot be combined with --prefix/--limit")
        doc = client.actor_state(args.address, args.key)
    elif args.prefix is not None or args.limit is not None:
        doc = client.actor_state_scan(args.address, args.prefix or b"", args.limit)
    else:
        doc = client.actor(args.address)
    print_json(doc)
    return 0


@cli_command
def cmd_query_timers(args: argparse.Namespace) -> int:
    """The actor's live timers, in due order, and (``"recent_terminal"``) its most recent timers that ended
    without firing, with their reason (``GET /actor/{address}/timers/history``)."""
    client = rpc_client(args)
    after: bytes | None = args.cip1_after
    live: Any = client.actor_timers(args.address, cip1_after=None if after is None else "0x" + after.hex())
    history: Any = client.timer_history(args.address, limit=args.history)
    if isinstance(live, dict):
        live = _follow_cip1_pages(client, args.address, live, args.cip1_pages)
    if isinstance(live, dict) and isinstance(history, dict):
        live = {**live, "recent_terminal": history.get("terminal"),
                "recent_terminal_truncated": history.get("truncated")}
    print_json(live)
    return 0


def _follow_cip1_pages(client: RpcClient, address: bytes, doc: dict[str, Any], pages: int) -> dict[str, Any]:
    """Fetch up to ``pages`` pages of the CIP-1 listing in all (``cip1.next`` → ``?cip1_after=``), merging their
    timers and scan counts into ``doc["cip1"]``; its ``next`` is the cursor after the last page fetched."""
    cip1 = doc.get("cip1")
    if not isinstance(cip1, dict):
        return doc
    cip1 = {**cip1, "timers": list(cip1.get("timers") or [])}
    for _ in range(pages - 1):
        cursor = cip1.get("next")
        if not isinstance(cursor, str):
            break
        more: Any = client.actor_timers(address, cip1_after=cursor)
        page = more.get("cip1") if isinstance(more, dict) else None
        if not isinstance(page, dict):
            break
        cip1["timers"] += page.get("timers") or []
        cip1["scanned"] = cip1.get("scanned", 0) + page.get("scanned", 0)
        cip1["next"] = page.get("next")
    cip1["timers"].sort(key=lambda t: (t.get("height", 0), t.get("seq", 0)))
    return {**doc, "cip1": cip1}


@cli_command
def cmd_query_read(args: argparse.Namespace) -> int:
    """Run a handler read-only on the head state (nothing is written or charged)."""
    body: dict[str, Any] = {"actor": _checksum(args.address), "handler": args.handler,
                            "payload": "0x" + args.payload.hex(), "cycles_limit": args.cycles_limit}
    print_json(rpc_client(args).actor_read(body))
    return 0


# -- registration ----------------------------------------------------------------------
def register_tx(tx_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tx deploy``, ``tx call`` and the timer system instructions."""
    u64 = uint_arg(U64_MAX, "u64")
    td = tx_sub.add_parser("deploy", help="deploy a Python actor (waits for the receipt unless --no-wait)")
    td.add_argument("--key", default=None, metavar="FILE", help="deployer's account key file (required unless "
                                                                "--simulate)")
    td.add_argument("--source", required=True, metavar="FILE", help="actor source file (UTF-8 Python)")
    td.add_argument("--salt", type=_hex(MAX_SALT_BYTES), default=b"", metavar="HEX",
                    help=f"0..{MAX_SALT_BYTES} bytes mixed into the address (default empty)")
    td.add_argument("--init", type=_handler, default=None, metavar="HANDLER", help="handler run right after deploy")
    td.add_argument("--payload", type=_hex(), default=b"", metavar="HEX", help="payload for --init")
    add_tx_flags(td, cycles_limit=DEPLOY_CYCLES_LIMIT, cells_limit=None,
                 cells_help=f"default 2 × source bytes + payload bytes + {ACTOR_CELLS_MARGIN}")
    _add_dry_run_flags(td)
    td.set_defaults(func=cmd_tx_deploy)

    add_call_parser(tx_sub)

    tu = tx_sub.add_parser("update-timer-config", help="(system deployers) replace the governed TimerConfig")
    tu.add_argument("--key", required=True, metavar="FILE")
    for name in ("max-ttl-blocks", "max-cycles-per-fire", "max-cells-per-fire", "max-timers-per-actor",
                 "gc-cycles-per-block"):
        tu.add_argument(f"--{name}", required=True, type=u64, metavar="N")
    add_tx_flags(tu)
    tu.set_defaults(func=cmd_tx_update_timer_config)

    tk = tx_sub.add_parser("cancel-timer", help="(system deployers) remove any actor's timer; idempotent")
    tk.add_argument("--key", required=True, metavar="FILE")
    tk.add_argument("--timer-id", required=True, type=_hex(exact=32), metavar="HEX")
    add_tx_flags(tk)
    tk.set_defaults(func=cmd_tx_cancel_timer)

    te = tx_sub.add_parser("extend-timer", help="(system deployers) raise a timer's expires_at; never shortens")
    te.add_argument("--key", required=True, metavar="FILE")
    te.add_argument("--timer-id", required=True, type=_hex(exact=32), metavar="HEX")
    te.add_argument("--expires-at", required=True, type=u64, metavar="HEIGHT")
    add_tx_flags(te)
    te.set_defaults(func=cmd_tx_extend_timer)


def _add_dry_run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulate", action="store_true",
                   help="dry run only (POST /simulate on the head state): prints result, events, cycles and cells "
                        "used and the error; nothing is signed or sent; exit 3 if the run fails")
    p.add_argument("--from", dest="sender", type=address_arg, default=None, metavar="ADDRESS",
                   help="with --simulate and no --key: the sender to simulate as (default the zero address)")
    p.add_argument("--gas", choices=("auto",), default=None,
                   help="auto: set --cycles-limit/--cells-limit from a dry run (125%% of its use plus a margin); "
                        "a failed dry run exits 3 and sends nothing")


def add_call_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``call`` (as ``tx call`` and as the top-level ``cowboy-node call``)."""
    tc = sub.add_parser("call", help="call a handler of a deployed actor (--simulate: a dry run)")
    tc.add_argument("--key", default=None, metavar="FILE", help="caller's account key file (required unless "
                                                                "--simulate)")
    tc.add_argument("--actor", required=True, type=address_arg, metavar="ADDRESS")
    tc.add_argument("--handler", required=True, type=_handler, metavar="NAME")
    tc.add_argument("--payload", type=_hex(), default=b"", metavar="HEX", help="bytes passed to the handler")
    add_tx_flags(tc, cycles_limit=CALL_CYCLES_LIMIT, cells_limit=None,
                 cells_help=f"default payload bytes + {ACTOR_CELLS_MARGIN}")
    _add_dry_run_flags(tc)
    tc.set_defaults(func=cmd_tx_call)


def register_query(q_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``query actor``, ``query timers`` and ``query read``."""
    qa = q_sub.add_parser("actor", help="an actor's record, one storage value (--key) or a scan (--prefix)")
    qa.add_argument("address", type=address_arg, metavar="ADDRESS")
    qa.add_argument("--key", type=_state_key, default=None, metavar="STATE_KEY",
                    help="storage key: 0x-hex, or text taken as UTF-8")
    qa.add_argument("--prefix", type=lambda t: _state_key(t, allow_empty=True), default=None, metavar="PREFIX",
                    help="list storage entries under this key prefix (0x-hex or text)")
    qa.add_argument("--limit", type=_scan_limit, default=None, metavar="N",
                    help="scan at most N entries (1..1000, default 100)")
    add_rpc_flag(qa)
    qa.set_defaults(func=cmd_query_actor)

    qt = q_sub.add_parser("timers", help="an actor's live timers, in due order, and its recent terminal timers")
    qt.add_argument("address", type=address_arg, metavar="ADDRESS")
    qt.add_argument("--history", type=_history_limit, default=20, metavar="N",
                    help="recent terminal timers to show (1..200, default 20)")
    qt.add_argument("--cip1-pages", type=_cip1_pages, default=8, metavar="N",
                    help="pages of the CIP-1 (set_timeout) listing to fetch, following cip1.next (1..64, default "
                         "8; each page scans at most 2,048 CIP-1 records of all actors)")
    qt.add_argument("--cip1-after", type=_hex(exact=32), default=None, metavar="TIMER_ID",
                    help="start the CIP-1 listing after this id (a previous answer's cip1.next)")
    add_rpc_flag(qt)
    qt.set_defaults(func=cmd_query_timers)

    qr = q_sub.add_parser("read", help="run a handler read-only on the head state (no transaction)")
    qr.add_argument("address", type=address_arg, metavar="ADDRESS")
    qr.add_argument("--handler", required=True, type=_handler, metavar="NAME")
    qr.add_argument("--payload", type=_hex(), default=b"", metavar="HEX")
    qr.add_argument("--cycles-limit", type=uint_arg(10_000_000, "the node's read maximum"), default=READ_CYCLES_LIMIT,
                    metavar="N", help=f"default {READ_CYCLES_LIMIT}")
    add_rpc_flag(qr)
    qr.set_defaults(func=cmd_query_read)
