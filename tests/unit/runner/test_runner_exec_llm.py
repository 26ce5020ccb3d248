"""LLM executor against an OpenAI-compatible stub server (docs/runner-executors.md §LLM)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from cowboy_protocol.types.jobspec import LlmJob, ResourceBounds
from cowboy_runner.executors import ExecutorError, LlmConfig, LlmExecutor
from tests.unit.runner_exec_servers import LlmStub, llm_app, serve

pytestmark = pytest.mark.timeout(300)

MODEL_ID = bytes(range(32))
SCHEMA = '{"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}'


@pytest.fixture
async def stub() -> AsyncIterator[tuple[str, LlmStub]]:
    s = LlmStub()
    async with serve(llm_app(s)) as base:
        yield base, s


def _executor(base: str, **kw: object) -> LlmExecutor:
    cfg = LlmConfig(base_url=f"{base}/v1", models={"0x" + MODEL_ID.hex().upper(): "tiny-model"}, **kw)  # type: ignore[arg-type]
    return LlmExecutor(cfg, max_output_bytes=256 * 1024)


def _job(**kw: object) -> LlmJob:
    args: dict[str, object] = {"model_id": MODEL_ID, "prompt": "What is 6*7?", "max_tokens": 100}
    args.update(kw)
    return LlmJob(**args)  # type: ignore[arg-type]


async def _fails(ex: LlmExecutor, job: LlmJob, code: str, deadline_s: float = 10.0) -> ExecutorError:
    with pytest.raises(ExecutorError) as info:
        await ex.execute(job, None, deadline_s=deadline_s)
    assert info.value.code == code, info.value
    return info.value


async def test_request_shape_and_free_text_reply(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    ex = _executor(base, api_key="sk-test")
    result = await ex.execute(_job(system_prompt="Be terse.", temperature=0.7), None, deadline_s=10)
    assert s.requests == [{"model": "tiny-model", "max_tokens": 100, "temperature": 0.7,
                           "messages": [{"role": "system", "content": "Be terse."},
                                        {"role": "user", "content": "What is 6*7?"}]}]
    assert s.auth == ["Bearer sk-test"]
    assert result.output == b"hello"
    assert result.usage_units == 12  # usage.total_tokens


async def test_defaults_no_system_prompt_operator_temperature_and_bounded_max_tokens(
        stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    ex = _executor(base, default_temperature=0.25)
    await ex.execute(_job(max_tokens=5000), ResourceBounds(max_output_tokens=300), deadline_s=10)
    assert s.requests[0]["messages"] == [{"role": "user", "content": "What is 6*7?"}]
    assert s.requests[0]["temperature"] == 0.25
    assert s.requests[0]["max_tokens"] == 300  # min(job.max_tokens, bounds.max_output_tokens)
    assert "response_format" not in s.requests[0] and s.auth == [None]


async def test_response_model_requests_json_schema_and_returns_canonical_json(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.reply = '{ "answer" : 42, "note": "ok" }'
    result = await _executor(base).execute(_job(response_model=SCHEMA), None, deadline_s=10)
    assert s.requests[0]["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "response", "schema": json.loads(SCHEMA)}}
    assert result.output == b'{"answer":42,"note":"ok"}'


async def test_json_object_mode(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.reply = '{"answer": 1}'
    await _executor(base, response_format="json_object").execute(_job(response_model=SCHEMA), None, deadline_s=10)
    assert s.requests[0]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("reply", ['{"answer": "42"}', '{"other": 1}', "42", "not json", '{"answer": 1, "answer": 2}'])
async def test_reply_not_matching_schema_is_schema_mismatch(stub: tuple[str, LlmStub], reply: str) -> None:
    base, s = stub
    s.reply = reply
    await _fails(_executor(base), _job(response_model=SCHEMA), "schema_mismatch")


async def test_schema_outside_node_subset_uses_jsonschema(stub: tuple[str, LlmStub]) -> None:
    pytest.importorskip("jsonschema")
    base, s = stub
    schema = json.dumps({"$defs": {"n": {"type": "string", "pattern": "^[a-z]+$"}},
                         "type": "object", "properties": {"name": {"$ref": "#/$defs/n"}}, "required": ["name"]})
    s.reply = '{"name": "abc"}'
    assert (await _executor(base).execute(_job(response_model=schema), None, deadline_s=10)).output == \
        b'{"name":"abc"}'
    s.reply = '{"name": "ABC"}'
    await _fails(_executor(base), _job(response_model=schema), "schema_mismatch")


async def test_response_model_not_json_is_schema_invalid(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    await _fails(_executor(base), _job(response_model="{not json"), "schema_invalid")
    assert s.requests == []  # refused before calling the model


async def test_unknown_model_id_is_unsupported_model(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    await _fails(_executor(base), _job(model_id=b"\x01" * 32), "unsupported_model")
    assert s.requests == []


async def test_slow_endpoint_times_out(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.delay_s = 30
    async with asyncio.timeout(10):
        await _fails(_executor(base), _job(), "timeout", deadline_s=0.5)


async def test_endpoint_error_status_is_upstream_error(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.status = 500
    err = await _fails(_executor(base), _job(), "upstream_error")
    assert err.detail["status"] == 500


async def test_usage_from_parts_when_total_missing(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.usage = {"prompt_tokens": 3, "completion_tokens": 4}
    assert (await _executor(base).execute(_job(), None, deadline_s=10)).usage_units == 7
    s.usage = None
    assert (await _executor(base).execute(_job(), None, deadline_s=10)).usage_units == 0


async def test_prompt_over_input_bound_is_refused(stub: tuple[str, LlmStub]) -> None:
    base, _ = stub
    with pytest.raises(ExecutorError) as info:
        await _executor(base).execute(_job(), ResourceBounds(max_input_tokens=6), deadline_s=10)
    assert info.value.code == "input_too_large"  # the stub reports prompt_tokens 7


def test_config_rejects_malformed_model_ids() -> None:
    with pytest.raises(ValueError):
        LlmConfig(base_url="http://x/v1", models={"abcd": "m"})
    with pytest.raises(ValueError):
        LlmConfig(base_url="http://x/v1", models={"00" * 32: "m", "0x" + "00" * 32: "n"})
