"""Create a single-validator genesis and its validator key (used by ``init`` and tests)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from cowboy_node.chain.genesis import Genesis, genesis_document, parse_genesis
from cowboy_node.crypto import bls, threshold
from cowboy_node.node.keys import ValidatorKey
from cowboy_node.types.block import Round
from cowboy_node.types.seed import round_message
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags, TimerConfig


@dataclass(frozen=True, slots=True)
class DevGenesis:
    """A fresh genesis plus the key of its only validator."""

    genesis: Genesis
    """Parsed genesis (``genesis.raw`` is the file content)."""
    validator_key: ValidatorKey
    """Key of validators[0]."""


def create_dev_genesis(*, chain_id: str, balances: Mapping[bytes, int], system_deployers: tuple[bytes, ...],
                       fee_recipient: bytes, genesis_time_ms: int, block_time_ms: int = 1000,
                       cip11: Cip11Flags | None = None, basefee: BasefeeConfig | None = None,
                       limits: ChainLimits | None = None, entropy: bytes | None = None) -> DevGenesis:
    """Deal a 1-of-1 threshold key, sign the genesis beacon and build genesis.json.

    ``entropy`` (≥ 96 bytes) makes the keys deterministic for tests; None uses os.urandom.
    """
    ent = entropy if entropy is not None else os.urandom(96)
    if len(ent) < 96:
        raise ValueError("entropy must be at least 96 bytes")
    ed_seed = ent[:32]
    secret = bls.secret_key_from_seed(ent[32:64])
    dealing = threshold.deal(secret, 1, 1, ent[64:96])
    share = dealing.shares[0]
    beacon = threshold.recover([(share.index, threshold.partial_sign(share, round_message(Round(0, 0))))], 1)
    draft = Genesis(
        chain_id=chain_id, genesis_time_ms=genesis_time_ms, validators=(), threshold=1,
        group_public_key=dealing.group_public_key, genesis_beacon=beacon, balances=dict(balances),
        system_deployers=system_deployers, block_time_ms=block_time_ms, basefee=basefee or BasefeeConfig(),
        timer=TimerConfig(), limits=limits or ChainLimits(), cip11=cip11 or Cip11Flags.for_phase(2), raw=b"")
    doc = genesis_document(draft)
    doc["validators"] = [{
        "name": "validator-0", "ed25519_public_key": "0x" + ed25519.public_key_from_seed(ed_seed).hex(),
        "bls_public_key": "0x" + dealing.share_public_keys[0].hex(), "bls_share_index": share.index,
        "fee_recipient": to_checksum_address(fee_recipient),
    }]
    raw = (json.dumps(doc, indent=2) + "\n").encode()
    key = ValidatorKey(ed25519_seed=ed_seed, bls_secret=bls.secret_key_to_bytes(share.secret),
                       bls_share_index=share.index)
    return DevGenesis(parse_genesis(raw), key)
