"""Custom job executor (job kind 0x03): the operator's local command for an ``executor_hash``, run as its own
process group with the job's ``params`` on stdin, its stdout as the result, and wall-time, memory and stdout
limits (docs/runner-executors.md §Custom)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import resource
import secrets
import signal
from collections.abc import Callable

from cowboy_protocol.types.jobspec import CustomJob, JobType, ResourceBounds
from cowboy_runner.executors import cgroups
from cowboy_runner.executors.base import ExecutionResult, ExecutorError, check_output_size
from cowboy_runner.executors.config import CustomConfig, CustomExecutorConfig
from cowboy_runner.executors.http import with_operator_limit
from cowboy_runner.executors.sandbox import Limits, bwrap_argv, container_argv, preexec, sandbox_uid

READ_BYTES = 64 * 1024
"""Pipe read size."""
MEMORY_MARKERS: tuple[bytes, ...] = (
    b"MemoryError",                      # Python
    b"Cannot allocate memory",           # strerror(ENOMEM): C programs, shells, mmap failures
    b"std::bad_alloc",                   # C++
    b"memory allocation of",             # Rust's alloc failure handler
    b"out of memory",                    # Go runtime, glibc, many others
    b"Out of memory",
)
"""Substrings of a stderr tail that mark a death by the address-space limit (see :func:`died_of_memory`)."""


def died_of_memory(stderr_tail: bytes) -> bool:
    """Whether a failed process hit its memory limit.

    RLIMIT_AS makes allocations fail (``ENOMEM``) rather than delivering a distinctive signal, so the only
    portable evidence is what the program printed while dying: the runtimes' allocation-failure messages.
    """
    return any(m in stderr_tail for m in MEMORY_MARKERS)


def _memory_limiter(max_memory_mb: int) -> Callable[[], None]:
    limit = max_memory_mb * 1024 * 1024
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)  # an unprivileged process cannot raise its hard limit

    def apply() -> None:  # runs in the child between fork and exec: setrlimit only, nothing that takes locks
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


CONTAINER_ENGINES = ("podman", "docker")
"""Isolation modes that run each command in a container."""
ENGINE_ENV_KEYS = ("PATH", "HOME", "XDG_RUNTIME_DIR", "DOCKER_HOST", "CONTAINER_HOST")
"""The runner's variables a container engine's client needs to reach its service (never passed into the
container: only the program's ``env`` is)."""


def _engine_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ENGINE_ENV_KEYS if k in os.environ}


def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the process's whole group (the command and anything it spawned)."""
    # start_new_session=True made the child a group leader (pgid == pid); the pgid cannot be reused while
    # any member is alive, so this never hits an unrelated group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class CustomExecutor:
    """Executes :class:`~cowboy_protocol.types.jobspec.CustomJob`; see docs/runner-executors.md §Custom."""

    def __init__(self, config: CustomConfig, *, max_output_bytes: int) -> None:
        self.config = config
        """Settings."""
        self.max_output_bytes = max_output_bytes
        """Largest result returned (stdout is also capped by ``config.max_stdout_bytes``)."""

    async def execute(self, job: JobType, bounds: ResourceBounds | None, *, deadline_s: float) -> ExecutionResult:
        """Run the command within ``deadline_s`` seconds or the operator's ``time_limit_s``, whichever is shorter;
        the process group is always killed afterwards."""
        if not isinstance(job, CustomJob):
            raise ExecutorError("unsupported_job_type", f"custom executor cannot run {type(job).__name__}")
        spec = self.config.executors.get(job.executor_hash)
        if spec is None:
            raise ExecutorError("unknown_executor", f"executor_hash {job.executor_hash.hex()} is not configured")
        memory_mb = self.memory_limit_mb(bounds)
        c = self.config
        cgroup = None
        if c.isolation == "bwrap" and c.cgroup:  # blocking sysfs writes, but a handful of small files
            cgroup = cgroups.create(c.cgroup_parent, memory_bytes=None if memory_mb is None else memory_mb << 20,
                                    max_pids=c.max_processes)
        container = f"cowboy-job-{os.getpid()}-{secrets.token_hex(6)}" if c.isolation in CONTAINER_ENGINES else None
        procs: list[asyncio.subprocess.Process] = []
        loop = asyncio.get_running_loop()
        started = loop.time()
        oom = False
        try:
            out, rc, tail = await with_operator_limit(
                self._run(spec, job.params, memory_mb, procs, cgroup, container), deadline_s, c.time_limit_s,
                "executors.custom.time_limit_s")
        except ExecutorError as e:
            if procs:
                e.detail.setdefault("pid", procs[0].pid)
            raise
        finally:
            if procs:
                kill_group(procs[0])
                if procs[0].returncode is None:
                    await procs[0].wait()
            if cgroup is not None:
                oom = cgroup.oom_killed()
                await asyncio.to_thread(cgroup.kill_and_remove)
            if container is not None:  # killing the engine's client does not stop the container itself
                await self._remove_container(container)
        wall_ms = math.ceil((loop.time() - started) * 1000)
        pid = procs[0].pid
        detail: dict[str, object] = {"pid": pid, "exit_code": rc, "wall_ms": wall_ms,
                                     "stderr_tail": tail.decode("utf-8", "replace"),
                                     "cgroup": None if cgroup is None else f"v{cgroup.version}"}
        if rc != 0:
            # A container killed by its memory cgroup exits 137 (SIGKILL); the deadline kill raised timeout above.
            killed_in_container = container is not None and rc == 128 + signal.SIGKILL
            if memory_mb is not None and (oom or died_of_memory(tail) or killed_in_container):
                detail["memory_limit_mb"] = memory_mb
                raise ExecutorError("memory_limit", f"process exceeded its {memory_mb} MiB memory limit",
                                    detail=detail)
            how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
            raise ExecutorError("process_failed", f"process ended with {how}: "
                                                  f"{tail[-300:].decode('utf-8', 'replace')}", detail=detail)
        return ExecutionResult(check_output_size(out, self.max_output_bytes), wall_ms, detail)

    def memory_limit_mb(self, bounds: ResourceBounds | None) -> int | None:
        """The address-space limit applied to a command: the smaller of the job's ``max_memory_mb`` and the
        operator's ``memory_limit_mb`` (whichever exist); None when ``enforce_memory_limit`` is off or neither
        is set."""
        if not self.config.enforce_memory_limit:
            return None
        limits = [m for m in (None if bounds is None else bounds.max_memory_mb, self.config.memory_limit_mb)
                  if m is not None]
        return min(limits) if limits else None

    async def _remove_container(self, name: str) -> None:
        engine = self.config.engine or self.config.isolation
        with contextlib.suppress(OSError, TimeoutError):
            proc = await asyncio.create_subprocess_exec(engine, "rm", "-f", name, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.DEVNULL, env=_engine_env())
            try:
                async with asyncio.timeout(30):
                    await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    async def _run(self, spec: CustomExecutorConfig, params: bytes, memory_mb: int | None,
                   procs: list[asyncio.subprocess.Process], cgroup: cgroups.JobCgroup | None = None,
                   container: str | None = None) -> tuple[bytes, int, bytes]:
        PIPE = asyncio.subprocess.PIPE
        c = self.config
        child_setup: Callable[[], None] | None
        env: dict[str, str] | None
        cpu = c.cpu_time_s if c.cpu_time_s is not None else \
            (None if c.time_limit_s is None else math.ceil(c.time_limit_s))
        if container is not None:
            assert spec.image is not None  # CustomConfig checks it
            limits = Limits(max_processes=c.max_processes, cpu_seconds=cpu, max_file_bytes=c.max_file_mb << 20,
                            memory_bytes=None if memory_mb is None else memory_mb << 20)
            argv = container_argv(c.engine or c.isolation, container, spec.image, spec.argv, env=spec.env or {},
                                  network=spec.network, cwd=spec.cwd, scratch_bytes=c.scratch_mb << 20,
                                  limits=limits)
            child_setup, env, cwd = None, _engine_env(), None
        elif c.isolation == "bwrap":
            # With a job cgroup the kernel bounds resident memory; RLIMIT_AS (address space) only without one.
            address_space = None if memory_mb is None or cgroup is not None else memory_mb << 20
            limits = Limits(max_processes=c.max_processes, cpu_seconds=cpu, max_file_bytes=c.max_file_mb << 20,
                            memory_bytes=address_space)
            argv = bwrap_argv(spec.argv, env=spec.env or {}, network=spec.network, ro_paths=spec.ro_paths,
                              cwd=spec.cwd, scratch_bytes=c.scratch_mb << 20, bwrap=c.bwrap)
            # bwrap itself gets an empty environment too: nothing of the runner's reaches the sandbox.
            join = None if cgroup is None else cgroup.join_paths
            child_setup, env, cwd = preexec(limits, sandbox_uid(c.sandbox_uid_base), join), {}, None
        else:
            argv = list(spec.argv)
            child_setup = None if memory_mb is None else _memory_limiter(memory_mb)
            env, cwd = (None if spec.env is None else dict(spec.env)), spec.cwd
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=PIPE, stdout=PIPE, stderr=PIPE,
                                                        start_new_session=True, preexec_fn=child_setup, env=env,
                                                        cwd=cwd)
        except OSError as e:
            raise ExecutorError("process_failed", f"cannot start {spec.argv[0]!r}: {e}") from None
        procs.append(proc)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        feeder = asyncio.create_task(self._feed(proc.stdin, params))
        tail = asyncio.create_task(self._tail(proc.stderr))
        try:
            out = await self._read_stdout(proc.stdout, proc)
            rc = await proc.wait()
            await feeder
            return out, rc, await tail
        finally:
            feeder.cancel()
            tail.cancel()
            await asyncio.gather(feeder, tail, return_exceptions=True)

    @staticmethod
    async def _feed(stdin: asyncio.StreamWriter, params: bytes) -> None:
        try:
            stdin.write(params)
            await stdin.drain()
            stdin.close()
            await stdin.wait_closed()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command need not read all of its input

    async def _tail(self, stderr: asyncio.StreamReader) -> bytes:
        keep = self.config.stderr_tail_bytes
        tail = b""
        while chunk := await stderr.read(READ_BYTES):
            tail = (tail + chunk)[-keep:] if keep > 0 else b""
        return tail

    async def _read_stdout(self, stdout: asyncio.StreamReader, proc: asyncio.subprocess.Process) -> bytes:
        cap = self.config.max_stdout_bytes
        parts: list[bytes] = []
        total = 0
        while chunk := await stdout.read(READ_BYTES):
            total += len(chunk)
            if total > cap:
                kill_group(proc)
                raise ExecutorError("output_too_large", f"stdout exceeded {cap} bytes", detail={"limit": cap})
            parts.append(chunk)
        return b"".join(parts)
