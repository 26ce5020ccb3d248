"""Every client command group of ``cowboy-node`` (status, keys, tx, query), wired in one place.

The groups' modules import the shared helpers of :mod:`cowboy_node.cli.client_commands`; this module imports
the groups, so no module imports one that imports it back.
"""

from __future__ import annotations

from cowboy_node.cli import (
    actor_commands,
    client_commands,
    governance_commands,
    job_commands,
    runner_commands,
    verify_commands,
    watch_command,
    workflow_commands,
)
from cowboy_node.cli.common import SubParsers

GROUPS = (actor_commands, runner_commands, job_commands, governance_commands)
"""Command groups adding ``tx`` and ``query`` subcommands, in help order."""


def register(subparsers: SubParsers) -> None:
    """Add the client subcommands (status, keys, tx, query, and ``call``: ``tx call`` at the top level, the
    natural home of ``call --simulate``) to ``subparsers``."""
    tx_sub, q_sub = client_commands.register_base(subparsers)
    actor_commands.add_call_parser(subparsers)
    for group in GROUPS:
        group.register_tx(tx_sub)
    for group in GROUPS:
        group.register_query(q_sub)
    workflow_commands.register_query(q_sub)
    verify_commands.register_query(q_sub)  # --verify on query account / actor, and query state
    watch_command.register(subparsers)
