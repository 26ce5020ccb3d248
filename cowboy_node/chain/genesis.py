"""``genesis.json``: parsing with precise errors, and the genesis block.

Format (hex strings are 0x-prefixed; amounts are decimal strings, u128)::

    {
      "chain_id": "cowboy-devnet-1",
      "genesis_time_ms": 1763840000000,
      "validators": [{"name": "validator-0", "ed25519_public_key": "0x..32",
                      "bls_public_key": "0x..96", "bls_share_index": 1,
                      "fee_recipient": "0x..20"}],
      "threshold": {"threshold": 1, "group_public_key": "0x..96",
                    "commitment": ["0x..96"]},   # t points; required for n > 1
      # (threshold = n - (n-1)//3; validators[i].bls_share_index = i + 1 and
      #  validators[i].bls_public_key = share_public_key(commitment, i + 1))
      "genesis_beacon": "0x..48",      # BLS signature over Round(0, 0)
      "balances": {"0x..20": "1000000000000000000000000"},
      "system_deployers": ["0x..20"],
      "params": {"block_time_ms": 1000, "basefee": {...}, "timer": {...},
                 "limits": {...}, "cip11": {...}},
      "pvm_version": 1                 # optional (default 1): actor semantics, see docs/pvm.md
    }
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.crypto import bls
from cowboy_node.crypto import threshold as threshold_bls
from cowboy_node.execution.pvm.version import PVM_VERSION, SUPPORTED_PVM_VERSIONS, interpreter_refusal
from cowboy_node.types.block import Round
from cowboy_node.types.seed import round_message
from cowboy_protocol.crypto.address import InvalidAddress, parse_address, to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import U128_MAX
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags, RunnerConfig, TimerConfig
from cowboy_protocol.types.validation_errors import ValidationError

_TOP_KEYS = {"chain_id", "genesis_time_ms", "validators", "threshold", "genesis_beacon", "balances",
             "system_deployers", "params"}
#: Optional top-level keys (defaulted when absent).
_OPTIONAL_TOP_KEYS = {"pvm_version"}
_VALIDATOR_KEYS = {"name", "ed25519_public_key", "bls_public_key", "bls_share_index", "fee_recipient"}
_THRESHOLD_KEYS = {"threshold", "group_public_key", "commitment"}
_PARAM_KEYS = {"block_time_ms", "basefee", "timer", "limits", "cip11", "runners"}


@dataclass(frozen=True, slots=True)
class ValidatorInfo:
    """A genesis validator."""

    name: str
    """Operator-chosen label."""
    ed25519_public_key: bytes
    """Peer identity (signs blocks and CIP-11 validator frames)."""
    bls_public_key: bytes
    """Public key of the validator's threshold share (96-byte G2)."""
    bls_share_index: int
    """1-based share index in the threshold dealing."""
    fee_recipient: bytes
    """Address credited with tips of blocks this validator proposes."""


@dataclass(frozen=True, slots=True)
class Genesis:
    """Parsed and validated ``genesis.json``."""

    chain_id: str
    """Chain identifier."""
    genesis_time_ms: int
    """Timestamp of block 0."""
    validators: tuple[ValidatorInfo, ...]
    """Static validator set."""
    threshold: int
    """Threshold t of the beacon scheme (1 for one validator)."""
    group_public_key: bytes
    """Threshold group public key (96-byte G2) verifying every beacon."""
    genesis_beacon: bytes
    """Beacon of Round(0, 0); the parent beacon of block 1."""
    balances: dict[bytes, int]
    """Initial balances."""
    system_deployers: tuple[bytes, ...]
    """Addresses allowed to send system instructions."""
    block_time_ms: int
    """Target block interval."""
    basefee: BasefeeConfig
    """Initial CIP-3 config."""
    timer: TimerConfig
    """Initial CIP-5 config."""
    limits: ChainLimits
    """Transaction and block limits."""
    cip11: Cip11Flags
    """CIP-11 protocol flags."""
    raw: bytes
    """The file bytes (hashed into the data directory's identity)."""
    runners: RunnerConfig = field(default_factory=RunnerConfig)
    """Runner-registry and job parameters (``params.runners``, defaults when absent)."""
    commitment: tuple[bytes, ...] = ()
    """Feldman commitment of the threshold dealing (``threshold.commitment``): ``threshold`` G2 points of 96 bytes,
    ``commitment[0]`` being the group public key; anyone derives validator i's share public key from it
    (:func:`cowboy_node.crypto.threshold.share_public_key` at ``i + 1``). Empty only in a single-validator
    genesis written before the commitment existed."""
    pvm_version: int = PVM_VERSION
    """Actor-execution semantics (grammar, Unicode data, cost table) of this chain: one of
    :data:`cowboy_node.execution.pvm.version.SUPPORTED_PVM_VERSIONS`; ``pvm_version`` in the file."""

    def share_public_keys(self) -> tuple[bytes, ...]:
        """Share public key of each validator, in validator order: derived from :attr:`commitment` when present,
        else the validators' ``bls_public_key`` (identical for a parsed genesis, which checks that they agree)."""
        if self.commitment:
            return _share_public_keys(self.commitment, tuple(v.bls_share_index for v in self.validators))
        return tuple(v.bls_public_key for v in self.validators)

    def hash(self) -> bytes:
        """Identity of this genesis: keccak256 of the file bytes."""
        return keccak256(self.raw)

    def to_json(self) -> dict[str, Any]:
        """The JSON document (as written by ``init``)."""
        return genesis_document(self)


def _hex(value: object, key: str, path: str, length: int) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ConfigError(path, key, f"expected a 0x-prefixed hex string of {length} bytes")
    try:
        raw = bytes.fromhex(value[2:])
    except ValueError:
        raise ConfigError(path, key, "not valid hex") from None
    if len(raw) != length:
        raise ConfigError(path, key, f"expected {length} bytes, got {len(raw)}")
    return raw


def _address(value: object, key: str, path: str) -> bytes:
    if not isinstance(value, str):
        raise ConfigError(path, key, "expected a 0x-prefixed 20-byte address")
    try:
        return parse_address(value)
    except InvalidAddress as e:
        raise ConfigError(path, key, str(e)) from None


def _uint(value: object, key: str, path: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(path, key, f"expected an integer ≥ {minimum}, got {value!r}")
    return value


def _unknown(obj: dict[str, Any], allowed: set[str], key: str, path: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise ConfigError(path, key or None, f"unknown keys {extra}; allowed: {sorted(allowed)}")


def parse_genesis(raw: bytes, path: str = "genesis.json") -> Genesis:
    """Parse and validate genesis bytes; every error names the file and the key."""
    doc = _top_level_object(raw, path)
    chain_id = _chain_id(doc["chain_id"], path)
    genesis_time_ms = _uint(doc["genesis_time_ms"], "genesis_time_ms", path)
    validators = _validators(doc["validators"], path)
    threshold, group_pk, commitment = _threshold(doc["threshold"], validators, path)
    beacon = _genesis_beacon(doc["genesis_beacon"], group_pk, path)
    balances = _balances(doc["balances"], path)
    deployers = _system_deployers(doc["system_deployers"], path)
    block_time_ms, basefee, timer, limits, flags, runners = _params(doc["params"], path)
    pvm_version = _pvm_version(doc.get("pvm_version", PVM_VERSION), path)
    return Genesis(chain_id, genesis_time_ms, validators, threshold, group_pk, beacon, balances,
                   deployers, block_time_ms, basefee, timer, limits, flags, bytes(raw), runners, commitment,
                   pvm_version)


def _pvm_version(value: object, path: str) -> int:
    """``pvm_version``: a PVM version this node implements (a node never runs actors under other semantics)."""
    if type(value) is not int:
        raise ConfigError(path, "pvm_version", "expected an integer")
    if value not in SUPPORTED_PVM_VERSIONS:
        raise ConfigError(path, "pvm_version", f"PVM version {value} is not implemented by this node "
                                               f"(it implements {sorted(SUPPORTED_PVM_VERSIONS)}); upgrade the node")
    return value


def check_interpreter(pvm_version: int, path: str | Path) -> None:
    """Refuse (``ConfigError`` naming ``pvm_version``) to execute actors on an interpreter the chain's PVM
    version is not validated on (``execution/pvm/version.py``); ``run`` and ``replay`` call it."""
    why = interpreter_refusal(pvm_version, tuple(sys.version_info[:3]))
    if why is not None:
        raise ConfigError(str(path), "pvm_version", why)


def _top_level_object(raw: bytes, path: str) -> dict[str, Any]:
    """Decode the JSON and check it is an object with exactly the top-level keys, so later steps can index it."""
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(path, None, f"not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError(path, None, "expected a JSON object")
    _unknown(doc, _TOP_KEYS | _OPTIONAL_TOP_KEYS, "", path)
    missing = sorted(_TOP_KEYS - set(doc))
    if missing:
        raise ConfigError(path, missing[0], "missing required key")
    return doc


def _chain_id(chain_id: object, path: str) -> str:
    """``chain_id``: a printable string of 1..64 characters (the transaction decoder's limit)."""
    if not isinstance(chain_id, str) or not 1 <= len(chain_id) <= 64 or not chain_id.isprintable():
        raise ConfigError(path, "chain_id", "expected a printable string of 1..64 characters")
    return chain_id


def _validators(vals_raw: object, path: str) -> tuple[ValidatorInfo, ...]:
    """``validators``: a non-empty array of validator objects with distinct Ed25519 keys (peer identities); the
    validator at position i (0-based) holds share i + 1 of the dealing."""
    if not isinstance(vals_raw, list) or not vals_raw:
        raise ConfigError(path, "validators", "expected a non-empty array")
    validators = tuple(_validator(v, f"validators[{i}]", path) for i, v in enumerate(vals_raw))
    first: dict[bytes, int] = {}
    for i, v in enumerate(validators):
        if v.bls_share_index != i + 1:
            raise ConfigError(path, f"validators[{i}].bls_share_index",
                              f"expected {i + 1} (the validator's position in the list + 1), got {v.bls_share_index}")
        j = first.setdefault(v.ed25519_public_key, i)
        if j != i:
            raise ConfigError(path, f"validators[{i}].ed25519_public_key", f"duplicate of validators[{j}]'s")
    return validators


def _validator(v: object, k: str, path: str) -> ValidatorInfo:
    """One ``validators[i]`` object: exactly the validator keys, each checked in turn (errors name ``k.key``)."""
    if not isinstance(v, dict):
        raise ConfigError(path, k, "expected an object")
    _unknown(v, _VALIDATOR_KEYS, k, path)
    for req in sorted(_VALIDATOR_KEYS):
        if req not in v:
            raise ConfigError(path, f"{k}.{req}", "missing required key")
    if not isinstance(v["name"], str):
        raise ConfigError(path, f"{k}.name", "expected a string")
    return ValidatorInfo(
        name=v["name"],
        ed25519_public_key=_hex(v["ed25519_public_key"], f"{k}.ed25519_public_key", path, 32),
        bls_public_key=_hex(v["bls_public_key"], f"{k}.bls_public_key", path, 96),
        bls_share_index=_uint(v["bls_share_index"], f"{k}.bls_share_index", path, minimum=1),
        fee_recipient=_address(v["fee_recipient"], f"{k}.fee_recipient", path),
    )


def quorum_threshold(n_validators: int) -> int:
    """The beacon threshold of ``n`` validators: the quorum ``n − ⌊(n − 1)/3⌋`` (2f + 1 when n = 3f + 1)."""
    return n_validators - (n_validators - 1) // 3


def _threshold(th: object, validators: tuple[ValidatorInfo, ...], path: str) -> tuple[int, bytes, tuple[bytes, ...]]:
    """``threshold``: t (the quorum of the validator set), the group public key that verifies every beacon, and
    the Feldman commitment of the dealing, which must yield the group key and every validator's share key.

    The commitment is required with more than one validator; a single-validator genesis without it (the format
    before the commitment existed) must have its validator's share key equal to the group key (a 1-of-1 dealing).
    """
    if not isinstance(th, dict):
        raise ConfigError(path, "threshold", "expected an object")
    _unknown(th, _THRESHOLD_KEYS, "threshold", path)
    n = len(validators)
    threshold = _uint(th.get("threshold"), "threshold.threshold", path, minimum=1)
    if threshold > n:
        raise ConfigError(path, "threshold.threshold", f"must be ≤ the number of validators ({n})")
    if threshold != quorum_threshold(n):
        raise ConfigError(path, "threshold.threshold",
                          f"must be {quorum_threshold(n)} for {n} validators (n − ⌊(n − 1)/3⌋), got {threshold}")
    group_pk = _g2(th.get("group_public_key"), "threshold.group_public_key", path)
    if "commitment" not in th:
        if n > 1:
            raise ConfigError(path, "threshold.commitment", f"missing required key (needed with {n} validators)")
        if validators[0].bls_public_key != group_pk:
            raise ConfigError(path, "validators[0].bls_public_key",
                              "must equal threshold.group_public_key (a single validator holds the whole key)")
        return threshold, group_pk, ()
    commitment = _commitment(th["commitment"], threshold, path)
    if commitment[0] != group_pk:
        raise ConfigError(path, "threshold.group_public_key", "must equal threshold.commitment[0]")
    share_keys = _share_public_keys(commitment, tuple(range(1, n + 1)))
    for i, (v, expected) in enumerate(zip(validators, share_keys, strict=True)):
        if v.bls_public_key != expected:
            raise ConfigError(path, f"validators[{i}].bls_public_key",
                              f"does not match share {i + 1} of threshold.commitment")
    return threshold, group_pk, commitment


def _g2(value: object, key: str, path: str) -> bytes:
    """A 96-byte compressed G2 point, decoded strictly (canonical, on the curve, in the subgroup, not identity)."""
    raw = _hex(value, key, path, 96)
    try:
        bls.decode_g2(raw)
    except bls.InvalidPoint as e:
        raise ConfigError(path, key, f"not a valid G2 point: {e}") from None
    return raw


def _commitment(value: object, threshold: int, path: str) -> tuple[bytes, ...]:
    """``threshold.commitment``: exactly ``threshold`` strictly decoded G2 points."""
    if not isinstance(value, list):
        raise ConfigError(path, "threshold.commitment", "expected an array of 0x-prefixed 96-byte G2 points")
    if len(value) != threshold:
        raise ConfigError(path, "threshold.commitment",
                          f"expected {threshold} points (threshold.threshold), got {len(value)}")
    return tuple(_g2(c, f"threshold.commitment[{j}]", path) for j, c in enumerate(value))


@functools.lru_cache(maxsize=16)
def _share_public_keys(commitment: tuple[bytes, ...], indices: tuple[int, ...]) -> tuple[bytes, ...]:
    """Share public keys at ``indices`` from the commitment (memoised: a 64-validator set takes ~0.6 s)."""
    return tuple(threshold_bls.share_public_key(commitment, i) for i in indices)


def _genesis_beacon(value: object, group_pk: bytes, path: str) -> bytes:
    """``genesis_beacon``: the group's signature of Round(0, 0), checked because block 1 builds on it."""
    beacon = _hex(value, "genesis_beacon", path, 48)
    if not bls.verify(group_pk, round_message(Round(0, 0)), beacon):
        raise ConfigError(path, "genesis_beacon", "is not a valid signature of Round(0, 0) under "
                          "threshold.group_public_key")
    return beacon


def _balances(bal_raw: object, path: str) -> dict[bytes, int]:
    """``balances``: address -> decimal u128 amount, no address twice, total supply within u128."""
    if not isinstance(bal_raw, dict):
        raise ConfigError(path, "balances", "expected an object of address -> decimal string")
    balances: dict[bytes, int] = {}
    for addr_text, amount_text in bal_raw.items():
        k = f"balances.{addr_text}"
        addr = _address(addr_text, k, path)
        if not isinstance(amount_text, str) or not amount_text.isdigit():
            raise ConfigError(path, k, "expected a decimal string amount")
        amount = int(amount_text)
        if amount > U128_MAX:
            raise ConfigError(path, k, "amount exceeds u128")
        if addr in balances:
            raise ConfigError(path, k, "duplicate address")
        balances[addr] = amount
    if sum(balances.values()) > U128_MAX:
        raise ConfigError(path, "balances", "total supply exceeds u128")
    return balances


def _system_deployers(dep_raw: object, path: str) -> tuple[bytes, ...]:
    """``system_deployers``: the addresses allowed to send system instructions."""
    if not isinstance(dep_raw, list):
        raise ConfigError(path, "system_deployers", "expected an array of addresses")
    return tuple(_address(a, f"system_deployers[{i}]", path) for i, a in enumerate(dep_raw))


def _params(
    params: object, path: str,
) -> tuple[int, BasefeeConfig, TimerConfig, ChainLimits, Cip11Flags, RunnerConfig]:
    """``params``: block time and the protocol configs, each defaulted when absent (config errors name the file)."""
    if not isinstance(params, dict):
        raise ConfigError(path, "params", "expected an object")
    _unknown(params, _PARAM_KEYS, "params", path)
    block_time_ms = _uint(params.get("block_time_ms", 1000), "params.block_time_ms", path, minimum=50)
    try:
        basefee = BasefeeConfig.from_json(params.get("basefee", {}), where="params.basefee")
        timer = TimerConfig.from_json(params.get("timer", {}), where="params.timer")
        limits = ChainLimits.from_json(params.get("limits", {}), where="params.limits")
        flags = Cip11Flags.from_json(params.get("cip11", {}), where="params.cip11")
        runners = RunnerConfig.from_json(params.get("runners", {}), where="params.runners")
    except ValidationError as e:
        raise ConfigError(path, None, e.message) from None
    return block_time_ms, basefee, timer, limits, flags, runners


def load_genesis(path: Path) -> Genesis:
    """Read and parse ``path``."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(str(path), None, f"cannot read: {e.strerror}") from None
    return parse_genesis(raw, str(path))


def genesis_document(g: Genesis) -> dict[str, Any]:
    """JSON document for ``g`` (inverse of :func:`parse_genesis`)."""
    return {
        "chain_id": g.chain_id,
        "genesis_time_ms": g.genesis_time_ms,
        "validators": [{
            "name": v.name, "ed25519_public_key": "0x" + v.ed25519_public_key.hex(),
            "bls_public_key": "0x" + v.bls_public_key.hex(), "bls_share_index": v.bls_share_index,
            "fee_recipient": to_checksum_address(v.fee_recipient),
        } for v in g.validators],
        "threshold": {"threshold": g.threshold, "group_public_key": "0x" + g.group_public_key.hex(),
                      **({"commitment": ["0x" + c.hex() for c in g.commitment]} if g.commitment else {})},
        "genesis_beacon": "0x" + g.genesis_beacon.hex(),
        "balances": {to_checksum_address(a): str(b) for a, b in sorted(g.balances.items())},
        "system_deployers": [to_checksum_address(a) for a in g.system_deployers],
        "params": {
            "block_time_ms": g.block_time_ms, "basefee": g.basefee.to_json(), "timer": g.timer.to_json(),
            "limits": g.limits.to_json(), "cip11": g.cip11.to_json(), "runners": g.runners.to_json(),
        },
        "pvm_version": g.pvm_version,
    }
