"""JobSpecV1 (CIP-11 §12.6): golden bytes, strict decoding, round trips, job ids and submission validation.

Golden hex below was assembled by hand, field by field, from the §12.6 tables (the comment on each part names
the keys); the job_spec_hash values are keccak256 of those hand-assembled bytes, computed once with
pycryptodome outside the code under test.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.execution.jobs.results import verification_params_of
from cowboy_node.execution.jobs.verification import Reveal, Verdict, verify
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types import runner
from cowboy_protocol.types.jobspec import (
    JOB_TYPE_CLASSES,
    AgentJob,
    CallbackInfo,
    CustomJob,
    Freshness,
    HttpJob,
    JobRequest,
    JobSpecV1,
    JobType,
    LlmJob,
    McpJob,
    PublishChainRootJob,
    ResourceBounds,
    canonical_job_request,
    canonical_job_spec,
    decode_job_request,
    decode_job_spec,
    derive_job_id,
    http_host,
    job_spec_hash,
    validate_request,
)
from cowboy_protocol.types.jobspec_checks import (
    CustomCheck,
    DnsCnameMatchCheck,
    DnsTxtRecordMatchCheck,
    JsonSchemaValidCheck,
    MajorityVoteCheck,
    NumericRangeCheck,
    NumericToleranceCheck,
    StructuredMatchCheck,
    VerificationConfig,
    VerificationMode,
    VerifierCheck,
    check_from_cbor,
)
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError


def _t(text: str) -> str:
    """Hex of ASCII text (the bytes after a text-string head)."""
    return text.encode().hex()


# --------------------------------------------------------------------------- golden parts

JOB_ID_HEX = "00" "5820" + "11" * 32                                             # 0: job_id bytes(32)
BOUNDS_HEX = "02" "a5" "00192000" "01190400" "02183c" "03190200" "0403"          # 2: {8192, 1024, 60, 512, 3}
VERIF_NONE_HEX = "03" "a7" "0000" "0101" "0201" "0380" "04f4" "0500" "06f6"      # 3: mode 0, 1, 1, [], false, 0, null
PRICE_HEX = "04" "1a000f4240" "05" "00" "06" "1864"                              # 4: 1_000_000, 5: tip 0, 6: 100
CALLBACK_NONE_HEX = "07" "a5" "0054" + "00" * 20 + "0160" "02f6" "0360" "0440"   # 7: CallbackInfo.NONE
TAIL_HEX = "08" "54" + "22" * 20 + "0907" "0af6" "0bf6"                          # 8: submitter, 9: 7, 10/11: null

JOB_TYPES: dict[str, tuple[JobType, str, str]] = {
    # kind: (value, JobTypeV1 hex, job_spec_hash of the whole spec)
    "llm": (
        LlmJob(model_id=b"\x33" * 32, prompt="hi", temperature=0.5, max_tokens=256),
        "a7" "0000" "01" "5820" + "33" * 32 + "02" "62" + _t("hi") + "03f6" "04" "fb3fe0000000000000"
        "05" "190100" "06f6",
        "06e3ff084d208b11058495f3cacf2a84cb1aaa2626781b927f80466e58d26057",
    ),
    "http": (  # >1 header (CIP-11 requires this pin); keys sorted by encoding: "B" < "Accept" < "X-Api-Key"
        HttpJob(url="https://example.com/a", method="GET",
                headers=(("X-Api-Key", "k"), ("Accept", "application/json"), ("B", "1")),
                extraction="$.price", freshness=Freshness(max_age_seconds=60, timestamp_field="ts")),
        "a7" "0001" "01" "75" + _t("https://example.com/a") + "02" "63" + _t("GET") +
        "03" "a3" "6142" "6131" "66" + _t("Accept") + "70" + _t("application/json") + "69" + _t("X-Api-Key") + "616b"
        "04f6" "05" "67" + _t("$.price") + "06" "a3" "00183c" "01f6" "02" "62" + _t("ts"),
        "084f3f6af8e9b03ec85c0fea8affe39529db30de714215c083272ab6690dc9b1",
    ),
    "mcp": (  # 2.0 given, encoded as the integer 2 (integral-in-range JSON number)
        McpJob(server="srv", tool_name="search", arguments={"q": "x", "n": 2.0, "f": 1.5, "l": [True, None]},
               timeout_seconds=30),
        "a5" "0002" "01" "63" + _t("srv") + "02" "66" + _t("search") +
        "03" "a4" "6166" "fb3ff8000000000000" "616c" "82f5f6" "616e" "02" "6171" "6178" "04" "181e",
        "fe6a649beeb058f2ce6c5bd29597e63a8840455a8207ce90d46ea2ca5ad0e140",
    ),
    "custom": (
        CustomJob(executor_hash=b"\x44" * 32, params=b"\x01\x02"),
        "a3" "0003" "01" "5820" + "44" * 32 + "02" "420102",
        "c1f380625ab2d884885e4a01dae43405373f3e78afb58f81c696743a95a407d4",
    ),
    "publish_chain_root": (
        PublishChainRootJob(src_chain_id=1, dst_chain_id=8453, height=1_000_000, registry_address=b"\x55" * 20),
        "a5" "0004" "0101" "02192105" "03" "1a000f4240" "04" "54" + "55" * 20,
        "b9dbffb1c39a90a58c6758a4f862fccb27ba736630c6b4ce3068b4c5d3bcb393",
    ),
    "agent": (
        AgentJob(model="m1", query="do", system_prompt_inline="be brief", max_iterations=10,
                 max_tool_calls_per_iter=5, timeout_seconds=300),
        "aa" "0005" "01" "62" + _t("m1") + "02" "62" + _t("do") + "03f6" "04" "68" + _t("be brief") +
        "05f6" "06f6" "070a" "0805" "0919012c",
        "db4ce5a96369523e71ca9ecc49bcfc291e7e310510b183c2b94c4ae45fc309b8",
    ),
}


def _spec(job: JobType, **changes: object) -> JobSpecV1:
    spec = JobSpecV1(job_id=b"\x11" * 32, job_type=job, bounds=ResourceBounds(), verification=VerificationConfig(),
                     max_price=1_000_000, tip=0, timeout_blocks=100, callback=CallbackInfo.NONE,
                     submitter=b"\x22" * 20, submitted_at=7, required_runner_pool=None, attachments=None)
    return dataclasses.replace(spec, **changes)  # type: ignore[arg-type]


def _spec_hex(job_type_hex: str) -> str:
    return "ac" + JOB_ID_HEX + "01" + job_type_hex + BOUNDS_HEX + VERIF_NONE_HEX + PRICE_HEX + CALLBACK_NONE_HEX + \
        TAIL_HEX


# --------------------------------------------------------------------------- job kind table


def test_job_kind_bytes_are_pinned_and_shared_with_the_runner_table() -> None:
    assert runner.JOB_KINDS == {"llm": 0x00, "http": 0x01, "mcp": 0x02, "custom": 0x03,
                                "publish_chain_root": 0x04, "agent": 0x05}
    kinds: dict[type[JobType], str] = {LlmJob: "llm", HttpJob: "http", McpJob: "mcp", CustomJob: "custom",
             PublishChainRootJob: "publish_chain_root", AgentJob: "agent"}
    for cls, name in kinds.items():
        assert runner.JOB_KINDS[name] == cls.KIND
    assert [c.KIND for c in JOB_TYPE_CLASSES] == list(range(6))


def test_verification_mode_and_check_kind_bytes_are_pinned() -> None:
    assert [(m.name, int(m)) for m in VerificationMode] == [
        ("NONE", 0), ("ECONOMIC_BOND", 1), ("MAJORITY_VOTE", 2), ("STRUCTURED_MATCH", 3), ("DETERMINISTIC", 4),
        ("SEMANTIC_SIMILARITY", 5)]
    classes: list[type[VerifierCheck]] = [
        MajorityVoteCheck, JsonSchemaValidCheck, StructuredMatchCheck, NumericToleranceCheck, NumericRangeCheck,
        CustomCheck, DnsTxtRecordMatchCheck, DnsCnameMatchCheck]
    assert [c.KIND for c in classes] == list(range(8))


# --------------------------------------------------------------------------- golden bytes


@pytest.mark.parametrize("kind", list(JOB_TYPES))
def test_canonical_job_spec_matches_golden_bytes_per_job_kind(kind: str) -> None:
    job, type_hex, hash_hex = JOB_TYPES[kind]
    spec = _spec(job)
    assert encode(job.to_cbor()).hex() == type_hex
    golden = bytes.fromhex(_spec_hex(type_hex))
    assert canonical_job_spec(spec) == golden
    assert job_spec_hash(spec).hex() == hash_hex
    assert keccak256(golden).hex() == hash_hex
    assert decode_job_spec(golden) == spec


def test_http_job_headers_encode_in_canonical_order_whatever_the_given_order() -> None:
    job = JOB_TYPES["http"][0]
    assert isinstance(job, HttpJob)
    reordered = dataclasses.replace(job, headers=tuple(reversed(job.headers)))
    assert reordered == job
    # docs/jobs.md: sorted by encoded name, so shorter names first
    assert reordered.headers == (("B", "1"), ("Accept", "application/json"), ("X-Api-Key", "k"))
    assert job_spec_hash(_spec(reordered)).hex() == JOB_TYPES["http"][2]


VERIF_ALL_SUPPORTED = VerificationConfig(
    mode=VerificationMode.STRUCTURED_MATCH, runners=3, threshold=2,
    checks=(MajorityVoteCheck(field="a"), JsonSchemaValidCheck(schema="{}"), StructuredMatchCheck(fields=("x", "y")),
            NumericToleranceCheck(field="p", tolerance=1), NumericRangeCheck(field="p", min=-1.5, max=2)),
    tee_required=True, dispute_window_blocks=10, required_tee_type="sgx")
VERIF_ALL_SUPPORTED_HEX = (
    "a7" "0003" "0103" "0202" "03" "85"
    "a2" "0000" "01" "6161"                                                  # majority_vote "a"
    "a2" "0001" "01" "627b7d"                                                # json_schema_valid "{}"
    "a2" "0002" "01" "82" "6178" "6179"                                      # structured_match ["x", "y"]
    "a3" "0003" "01" "6170" "02" "fb3ff0000000000000"                        # numeric_tolerance "p" 1.0 (float64)
    "a4" "0004" "01" "6170" "02" "fbbff8000000000000" "03" "fb4000000000000000"  # numeric_range "p" -1.5..2.0
    "04f5" "050a" "06" "63" + _t("sgx"))


def test_verification_config_with_every_supported_check_matches_golden_bytes() -> None:
    assert encode(VERIF_ALL_SUPPORTED.to_cbor()).hex() == VERIF_ALL_SUPPORTED_HEX
    assert VerificationConfig.from_cbor(VERIF_ALL_SUPPORTED.to_cbor()) == VERIF_ALL_SUPPORTED
    stored = _accepted(JobRequest(job_type=JOB_TYPES["http"][0], verification=VERIF_ALL_SUPPORTED, max_price=1))
    assert stored.verification == VERIF_ALL_SUPPORTED
    assert stored.max_price == 1


def test_integral_tolerance_is_float64_not_an_integer() -> None:
    assert encode(NumericToleranceCheck(field="p", tolerance=1).to_cbor()).hex() == "a3000301617002fb3ff0000000000000"


@pytest.mark.parametrize(("check", "golden"), [
    (CustomCheck(actor_hex="0xab", method="ok"), "a3" "0005" "0164" + _t("0xab") + "0262" + _t("ok")),
    (DnsTxtRecordMatchCheck(fqdn="a.io", expected_value="v", min_resolvers=2),
     "a4" "0006" "0164" + _t("a.io") + "0261" + _t("v") + "0302"),
    (DnsCnameMatchCheck(fqdn="a.io", expected_target="b.io", min_resolvers=3),
     "a4" "0007" "0164" + _t("a.io") + "0264" + _t("b.io") + "0303"),
])
def test_unsupported_check_kinds_still_have_a_canonical_encoding(check: VerifierCheck, golden: str) -> None:
    assert encode(check.to_cbor()).hex() == golden
    assert check_from_cbor(check.to_cbor()) == check


def test_custom_check_actor_text_is_carried_verbatim_even_when_not_hex() -> None:
    check = CustomCheck(actor_hex="not hex!", method="m")
    assert check.to_cbor()[1] == "not hex!"
    decoded = check_from_cbor(check.to_cbor())
    assert isinstance(decoded, CustomCheck)
    assert (decoded.actor_hex, decoded.method) == ("not hex!", "m")


CALLBACK = CallbackInfo(actor=b"\x66" * 20, handler="on_result", payload=None, correlation_id="c1", context=b"\xff")
CALLBACK_HEX_NULL = "a5" "0054" + "66" * 20 + "0169" + _t("on_result") + "02f6" "0362" + _t("c1") + "0441ff"
CALLBACK_HEX_BYTES = "a5" "0054" + "66" * 20 + "0169" + _t("on_result") + "02420001" "0362" + _t("c1") + "0441ff"


def test_callback_info_golden_bytes_with_null_and_with_bytes_payload() -> None:
    assert encode(CALLBACK.to_cbor()).hex() == CALLBACK_HEX_NULL
    with_payload = dataclasses.replace(CALLBACK, payload=b"\x00\x01")
    assert encode(with_payload.to_cbor()).hex() == CALLBACK_HEX_BYTES
    assert CallbackInfo.from_cbor(with_payload.to_cbor()) == with_payload
    empty_payload = dataclasses.replace(CALLBACK, payload=b"")
    assert encode(empty_payload.to_cbor()) != encode(CALLBACK.to_cbor())  # null and empty are distinct


def test_callback_none_is_the_zero_actor_with_empty_fields() -> None:
    assert encode(CallbackInfo.NONE.to_cbor()).hex() == "a5" "0054" + "00" * 20 + "0160" "02f6" "0360" "0440"
    assert not CallbackInfo.NONE.has_callback
    assert CALLBACK.has_callback


def test_job_request_is_the_spec_without_id_submitter_height_renumbered() -> None:
    job, type_hex, _ = JOB_TYPES["custom"]
    req = JobRequest(job_type=job, max_price=1_000_000)
    golden = ("a9" "00" + type_hex + "01" + BOUNDS_HEX[2:] + "02" + VERIF_NONE_HEX[2:] +
              "03" "1a000f4240" "04" "00" "05" "1864" "06" + CALLBACK_NONE_HEX[2:] + "07f6" "08f6")
    assert canonical_job_request(req).hex() == golden
    assert decode_job_request(bytes.fromhex(golden)) == req
    spec = req.to_spec(b"\x11" * 32, b"\x22" * 20, 7)
    assert canonical_job_spec(spec).hex() == _spec_hex(type_hex)
    assert spec.request == req


def test_derive_job_id_is_keccak_of_domain_tx_hash_and_u32_index() -> None:
    assert derive_job_id(b"\xaa" * 32, 1).hex() == "a584e14f44f79217a093a4e9899abe2d1a86c429f4f1093c8af8f00d8a63513d"
    assert derive_job_id(bytes(32), 0).hex() == "cdec5b2bfa22c36641a35ad3354037bd9b385857028bad8ef3363cf278c7aa2e"
    assert derive_job_id(b"\xaa" * 32, 0) != derive_job_id(b"\xaa" * 32, 1)
    with pytest.raises(ValueError):
        derive_job_id(b"\xaa" * 31, 0)
    with pytest.raises(ValueError):
        derive_job_id(b"\xaa" * 32, 1 << 32)


# --------------------------------------------------------------------------- strict decoding

GOLDEN_LLM = _spec_hex(JOB_TYPES["llm"][1])


def _sub(hex_text: str, old: str, new: str) -> str:
    """Replace the one occurrence of ``old`` that starts on a byte boundary."""
    hits = [i for i in range(0, len(hex_text), 2) if hex_text.startswith(old, i)]
    assert len(hits) == 1, (old, hits)
    return hex_text[:hits[0]] + new + hex_text[hits[0] + len(old):]


def _reject(hex_text: str) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode_job_spec(bytes.fromhex(hex_text))
    return info.value


def test_decode_rejects_an_extra_key() -> None:
    _reject("ad" + GOLDEN_LLM[2:] + "0cf6")  # key 12


def test_decode_rejects_a_missing_key() -> None:
    assert GOLDEN_LLM.endswith("0bf6")
    _reject("ab" + GOLDEN_LLM[2:-4])  # no key 11


def test_decode_rejects_an_integer_where_float64_is_required() -> None:
    _reject(_sub(GOLDEN_LLM, "04fb3fe0000000000000", "0401"))  # temperature 1 as an int


def test_decode_rejects_an_integral_float_in_a_json_value() -> None:
    mcp_hex = _spec_hex(JOB_TYPES["mcp"][1])
    _reject(_sub(mcp_hex, "616e02", "616efb4000000000000000"))  # "n": 2.0 must be the integer 2


def test_decode_rejects_non_canonical_bytes() -> None:
    _reject(_sub(GOLDEN_LLM, "041a000f4240", "041b00000000000f4240"))  # non-shortest max_price
    _reject(GOLDEN_LLM + "00")  # trailing byte
    _reject(_sub(GOLDEN_LLM, "0500" "061864", "061864" "0500"))  # keys 6 before 5


@pytest.mark.parametrize(("old", "new"), [
    ("005820" + "11" * 32, "00581f" + "11" * 31),        # job_id 31 bytes
    ("0854" + "22" * 20, "0855" + "22" * 21),            # submitter 21 bytes
    ("015820" + "33" * 32, "01581f" + "33" * 31),        # model_id 31 bytes
    ("0054" + "00" * 20, "0053" + "00" * 19),            # callback actor 19 bytes
])
def test_decode_rejects_wrong_fixed_lengths(old: str, new: str) -> None:
    _reject(_sub(GOLDEN_LLM, old, new))


@pytest.mark.parametrize(("old", "new"), [
    ("01a70000", "01a70006"),          # unknown job kind 6
    ("03a70000", "03a70006"),          # unknown verification mode 6
    ("04f4", "0400"),                  # tee_required not a bool
    ("0af6", "0a60"),                  # required_runner_pool as text
    ("0bf6", "0b8101"),                # attachment that is not a map
    ("0907", "0920"),                  # negative submitted_at
    ("03f6", "0340"),                  # system_prompt as bytes
])
def test_decode_rejects_wrong_types_and_unknown_enum_bytes(old: str, new: str) -> None:
    _reject(_sub(GOLDEN_LLM, old, new))


def test_decode_keeps_null_distinct_from_empty() -> None:
    spec = decode_job_spec(bytes.fromhex(_sub(_sub(GOLDEN_LLM, "0af6", "0a40"), "0bf6", "0b80")))
    assert spec.required_runner_pool == b""
    assert spec.attachments == ()
    assert spec != _spec(JOB_TYPES["llm"][0])
    # every other field is the golden spec's
    assert spec == _spec(JOB_TYPES["llm"][0], required_runner_pool=b"", attachments=())


def test_unknown_check_kind_and_wrong_check_keys_are_rejected() -> None:
    with pytest.raises(DecodeError):
        check_from_cbor({0: 8, 1: "x"})
    with pytest.raises(DecodeError):
        check_from_cbor({0: 0, 1: "x", 2: "extra"})
    with pytest.raises(DecodeError):
        check_from_cbor({0: 3, 1: "p", 2: 1})  # tolerance as an integer


def test_attachments_are_kept_as_opaque_canonical_maps() -> None:
    att = {0: b"\x01", 1: "vol", 2: [1, 2]}
    spec = _spec(JOB_TYPES["custom"][0], attachments=(att,))
    decoded = decode_job_spec(canonical_job_spec(spec))
    assert decoded.attachments == (att,)
    assert decoded == spec


# --------------------------------------------------------------------------- round trip

texts = st.text(max_size=12)
opt_texts = st.none() | texts
u64 = st.integers(0, (1 << 64) - 1)
floats = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 64), (1 << 64) - 1) | floats | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3), max_leaves=8)

job_types: st.SearchStrategy[JobType] = st.one_of(
    st.builds(LlmJob, model_id=st.binary(min_size=32, max_size=32), prompt=texts, system_prompt=opt_texts,
              temperature=st.none() | floats, max_tokens=u64, response_model=opt_texts),
    st.builds(HttpJob, url=texts, method=texts,
              headers=st.dictionaries(texts, texts, max_size=4).map(lambda d: tuple(d.items())),
              body=st.none() | st.binary(max_size=8), extraction=opt_texts,
              freshness=st.none() | st.builds(Freshness, max_age_seconds=u64, cache_control=opt_texts,
                                              timestamp_field=opt_texts)),
    st.builds(McpJob, server=texts, tool_name=texts, arguments=json_values, timeout_seconds=st.none() | u64),
    st.builds(CustomJob, executor_hash=st.binary(min_size=32, max_size=32), params=st.binary(max_size=8)),
    st.builds(PublishChainRootJob, src_chain_id=u64, dst_chain_id=u64, height=u64,
              registry_address=st.binary(min_size=20, max_size=20)),
    st.builds(AgentJob, model=texts, query=texts, system_prompt_path=opt_texts, system_prompt_inline=opt_texts,
              session_id=opt_texts, session_dir=opt_texts, max_iterations=u64, max_tool_calls_per_iter=u64,
              timeout_seconds=u64),
)
checks: st.SearchStrategy[VerifierCheck] = st.one_of(
    st.builds(MajorityVoteCheck, field=texts), st.builds(JsonSchemaValidCheck, schema=texts),
    st.builds(StructuredMatchCheck, fields=st.lists(texts, max_size=3).map(tuple)),
    st.builds(NumericToleranceCheck, field=texts, tolerance=floats),
    st.builds(NumericRangeCheck, field=texts, min=floats, max=floats),
    st.builds(CustomCheck, actor_hex=texts, method=texts),
    st.builds(DnsTxtRecordMatchCheck, fqdn=texts, expected_value=texts, min_resolvers=u64),
    st.builds(DnsCnameMatchCheck, fqdn=texts, expected_target=texts, min_resolvers=u64),
)
verifications = st.builds(VerificationConfig, mode=st.sampled_from(list(VerificationMode)), runners=u64,
                          threshold=u64, checks=st.lists(checks, max_size=3).map(tuple), tee_required=st.booleans(),
                          dispute_window_blocks=u64, required_tee_type=opt_texts)
callbacks = st.just(CallbackInfo.NONE) | st.builds(
    CallbackInfo, actor=st.binary(min_size=20, max_size=20), handler=texts, payload=st.none() | st.binary(max_size=8),
    correlation_id=texts, context=st.binary(max_size=8))
requests = st.builds(
    JobRequest, job_type=job_types,
    bounds=st.builds(ResourceBounds, max_input_tokens=u64, max_output_tokens=u64, max_wall_time_seconds=u64,
                     max_memory_mb=u64, max_retries=u64),
    verification=verifications, max_price=u64, tip=u64, timeout_blocks=u64, callback=callbacks,
    required_runner_pool=st.none() | st.binary(max_size=8),
    attachments=st.none() | st.lists(st.dictionaries(st.integers(0, 5), u64 | texts, max_size=3),
                                     max_size=2).map(tuple))


@settings(max_examples=300, deadline=None)
@given(requests, st.binary(min_size=32, max_size=32), st.binary(min_size=20, max_size=20), u64)
def test_decode_of_encode_is_identity(req: JobRequest, job_id: bytes, submitter: bytes, height: int) -> None:
    spec = req.to_spec(job_id, submitter, height)
    raw = canonical_job_spec(spec)
    assert decode_job_spec(raw) == spec
    assert canonical_job_spec(decode_job_spec(raw)) == raw
    assert decode_job_request(canonical_job_request(req)) == req


# --------------------------------------------------------------------------- validation

HTTP = HttpJob(url="https://example.com/data.json")
OK = JobRequest(job_type=HTTP, max_price=1_000_000)


def _code(req: JobRequest, **kwargs: int) -> str:
    with pytest.raises(ValidationError) as info:
        validate_request(req, **kwargs)
    return info.value.code


def _with(**changes: object) -> JobRequest:
    return dataclasses.replace(OK, **changes)  # type: ignore[arg-type]


def _verif(**changes: object) -> JobRequest:
    return _with(verification=dataclasses.replace(VerificationConfig(), **changes))  # type: ignore[arg-type]


def _accepted(req: JobRequest, **kwargs: int) -> JobRequest:
    """Validate ``req`` (validate_request returns None: it only raises) and return what the chain stores for it,
    the request decoded from its canonical bytes, for the caller to check field by field."""
    validate_request(req, **kwargs)
    stored = decode_job_request(canonical_job_request(req))
    assert stored == req
    return stored


def test_the_minimal_http_request_is_valid() -> None:
    stored = _accepted(OK)
    job = stored.job_type
    assert isinstance(job, HttpJob)
    assert job.url == "https://example.com/data.json"
    assert job.method == "GET"  # HttpJob.method default
    assert (job.headers, job.body, job.extraction, job.freshness) == ((), None, None, None)
    assert http_host(job) == "example.com"
    # ResourceBounds defaults (project choice; docs/jobs.md JSON example: 8192, 1024, 60, 512, 3)
    b = stored.bounds
    assert (b.max_input_tokens, b.max_output_tokens, b.max_wall_time_seconds, b.max_memory_mb, b.max_retries) == \
        (8192, 1024, 60, 512, 3)
    # VerificationConfig.DEFAULT: "mode none, one runner, threshold 1, no checks, no TEE, no dispute window"
    v = stored.verification
    assert (v.mode, v.runners, v.threshold, v.checks) == (VerificationMode.NONE, 1, 1, ())
    assert (v.tee_required, v.dispute_window_blocks, v.required_tee_type) == (False, 0, None)
    assert stored.max_price == 1_000_000
    # JobRequest defaults (docs/jobs.md: tip 0, timeout_blocks 100, callback null, pool null, attachments null)
    assert (stored.tip, stored.timeout_blocks) == (0, 100)
    assert stored.callback == CallbackInfo.NONE
    assert not stored.callback.has_callback
    assert (stored.required_runner_pool, stored.attachments) == (None, None)


@pytest.mark.parametrize("job", [
    HttpJob(url="ftp://example.com/x"),
    HttpJob(url="https:///path"),
    HttpJob(url="https://user:pw@example.com/"),
    HttpJob(url="https://exa mple.com/"),
    HttpJob(url="https://example.com:0/"),
    HttpJob(url="https://example.com/", method="get"),
    HttpJob(url="https://example.com/", method="CONNECT"),
    HttpJob(url="https://example.com/", headers=tuple((f"X-{i}", "v") for i in range(33))),
    HttpJob(url="https://example.com/", headers=(("Host", "evil.example"),)),
    HttpJob(url="https://example.com/", headers=(("Bad Name", "v"),)),
    HttpJob(url="https://example.com/", headers=(("X-A", "a\r\nInjected: 1"),)),
    HttpJob(url="https://example.com/", body=b"x"),  # GET with a body
    LlmJob(model_id=b"\x00" * 32, prompt="p", max_tokens=0),
    LlmJob(model_id=b"\x00" * 32, prompt="p", max_tokens=1, temperature=2.5),
    LlmJob(model_id=b"\x00" * 32, prompt="p", max_tokens=1, temperature=-0.1),
    LlmJob(model_id=b"\x00" * 31, prompt="p", max_tokens=1),
    LlmJob(model_id=b"\x00" * 32, prompt="", max_tokens=1),
    CustomJob(executor_hash=b"\x00" * 31),
    McpJob(server="", tool_name="t", arguments={}),
    McpJob(server="s", tool_name="t", arguments={}, timeout_seconds=0),
    AgentJob(model="m", query="q", max_iterations=0, max_tool_calls_per_iter=1, timeout_seconds=1),
    PublishChainRootJob(src_chain_id=1, dst_chain_id=2, height=3, registry_address=b"\x00" * 19),
])
def test_job_type_invalid(job: JobType) -> None:
    assert _code(_with(job_type=job)) == "job_type_invalid"


def test_valid_job_types_of_every_kind_pass() -> None:
    for kind, (job, _, _) in JOB_TYPES.items():
        stored = _accepted(_with(job_type=job))
        assert stored.job_type == job
        assert stored.job_type.to_cbor()[0] == runner.JOB_KINDS[kind]  # the kind byte it is stored under
    post = _accepted(_with(job_type=HttpJob(url="https://example.com/", method="POST", body=b"{}",
                                            headers=tuple((f"X-{i}", "v") for i in range(32))))).job_type
    assert isinstance(post, HttpJob)
    assert (post.url, post.method, post.body) == ("https://example.com/", "POST", b"{}")
    # all 32 headers kept, sorted by encoded name: the 3-character names X-0..X-9 before X-10..X-31
    assert post.headers == tuple((f"X-{i}", "v") for i in range(32))


def test_duplicate_http_header_names_are_invalid_and_names_are_exact() -> None:
    with pytest.raises(ValidationError) as info:
        HttpJob(url="https://example.com/", headers=(("A", "1"), ("A", "2")))
    assert info.value.code == "job_type_invalid"
    job = HttpJob(url="https://example.com/", headers=(("A", "1"), ("a", "2")))  # not lower-cased: distinct
    assert job.headers == (("A", "1"), ("a", "2"))  # both kept, names as given, "A" (0x41) before "a" (0x61)


def test_job_bounds_invalid() -> None:
    assert _code(_with(bounds=ResourceBounds(max_wall_time_seconds=0))) == "job_bounds_invalid"
    assert _code(_with(bounds=ResourceBounds(max_memory_mb=0))) == "job_bounds_invalid"


def test_semantic_similarity_is_refused_because_no_embedding_model_ships() -> None:
    with pytest.raises(ValidationError) as info:
        validate_request(_verif(mode=VerificationMode.SEMANTIC_SIMILARITY, runners=3, threshold=2))
    assert info.value.code == "semantic_similarity_unsupported"
    assert "embedding model" in info.value.message


@pytest.mark.parametrize("runners", [0, 17])
def test_job_runners_invalid(runners: int) -> None:
    assert _code(_verif(mode=VerificationMode.MAJORITY_VOTE, runners=runners, threshold=1)) == "job_runners_invalid"


def test_sixteen_runners_are_allowed() -> None:
    v = _accepted(_verif(mode=VerificationMode.MAJORITY_VOTE, runners=16, threshold=9)).verification
    assert (v.mode, v.runners, v.threshold) == (VerificationMode.MAJORITY_VOTE, 16, 9)


@pytest.mark.parametrize(("mode", "runners"), [
    (VerificationMode.NONE, 2), (VerificationMode.ECONOMIC_BOND, 2), (VerificationMode.MAJORITY_VOTE, 1),
    (VerificationMode.STRUCTURED_MATCH, 1), (VerificationMode.DETERMINISTIC, 1),
])
def test_job_mode_runners_mismatch(mode: VerificationMode, runners: int) -> None:
    assert _code(_verif(mode=mode, runners=runners, threshold=1)) == "job_mode_runners_mismatch"


@pytest.mark.parametrize(("mode", "runners", "threshold"), [
    (VerificationMode.NONE, 1, 0), (VerificationMode.NONE, 1, 2), (VerificationMode.DETERMINISTIC, 3, 4),
    (VerificationMode.MAJORITY_VOTE, 4, 2), (VerificationMode.MAJORITY_VOTE, 3, 1),
])
def test_job_threshold_invalid(mode: VerificationMode, runners: int, threshold: int) -> None:
    assert _code(_verif(mode=mode, runners=runners, threshold=threshold)) == "job_threshold_invalid"


def test_majority_threshold_just_above_half_is_valid() -> None:
    for runners, threshold in ((4, 3), (3, 2)):
        v = _accepted(_verif(mode=VerificationMode.MAJORITY_VOTE, runners=runners, threshold=threshold)).verification
        assert (v.mode, v.runners, v.threshold) == (VerificationMode.MAJORITY_VOTE, runners, threshold)


@pytest.mark.parametrize("check", [
    CustomCheck(actor_hex="0x" + "00" * 20, method="m"),
    DnsTxtRecordMatchCheck(fqdn="a.io", expected_value="v", min_resolvers=2),
    DnsCnameMatchCheck(fqdn="a.io", expected_target="b.io", min_resolvers=2),
])
def test_job_check_unsupported(check: VerifierCheck) -> None:
    req = _verif(mode=VerificationMode.STRUCTURED_MATCH, runners=3, threshold=2,
                 checks=(StructuredMatchCheck(fields=("a",)), check))
    assert _code(req) == "job_check_unsupported"


@pytest.mark.parametrize(("mode", "runners", "check_list"), [
    (VerificationMode.STRUCTURED_MATCH, 3, ()),                                         # needs a comparison
    (VerificationMode.STRUCTURED_MATCH, 3, (JsonSchemaValidCheck(schema="{}"),)),       # only a validity check
    (VerificationMode.NONE, 1, (MajorityVoteCheck(field="a"),)),                        # nothing to compare
    (VerificationMode.DETERMINISTIC, 3, (NumericToleranceCheck(field="p", tolerance=1.0),)),
    (VerificationMode.MAJORITY_VOTE, 3, (StructuredMatchCheck(fields=("a",)),)),        # kind not in mode
    (VerificationMode.STRUCTURED_MATCH, 3, (NumericToleranceCheck(field="p", tolerance=-1.0),)),
    (VerificationMode.STRUCTURED_MATCH, 3, (MajorityVoteCheck(field="a..b"),)),         # empty segment
    (VerificationMode.STRUCTURED_MATCH, 3, (MajorityVoteCheck(field="a" * 257),)),
    (VerificationMode.STRUCTURED_MATCH, 3, (StructuredMatchCheck(fields=()),)),
    (VerificationMode.STRUCTURED_MATCH, 3, (StructuredMatchCheck(fields=tuple(f"f{i}" for i in range(65))),)),
    (VerificationMode.STRUCTURED_MATCH, 3, (StructuredMatchCheck(fields=("a",)), JsonSchemaValidCheck(schema=""))),
    (VerificationMode.STRUCTURED_MATCH, 3, (StructuredMatchCheck(fields=("a", "a")),)),
    (VerificationMode.STRUCTURED_MATCH, 3, (StructuredMatchCheck(fields=("a",)),
                                            NumericRangeCheck(field="p", min=2.0, max=1.0))),
])
def test_job_checks_invalid(mode: VerificationMode, runners: int, check_list: tuple[VerifierCheck, ...]) -> None:
    req = _verif(mode=mode, runners=runners, threshold=runners // 2 + 1, checks=check_list)
    assert _code(req) == "job_checks_invalid"


def test_admission_checks_are_accepted_in_every_mode_and_the_empty_path_is_the_whole_result() -> None:
    admission = (JsonSchemaValidCheck(schema='{"type": "object"}'), NumericRangeCheck(field="", min=0, max=1))
    assert _accepted(_verif(checks=admission)).verification.checks == admission
    assert _accepted(_verif(mode=VerificationMode.DETERMINISTIC, runners=2, threshold=2,
                            checks=admission)).verification.checks == admission
    by_bytes = _accepted(_verif(mode=VerificationMode.MAJORITY_VOTE, runners=3, threshold=2,
                                checks=(MajorityVoteCheck(field=""),))).verification
    fields = tuple(f"f{i}" for i in range(64))
    assert _accepted(_verif(mode=VerificationMode.STRUCTURED_MATCH, runners=2, threshold=2,
                            checks=(StructuredMatchCheck(fields=fields),))).verification.checks == \
        (StructuredMatchCheck(fields=fields),)

    # "" is the whole result (docs/verification.md §2): a range on "" bounds the result itself, inclusive (§4)
    a, b, c = b"\x0a" * 20, b"\x0b" * 20, b"\x0c" * 20
    whole = _accepted(_verif(checks=(admission[1],))).verification
    assert verify(verification_params_of(whole), (Reveal(a, b"1", 1),)) == Verdict(
        ok=True, result=b"1", matching=(a,), outliers=(), reason="verified")
    assert verify(verification_params_of(whole), (Reveal(a, b"1.5", 1),)) == Verdict(
        ok=False, result=None, matching=(), outliers=(a,), reason="out_of_range")
    # a majority_vote check on "" compares the whole result as bytes (§4): same JSON, other spacing, disagrees
    reveals = (Reveal(a, b'{"x":1}', 1), Reveal(b, b'{"x": 1}', 1), Reveal(c, b'{"x":1}', 1))
    assert verify(verification_params_of(by_bytes), reveals) == Verdict(
        ok=True, result=b'{"x":1}', matching=(a, c), outliers=(b,), reason="verified")


def test_too_many_checks_are_invalid() -> None:
    many = tuple(NumericRangeCheck(field="p", min=0, max=1) for _ in range(17))
    assert _code(_verif(checks=many)) == "job_checks_invalid"
    assert _accepted(_verif(checks=many[:16])).verification.checks == many[:16]


def test_job_verification_invalid() -> None:
    assert _code(_verif(required_tee_type="sgx")) == "job_verification_invalid"  # tee_required false
    assert _code(_verif(dispute_window_blocks=100_001)) == "job_verification_invalid"
    v = _accepted(_verif(tee_required=True, required_tee_type="sgx")).verification
    assert (v.tee_required, v.required_tee_type) == (True, "sgx")


@pytest.mark.parametrize(("max_price", "tip"), [(0, 0), (1 << 64, 0), (1, 1 << 64), (1, -1)])
def test_job_price_invalid(max_price: int, tip: int) -> None:
    assert _code(_with(max_price=max_price, tip=tip)) == "job_price_invalid"


def test_job_timeout_invalid_and_its_bounds() -> None:
    assert _code(_with(timeout_blocks=9)) == "job_timeout_invalid"
    assert _code(_with(timeout_blocks=100_001)) == "job_timeout_invalid"
    assert _accepted(_with(timeout_blocks=10)).timeout_blocks == 10
    assert _accepted(_with(timeout_blocks=100_000)).timeout_blocks == 100_000
    # a commit phase that rounds to 0 blocks leaves no commit window
    assert _code(_with(timeout_blocks=10), commit_phase_permille=50) == "job_timeout_invalid"


CB_OK = CallbackInfo(actor=b"\x66" * 20, handler="h")


@pytest.mark.parametrize("cb", [
    dataclasses.replace(CB_OK, handler=""),                              # actor set, no handler
    dataclasses.replace(CallbackInfo.NONE, handler="h"),                 # handler without actor
    dataclasses.replace(CallbackInfo.NONE, context=b"x"),                # zero actor with data
    dataclasses.replace(CB_OK, handler="h" * 257),
    dataclasses.replace(CB_OK, handler="é" * 129),                       # 258 UTF-8 bytes
    dataclasses.replace(CB_OK, payload=b"\x00" * (64 * 1024 + 1)),
    dataclasses.replace(CB_OK, correlation_id="c" * 257),
    dataclasses.replace(CB_OK, context=b"\x00" * 4097),
])
def test_job_callback_invalid(cb: CallbackInfo) -> None:
    assert _code(_with(callback=cb)) == "job_callback_invalid"


def test_callback_limits_are_inclusive() -> None:
    cb = _accepted(_with(callback=dataclasses.replace(CB_OK, handler="h" * 256, correlation_id="c" * 256,
                                                      context=b"\x00" * 4096, payload=b""))).callback
    assert cb.has_callback
    assert cb.actor == b"\x66" * 20
    assert (cb.handler, cb.correlation_id, cb.context) == ("h" * 256, "c" * 256, b"\x00" * 4096)
    assert cb.payload == b""  # empty, kept distinct from null


def test_job_pool_invalid() -> None:
    assert _code(_with(required_runner_pool=b"")) == "job_pool_invalid"
    assert _code(_with(required_runner_pool=b"\x01" * 33)) == "job_pool_invalid"
    assert _accepted(_with(required_runner_pool=b"\x01" * 32)).required_runner_pool == b"\x01" * 32


def test_job_attachments_unsupported() -> None:
    assert _code(_with(attachments=({0: 1},))) == "job_attachments_unsupported"
    assert _accepted(_with(attachments=())).attachments == ()  # empty, kept distinct from null


def test_job_too_large() -> None:
    big = HttpJob(url="https://example.com/", method="POST", body=b"\x00" * (64 * 1024))
    assert _code(_with(job_type=big)) == "job_too_large"
    fits = HttpJob(url="https://example.com/", method="POST", body=b"\x00" * (60 * 1024))
    stored = _accepted(_with(job_type=fits))
    assert stored.job_type == fits
    assert len(canonical_job_request(stored)) <= 64 * 1024  # MAX_REQUEST_BYTES: 64 KiB (docs/jobs.md)


# --------------------------------------------------------------------------- http_host


@pytest.mark.parametrize(("url", "host"), [
    ("https://Example.COM:8443/x?y#z", "example.com"),
    ("http://api.example.com", "api.example.com"),
    ("HTTPS://example.com/", "example.com"),
    ("http://10.0.0.1:80/", "10.0.0.1"),
    ("http://[::1]:8080/", "::1"),
    ("https://example.com?q=1", "example.com"),
    ("ftp://example.com/", None),
    ("https://user@example.com/", None),
    ("https://example.com:65536/", None),
    ("https://example.com:/", None),
    ("https://exa_mple..com/", None),
    ("https://éxample.com/", None),
    ("https://example.com/a b", None),
    ("https://[::1/", None),
])
def test_http_host(url: str, host: str | None) -> None:
    assert http_host(HttpJob(url=url)) == host


def test_http_host_of_a_non_http_job_is_none() -> None:
    assert http_host(JOB_TYPES["llm"][0]) is None
