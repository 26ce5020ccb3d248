"""Custom executor with real subprocesses (docs/runner-executors.md §Custom)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from cowboy_protocol.types.jobspec import CustomJob, ResourceBounds
from cowboy_runner.executors import CustomConfig, CustomExecutor, CustomExecutorConfig, ExecutorError
from cowboy_runner.executors.custom import died_of_memory

pytestmark = pytest.mark.timeout(300)

PY = sys.executable
UPPER = b"\x01" * 32
SLEEPER = b"\x02" * 32
FAIL = b"\x03" * 32
HOG = b"\x04" * 32
FLOOD = b"\x05" * 32
SPAWNER = b"\x06" * 32

UPPER_SRC = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read().upper())"
FAIL_SRC = "import sys; sys.stderr.write('x' * 5000 + 'the end of the error'); sys.exit(3)"
HOG_SRC = "b = bytearray(512 * 1024 * 1024); print(len(b))"
FLOOD_SRC = "import sys\nwhile True: sys.stdout.write('y' * 65536)"
# Writes its pid and a grandchild's pid, then hangs: a timeout must kill both (the whole process group).
SPAWNER_SRC = ("import subprocess, sys, os, time; c = subprocess.Popen([sys.executable, '-c', 'import time; "
               "time.sleep(60)']); open(sys.argv[1], 'w').write(f'{os.getpid()} {c.pid}'); time.sleep(60)")


def _executor(tmp_path: Path, **kw: object) -> CustomExecutor:
    executors = {
        UPPER.hex(): CustomExecutorConfig(argv=(PY, "-c", UPPER_SRC)),
        SLEEPER.hex(): CustomExecutorConfig(argv=(PY, "-c", "import time; time.sleep(60)")),
        FAIL.hex(): CustomExecutorConfig(argv=(PY, "-c", FAIL_SRC)),
        HOG.hex(): CustomExecutorConfig(argv=(PY, "-c", HOG_SRC)),
        FLOOD.hex(): CustomExecutorConfig(argv=(PY, "-c", FLOOD_SRC)),
        SPAWNER.hex(): CustomExecutorConfig(argv=(PY, "-c", SPAWNER_SRC, str(tmp_path / "pids"))),
    }
    return CustomExecutor(CustomConfig(executors=executors, **{"isolation": "none", **kw}), max_output_bytes=256 * 1024)  # type: ignore[arg-type]


def _gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (absent, or a zombie awaiting its reaper)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


async def _eventually_gone(pid: int) -> bool:
    for _ in range(200):  # a grandchild is reaped by init, asynchronously; bounded wait
        if _gone(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_params_on_stdin_result_on_stdout(tmp_path: Path) -> None:
    result = await _executor(tmp_path).execute(CustomJob(executor_hash=UPPER, params=b"abc\x00def"),
                                               ResourceBounds(), deadline_s=20)
    assert result.output == b"ABC\x00DEF"
    assert result.detail["exit_code"] == 0
    assert result.usage_units >= 1 and result.usage_units == result.detail["wall_ms"]


async def test_large_params_do_not_deadlock(tmp_path: Path) -> None:
    params = b"q" * (200 * 1024)  # larger than a pipe buffer in both directions
    result = await _executor(tmp_path).execute(CustomJob(executor_hash=UPPER, params=params), None, deadline_s=20)
    assert result.output == params.upper()


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    ex = _executor(tmp_path)
    with pytest.raises(ExecutorError) as info:
        async with asyncio.timeout(15):
            await ex.execute(CustomJob(executor_hash=SPAWNER), None, deadline_s=2.0)
    assert info.value.code == "timeout"
    pid, grandchild = map(int, (tmp_path / "pids").read_text().split())
    assert info.value.detail["pid"] == pid
    assert _gone(pid)  # the command itself is killed and reaped before execute returns
    assert await _eventually_gone(grandchild)


async def test_memory_limit(tmp_path: Path) -> None:
    with pytest.raises(ExecutorError) as info:
        await _executor(tmp_path).execute(CustomJob(executor_hash=HOG), ResourceBounds(max_memory_mb=128),
                                          deadline_s=20)
    assert info.value.code == "memory_limit"
    assert "MemoryError" in str(info.value.detail["stderr_tail"])


async def test_memory_limit_off_lets_the_allocation_succeed(tmp_path: Path) -> None:
    result = await _executor(tmp_path, enforce_memory_limit=False).execute(
        CustomJob(executor_hash=HOG), ResourceBounds(max_memory_mb=128), deadline_s=20)
    assert result.output == b"536870912\n"


async def test_non_zero_exit_is_process_failed_with_stderr_tail(tmp_path: Path) -> None:
    ex = _executor(tmp_path, stderr_tail_bytes=100)
    with pytest.raises(ExecutorError) as info:
        await ex.execute(CustomJob(executor_hash=FAIL), ResourceBounds(), deadline_s=20)
    assert info.value.code == "process_failed"
    assert info.value.detail["exit_code"] == 3
    tail = str(info.value.detail["stderr_tail"])
    assert len(tail) == 100 and tail.endswith("the end of the error")


async def test_stdout_cap(tmp_path: Path) -> None:
    ex = _executor(tmp_path, max_stdout_bytes=100_000)
    with pytest.raises(ExecutorError) as info:
        async with asyncio.timeout(15):
            await ex.execute(CustomJob(executor_hash=FLOOD), None, deadline_s=20)
    assert info.value.code == "output_too_large"
    assert _gone(int(info.value.detail["pid"]))  # type: ignore[call-overload]


async def test_unknown_executor_hash(tmp_path: Path) -> None:
    with pytest.raises(ExecutorError) as info:
        await _executor(tmp_path).execute(CustomJob(executor_hash=b"\xee" * 32), None, deadline_s=5)
    assert info.value.code == "unknown_executor"


async def test_missing_command_is_process_failed(tmp_path: Path) -> None:
    cfg = CustomConfig(executors={UPPER: CustomExecutorConfig(argv=(str(tmp_path / "nope"),))})
    with pytest.raises(ExecutorError) as info:
        await CustomExecutor(cfg, max_output_bytes=1024).execute(CustomJob(executor_hash=UPPER), None, deadline_s=5)
    assert info.value.code == "process_failed"


async def test_hung_executor_does_not_block_a_concurrent_fast_job(tmp_path: Path) -> None:
    ex = _executor(tmp_path)
    finished: list[str] = []

    async def run(name: str, job: CustomJob, deadline_s: float) -> None:
        try:
            await ex.execute(job, None, deadline_s=deadline_s)
        except ExecutorError as e:
            assert e.code == "timeout"
        finished.append(name)

    async with asyncio.timeout(20):
        await asyncio.gather(run("hung", CustomJob(executor_hash=SLEEPER), 3.0),
                             run("fast", CustomJob(executor_hash=UPPER, params=b"x"), 15.0))
    assert finished == ["fast", "hung"]


def test_memory_markers() -> None:
    assert died_of_memory(b"Traceback ...\nMemoryError\n")
    assert died_of_memory(b"memory allocation of 1073741824 bytes failed\n")
    assert died_of_memory(b"fatal error: runtime: out of memory\n")
    assert not died_of_memory(b"ValueError: bad input\n")
