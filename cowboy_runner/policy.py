"""What a runner will refuse, and why, in the words of the ``runner.toml`` keys that decide it.

Three things must agree for an HTTP job to reach a runner's executor and succeed (docs/runner.md "Serving jobs
from your own server"): the capabilities the chain holds for the runner (the dispatcher's capability filter), the
``[capabilities]`` the daemon serves (the executor's allow-list is ``capabilities.http_domains``), and
``executors.http.allow_private_addresses`` for hosts on the runner's own network. :func:`refusal_policy` is the
daemon's view (written into ``status.json``); :func:`refusal_lines` turns it, the chain's registration and the
current ``runner.toml`` into the ``status`` lines that say what will be refused and which key to change.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any

from cowboy_protocol.types.runner import JOB_KIND_NAMES
from cowboy_runner.config import RunnerSettings
from cowboy_runner.executor_settings import ALLOW_PRIVATE_ENV
from cowboy_runner.executors.addresses import is_global_address


def is_local_host(host: str) -> bool:
    """True when HTTP jobs for ``host`` need ``allow_private_addresses``: ``localhost`` (and ``*.localhost``,
    RFC 6761) or an IP literal that is not globally routable (loopback, RFC 1918, link-local, ...)."""
    h = host.lower().rstrip(".")
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(h)
    except ValueError:
        return False
    return not is_global_address(h)


def refusal_policy(settings: RunnerSettings) -> dict[str, Any]:
    """The settings that decide what the daemon refuses: job types, HTTP hosts, private addresses, methods."""
    http = settings.executors.http
    return {"job_types": [JOB_KIND_NAMES[k] for k in settings.capabilities.job_kinds],
            "http_domains": list(settings.capabilities.http_domains),
            "allow_private_addresses": http.allow_private_addresses or os.environ.get(ALLOW_PRIVATE_ENV) == "1",
            "allowed_methods": list(http.allowed_methods)}


def _hint(home: str, host: str | None = None) -> str:
    flag = f" --http-domain {host}" if host else ""
    return f"`cowboy-runner capabilities --home {home}{flag}`"


def refusal_lines(policy: dict[str, Any], chain: dict[str, Any] | None, current: dict[str, Any] | None,
                  home: str) -> list[str]:
    """``status`` lines: what the daemon refuses (``policy``), where the chain's advertised ``capabilities``
    (``chain``; None: unknown or not registered) differ from it, and whether ``runner.toml`` (``current``) changed
    since the daemon started. Each line names the key to change."""
    lines: list[str] = []
    kinds = policy.get("job_types", [])
    lines.append(f"refuses:    job types other than {', '.join(kinds) or '(none)'} (capabilities.job_types)")
    domains = policy.get("http_domains", [])
    if "http" in kinds:
        if "*" not in domains:
            lines.append(f"refuses:    http hosts other than {', '.join(domains) or '(none)'} "
                         f"(capabilities.http_domains; add one with {_hint(home, 'HOST')})")
        if not policy.get("allow_private_addresses"):
            lines.append("refuses:    http to loopback/private addresses "
                         "(executors.http.allow_private_addresses = false)")
        for host in domains:
            if is_local_host(host) and not policy.get("allow_private_addresses"):
                lines.append(f"PROBLEM:    {host} is served but private addresses are refused: every job for it "
                             f"fails address_not_allowed; run {_hint(home, host)}")
    if chain is not None:
        for key in ("job_types", "http_domains"):
            advertised, served = sorted(chain.get(key, [])), sorted(policy.get(key, []))
            if advertised != served:
                lines.append(f"PROBLEM:    the chain advertises {key} {advertised} but this daemon serves {served}: "
                             f"jobs are matched to the chain's list; run {_hint(home)} to bring them in line")
    if current is not None:
        keys = ("job_types", "http_domains", "allow_private_addresses")
        changed = [k for k in keys if current.get(k) != policy.get(k)]
        if changed:
            lines.append(f"restart:    runner.toml changed since the daemon started ({', '.join(changed)}); restart "
                         f"it to apply (`cowboy-runner drain --home {home} --wait 60`, then `cowboy-runner run`)")
    return lines
