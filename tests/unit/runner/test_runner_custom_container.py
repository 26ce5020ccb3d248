"""Container isolation of custom programs (issue 21 item 1, docs/runner-executors.md "Isolation"): with
``isolation = "podman"`` each command runs in a fresh container of its image — stdin/stdout as usual, nobody's uid,
no network unless granted, none of the runner's environment or files, and at the deadline the container itself is
removed (killing the engine's client alone would leave it running).

Uses podman and a local image with ``python3`` (``COWBOY_TEST_IMAGE``, default ``localhost/cowboy-node:local``,
what ``make image`` builds); skipped with the reason when either is missing. Never pulls. Opt-in (containers take
seconds each): ``make test-runner-ops`` sets ``COWBOY_RUNNER_OPS_E2E=1``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import textwrap

import pytest

from cowboy_protocol.types.jobspec import CustomJob, ResourceBounds
from cowboy_runner.config import ConfigError
from cowboy_runner.executor_settings import check_isolation
from cowboy_runner.executors import (
    CustomConfig,
    CustomExecutor,
    CustomExecutorConfig,
    ExecutionResult,
    ExecutorError,
    ExecutorsConfig,
)
from cowboy_runner.executors.sandbox import container_problem

pytestmark = pytest.mark.timeout(300)

IMAGE = os.environ.get("COWBOY_TEST_IMAGE", "localhost/cowboy-node:local")
if os.environ.get("COWBOY_RUNNER_OPS_E2E") != "1":
    PROBLEM: str | None = "opt-in: make test-runner-ops (COWBOY_RUNNER_OPS_E2E=1)"
else:
    PROBLEM = container_problem("podman", (IMAGE,)) if shutil.which("podman") else "podman not found"
needs_podman = pytest.mark.skipif(PROBLEM is not None, reason=f"no container engine/image here: {PROBLEM}")
H = b"\x43" * 32


def _executor(src: str, *, network: bool = False, **kw: object) -> CustomExecutor:
    program = CustomExecutorConfig(("python3", "-c", textwrap.dedent(src)), image=IMAGE, network=network,
                                   env={"GREETING": "hi"})
    cfg = CustomConfig(executors={H: program}, isolation="podman", **kw)  # type: ignore[arg-type]
    return CustomExecutor(cfg, max_output_bytes=256 * 1024)


async def _run(ex: CustomExecutor, params: bytes = b"", deadline_s: float = 60.0) -> ExecutionResult:
    return await ex.execute(CustomJob(executor_hash=H, params=params), ResourceBounds(max_wall_time_seconds=60),
                            deadline_s=deadline_s)


def _containers(prefix: str = "cowboy-job-") -> list[str]:
    out = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                         timeout=30, check=False).stdout
    return [n for n in out.split() if n.startswith(prefix)]


@needs_podman
async def test_container_runs_the_job_as_nobody_without_the_runner_environment_or_network(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COWBOY_TEST_LLM_KEY", "sk-must-not-leak")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    src = f"""
        import json, os, socket, sys
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
            net = "connected"
        except OSError as e:
            net = type(e).__name__
        try:
            open("/etc/evil", "w")
            rootfs = "writable"
        except OSError as e:
            rootfs = type(e).__name__
        print(json.dumps({{"stdin": sys.stdin.read(), "uid": os.getuid(), "env": dict(os.environ), "net": net,
                          "rootfs": rootfs}}))
    """
    try:
        result = await _run(_executor(src), params=b'{"q": 1}')
    finally:
        server.close()
    seen = json.loads(result.output)
    assert seen["stdin"] == '{"q": 1}' and seen["uid"] == 65534
    assert "COWBOY_TEST_LLM_KEY" not in seen["env"] and seen["env"]["GREETING"] == "hi"
    assert seen["net"] != "connected" and seen["rootfs"] != "writable"
    assert b"sk-must-not-leak" not in result.output


@needs_podman
async def test_container_is_removed_at_the_deadline() -> None:
    before = set(_containers())
    with pytest.raises(ExecutorError) as info:
        await _run(_executor("import time; time.sleep(120)", time_limit_s=3.0))
    assert info.value.code == "timeout"
    assert set(_containers()) - before == set()  # nothing of this job is left, running or stopped


def test_container_isolation_needs_an_image_and_the_engine() -> None:
    with pytest.raises(ValueError, match="needs an image"):
        CustomConfig(executors={H: CustomExecutorConfig(("python3",))}, isolation="podman")
    cfg = ExecutorsConfig(custom=CustomConfig(executors={H: CustomExecutorConfig(("x",), image="img")},
                                              isolation="podman", engine="/nonexistent/podman"))
    with pytest.raises(ConfigError, match=r"executors\.custom\.isolation: 'podman' but /nonexistent/podman not found"):
        check_isolation(cfg)


@needs_podman
def test_missing_image_is_refused_at_start_never_pulled() -> None:
    cfg = ExecutorsConfig(custom=CustomConfig(
        executors={H: CustomExecutorConfig(("x",), image="localhost/cowboy-no-such-image:never")},
        isolation="podman"))
    with pytest.raises(ConfigError, match="is not available to"):
        check_isolation(cfg)
