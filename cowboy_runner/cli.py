"""``cowboy-runner`` command line (docs/runner.md "Command line").

Exit codes: 0 success; 1 unexpected error; 2 invalid usage or configuration (the message names the
``runner.toml`` key or the file); 3 no daemon running (``status``, ``drain``); 4 validator unreachable or request
refused; 5 the transaction was refused by chain rules (stake below ``min_runner_stake``) or failed on chain, or no
receipt appeared in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from cowboy_protocol.http_client import ApiError, NodeUnreachable, RpcClient
from cowboy_runner import capabilities_cmd
from cowboy_runner.cli_support import (
    EXIT_CHAIN,
    EXIT_CONFIG,
    EXIT_ERROR,
    EXIT_NOT_RUNNING,
    EXIT_OK,
    EXIT_VALIDATOR,
    CliError,
    _fees,
    _live_daemon,
    _load,
    _state_dir,
    _submit_and_wait,
)
from cowboy_runner.config import ConfigError, init_home, load_settings
from cowboy_runner.daemon import Daemon, StartupError, configure_logging
from cowboy_runner.keyfile import load_key
from cowboy_runner.policy import refusal_lines, refusal_policy
from cowboy_runner.status import is_running, read_pid, read_status, render_text
from cowboy_runner.txbuild import TxBuildError, build_deregister, build_register


def _report(receipt: Mapping[str, Any], what: str) -> int:
    ok = receipt.get("status") == "success"
    print(json.dumps({"action": what, "status": receipt.get("status"), "error_code": receipt.get("error_code"),
                      "tx_hash": receipt.get("tx_hash"), "height": receipt.get("height")}))
    return EXIT_OK if ok else EXIT_CHAIN


def cmd_register(args: argparse.Namespace) -> int:
    """Submit RunnerRegister with the configured capabilities and rate card; wait for the receipt."""
    settings, key = _load(args.home)
    rpc = RpcClient(settings.validator_rpc)
    params = rpc.params()
    minimum = int(params["runners"]["min_runner_stake"])
    if args.stake < minimum:
        raise CliError(f"--stake {args.stake} is below the chain's min_runner_stake {minimum}", EXIT_CHAIN)
    status = rpc.status()
    nonce = int(rpc.account(key.address)["next_pending_nonce"])
    tx = build_register(key, str(status["chain_id"]), stake=args.stake, capabilities=settings.capabilities,
                        rate_card=settings.rate_card, nonce=nonce, fees=_fees(status, settings))
    return _report(_submit_and_wait(rpc, tx, args.timeout), "register")


def cmd_deregister(args: argparse.Namespace) -> int:
    """Submit RunnerDeregister; wait for the receipt."""
    settings, key = _load(args.home)
    rpc = RpcClient(settings.validator_rpc)
    status = rpc.status()
    nonce = int(rpc.account(key.address)["next_pending_nonce"])
    tx = build_deregister(key, str(status["chain_id"]), nonce=nonce, fees=_fees(status, settings))
    return _report(_submit_and_wait(rpc, tx, args.timeout), "deregister")


def cmd_run(args: argparse.Namespace) -> int:
    """Run the daemon in the foreground."""

    settings, key = _load(args.home)
    configure_logging(settings.log_format, settings.log_level)
    running = _live_daemon(settings.journal_path.parent)
    if running is not None:
        raise CliError(f"a runner daemon is already running for {args.home} (pid {running})", EXIT_CONFIG)
    try:
        return asyncio.run(Daemon(settings, key).run())
    except StartupError as e:
        raise CliError(str(e), e.exit_code) from None


def cmd_status(args: argparse.Namespace) -> int:
    """Print the running daemon's status file."""

    directory = _state_dir(args.home)
    doc = read_status(directory)
    if doc is None:
        raise CliError(f"no status in {directory}: the daemon has not run (start it with `cowboy-runner run`)",
                       EXIT_NOT_RUNNING)
    running = is_running(directory, doc)
    refusals = _refusals(args.home, doc)
    if args.json:
        print(json.dumps({**doc, "running": running, "refusals": refusals}, indent=2, sort_keys=True))
    else:
        print("\n".join([render_text(doc, running), *refusals]))
    return EXIT_OK if running else EXIT_NOT_RUNNING


def _refusals(home: str, doc: dict[str, Any]) -> list[str]:
    """What the daemon will refuse and which key to change (cowboy_runner/policy.py), from the policy it started
    with, the chain's advertised capabilities it last read, and the runner.toml on disk now."""
    policy = doc.get("policy")
    if not isinstance(policy, dict):
        return []
    try:
        current: dict[str, Any] | None = refusal_policy(load_settings(home))
    except ConfigError:
        current = None
    return refusal_lines(policy, doc.get("chain_capabilities"), current, home)


def cmd_drain(args: argparse.Namespace) -> int:
    """Signal the daemon (SIGUSR1) to stop taking work, finish in-flight jobs and exit; optionally wait."""
    directory = _state_dir(args.home)
    pid = _live_daemon(directory)
    if pid is None:
        stale = read_pid(directory)
        why = "" if stale is None else f" (the pid file names {stale}, which is not this home's live daemon)"
        raise CliError(f"no runner daemon is running for this home{why}", EXIT_NOT_RUNNING)
    os.kill(pid, signal.SIGUSR1)
    print(f"drain requested (pid {pid})")
    if args.wait > 0:
        deadline = time.monotonic() + args.wait
        while time.monotonic() < deadline:
            if read_pid(directory) is None:
                print("daemon exited")
                return EXIT_OK
            time.sleep(0.2)
        raise CliError(f"daemon still running after {args.wait:g} s", EXIT_ERROR)
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    """Create the home: key (0600) and a commented runner.toml."""
    try:
        path = init_home(Path(args.home), args.validator_rpc, force=args.force)
    except (FileExistsError, ValueError) as e:
        raise CliError(str(e), EXIT_CONFIG) from None
    key = load_key(Path(args.home) / "keys" / "runner.key")
    print(json.dumps({"config": str(path), "address": key.checksum_address}))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    p = argparse.ArgumentParser(prog="cowboy-runner", description="Cowboy runner daemon (CIP-11)")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command")

    def with_home(name: str, help_text: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_text)
        sp.add_argument("--home", required=True, help="runner home directory (holds runner.toml)")
        return sp

    sp = with_home("init", "create a home: key file (0600) and a commented runner.toml")
    sp.add_argument("--validator-rpc", required=True, help="the validator's HTTP API, e.g. http://127.0.0.1:4000")
    sp.add_argument("--force", action="store_true", help="rewrite runner.toml (the key is never replaced)")
    sp.set_defaults(fn=cmd_init)
    sp = with_home("register", "submit RunnerRegister and wait for inclusion")
    sp.add_argument("--stake", type=int, required=True, help="stake to bond (>= the chain's min_runner_stake)")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the receipt")
    sp.set_defaults(fn=cmd_register)
    sp = with_home("deregister", "submit RunnerDeregister and wait for inclusion")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the receipt")
    sp.set_defaults(fn=cmd_deregister)
    with_home("run", "run the daemon in the foreground").set_defaults(fn=cmd_run)
    sp = with_home("status", "show the running daemon's sessions, presence, jobs and last results")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.set_defaults(fn=cmd_status)
    sp = with_home("drain", "stop taking new work, finish in-flight jobs, then exit")
    sp.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the daemon to exit (0: do not)")
    sp.set_defaults(fn=cmd_drain)
    capabilities_cmd.register(with_home)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cowboy-runner`` console script."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.version:
        try:
            print(version("cowboy-node"))
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            print("unknown")
        return EXIT_OK
    if getattr(args, "fn", None) is None:
        p.print_help(sys.stderr)
        return EXIT_CONFIG
    if argv is None and args.command != "run":
        # `cowboy-runner status | head`: a closed pipe ends a printing command quietly, as it does any Unix
        # filter (Python ignores SIGPIPE and would die with BrokenPipeError). Not for the daemon: its sockets
        # and its MCP servers' pipes rely on SIGPIPE being ignored. Only as the process's own entry point (argv
        # None): called in-process (tests) it must not change the host process's signal disposition.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        code: int = args.fn(args)
        return code
    except CliError as e:
        print(f"cowboy-runner: {e}", file=sys.stderr)
        return e.code
    except NodeUnreachable as e:
        print(f"cowboy-runner: runner.validator_rpc: {e}", file=sys.stderr)
        return EXIT_VALIDATOR
    except ApiError as e:
        print(f"cowboy-runner: the validator refused the request: {e.code}: {e.message}", file=sys.stderr)
        return EXIT_VALIDATOR
    except TxBuildError as e:
        print(f"cowboy-runner: {e}", file=sys.stderr)
        return EXIT_CHAIN


if __name__ == "__main__":
    sys.exit(main())
