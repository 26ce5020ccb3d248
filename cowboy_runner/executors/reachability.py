"""Start-up check that every configured custom program can be started inside its bubblewrap sandbox.

The sandbox (``executors/sandbox.py``) shows a program only the system paths, its own directory, its ``ro_paths``
and ``cwd``, replaces ``/tmp`` with its own tmpfs (and ``/proc``, ``/dev`` with fresh ones), and runs it as an
unprivileged uid when the runner is root. A program that is not reachable there fails every job with
``bwrap: execvp …: No such file or directory`` or ``Permission denied``; the runner refuses to start instead,
naming the program and the reason (``executor_settings.check_isolation``).
"""

from __future__ import annotations

import os
import shutil
import stat

from cowboy_runner.executors.config import CustomExecutorConfig
from cowboy_runner.executors.sandbox import SANDBOX_PATH, SCRATCH, SYSTEM_PATHS

HIDDEN = (SCRATCH, "/proc", "/dev")
"""Host directories the sandbox replaces with its own: nothing of the host's under them exists inside."""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _hidden_root(path: str) -> str | None:
    for p in (path, os.path.realpath(path)):
        for root in HIDDEN:
            if _under(p, root):
                return root
    return None


def _bound_roots(program: str, spec: CustomExecutorConfig) -> list[str]:
    """Real paths of what the sandbox binds for ``spec`` (as ``sandbox.bwrap_argv`` does)."""
    roots = [p for p in SYSTEM_PATHS if os.path.exists(p)]
    if not any(_under(program, p) for p in SYSTEM_PATHS):
        roots.append(os.path.dirname(os.path.abspath(program)))
    roots += list(spec.ro_paths)
    if spec.cwd is not None:
        roots.append(spec.cwd)
    return [os.path.realpath(p) for p in roots]


def _other_access(real: str) -> str | None:
    """Why a uid that is neither the owner nor in the group cannot read and execute ``real``, else None."""
    mode = os.stat(real).st_mode
    if mode & (stat.S_IROTH | stat.S_IXOTH) != stat.S_IROTH | stat.S_IXOTH:
        return f"{real} has mode {stat.S_IMODE(mode):04o} (others need r and x: chmod o+rx)"
    parent = os.path.dirname(real)
    while True:
        dmode = os.stat(parent).st_mode
        if not dmode & stat.S_IXOTH:
            return f"its directory {parent} has mode {stat.S_IMODE(dmode):04o} (others need x: chmod o+x)"
        if parent == "/":
            return None
        parent = os.path.dirname(parent)


def program_problem(spec: CustomExecutorConfig, *, as_other_uid: bool) -> str | None:
    """Why ``spec``'s program cannot start in its sandbox, else None. ``as_other_uid``: the sandbox runs as a uid
    other than the file's owner and group (the runner is root and drops to ``sandbox_uid_base + n``); else as the
    runner's own uid."""
    program = spec.argv[0]
    if spec.cwd is not None and (root := _hidden_root(spec.cwd)) is not None:
        return f"its cwd {spec.cwd} is under {root}, which the sandbox replaces with its own"
    if os.sep not in program:
        found = shutil.which(program, path=SANDBOX_PATH)
        if found is None:
            return f"{program!r} is not on the sandbox's PATH ({SANDBOX_PATH}); give its absolute path"
        path = found
    elif not os.path.isabs(program):
        return (f"{program!r} is a relative path, resolved inside the sandbox from its working directory "
                f"({spec.cwd or SCRATCH}); give its absolute path")
    else:
        path = program
    root = _hidden_root(path)
    if root is not None:
        return (f"{path} is under {root}, which the sandbox replaces with its own (the program does not exist "
                "there); install it elsewhere, e.g. under /opt or /usr/local")
    if not os.path.exists(path):
        return f"{path} does not exist"
    real = os.path.realpath(path)
    if not os.path.isfile(real):
        return f"{path} is not a regular file"
    roots = _bound_roots(path, spec)
    if not any(_under(real, r) for r in roots):
        return (f"{path} resolves to {real}, outside every path the sandbox shows it; add "
                f"{os.path.dirname(real)} to its ro_paths")
    if as_other_uid:
        why = _other_access(real)
        if why is not None:
            return f"{path} is not readable and executable by the sandbox uid: {why}"
    elif not os.access(real, os.R_OK | os.X_OK):
        return f"{path} is not readable and executable by the runner's user, which the sandbox runs as"
    return None
