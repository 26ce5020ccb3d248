"""Per-job cgroups for sandboxed custom programs (docs/runner-executors.md "Isolation"): a memory limit the kernel
enforces on resident memory (unlike ``RLIMIT_AS``, which breaks CUDA, JVM and Go programs that reserve address
space) and a process-count limit that holds whatever uid the program runs as.

Two layouts are used when they are writable by the runner:

* cgroup v1: ``/sys/fs/cgroup/memory`` and ``/sys/fs/cgroup/pids`` — a ``cowboy-runner/job-<n>`` directory in
  each, ``memory.limit_in_bytes`` (+ ``memory.memsw.limit_in_bytes`` when swap accounting exists) and
  ``pids.max``; an OOM kill is read from ``memory.oom_control`` (``oom_kill``);
* cgroup v2 under an operator-delegated parent (``executors.custom.cgroup_parent``, e.g. a systemd
  ``Delegate=yes`` slice, whose ``cgroup.subtree_control`` enables ``memory`` and ``pids``): ``job-<n>`` with
  ``memory.max``, ``memory.swap.max = 0`` and ``pids.max``; an OOM kill is ``oom_kill`` in ``memory.events``.

The child joins the job's cgroups between fork and exec (:meth:`JobCgroup.join_paths`), before it drops
privileges, so everything it starts is accounted there. Afterwards every process left in them is killed and the
directories removed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup")
"""Mount point of the cgroup hierarchies."""
GROUP = "cowboy-runner"
"""Directory the job cgroups are created in (v1: in each controller's hierarchy)."""

_jobs: Iterator[int] = itertools.count()


def _write(path: Path, value: str) -> None:
    path.write_text(value, encoding="ascii")


@dataclass
class JobCgroup:
    """The cgroup directories of one job."""

    dirs: list[Path]
    """Job directories (v1: one per controller; v2: one)."""
    version: int
    """1 or 2."""

    @property
    def join_paths(self) -> list[bytes]:
        """``cgroup.procs`` files the child writes its pid to (bytes: used between fork and exec)."""
        return [str(d / "cgroup.procs").encode() for d in self.dirs]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this job for exceeding the memory limit."""
        for d in self.dirs:
            name = "memory.oom_control" if self.version == 1 else "memory.events"
            try:
                text = (d / name).read_text(encoding="ascii")
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                    return True
        return False

    def kill_and_remove(self, wait_s: float = 2.0) -> bool:
        """SIGKILL every process left in the job's cgroups and remove them; False if one could not be removed
        within ``wait_s`` (an empty leftover directory costs nothing and does not affect other jobs)."""
        deadline = time.monotonic() + wait_s
        pending = list(self.dirs)
        while pending:
            for d in list(pending):
                with contextlib.suppress(OSError):
                    for pid in (d / "cgroup.procs").read_text(encoding="ascii").split():
                        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                            os.kill(int(pid), signal.SIGKILL)
                try:
                    d.rmdir()
                    pending.remove(d)
                except FileNotFoundError:
                    pending.remove(d)
                except OSError:
                    pass
            if pending:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
        return True


def _v1_writable() -> bool:
    return all(os.access(V1_ROOT / c, os.W_OK) and (V1_ROOT / c / "cgroup.procs").exists()
               for c in ("memory", "pids"))


def _v2_ready(parent: Path) -> bool:
    try:
        enabled = (parent / "cgroup.subtree_control").read_text(encoding="ascii").split()
    except OSError:
        return False
    return "memory" in enabled and "pids" in enabled and os.access(parent, os.W_OK)


def available(parent: str | None) -> str | None:
    """Which layout a job cgroup would use (``"v1"``, ``"v2"``) or None when neither is usable here."""
    if parent is not None:
        return "v2" if _v2_ready(Path(parent)) else None
    return "v1" if _v1_writable() else None


def create(parent: str | None, *, memory_bytes: int | None, max_pids: int) -> JobCgroup | None:
    """A fresh job cgroup with the limits, or None when cgroups are not usable here (module docstring)."""
    layout = available(parent)
    if layout is None:
        return None
    name = f"job-{os.getpid()}-{next(_jobs)}"
    made: list[Path] = []
    try:
        if layout == "v2":
            d = Path(parent or "") / name
            d.mkdir()
            made.append(d)
            if memory_bytes is not None:
                _write(d / "memory.max", str(memory_bytes))
                with contextlib.suppress(OSError):  # no swap controller: nothing to bound
                    _write(d / "memory.swap.max", "0")
            _write(d / "pids.max", str(max_pids))
            return JobCgroup(made, 2)
        mem = V1_ROOT / "memory" / GROUP / name
        pids = V1_ROOT / "pids" / GROUP / name
        for d in (mem, pids):
            d.mkdir(parents=True)
            made.append(d)
        if memory_bytes is not None:
            _write(mem / "memory.limit_in_bytes", str(memory_bytes))
            with contextlib.suppress(OSError):  # swap accounting off: the limit above is the whole bound
                _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))
        _write(pids / "pids.max", str(max_pids))
        return JobCgroup(made, 1)
    except OSError:
        JobCgroup(made, 1 if layout == "v1" else 2).kill_and_remove(0.5)
        return None
