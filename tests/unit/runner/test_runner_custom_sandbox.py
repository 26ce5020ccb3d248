"""Escape suite of the custom executor's bubblewrap sandbox (issue 21 item 1, docs/runner-executors.md
"Isolation"): a custom program tries to read the runner's key, its environment, outlive the deadline, open a
socket, fork-bomb and fill the disk — each fails, the job ends with a result or a typed error, and nothing is left
running. Programs are ``/usr/bin/python3`` scripts (the system interpreter, visible inside the sandbox).

Skipped, with bwrap's own explanation, only where bubblewrap cannot build a sandbox (not installed, or no user
namespaces); the runner then refuses ``isolation = "bwrap"`` at start, which is tested here regardless."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import textwrap
import time
from pathlib import Path

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
    cgroups,
)
from cowboy_runner.executors.sandbox import bwrap_argv, bwrap_problem

pytestmark = pytest.mark.timeout(300)

PY3 = "/usr/bin/python3"
PROBLEM = bwrap_problem() if os.path.exists(PY3) else f"{PY3} is missing"
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"bubblewrap cannot run here: {PROBLEM}")
H = b"\x42" * 32
MARK = "987654321"
"""A sleep duration no other process uses: how a leftover sandboxed process is found in the host's /proc."""


def _executor(src: str, *, network: bool = False, time_limit_s: float = 20.0, **kw: object) -> CustomExecutor:
    program = CustomExecutorConfig((PY3, "-c", textwrap.dedent(src)), network=network)
    cfg = CustomConfig(executors={H: program}, time_limit_s=time_limit_s, **kw)  # type: ignore[arg-type]
    return CustomExecutor(cfg, max_output_bytes=256 * 1024)


async def _run(ex: CustomExecutor, params: bytes = b"", deadline_s: float = 20.0) -> ExecutionResult:
    return await ex.execute(CustomJob(executor_hash=H, params=params), ResourceBounds(max_wall_time_seconds=60,
                                                                                      max_memory_mb=2048),
                            deadline_s=deadline_s)


def _leftovers() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if MARK.encode() in cmd and b"pytest" not in cmd:
                found.append(int(entry))
    return found


@needs_bwrap
async def test_program_cannot_read_the_runner_key_or_home(tmp_path: Path) -> None:
    home = tmp_path / "runner-home"
    (home / "keys").mkdir(parents=True)
    key = home / "keys" / "runner.key"
    key.write_text('{"private_key": "0xSECRETKEYMATERIAL"}')
    key.chmod(0o644)  # even a world-readable key is out of reach: the home is not in the sandbox
    src = f"""
        import os, json
        out = {{}}
        for p in ({str(key)!r}, {str(home)!r}, "/proc/1/root{key}"):
            try:
                out[p] = open(p).read() if p.endswith(".key") else os.listdir(p)
            except Exception as e:
                out[p] = type(e).__name__
        print(json.dumps(out))
    """
    result = await _run(_executor(src))
    assert b"SECRETKEYMATERIAL" not in result.output
    seen = json.loads(result.output)
    assert set(seen.values()) <= {"FileNotFoundError", "PermissionError"}, seen


@needs_bwrap
async def test_program_sees_neither_the_runner_environment_nor_other_processes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COWBOY_TEST_LLM_KEY", "sk-must-not-leak")
    src = """
        import os, json
        environs = {}
        for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
            try:
                environs[pid] = open(f"/proc/{pid}/environ", "rb").read().decode("latin-1")
            except Exception as e:
                environs[pid] = type(e).__name__
        print(json.dumps({"env": dict(os.environ), "pids": sorted(environs), "environs": environs}))
    """
    ex = CustomExecutor(CustomConfig(executors={H: CustomExecutorConfig((PY3, "-c", textwrap.dedent(src)),
                                                                        env={"LANG": "C.UTF-8"})}),
                        max_output_bytes=256 * 1024)
    result = await _run(ex)
    assert b"sk-must-not-leak" not in result.output
    seen = json.loads(result.output)
    assert set(seen["env"]) == {"PATH", "HOME", "TMPDIR", "LANG", "PWD"}, seen["env"]  # PWD: bwrap --chdir
    assert seen["env"]["LANG"] == "C.UTF-8" and seen["env"]["HOME"] == "/tmp"
    assert seen["pids"] == ["1", "2"]  # the namespace's init and the program: no host process is visible


@needs_bwrap
async def test_program_cannot_outlive_the_deadline_even_from_a_new_session() -> None:
    src = f"""
        import os, subprocess, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                subprocess.Popen(["sleep", "{MARK}"], start_new_session=True)
                os._exit(0)
            os._exit(0)
        time.sleep(60)
    """
    assert _leftovers() == []
    with pytest.raises(ExecutorError) as info:
        await _run(_executor(src, time_limit_s=1.5))
    assert info.value.code == "timeout"
    for _ in range(50):  # the kernel tears the pid namespace down right after its init dies
        if not _leftovers():
            break
        await asyncio.sleep(0.1)
    assert _leftovers() == []


@needs_bwrap
async def test_program_cannot_open_a_socket_without_a_grant() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    port = server.getsockname()[1]
    src = f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
            print("connected")
        except OSError as e:
            print("refused", type(e).__name__)
    """
    try:
        result = await _run(_executor(src))
        assert result.output.startswith(b"refused"), result.output
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing reached the host
        granted = await _run(_executor(src, network=True))  # the positive control: a grant opens the network
        assert granted.output.startswith(b"connected"), granted.output
    finally:
        server.close()


@needs_bwrap
async def test_fork_bomb_is_contained_and_the_runner_stays_healthy() -> None:
    src = """
        import os, time
        n = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                n += 1
        except OSError as e:
            print("stopped after", n, type(e).__name__)
    """
    result = await _run(_executor(src, max_processes=32))
    words = result.output.split()
    assert words[:2] == [b"stopped", b"after"] and int(words[2]) < 32, result.output
    assert (await _run(_executor("print('still fine')"))).output == b"still fine\n"  # the next job runs


@needs_bwrap
async def test_filling_the_disk_stops_at_the_scratch_size() -> None:
    src = """
        try:
            with open("/tmp/fill", "wb") as f:
                for _ in range(64):
                    f.write(b"x" * (1 << 20))
            print("wrote 64 MiB")
        except OSError as e:
            print("stopped", e.errno)
    """
    result = await _run(_executor(src, scratch_mb=8, max_file_mb=1024))
    assert result.output.startswith(b"stopped"), result.output
    # RLIMIT_FSIZE: a write past max_file_mb fails with EFBIG (27; Python ignores SIGXFSZ, which kills others)
    big = await _run(_executor(src, scratch_mb=64, max_file_mb=2))
    assert big.output == b"stopped 27\n", big.output


@needs_bwrap
async def test_root_filesystem_is_read_only() -> None:
    result = await _run(_executor("""
        import os
        for p in ("/usr/evil", "/etc/evil"):
            try:
                open(p, "w")
                print("wrote", p)
            except OSError as e:
                print("refused", type(e).__name__)
    """))
    assert result.output.count(b"refused") == 2, result.output


def test_bwrap_command_line_shape() -> None:
    argv = bwrap_argv(("/opt/x/prog", "--json"), env={"A": "1"}, network=False, ro_paths=("/data",), cwd=None,
                      scratch_bytes=1 << 20)
    joined = " ".join(argv)
    assert argv[:5] == ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    assert "--share-net" not in argv and "--ro-bind /opt/x /opt/x" in joined and "--ro-bind /data /data" in joined
    assert "--size 1048576 --tmpfs /tmp" in joined and "--setenv A 1" in joined and argv[-3:] == ["--",
                                                                                               "/opt/x/prog",
                                                                                               "--json"]
    assert "--share-net" in bwrap_argv(("p",), env={}, network=True, ro_paths=(), cwd=None, scratch_bytes=1)


def test_bwrap_isolation_is_refused_at_start_when_bwrap_cannot_run() -> None:
    cfg = ExecutorsConfig(custom=CustomConfig(executors={H: CustomExecutorConfig(("/bin/true",))},
                                              bwrap="/nonexistent/bwrap"))
    with pytest.raises(ConfigError) as info:
        check_isolation(cfg)
    assert str(info.value).startswith('runner.toml: executors.custom.isolation: "bwrap" but /nonexistent/bwrap '
                                      "not found")


def test_isolation_none_is_allowed_with_a_warning() -> None:
    cfg = ExecutorsConfig(custom=CustomConfig(executors={H: CustomExecutorConfig(("/bin/true",))}, isolation="none"))
    warning = check_isolation(cfg)
    assert warning is not None and "unsandboxed" in warning


@needs_bwrap
def test_bwrap_isolation_passes_the_start_check_here(tmp_path: Path) -> None:
    cfg = ExecutorsConfig(custom=CustomConfig(executors={H: CustomExecutorConfig(("/bin/true",))}))
    if CGROUP is not None:  # bwrap works and a job cgroup can be made: nothing to warn about
        assert check_isolation(cfg) is None
    no_cgroup = ExecutorsConfig(custom=CustomConfig(executors={H: CustomExecutorConfig(("/bin/true",))},
                                                    cgroup_parent=str(tmp_path)))  # not a delegated cgroup
    warning = check_isolation(no_cgroup)
    assert warning is not None and "falls back to RLIMIT_AS" in warning


def test_skip_reason_is_verifiable() -> None:
    """The suite above is skipped only with bwrap's own words; this records which case this host is."""
    if PROBLEM is None:
        assert bwrap_problem() is None
    else:
        assert "bwrap" in PROBLEM or PY3 in PROBLEM
    time.sleep(0)


CGROUP = cgroups.available(None)
needs_cgroup = pytest.mark.skipif(PROBLEM is not None or CGROUP is None,
                                  reason=f"bubblewrap cannot run here: {PROBLEM}" if PROBLEM is not None else
                                  "not applicable: no writable cgroup v1 memory/pids hierarchy on this host")


@needs_cgroup
async def test_cgroup_memory_limit_kills_resident_memory_over_the_limit() -> None:
    src = """
        b = bytearray(256 * 1024 * 1024)
        for i in range(0, len(b), 4096):
            b[i] = 1                      # touch every page: resident, not just reserved
        print("survived")
    """
    with pytest.raises(ExecutorError) as info:
        await _run(_executor(src, memory_limit_mb=64))
    assert info.value.code == "memory_limit" and info.value.detail["cgroup"] == "v1"


@needs_cgroup
async def test_cgroup_memory_limit_lets_a_program_reserve_address_space() -> None:
    """What RLIMIT_AS breaks (JVM heaps, Go arenas, CUDA): reserving far more than the limit without using it."""
    src = """
        import mmap
        m = mmap.mmap(-1, 4 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)  # MAP_NORESERVE
        m[0] = 1
        print("reserved 4 GiB")
    """
    result = await _run(_executor(src, memory_limit_mb=64))
    assert result.output == b"reserved 4 GiB\n" and result.detail["cgroup"] == "v1"
    with pytest.raises(ExecutorError) as info:  # the control: the same program under RLIMIT_AS fails
        await _run(_executor(src, memory_limit_mb=64, cgroup=False))
    assert info.value.code == "memory_limit"
    # Removed after the job. Only this process's jobs: another pytest-xdist worker may be running one right now.
    assert not [d for d in (cgroups.V1_ROOT / "memory" / cgroups.GROUP).glob(f"job-{os.getpid()}-*")]
