"""The daemon's status file and pid file, read by ``cowboy-runner status`` and ``cowboy-runner drain``.

``run`` writes ``<journal dir>/status.json`` (atomically: temp file + rename) about once a second, and
``<journal dir>/runner.pid`` while it runs. The status document (project choice)::

    {"pid", "updated_at" (unix s), "address", "chain_id", "head", "accepting", "draining",
     "sessions": [{"validator", "endpoint", "connected", "connects", "last_pong_at", "rtt_ms"}],
     "poll": {"active", "disabled"}, "jobs_in_flight": [{"job_id", "state", "source"}],
     "executors": {kind: {"advertised", "unhealthy", "running", "waiting", "max_concurrent", "queue"}},
     "pending_obligations": N, "last_results": [{"job_id", "state", "reason"}], "last_error"}
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cowboy_runner.jobs import JobManager
    from cowboy_runner.journal import Obligation
    from cowboy_runner.link import Link
    from cowboy_runner.poll import Poller

STATUS_FILE = "status.json"
"""Status file name, next to the journal."""
PID_FILE = "runner.pid"
"""Pid file name, next to the journal."""
STALE_AFTER_S = 10.0
"""A status file older than this (or whose pid is gone) describes a daemon that is not running."""


def running_status(jobs: JobManager, links: Sequence[Link], session_problems: Sequence[str], poller: Poller | None,
                   pending: Sequence[Obligation], recent: Sequence[Obligation]) -> dict[str, Any]:
    """The running daemon's part of the status document: head, sessions, poll, jobs, executors, obligations."""
    return {
        "head": jobs.head, "accepting": jobs.accepting(), "draining": jobs.draining,
        "sessions": [{"validator": "0x" + (lk.config.expected_validator or b"").hex(),
                      "subset_epoch": lk.config.subset_epoch,
                      "endpoint": f"{lk.config.host}:{lk.config.port}", "connected": lk.authenticated.is_set(),
                      "connects": lk.connects, "last_pong_at": lk.last_pong_at, "last_close": lk.last_close,
                      "unavailable_kinds": sorted(lk.unavailable), "capability_deltas": lk.deltas_sent,
                      "rtt_ms": None if lk.last_rtt is None else round(lk.last_rtt * 1000, 3)}
                     for lk in links],
        "session_problems": list(session_problems),
        "poll": {"active": bool(poller and poller.active), "disabled": bool(poller and poller.disabled)},
        "jobs_in_flight": [{"job_id": "0x" + j.hex(), "state": jobs.jobs[j].state if j in jobs.jobs else "?",
                            "source": jobs.jobs[j].source if j in jobs.jobs else "?"} for j in sorted(jobs.tasks)],
        "executors": jobs.executor_status(),
        "pending_obligations": len(pending),
        "obligations": [{"job_id": "0x" + ob.job_id.hex(), "state": ob.state} for ob in pending],
        "last_results": [{"job_id": "0x" + ob.job_id.hex(), "state": ob.state, "reason": ob.reason} for ob in recent],
    }


def write_status(directory: Path, doc: dict[str, Any]) -> None:
    """Replace the status file atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{STATUS_FILE}.tmp"
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(directory / STATUS_FILE)


def read_status(directory: Path) -> dict[str, Any] | None:
    """The last status document, or None when there is none."""
    try:
        doc = json.loads((directory / STATUS_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_pid(directory: Path) -> None:
    """Record this process as the running daemon."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / PID_FILE).write_text(f"{os.getpid()}\n", encoding="utf-8")


def remove_pid(directory: Path) -> None:
    """Forget the pid file (clean exit)."""
    try:
        if read_pid(directory) == os.getpid():
            (directory / PID_FILE).unlink()
    except FileNotFoundError:
        pass


def read_pid(directory: Path) -> int | None:
    """Pid of a live daemon, or None (no file, garbage, or the process is gone)."""
    try:
        pid = int((directory / PID_FILE).read_text(encoding="utf-8").strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def is_running(directory: Path, doc: dict[str, Any] | None) -> bool:
    """Whether ``doc`` describes a live daemon (pid alive and a fresh update)."""
    pid = read_pid(directory)
    if pid is None or doc is None or doc.get("pid") != pid:
        return False
    return time.time() - float(doc.get("updated_at", 0)) <= STALE_AFTER_S


def render_text(doc: dict[str, Any], running: bool) -> str:
    """Human-readable ``status`` output."""
    lines = [f"daemon:     {'running (pid ' + str(doc.get('pid')) + ')' if running else 'NOT running (stale status)'}",
             f"address:    {doc.get('address')}", f"chain:      {doc.get('chain_id')} head {doc.get('head')}",
             f"accepting:  {doc.get('accepting')}{'  (draining)' if doc.get('draining') else ''}"]
    if doc.get("starting"):
        lines.append("starting:   waiting for the validator (see last error)")
    for s in doc.get("sessions", []):
        pong = s.get("last_pong_at")
        age = f"{time.time() - pong:.1f}s ago" if isinstance(pong, int | float) else "never"
        lines.append(f"session:    {s.get('endpoint')} validator {str(s.get('validator'))[:18]}… "
                     f"{'UP' if s.get('connected') else 'down'} connects={s.get('connects')} last pong {age}"
                     + (f" last close {s['last_close']}" if s.get("last_close") else ""))
    for problem in doc.get("session_problems", []):
        lines.append(f"no session: {problem}")
    poll = doc.get("poll", {})
    lines.append(f"poll:       {'active' if poll.get('active') else 'idle'}"
                 f"{' (disabled by the chain)' if poll.get('disabled') else ''}")
    jobs = doc.get("jobs_in_flight", [])
    lines.append(f"in flight:  {len(jobs)}; pending obligations {doc.get('pending_obligations', 0)}")
    for j in jobs:
        lines.append(f"  {j.get('job_id')} {j.get('state')} ({j.get('source')})")
    for kind, e in sorted(doc.get("executors", {}).items()):
        state = "UNHEALTHY " + str(e.get("unhealthy")) if e.get("unhealthy") else "healthy"
        slots = "" if e.get("max_concurrent") is None else \
            f" running {e.get('running')}/{e.get('max_concurrent')} queued {e.get('waiting')}/{e.get('queue')}"
        lines.append(f"executor:   {kind} {state}{slots} {'advertised' if e.get('advertised') else 'NOT advertised'}")
    lines.append("last results:")
    for r in doc.get("last_results", []):
        lines.append(f"  {r.get('job_id')} {r.get('state')} {r.get('reason')}")
    if doc.get("last_error"):
        lines.append(f"last error: {doc['last_error']}")
    return "\n".join(lines)
