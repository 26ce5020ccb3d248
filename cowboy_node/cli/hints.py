"""One-line hints after an error of the client commands: what to run next (docs/jobs.md, README "Local devnet").

The error line itself stays as it was (``error: <code>: <message>``, parsed by scripts); the hint is a second
stderr line starting ``hint:``. Hints name the command or setting that fixes the usual cause, never guess beyond
what the error says.
"""

from __future__ import annotations

DEVNET_FAUCET = "devnet-home/keys/faucet.key"
"""The faucet key ``make devnet`` writes (README "Local devnet")."""


def unreachable_hint(url: str) -> str:
    """After ``cannot reach node at URL``."""
    return (f"is a node running at {url}? Start a local one with `make devnet` (RPC http://127.0.0.1:4000), or "
            "point the command at yours with --rpc URL")


def error_hint(code: str, message: str, *, sender: str | None = None, host: str | None = None) -> str | None:
    """A hint for an error ``code`` (RPC refusal or failed receipt), or None. ``sender``: the account that pays;
    ``host``: an HTTP job's target host."""
    if code == "insufficient_funds":
        who = sender or "ADDRESS"
        return (f"fund {who} first; on a devnet from the faucet: `cowboy-node tx transfer --key {DEVNET_FAUCET} "
                f"--to {who} --amount 1000000000000000000000 --wait`")
    if code == "no_eligible_runner" and "capability" in message:
        target = host or "HOST"
        return (f"no registered runner advertises this job's host {target!r} (or its job type): the runner's operator "
                f"runs `cowboy-runner capabilities --home RUNNER_HOME --http-domain {target}`, which sets "
                "capabilities.http_domains in runner.toml (and allow_private_addresses for a local host) and updates "
                "the registration on chain (docs/jobs.md \"A job against your own server\")")
    if code == "no_eligible_runner" and "no runners registered" in message:
        return ("no runner is registered: start one (`DEVNET_RUNNER=1 make devnet`, or README \"Runners (CIP-11)\")")
    return None
