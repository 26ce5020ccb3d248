"""The custom executor's sandbox (docs/runner-executors.md "Custom" → "Isolation"): a bubblewrap (``bwrap``)
command line and the resource limits set in the child before it starts.

Inside the sandbox a program sees read-only ``/usr``, ``/etc`` and the ``/bin``, ``/sbin``, ``/lib*`` links, its
own program directory and any ``ro_paths`` the operator lists, a fresh ``/proc`` and ``/dev``, and a size-bounded
tmpfs ``/tmp`` as its scratch space and home. The runner's home (its signing key, journal and ``runner.toml``) and
environment do not exist there: the environment is emptied (``--clearenv``) and holds only ``PATH``, ``HOME``,
``TMPDIR`` and the program's configured ``env``. Every namespace is new (user, mount, pid, ipc, uts, cgroup, and
network unless the program is granted it); the program runs in its own session; when the runner kills the
sandbox's outer process at the deadline, the kernel kills the whole pid namespace with it (``--die-with-parent``
on its init), so no grandchild outlives the job whatever it does (``setsid``, double fork).

A runner started as root drops to an unprivileged uid/gid before ``bwrap`` runs (a distinct one per job from
``sandbox_uid_base``), so ``RLIMIT_NPROC`` applies (the kernel exempts root from it) and jobs cannot signal one
another. Limits (``setrlimit`` in the child, inherited by everything the program starts): ``RLIMIT_NPROC``
(processes), ``RLIMIT_CPU`` (CPU seconds), ``RLIMIT_FSIZE`` (largest file written), ``RLIMIT_NOFILE``,
``RLIMIT_CORE`` = 0, and ``RLIMIT_AS`` when the memory limit is enforced.
"""

from __future__ import annotations

import itertools
import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host paths visible read-only in every sandbox (symlinks such as a merged-/usr ``/bin`` are recreated as links)."""
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` inside the sandbox."""
SCRATCH = "/tmp"
"""The writable scratch directory (tmpfs), also ``HOME`` and the working directory unless ``cwd`` is set."""
UID_SPAN = 4096
"""Distinct sandbox uids cycled through when the runner runs as root."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-process resource limits of one sandboxed command."""

    max_processes: int = 64
    """``RLIMIT_NPROC``: processes and threads of the sandbox uid (a fork bomb fails with EAGAIN)."""
    cpu_seconds: int | None = None
    """``RLIMIT_CPU`` (None: none; the wall-clock deadline still applies)."""
    max_file_bytes: int = 64 << 20
    """``RLIMIT_FSIZE``: largest file the program may write (more: SIGXFSZ)."""
    max_open_files: int = 256
    """``RLIMIT_NOFILE``."""
    memory_bytes: int | None = None
    """``RLIMIT_AS`` (None: not enforced)."""


def _bounded(limit: int, which: int) -> int:
    _soft, hard = resource.getrlimit(which)
    return limit if hard == resource.RLIM_INFINITY else min(limit, hard)  # a hard limit cannot be raised


def preexec(limits: Limits, uid: int | None, join: list[bytes] | None = None) -> Callable[[], None]:
    """The child's set-up between fork and exec: join the ``cgroup.procs`` files in ``join`` (while still
    privileged), optional drop to ``uid`` (gid = uid, no supplementary groups), then the limits. Only system
    calls: nothing that takes a lock the parent may hold."""
    cgroup_files = list(join or [])
    values = [(resource.RLIMIT_NPROC, limits.max_processes), (resource.RLIMIT_FSIZE, limits.max_file_bytes),
              (resource.RLIMIT_NOFILE, limits.max_open_files), (resource.RLIMIT_CORE, 0)]
    if limits.cpu_seconds is not None:
        values.append((resource.RLIMIT_CPU, limits.cpu_seconds))
    if limits.memory_bytes is not None:
        values.append((resource.RLIMIT_AS, limits.memory_bytes))
    bounded = [(which, _bounded(v, which)) for which, v in values]

    def apply() -> None:
        for path in cgroup_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"%d" % os.getpid())
            finally:
                os.close(fd)
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        for which, v in bounded:
            resource.setrlimit(which, (v, v))

    return apply


_uids: Iterator[int] = itertools.count()


def sandbox_uid(base: int) -> int | None:
    """The uid the next sandbox runs as: a fresh one of ``base .. base + UID_SPAN - 1`` when the runner is root,
    else None (the runner's own uid; RLIMIT_NPROC then counts the runner user's processes too)."""
    if os.geteuid() != 0:
        return None
    return base + next(_uids) % UID_SPAN


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def bwrap_argv(argv: tuple[str, ...], *, env: Mapping[str, str], network: bool, ro_paths: tuple[str, ...],
               cwd: str | None, scratch_bytes: int, bwrap: str = "bwrap") -> list[str]:
    """The ``bwrap`` command line running ``argv`` in the sandbox (module docstring)."""
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    if network:
        args.append("--share-net")
    args += _system_binds()
    program = argv[0]
    extra = list(ro_paths)
    if os.sep in program and not any(program.startswith(p + os.sep) for p in SYSTEM_PATHS):
        extra.append(os.path.dirname(os.path.abspath(program)))  # the program's own directory
    if cwd is not None:
        extra.append(cwd)
    for path in sorted(set(extra)):
        args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(scratch_bytes), "--tmpfs", SCRATCH,
             "--chdir", cwd or SCRATCH]
    base_env = {"PATH": SANDBOX_PATH, "HOME": SCRATCH, "TMPDIR": SCRATCH}
    for key, value in sorted({**base_env, **env}.items()):
        args += ["--setenv", key, value]
    return [*args, "--", *argv]


def bwrap_problem(bwrap: str = "bwrap", uid_base: int = 200_000) -> str | None:
    """None when ``bwrap`` can build a sandbox here (found, user namespaces allowed, run as the sandbox uid),
    else why not — checked once at start so a runner never runs a custom program unsandboxed by surprise."""
    path = shutil.which(bwrap)
    if path is None:
        return f"{bwrap} not found (install the bubblewrap package)"
    argv = bwrap_argv(("/bin/true",), env={}, network=False, ro_paths=(), cwd=None, scratch_bytes=1 << 20,
                      bwrap=path)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False,
                              preexec_fn=preexec(Limits(), sandbox_uid(uid_base)))
    except (OSError, subprocess.SubprocessError) as e:
        return f"{path} cannot run: {e}"
    if done.returncode != 0:
        text = done.stderr.decode("utf-8", "replace").strip()[-300:]
        return f"{path} cannot create a sandbox here (user namespaces unavailable?): {text or done.returncode}"
    return None


CONTAINER_USER = "65534:65534"
"""uid:gid commands run as inside a container (nobody)."""


def container_argv(engine: str, name: str, image: str, argv: tuple[str, ...], *, env: Mapping[str, str],
                   network: bool, cwd: str | None, scratch_bytes: int, limits: Limits) -> list[str]:
    """The ``podman run`` / ``docker run`` command line running ``argv`` (``argv[0]`` as the entrypoint) in a
    fresh container of ``image``: stdin attached, no network unless granted, read-only root with a tmpfs ``/tmp``,
    nobody's uid, no capabilities, no privilege gain, the memory/pids/file/CPU limits, removed when it ends."""
    args = [engine, "run", "--rm", "-i", "--name", name, "--read-only", "--tmpfs",
            f"/tmp:rw,size={scratch_bytes},mode=1777", "--workdir", cwd or SCRATCH, "--user", CONTAINER_USER,
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--no-healthcheck",
            "--pids-limit", str(limits.max_processes),
            # every rlimit explicit: runc refuses a partial set where the engine's defaults exceed the hard limits
            "--ulimit", f"nproc={limits.max_processes}:{limits.max_processes}",
            "--ulimit", f"fsize={limits.max_file_bytes}",
            "--ulimit", f"nofile={limits.max_open_files}:{limits.max_open_files}", "--ulimit", "core=0"]
    if not network:
        args += ["--network", "none"]
    if limits.memory_bytes is not None:  # the container's cgroup: resident memory, swap included
        args += ["--memory", str(limits.memory_bytes), "--memory-swap", str(limits.memory_bytes)]
    if limits.cpu_seconds is not None:
        args += ["--ulimit", f"cpu={limits.cpu_seconds}"]
    for key, value in sorted({"HOME": SCRATCH, "TMPDIR": SCRATCH, **env}.items()):
        args += ["--env", f"{key}={value}"]
    return [*args, "--entrypoint", argv[0], image, *argv[1:]]


def container_problem(engine: str, images: tuple[str, ...]) -> str | None:
    """None when ``engine`` runs and has every image locally (a runner never pulls at job time), else why not."""
    path = shutil.which(engine)
    if path is None:
        return f"{engine} not found"
    for image in sorted(set(images)):
        try:
            done = subprocess.run([path, "image", "inspect", image], capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            return f"{path} cannot run: {e}"
        if done.returncode != 0:
            text = done.stderr.decode("utf-8", "replace").strip()[-200:]
            return f"image {image!r} is not available to {path} ({text or done.returncode}); pull or build it first"
    return None
