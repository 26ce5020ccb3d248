"""``cowboy-runner capabilities``: change what the runner serves in one place, and bring the chain in line.

``runner.toml`` is the source: the command edits ``[capabilities] http_domains`` and, for hosts on the runner's
own network, ``[executors.http] allow_private_addresses`` together, then (when the runner is registered) sends
``RunnerUpdateCapabilities`` so the chain's capability filter matches the daemon's allow-list. Without flags it
only brings the chain in line with ``runner.toml``; ``--show`` changes nothing. A running daemon keeps the
settings it started with, so the output says when it must be restarted (``status`` says so too).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cowboy_protocol import api_types as api
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.http_client import ApiError, NodeUnreachable, RpcClient
from cowboy_protocol.types.runner_json import capabilities_to_json
from cowboy_runner.cli_support import (
    EXIT_CHAIN,
    EXIT_CONFIG,
    EXIT_OK,
    EXIT_VALIDATOR,
    CliError,
    _fees,
    _live_daemon,
    _load,
    _submit_and_wait,
)
from cowboy_runner.config import CONFIG_FILE, ConfigError, RunnerSettings, parse_settings
from cowboy_runner.policy import is_local_host, refusal_policy
from cowboy_runner.toml_edit import set_key
from cowboy_runner.txbuild import build_update_capabilities


def _domains(current: tuple[str, ...], add: list[str], remove: list[str]) -> list[str]:
    out = [d for d in current if d not in {r.lower() for r in remove}]
    for d in add:
        if d.lower() not in out:
            out.append(d.lower())
    return out


def _private(args: argparse.Namespace, domains: list[str], current: bool, added: list[str]) -> tuple[bool, str]:
    """The new ``allow_private_addresses`` and why: as asked, else switched on when a newly added host is local."""
    local = [d for d in domains if is_local_host(d)]
    if args.private_addresses == "deny" and local:
        raise CliError(f"--private-addresses deny: {', '.join(local)} would then be refused (address_not_allowed); "
                       "remove them with --remove-http-domain or allow private addresses", EXIT_CONFIG)
    if args.private_addresses is not None:
        return args.private_addresses == "allow", "as asked (--private-addresses)"
    if not current and any(is_local_host(d) for d in added):
        return True, "switched on: a local host was added (loopback/private addresses are refused otherwise)"
    return current, "unchanged"


def _rewrite(settings: RunnerSettings, domains: list[str], private: bool) -> RunnerSettings:
    """Edit runner.toml, check that the result parses to what was meant, and replace the file atomically."""
    path = settings.home / CONFIG_FILE
    text = path.read_text(encoding="utf-8")
    text = set_key(text, "capabilities", "http_domains", domains)
    text = set_key(text, "executors.http", "allow_private_addresses", private)
    try:
        new = parse_settings(text, settings.home)
    except ConfigError as e:
        raise CliError(f"{e} (runner.toml was not changed)", EXIT_CONFIG) from None
    if sorted(new.capabilities.http_domains) != sorted(set(domains)) or \
            new.executors.http.allow_private_addresses != private:
        raise CliError(f"could not edit {path} automatically (a value spread over several lines?): set "
                       f"capabilities.http_domains = {json.dumps(domains)} and executors.http.allow_private_addresses"
                       f" = {str(private).lower()} by hand", EXIT_CONFIG)
    tmp = path.with_name(f".{CONFIG_FILE}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return new


def _chain_record(rpc: RpcClient, address: str) -> api.Runner | None:
    """This runner's registration on chain (None: not registered)."""
    try:
        record = rpc.runner(address)
    except ApiError as e:
        if e.status == 404:
            return None
        raise
    return record


def _sync_chain(settings: RunnerSettings, args: argparse.Namespace) -> dict[str, Any]:
    """Send RunnerUpdateCapabilities when the chain's registration differs from ``settings``; the outcome."""
    _, key = _load(str(settings.home))
    rpc = RpcClient(settings.validator_rpc)
    address = to_checksum_address(key.address)
    record = _chain_record(rpc, address)
    if record is None:
        return {"action": "not_registered", "note": "`cowboy-runner register` will advertise these"}
    if record.get("capabilities") == capabilities_to_json(settings.capabilities):
        return {"action": "unchanged"}
    status = rpc.status()
    nonce = int(rpc.account(address)["next_pending_nonce"])
    tx = build_update_capabilities(key, str(status["chain_id"]), capabilities=settings.capabilities, nonce=nonce,
                                   fees=_fees(status, settings))
    receipt = _submit_and_wait(rpc, tx, args.timeout)
    if receipt.get("status") != "success":
        raise CliError(f"RunnerUpdateCapabilities failed on chain: {receipt.get('error_code')} "
                       f"({receipt.get('error_message')}); {_RETRY.format(home=settings.home)}", EXIT_CHAIN)
    return {"action": "updated", "status": receipt.get("status"), "tx_hash": receipt.get("tx_hash"),
            "height": receipt.get("height"), "was": record.get("capabilities")}


_RETRY = "runner.toml is already changed: rerun `cowboy-runner capabilities --home {home}` to update the chain"


def cmd_capabilities(args: argparse.Namespace) -> int:
    """Edit http_domains / allow_private_addresses in runner.toml and bring the chain's registration in line."""
    settings, _ = _load(args.home)
    old = refusal_policy(settings)
    domains = _domains(settings.capabilities.http_domains, args.http_domain, args.remove_http_domain)
    private, why = _private(args, domains, settings.executors.http.allow_private_addresses, args.http_domain)
    out: dict[str, Any] = {"config": str(Path(args.home) / CONFIG_FILE)}
    if args.show:
        _, key = _load(args.home)
        record = _chain_record(RpcClient(settings.validator_rpc), to_checksum_address(key.address))
        out.update(policy=old, chain=None if record is None else record.get("capabilities"))
        print(json.dumps(out, indent=2))
        return EXIT_OK
    http = settings.executors.http
    if sorted(domains) != sorted(settings.capabilities.http_domains) or private != http.allow_private_addresses:
        settings = _rewrite(settings, domains, private)
    new = refusal_policy(settings)
    out.update(http_domains=new["http_domains"], allow_private_addresses=new["allow_private_addresses"],
               allow_private_addresses_reason=why,
               changed=[k for k in ("http_domains", "allow_private_addresses") if old[k] != new[k]])
    try:
        out["chain"] = {"action": "skipped (--no-chain)"} if args.no_chain else _sync_chain(settings, args)
    except NodeUnreachable as e:
        raise CliError(f"runner.validator_rpc: {e}; {_RETRY.format(home=args.home)}" if out["changed"] else
                       f"runner.validator_rpc: {e}", EXIT_VALIDATOR) from None
    pid = _live_daemon(settings.journal_path.parent)
    out["restart_needed"] = bool(out["changed"]) and pid is not None
    print(json.dumps(out, indent=2))
    if out["restart_needed"]:
        print(f"cowboy-runner: the running daemon (pid {pid}) still uses the old settings: restart it "
              f"(`cowboy-runner drain --home {args.home} --wait 60`, then `cowboy-runner run --home {args.home}`)",
              file=sys.stderr)
    return EXIT_OK


def register(with_home: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Add the ``capabilities`` subcommand (``with_home`` adds a subparser with ``--home``)."""
    sp = with_home("capabilities", "set the HTTP hosts served (runner.toml and the chain's registration together)")
    sp.add_argument("--http-domain", action="append", default=[], metavar="HOST",
                    help="serve HTTP jobs for HOST (exact, *.suffix or *); a loopback/private host such as 127.0.0.1 "
                         "or localhost also switches executors.http.allow_private_addresses on")
    sp.add_argument("--remove-http-domain", action="append", default=[], metavar="HOST", help="stop serving HOST")
    sp.add_argument("--private-addresses", choices=("allow", "deny"), default=None,
                    help="set executors.http.allow_private_addresses explicitly")
    sp.add_argument("--no-chain", action="store_true", help="edit runner.toml only; send no transaction")
    sp.add_argument("--show", action="store_true", help="print runner.toml's and the chain's view; change nothing")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the update's receipt")
    sp.set_defaults(fn=cmd_capabilities)
