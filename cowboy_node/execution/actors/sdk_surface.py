"""The cowboy-actor-sdk surface actors get on this node, checked at deploy (docs/actors.md "SDK names").

Every name ``cowboy_sdk`` exports (``cowboy_sdk.__all__``) is either in the curated view
(``sdk_bridge.SDK_VIEW``, with the SDK's semantics) or in :data:`REFUSED`, with the reason. An actor
that imports or reads a refused name — ``from cowboy_sdk import fork`` or ``cowboy_sdk.fork`` — is
refused at deploy with rule ``sdk_name_unavailable`` and a message naming it and saying why; a name
the SDK does not export at all is rule ``sdk_name_unknown``. (Before, such an actor deployed and
failed with an ``ImportError`` on its first call.)

:func:`transform` is the deploy-time tree transform the code cache compiles every actor with: this
check, then the continuation lowering (``actors/fsm.py``).
"""

from __future__ import annotations

import ast
import types
from collections.abc import Mapping

from cowboy_node.execution.actors.fsm import FSM_MODULE, lower_continuations
from cowboy_node.execution.actors.sdk_bridge import SDK_VIEW
from cowboy_node.execution.pvm.pvm_errors import ActorRejected

_NO_HOST = "host functions this node does not provide"
REFUSED: Mapping[str, str] = types.MappingProxyType({
    "__version__": "a dunder name (never importable in the PVM)",
    "Capture": "construct continuation state with capture(); Capture objects are made by the SDK only",
    "Retry": "retry policies for runner jobs are not bridged (the node re-selects failed jobs itself, "
             "JobSpec max_retries)",
    "Verify": "verification builders are not bridged (runner jobs use verification mode none, one runner)",
    "CowboyModel": "structured models need `cowboy build` schemas; pass response_schema= (JSON text) instead",
    "derive_actor_address": "the SDK derives keccak256(0xff ‖ deployer ‖ keccak256(salt) ‖ code_hash) behind a group "
                            "prefix; this node's addresses are keccak256(creator ‖ salt ‖ keccak256(source))[12:]",
    "events": "the module itself is not bridged: import emit / on_event from cowboy_sdk",
    "events_v0": "the v0 event API is not bridged: use emit / on_event",
    "on_stream": f"CIP-7 streams (Watchtower) need {_NO_HOST}",
    "watchtower": f"CIP-7 streams (Watchtower) need {_NO_HOST}",
    "routes": "CIP-15 HTTP routes need a gateway this node does not run",
    "Pays": "CIP-15 HTTP routes need a gateway this node does not run",
    "mount": "CIP-15 HTTP routes need a gateway this node does not run",
    "storage_guard": "storage guards are not bridged (use @reentrancy_guard or continuation guard_keys)",
    "GuardedValue": "storage guards are not bridged (use @reentrancy_guard or continuation guard_keys)",
    "GuardSet": "storage guards are not bridged (use @reentrancy_guard or continuation guard_keys)",
    "pvm_random": f"the beacon-seeded random source needs {_NO_HOST}",
    "pvm_time": f"needs {_NO_HOST}; use runtime.get_block_height() or runtime.context()['timestamp_ms']",
    "pvm_sys": f"needs {_NO_HOST}",
})
"""``cowboy_sdk`` exports actors cannot use on this node, with the reason (listed in docs/actors.md)."""

_INTERNAL = frozenset({FSM_MODULE})


def _check(node: ast.AST, name: str) -> None:
    if name in SDK_VIEW:
        return
    line = getattr(node, "lineno", 0)
    reason = REFUSED.get(name)
    if reason is not None:
        raise ActorRejected(line, "sdk_name_unavailable", f"cowboy_sdk.{name} is not available on this node: {reason}")
    raise ActorRejected(line, "sdk_name_unknown", f"cowboy_sdk has no name {name!r}")


def check_names(tree: ast.Module) -> None:
    """Refuse the first ``cowboy_sdk`` name the actor imports or reads that the node does not provide."""
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update(a.asname or a.name for a in node.names if a.name == "cowboy_sdk")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "cowboy_sdk" and not node.level:
            for alias in node.names:
                if alias.name != "*" and alias.name not in _INTERNAL:
                    _check(node, alias.name)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
              and not node.attr.startswith("_")):
            _check(node, node.attr)


def transform(tree: ast.Module, source: str) -> ast.Module:
    """The deploy-time transform: the SDK name check, then the continuation lowering."""
    check_names(tree)
    return lower_continuations(tree, source)


__all__ = ["REFUSED", "check_names", "transform"]
