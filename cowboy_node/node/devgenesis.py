"""Create a genesis and its validators' keys: one validator for ``init`` and tests, n for ``testnet``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cowboy_node.chain.genesis import Genesis, genesis_document, parse_genesis, quorum_threshold
from cowboy_node.crypto import bls, threshold
from cowboy_node.node.keys import ValidatorKey
from cowboy_node.types.block import Round
from cowboy_node.types.seed import round_message
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags, TimerConfig

MAX_VALIDATORS = 64
"""Largest validator set :func:`create_genesis` deals a key to."""


@dataclass(frozen=True, slots=True)
class DevGenesis:
    """A fresh genesis plus the key of its only validator."""

    genesis: Genesis
    """Parsed genesis (``genesis.raw`` is the file content)."""
    validator_key: ValidatorKey
    """Key of validators[0]."""


@dataclass(frozen=True, slots=True)
class NetworkGenesis:
    """A fresh genesis plus the keys of all its validators."""

    genesis: Genesis
    """Parsed genesis (``genesis.raw`` is the file content)."""
    validator_keys: tuple[ValidatorKey, ...]
    """Key of validators[i] at position i (its BLS share has index i + 1)."""


def entropy_bytes(n_validators: int) -> int:
    """Bytes of entropy :func:`create_genesis` consumes for ``n`` validators."""
    return 64 + 32 * n_validators


def create_genesis(*, chain_id: str, n_validators: int, fee_recipients: Sequence[bytes],
                   balances: Mapping[bytes, int], system_deployers: tuple[bytes, ...], genesis_time_ms: int,
                   block_time_ms: int = 1000, cip11: Cip11Flags | None = None, basefee: BasefeeConfig | None = None,
                   limits: ChainLimits | None = None, entropy: bytes | None = None) -> NetworkGenesis:
    """Deal one threshold key to ``n`` validators (t = n − ⌊(n − 1)/3⌋), sign the genesis beacon with the group
    secret and build genesis.json with the dealing's Feldman commitment.

    The dealer (this function) knows every share: a trusted dealer, not a DKG. Validator i is named
    ``validator-i``, gets share i + 1 and ``fee_recipients[i]``. ``entropy`` (at least :func:`entropy_bytes`
    bytes: validator 0's Ed25519 seed, the group secret seed, the polynomial seed, then the Ed25519 seeds of
    validators 1..n−1, 32 bytes each) makes the keys deterministic for tests; None uses os.urandom.
    """
    if not 1 <= n_validators <= MAX_VALIDATORS:
        raise ValueError(f"need 1..{MAX_VALIDATORS} validators, got {n_validators}")
    if len(fee_recipients) != n_validators:
        raise ValueError(f"need {n_validators} fee recipients, got {len(fee_recipients)}")
    need = entropy_bytes(n_validators)
    ent = entropy if entropy is not None else os.urandom(need)
    if len(ent) < need:
        raise ValueError(f"entropy must be at least {need} bytes")
    ed_seeds = [ent[:32]] + [ent[96 + 32 * i:128 + 32 * i] for i in range(n_validators - 1)]
    secret = bls.secret_key_from_seed(ent[32:64])
    t = quorum_threshold(n_validators)
    dealing = threshold.deal(secret, n_validators, t, ent[64:96])
    for share in dealing.shares:
        if not threshold.verify_share(dealing.commitment, share):  # never: deal() is correct; checked all the same
            raise AssertionError(f"share {share.index} does not verify against the commitment")
    beacon = bls.sign(secret, round_message(Round(0, 0)))
    draft = Genesis(
        chain_id=chain_id, genesis_time_ms=genesis_time_ms, validators=(), threshold=t,
        group_public_key=dealing.group_public_key, genesis_beacon=beacon, balances=dict(balances),
        system_deployers=system_deployers, block_time_ms=block_time_ms, basefee=basefee or BasefeeConfig(),
        timer=TimerConfig(), limits=limits or ChainLimits(), cip11=cip11 or Cip11Flags.for_phase(2), raw=b"",
        commitment=dealing.commitment)
    doc = genesis_document(draft)
    doc["validators"] = [{
        "name": f"validator-{i}", "ed25519_public_key": "0x" + ed25519.public_key_from_seed(seed).hex(),
        "bls_public_key": "0x" + dealing.share_public_keys[i].hex(), "bls_share_index": share.index,
        "fee_recipient": to_checksum_address(fee_recipients[i]),
    } for i, (seed, share) in enumerate(zip(ed_seeds, dealing.shares, strict=True))]
    raw = (json.dumps(doc, indent=2) + "\n").encode()
    keys = tuple(ValidatorKey(ed25519_seed=seed, bls_secret=bls.secret_key_to_bytes(share.secret),
                              bls_share_index=share.index)
                 for seed, share in zip(ed_seeds, dealing.shares, strict=True))
    return NetworkGenesis(parse_genesis(raw), keys)


def create_dev_genesis(*, chain_id: str, balances: Mapping[bytes, int], system_deployers: tuple[bytes, ...],
                       fee_recipient: bytes, genesis_time_ms: int, block_time_ms: int = 1000,
                       cip11: Cip11Flags | None = None, basefee: BasefeeConfig | None = None,
                       limits: ChainLimits | None = None, entropy: bytes | None = None) -> DevGenesis:
    """Deal a 1-of-1 threshold key, sign the genesis beacon and build genesis.json (with the commitment).

    ``entropy`` (≥ 96 bytes) makes the keys deterministic for tests; None uses os.urandom.
    """
    net = create_genesis(chain_id=chain_id, n_validators=1, fee_recipients=(fee_recipient,), balances=balances,
                         system_deployers=system_deployers, genesis_time_ms=genesis_time_ms,
                         block_time_ms=block_time_ms, cip11=cip11, basefee=basefee, limits=limits, entropy=entropy)
    return DevGenesis(net.genesis, net.validator_keys[0])
