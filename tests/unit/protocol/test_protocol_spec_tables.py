"""CIP-11 byte tables and spec-given vectors, each pinned against the value the specification text states
(or, where the seed text lost it, against the table written in ``docs/protocol.md``), one test per table.

A table test fails when a value changes *and* when a new member appears without a pin (the comparison is of
the whole ``{name: value}`` mapping). Expected values are literals copied from the spec sections named in each
test, or parsed from the documentation — never read from the code under test.
"""

from __future__ import annotations

import re
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.execution.jobs import seeds
from cowboy_node.execution.jobs.selection import K_HARD_MIN
from cowboy_node.types import presence, seed
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.transport import preimages
from cowboy_protocol.transport.enums import AckKind, CancelReason, FrameType, GoodbyeReason, RejectReason, Role, Scheme
from cowboy_protocol.transport.frames import MAX_FRAME_BYTES, PROTOCOL_VERSION
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.subset import MAX_SUBSET, MIN_SUBSET, subset_size
from cowboy_protocol.types.instructions import (
    CallActor,
    CancelTimer,
    DeployActor,
    ExtendTimer,
    Transfer,
    UpdateBasefeeConfig,
    UpdateTimerConfig,
    UpdateTimerPolicy,
)
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import JOB_TYPE_CLASSES
from cowboy_protocol.types.jobspec_checks import CHECK_KINDS, VerificationMode
from cowboy_protocol.types.params import ChainLimits, Cip11Flags, Cip11Params, RunnerConfig
from cowboy_protocol.types.runner import JOB_KINDS
from cowboy_protocol.types.runner_instructions import (
    RunnerDeregister,
    RunnerHeartbeat,
    RunnerRegister,
    RunnerUpdateCapabilities,
    RunnerUpdateRateCard,
)

DOC = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text(encoding="utf-8")


def _members(enum: type[IntEnum]) -> dict[str, int]:
    return {m.name: int(m.value) for m in enum}


def _camel_to_upper(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def _doc_enum_row(label: str) -> dict[str, int]:
    """``| <label> | Name 0x01, Name 0x02 |`` of docs/protocol.md §8.2 as {NAME: value}."""
    m = re.search(rf"^\| {re.escape(label)} \| (.+?) \|$", DOC, re.M)
    assert m, f"docs/protocol.md §8.2 has no row for {label}"
    out: dict[str, int] = {}
    for item in m.group(1).split(","):
        name, value = item.strip().rsplit(" ", 1)
        out[_camel_to_upper(name)] = int(value, 16)
    return out


# --- tables the spec text gives -----------------------------------------------------------------------------

def test_role_table_is_cip11_12_6() -> None:
    """§12.6: signer_role / any Role: Runner = 0x01, Validator = 0x02."""
    assert _members(Role) == {"RUNNER": 0x01, "VALIDATOR": 0x02}


def test_scheme_table_and_key_lengths_are_cip11_12_6() -> None:
    """§12.6: 0x01 secp256k1 (33-byte key, 34 on the wire, 65-byte sig); 0x02 Ed25519 (32 / 33 / 64)."""
    assert _members(Scheme) == {"SECP256K1": 0x01, "ED25519": 0x02}
    g = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
    assert len(PubKey.runner(g).to_bytes()) == 34
    assert len(PubKey.validator(bytes(32)).to_bytes()) == 33
    assert (Scheme.SECP256K1.signature_length, Scheme.ED25519.signature_length) == (65, 64)


def test_frame_type_table_is_cip11_12_2() -> None:
    assert _members(FrameType) == {
        "HELLO": 0x01, "HELLO_ACK": 0x02, "HEARTBEAT_PING": 0x10, "HEARTBEAT_PONG": 0x11,
        "BACKPRESSURE_SIGNAL": 0x12, "CAPABILITY_DELTA": 0x13, "JOB_ASSIGNMENT": 0x20, "JOB_ACK": 0x21,
        "JOB_PROGRESS": 0x22, "JOB_RESULT": 0x23, "JOB_CANCEL": 0x24, "JOB_RESULT_COMMIT": 0x25, "GOODBYE": 0xF0,
        # project extension for §8.3 Mode A receipts (no §12.2 row; docs/protocol.md §8.5)
        "PRESENCE_RECEIPT_REQUEST": 0x14, "PRESENCE_RECEIPT": 0x15}


def test_job_kind_table_is_cip11_9_4_for_every_job_type() -> None:
    """§9.4 job_kind (and §12.6 JobTypeV1 key 0): Llm 0x00, Http 0x01, Mcp 0x02, Custom 0x03,
    PublishChainRoot 0x04, Agent 0x05 — pinned against the name table and against every JobType class
    (this Python stack has one JobType definition, shared by node and runner through cowboy_protocol)."""
    assert JOB_KINDS == {"llm": 0x00, "http": 0x01, "mcp": 0x02, "custom": 0x03, "publish_chain_root": 0x04,
                         "agent": 0x05}
    by_class = {cls.__name__: cls.KIND for cls in JOB_TYPE_CLASSES}
    assert by_class == {"LlmJob": 0x00, "HttpJob": 0x01, "McpJob": 0x02, "CustomJob": 0x03,
                        "PublishChainRootJob": 0x04, "AgentJob": 0x05}


def test_verification_mode_table_is_cip11_12_6() -> None:
    """§12.6 VerificationConfigV1 mode {0 none, 1 economic_bond, 2 majority_vote, 3 structured_match,
    4 deterministic, 5 semantic_similarity}."""
    assert _members(VerificationMode) == {"NONE": 0, "ECONOMIC_BOND": 1, "MAJORITY_VOTE": 2, "STRUCTURED_MATCH": 3,
                                          "DETERMINISTIC": 4, "SEMANTIC_SIMILARITY": 5}


def test_verifier_check_kind_table_is_cip11_12_6() -> None:
    assert CHECK_KINDS == {"majority_vote": 0, "json_schema_valid": 1, "structured_match": 2,
                           "numeric_tolerance": 3, "numeric_range": 4, "custom": 5, "dns_txt_record_match": 6,
                           "dns_cname_match": 7}


def test_presence_input_v1_bytes_are_cip11_7_2() -> None:
    """§7.2: version 0x01; kind 0x00 bitmap, 0x01 sparse; ~5,000 runners ⇒ a ~625-byte bitmap."""
    assert (presence.PRESENCE_VERSION, presence.KIND_BITMAP, presence.KIND_SPARSE) == (0x01, 0x00, 0x01)
    full = encode_presence(range(5000), 5000)
    assert full[:2] == b"\x01\x00" and len(full) - 2 == 625


def test_v3_selection_mode_bytes_and_seed_scheme_are_cip11_9_2() -> None:
    """§9.2: mode 0x00 immediate (M == 1), 0x01 delayed (M > 1); domain ``cowboy-runner-select-v3:``;
    canonical_seed_bytes scheme_id 0x01 = MinSig with signature_len_be2 = 0x0030 (48 bytes)."""
    assert (seeds.MODE_IMMEDIATE, seeds.MODE_DELAYED) == (0x00, 0x01)
    assert (seeds.mode_for(1), seeds.mode_for(2), seeds.mode_for(16)) == (0x00, 0x01, 0x01)
    assert seeds.SELECT_V3_DOMAIN == b"cowboy-runner-select-v3:"
    assert seeds.SELECT_V2_DOMAIN == b"cowboy-runner-select-v2:"
    assert seed.SCHEME_MINSIG == 0x01 and seeds.MINSIG_SIGNATURE_LEN == 0x0030
    with pytest.raises(ValueError):
        seeds.beacon_hash_v1(0, 1, bytes(96))  # 0x02 MinPk (0x0060) is reserved, not active


def test_collapse_helpers_are_the_cip11_12_6_values() -> None:
    """§12.6: retry_after_blocks_or_zero(None) = 0x0000000000000000 (None ≡ Some(0)); canonical_reason_or_empty /
    detail_or_empty(None) = the deterministic-CBOR empty text 0x60; present text is its CBOR text, untouched."""
    assert preimages.retry_after_blocks_or_zero(None) == bytes.fromhex("0000000000000000")
    assert preimages.retry_after_blocks_or_zero(0) == preimages.retry_after_blocks_or_zero(None)
    assert preimages.retry_after_blocks_or_zero(258) == bytes.fromhex("0000000000000102")
    assert preimages.reason_or_empty(None) == b"\x60" == preimages.reason_or_empty("")
    assert preimages.reason_or_empty(" A b ") == b"\x65 A b "


def test_protocol_version_is_cip11_12_3() -> None:
    """§12.3: Hello.version = (major << 8) | minor; this specification is 0x0100."""
    assert PROTOCOL_VERSION == 0x0100


@pytest.mark.parametrize(("n", "k"), [(1, 1), (2, 2), (5, 4), (8, 4), (9, 5), (16, 5), (100, 8)])
def test_subset_size_examples_of_cip11_5_1(n: int, k: int) -> None:
    assert subset_size(n) == k


def test_system_constants_defaults_are_cip11_13() -> None:
    assert (MIN_SUBSET, MAX_SUBSET, K_HARD_MIN, MAX_FRAME_BYTES) == (3, 8, 20, 2 * 1024 * 1024)
    p = Cip11Params()
    assert {n: getattr(p, n) for n in (
        "MIN_SUBSET", "MAX_SUBSET", "K_HARD_MIN", "RESULT_TX_INCLUSION_GRACE_BLOCKS",
        "RESULT_TX_REBROADCAST_INTERVAL_BLOCKS", "HEARTBEAT_BLOCKS", "PRESENCE_TIMEOUT_BLOCKS", "ACK_TIMEOUT_BLOCKS",
        "RECEIPT_FRESHNESS_BLOCKS", "PRESENCE_PROOF_TTL_BLOCKS", "OVERLAP_BLOCKS")} == {
        "MIN_SUBSET": 3, "MAX_SUBSET": 8, "K_HARD_MIN": 20, "RESULT_TX_INCLUSION_GRACE_BLOCKS": 2,
        "RESULT_TX_REBROADCAST_INTERVAL_BLOCKS": 2, "HEARTBEAT_BLOCKS": 1, "PRESENCE_TIMEOUT_BLOCKS": 15,
        "ACK_TIMEOUT_BLOCKS": 15, "RECEIPT_FRESHNESS_BLOCKS": 30, "PRESENCE_PROOF_TTL_BLOCKS": 60,
        "OVERLAP_BLOCKS": 160}
    r = RunnerConfig()
    assert (r.mru_ttl_blocks, r.mru_weight_multiplier, r.selection_seed_delay_views) == (1_280, 4, 3)
    assert ChainLimits().heartbeat_timeout_blocks == 100


def test_protocol_flags_default_off_in_the_cip11_13_order() -> None:
    """§13 flags, all default false; their state-map keys 0..4 follow docs/protocol.md §4 ``Cip11Flags``."""
    flags = Cip11Flags()
    names = ["CIP11_TRANSPORT_ENABLED", "CIP11_PRESENCE_SHADOW_ENABLED", "CIP11_PRESENT_FIRST_ENABLED",
             "CIP11_POLL_DISABLED", "PRESENCE_HARD_EXCLUDE_ENABLED"]
    assert list(flags.__dataclass_fields__) == names
    assert not any(getattr(flags, n) for n in names)
    doc = re.search(r"Cip11Flags\s+= \{(.*?)\}", DOC, re.S)
    assert doc and [x.split(":")[1].strip() for x in doc.group(1).split(",")] == names


# --- tables the project chose (docs/protocol.md §8.2 is the pin) ------------------------------------------

@pytest.mark.parametrize(("label", "enum"), [
    ("Role (CIP-11)", Role), ("Scheme (CIP-11)", Scheme), ("AckKind", AckKind), ("RejectReason", RejectReason),
    ("CancelReason", CancelReason), ("GoodbyeReason", GoodbyeReason)], ids=lambda x: getattr(x, "__name__", ""))
def test_enum_table_matches_docs_protocol_8_2(label: str, enum: type[IntEnum]) -> None:
    assert _members(enum) == _doc_enum_row(label)


def test_goodbye_and_ack_tables_contain_the_members_the_spec_names() -> None:
    """§12.1/§12.3/§5.3/§10.1/§10.2 name ProtocolError, UnsupportedVersion, OverlapExpired,
    Accepted/Duplicate/Reject and Reject(UnverifiableAssignment); byte 0x00 is never a variant."""
    assert {"PROTOCOL_ERROR", "UNSUPPORTED_VERSION", "OVERLAP_EXPIRED"} <= set(_members(GoodbyeReason))
    assert set(_members(AckKind)) == {"ACCEPTED", "DUPLICATE", "REJECT"}
    assert "UNVERIFIABLE_ASSIGNMENT" in _members(RejectReason)
    for enum in (AckKind, RejectReason, CancelReason, GoodbyeReason):
        assert 0 not in set(_members(enum).values())


def test_instruction_kinds_match_docs_protocol_2() -> None:
    """Every row of the docs/protocol.md §2 instruction table is the KIND of the class of that name."""
    section = DOC[DOC.index("### Instructions"):DOC.index("## 3.")]
    rows = re.findall(r"^\| (0x[0-9A-F]{2}) \| (\w+) \|", section, re.M)
    classes: list[Any] = [Transfer, DeployActor, CallActor, RunnerRegister, RunnerHeartbeat, RunnerUpdateCapabilities,
               RunnerUpdateRateCard, RunnerDeregister, JobSubmit, JobResultCommit, JobResultSubmit,
               UpdateBasefeeConfig, UpdateTimerConfig, CancelTimer, ExtendTimer, UpdateTimerPolicy]
    documented = {name: int(kind, 16) for kind, name in rows}
    assert {c.__name__: c.KIND for c in classes} == {n: documented[n] for n in (c.__name__ for c in classes)}
