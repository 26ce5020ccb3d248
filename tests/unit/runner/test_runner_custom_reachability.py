"""The runner refuses to start when a configured custom program cannot start inside its bubblewrap sandbox
(issue 35; ``executors/reachability.py``): under ``/tmp`` (the sandbox's own tmpfs hides it), not readable and
executable by the sandbox uid, a relative path, not on the sandbox's PATH, a symlink out of what the sandbox
binds, a cwd under ``/tmp``. The error names the program's ``executors.custom.0x…`` key, the program and the
reason. With bubblewrap available, the premise is checked too: the refused ``/tmp`` program really fails in the
sandbox, and a program the check accepts really runs there."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
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
)
from cowboy_runner.executors.reachability import program_problem
from cowboy_runner.executors.sandbox import bwrap_problem

pytestmark = pytest.mark.timeout(300)

H = b"\x35" * 32
SCRIPT = "#!/bin/sh\necho reached\n"
BWRAP_PROBLEM = bwrap_problem()


def _program(directory: Path, mode: int = 0o755) -> Path:
    path = directory / "prog"
    path.write_text(SCRIPT)
    path.chmod(mode)
    return path


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A fresh directory (mode 0755) that the sandbox does not hide: not under /tmp, where tmp_path lives."""
    base = Path(tempfile.mkdtemp(prefix="cowboy-reach-", dir="/var/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _refusal(spec: CustomExecutorConfig) -> str:
    with pytest.raises(ConfigError) as info:
        check_isolation(ExecutorsConfig(custom=CustomConfig(executors={H: spec})))
    return str(info.value)


def test_a_program_in_a_mktemp_folder_under_tmp_is_refused_at_start_naming_it() -> None:
    folder = Path(tempfile.mkdtemp())  # what `mktemp -d` gives: a 0700 folder under /tmp
    try:
        prog = _program(folder)
        message = _refusal(CustomExecutorConfig((str(prog), "--flag")))
    finally:
        shutil.rmtree(folder)
    assert message.startswith(f"runner.toml: executors.custom.0x{H.hex()}: program {prog}: {prog} is under /tmp, "
                              "which the sandbox replaces with its own")


def test_a_program_the_sandbox_uid_cannot_read_and_execute_is_refused(outside_tmp: Path) -> None:
    private = outside_tmp / "private"
    private.mkdir(mode=0o700)
    prog = _program(private)
    why = program_problem(CustomExecutorConfig((str(prog),)), as_other_uid=True)
    assert why is not None and "not readable and executable by the sandbox uid" in why
    assert f"its directory {private} has mode 0700" in why
    owner_only = _program(outside_tmp, mode=0o700)
    why = program_problem(CustomExecutorConfig((str(owner_only),)), as_other_uid=True)
    assert why is not None and f"{owner_only} has mode 0700 (others need r and x" in why


def test_a_readable_program_outside_tmp_passes(outside_tmp: Path) -> None:
    prog = _program(outside_tmp)
    for as_other_uid in (True, False):
        assert program_problem(CustomExecutorConfig((str(prog),)), as_other_uid=as_other_uid) is None
    assert program_problem(CustomExecutorConfig(("true",)), as_other_uid=True) is None  # on the sandbox's PATH


@pytest.mark.parametrize(("argv0", "fragment"), [
    ("bin/prog", "is a relative path, resolved inside the sandbox"),
    ("no-such-program-35", "is not on the sandbox's PATH (/usr/local/bin:/usr/bin:/bin)"),
    ("/nonexistent-35/prog", "/nonexistent-35/prog does not exist"),
])
def test_programs_the_sandbox_cannot_find_are_refused(argv0: str, fragment: str) -> None:
    assert fragment in _refusal(CustomExecutorConfig((argv0,)))


def test_a_symlink_out_of_the_bound_paths_needs_ro_paths(outside_tmp: Path) -> None:
    (outside_tmp / "lib").mkdir()
    (outside_tmp / "bin").mkdir()
    target = _program(outside_tmp / "lib")
    link = outside_tmp / "bin" / "prog"
    link.symlink_to(target)
    why = program_problem(CustomExecutorConfig((str(link),)), as_other_uid=True)
    assert why is not None and f"resolves to {target}, outside every path the sandbox shows it" in why
    assert program_problem(CustomExecutorConfig((str(link),), ro_paths=(str(outside_tmp / "lib"),)),
                           as_other_uid=True) is None


def test_a_cwd_under_tmp_is_refused(outside_tmp: Path, tmp_path: Path) -> None:
    prog = _program(outside_tmp)
    assert f"its cwd {tmp_path} is under /tmp" in _refusal(CustomExecutorConfig((str(prog),), cwd=str(tmp_path)))


def test_isolation_none_is_not_checked_against_the_sandbox() -> None:
    cfg = ExecutorsConfig(custom=CustomConfig(executors={H: CustomExecutorConfig(("/tmp/anything",))},
                                              isolation="none"))
    assert check_isolation(cfg) is not None  # only the "unsandboxed" warning


# --- the premise, where bubblewrap runs ------------------------------------------------------------------

def _run(prog: str) -> ExecutionResult:
    ex = CustomExecutor(CustomConfig(executors={H: CustomExecutorConfig((prog,))}, cgroup=False),
                        max_output_bytes=1024)
    job = CustomJob(executor_hash=H, params=b"")
    return asyncio.run(ex.execute(job, ResourceBounds(max_wall_time_seconds=30, max_memory_mb=512), deadline_s=30))


@pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bubblewrap cannot run here: {BWRAP_PROBLEM}")
def test_what_the_check_refuses_fails_in_the_sandbox_and_what_it_accepts_runs(outside_tmp: Path) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        hidden = _program(folder)
        with pytest.raises(ExecutorError) as info:
            _run(str(hidden))
        assert info.value.code == "process_failed" and "execvp" in str(info.value)
    finally:
        shutil.rmtree(folder)
    result = _run(str(_program(outside_tmp)))
    assert result.output == b"reached\n"
