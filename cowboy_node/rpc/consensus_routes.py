"""HTTP routes of the validator set and consensus evidence (docs/api.md "Validators and consensus").

``GET /validators``: the ``ValidatorSetSnapshot`` the chain state holds (CIP-11 §5.4) with each validator's
genesis record; ``GET /consensus/evidence?limit=N``: the newest evidence of validators breaking the protocol.
The facade must implement :class:`ConsensusFacade`; otherwise these routes answer 501.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from aiohttp import web

from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.params import FACADE_KEY, parse_limit

DEFAULT_EVIDENCE_LIMIT = 100
"""Records ``/consensus/evidence`` returns when ``limit`` is not given."""


@runtime_checkable
class ConsensusFacade(Protocol):
    """Validator-set and evidence reads; both are cheap and run on the event loop."""

    def validators(self) -> dict[str, Any]:
        """``{"subset_epoch", "validator_set_hash", "height", "validators": [{"index", "name",
        "ed25519_public_key", "bls_share_index", "bls_public_key", "fee_recipient", "self", "in_snapshot"}]}``
        plus ``reconfiguration`` while a ``ValidatorSetActivated`` governs the head (docs/transport.md)."""
        ...

    def consensus_evidence(self, limit: int) -> dict[str, Any]:
        """``{"count", "evidence": [...]}``: up to ``limit`` newest records, newest last."""
        ...


def _consensus_facade(request: web.Request) -> ConsensusFacade:
    facade = request.app[FACADE_KEY]
    if not isinstance(facade, ConsensusFacade):
        raise RpcError(501, "not_implemented", "this node does not serve consensus information")
    return facade


async def handle_validators(request: web.Request) -> web.Response:
    """``GET /validators``."""
    return web.json_response(_consensus_facade(request).validators())


async def handle_evidence(request: web.Request) -> web.Response:
    """``GET /consensus/evidence?limit=100``."""
    q = request.query
    limit = parse_limit(q["limit"]) if "limit" in q else DEFAULT_EVIDENCE_LIMIT
    return web.json_response(_consensus_facade(request).consensus_evidence(limit))


def add_consensus_routes(r: web.UrlDispatcher) -> None:
    """Register the routes on ``r``."""
    r.add_get("/validators", handle_validators, allow_head=False)
    r.add_get("/consensus/evidence", handle_evidence, allow_head=False)
