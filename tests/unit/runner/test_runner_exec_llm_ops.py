"""LLM executor as operators run it (issue 21 item 4): retry with backoff on 429/5xx honouring Retry-After, the
operator's max_tokens cap, the input-token check before the call, finish_reason=length as an error, the API key
from a 0600 key file or a set environment variable, error text without the key, per-model metrics."""

from __future__ import annotations

import email.utils
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cowboy_protocol.types.jobspec import LlmJob, ResourceBounds
from cowboy_runner.config import ConfigError, parse_settings
from cowboy_runner.executor_settings import executors_config
from cowboy_runner.executors import ExecutorError, LlmConfig, LlmExecutor
from cowboy_runner.executors.llm import retry_after_seconds
from cowboy_runner.metrics import RunnerMetrics
from tests.unit.runner_exec_servers import LlmStub, llm_app, serve

pytestmark = pytest.mark.timeout(300)

MODEL_ID = bytes(range(32))
FAST_RETRY = {"retry_base_delay_s": 0.01, "retry_max_delay_s": 1.0}


@pytest.fixture
async def stub() -> AsyncIterator[tuple[str, LlmStub]]:
    s = LlmStub()
    async with serve(llm_app(s)) as base:
        yield base, s


def _executor(base: str, observer: RunnerMetrics | None = None, **kw: object) -> LlmExecutor:
    cfg = LlmConfig(base_url=f"{base}/v1", models={MODEL_ID: "tiny-model"}, **kw)  # type: ignore[arg-type]
    return LlmExecutor(cfg, max_output_bytes=256 * 1024, observer=observer)


def _job(**kw: object) -> LlmJob:
    args: dict[str, object] = {"model_id": MODEL_ID, "prompt": "What is 6*7?", "max_tokens": 100}
    args.update(kw)
    return LlmJob(**args)  # type: ignore[arg-type]


async def _fails(ex: LlmExecutor, job: LlmJob, code: str, bounds: ResourceBounds | None = None) -> ExecutorError:
    with pytest.raises(ExecutorError) as info:
        await ex.execute(job, bounds, deadline_s=20.0)
    assert info.value.code == code, info.value
    return info.value


# -- retries ------------------------------------------------------------------------------------------------
async def test_429_with_retry_after_then_success(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.script = [(429, {"Retry-After": "0"}, "slow down")]
    result = await _executor(base, **FAST_RETRY).execute(_job(), None, deadline_s=20)
    assert result.output == b"hello" and len(s.requests) == 2 and result.detail["attempts"] == 2


async def test_5xx_retried_with_backoff_then_success(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.script = [(503, {}, "busy"), (500, {}, "oops")]
    result = await _executor(base, **FAST_RETRY).execute(_job(), None, deadline_s=20)
    assert result.output == b"hello" and len(s.requests) == 3


async def test_retries_are_bounded(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.script = [(429, {}, "no")] * 5
    err = await _fails(_executor(base, max_retries=2, **FAST_RETRY), _job(), "rate_limited")
    assert len(s.requests) == 3 and err.detail == {"status": 429, "attempts": 3}


async def test_retry_after_longer_than_the_operator_allows_fails_at_once(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.script = [(429, {"Retry-After": "3600"}, "come back in an hour")]
    await _fails(_executor(base, **FAST_RETRY), _job(), "rate_limited")
    assert len(s.requests) == 1


async def test_client_errors_are_not_retried(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.script = [(400, {}, "bad request")]
    err = await _fails(_executor(base, **FAST_RETRY), _job(), "upstream_error")
    assert len(s.requests) == 1 and err.detail["status"] == 400


async def test_garbage_reply_is_upstream_error(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.script = [(200, {"Content-Type": "application/json"}, "{not json")]
    await _fails(_executor(base), _job(), "upstream_error")


async def test_endless_reply_stream_is_cut_at_the_response_cap(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.endless = True
    err = await _fails(_executor(base, max_response_bytes=1 << 20), _job(), "response_too_large")
    assert err.detail["limit"] == 1 << 20
    s.endless = False
    assert (await _executor(base).execute(_job(), None, deadline_s=20)).output == b"hello"  # next job is fine


def test_retry_after_forms() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds("7", now) == 7.0
    assert retry_after_seconds(email.utils.formatdate(now + 30, usegmt=True), now) == 30.0
    assert retry_after_seconds(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    assert retry_after_seconds("soon", now) is None and retry_after_seconds(None, now) is None
    assert retry_after_seconds("-1", now) is None


# -- token bounds ---------------------------------------------------------------------------------------------
async def test_operator_max_tokens_caps_a_job_without_bounds(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    await _executor(base, max_tokens=50).execute(_job(max_tokens=100_000), None, deadline_s=20)
    assert s.requests[0]["max_tokens"] == 50


async def test_input_limit_checked_before_the_endpoint_is_paid(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    bounds = ResourceBounds(max_input_tokens=10)
    err = await _fails(_executor(base), _job(prompt="x" * 61), "input_too_large", bounds)  # 10 tokens x 6 chars
    assert s.requests == [] and err.detail["phase"] == "before_call"
    await _executor(base).execute(_job(prompt="x" * 40, system_prompt="y" * 20), bounds, deadline_s=20)
    assert len(s.requests) == 1  # 60 characters: possibly within 10 tokens, so the endpoint decides


async def test_reply_cut_at_max_tokens_is_an_error(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.finish_reason = "length"
    err = await _fails(_executor(base), _job(), "output_truncated")
    assert err.detail["completion_tokens"] == 5


# -- the key ----------------------------------------------------------------------------------------------------
async def test_endpoint_error_text_never_carries_the_key(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    s.status, s.error_text = 401, "Incorrect API key provided: sk-very-secret-key-1234"
    err = await _fails(_executor(base, api_key="sk-very-secret-key-1234"), _job(), "upstream_error")
    assert "sk-very-secret" not in str(err) and "sk-very-secret" not in err.message
    assert "[redacted]" in err.message and s.auth == ["Bearer sk-very-secret-key-1234"]


BASE_TOML = """
[runner]
validator_rpc = "http://127.0.0.1:4000"
[capabilities]
job_types = ["llm"]
max_concurrent_jobs = 1
[rate_card.llm]
base_price = "100"
price_per_unit = "2"
[executors.llm]
base_url = "http://127.0.0.1:8000/v1"
"""


def test_api_key_file_0600_is_read(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    key = tmp_path / "keys" / "llm.key"
    key.write_text("sk-from-file\n")
    key.chmod(0o600)
    cfg = executors_config(parse_settings(BASE_TOML + 'api_key_file = "keys/llm.key"\n', tmp_path))
    assert cfg.llm is not None and cfg.llm.api_key == "sk-from-file"
    assert cfg.llm.price == (100, 2)


def test_api_key_file_readable_by_others_is_refused_naming_the_file(tmp_path: Path) -> None:
    key = tmp_path / "llm.key"
    key.write_text("sk-from-file\n")
    key.chmod(0o644)
    with pytest.raises(ConfigError) as info:
        executors_config(parse_settings(BASE_TOML + 'api_key_file = "llm.key"\n', tmp_path))
    assert str(info.value).startswith("runner.toml: executors.llm.api_key_file: ")
    assert str(key) in str(info.value) and "chmod 600" in str(info.value)


def test_missing_api_key_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"executors\.llm\.api_key_file: cannot read"):
        executors_config(parse_settings(BASE_TOML + 'api_key_file = "nope.key"\n', tmp_path))


def test_configured_but_unset_env_var_is_a_startup_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COWBOY_TEST_UNSET_KEY", raising=False)
    settings = parse_settings(BASE_TOML + 'api_key_env = "COWBOY_TEST_UNSET_KEY"\n', tmp_path)
    with pytest.raises(ConfigError) as info:
        executors_config(settings)
    assert "executors.llm.api_key_env" in str(info.value) and "COWBOY_TEST_UNSET_KEY" in str(info.value)
    monkeypatch.setenv("COWBOY_TEST_UNSET_KEY", "sk-env")
    cfg = executors_config(settings)
    assert cfg.llm is not None and cfg.llm.api_key == "sk-env"


def test_only_one_key_source() -> None:
    with pytest.raises(ConfigError, match="not several"):
        parse_settings(BASE_TOML + 'api_key = "a"\napi_key_file = "f"\n', Path(os.sep))


# -- metrics ----------------------------------------------------------------------------------------------------
async def test_per_model_token_and_price_metrics(stub: tuple[str, LlmStub]) -> None:
    base, s = stub
    metrics = RunnerMetrics()
    ex = _executor(base, observer=metrics, price=(100, 2))
    await ex.execute(_job(), None, deadline_s=20)
    s.finish_reason = "length"
    await _fails(ex, _job(), "output_truncated")
    value = metrics.registry.get_sample_value
    labels = {"model": "tiny-model"}
    assert value("cowboy_runner_llm_requests_total", {**labels, "outcome": "ok"}) == 1
    assert value("cowboy_runner_llm_requests_total", {**labels, "outcome": "output_truncated"}) == 1
    assert value("cowboy_runner_llm_tokens_total", {**labels, "kind": "prompt"}) == 14  # 7 per call
    assert value("cowboy_runner_llm_tokens_total", {**labels, "kind": "completion"}) == 10
    assert value("cowboy_runner_llm_price_total", labels) == 100 + 2 * 12  # only the success is priced
