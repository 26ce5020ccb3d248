"""The signature pool with real worker processes: the same results as in-process, and close() ends the workers.

Bounded: every wait has a timeout; the pool is closed (workers joined) in ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cowboy_node.chain.signature_pool import SignaturePool, prepare_batch
from tests.unit.chain.test_admission_pool import corpus

RESULT_TIMEOUT_S = 60.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose: read its state where /proc exists.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def test_workers_recover_like_in_process_and_close_ends_them() -> None:
    items = [raw for raw, _ in corpus()] * 20
    pool = SignaturePool(2, max_inflight=4)
    try:
        pool.warm_up()
        pids = pool.worker_pids()
        assert len(pids) == 2 and os.getpid() not in pids
        futures = [pool.submit(items[i:i + 50], max_body=131_072) for i in range(0, len(items), 50)]
        assert pool.inflight <= 4
        got = [r for f in futures for r in f.result(timeout=RESULT_TIMEOUT_S)]
        assert got == prepare_batch(items, max_body=131_072)
    finally:
        pool.close()
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
    assert pool.worker_pids() == [] and pool.inflight == 0


CHILD = """
import os, signal
from cowboy_node.chain.signature_pool import SignaturePool
pool = SignaturePool(2)
pool.warm_up()
print(" ".join(map(str, pool.worker_pids())), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_workers_exit_when_the_node_process_is_killed(tmp_path: Path) -> None:
    out = tmp_path / "pids"
    with out.open("w") as f:  # a file, not a pipe: an orphaned worker holding a pipe would block the read
        proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=f, stderr=subprocess.DEVNULL)
        assert proc.wait(timeout=RESULT_TIMEOUT_S) == -signal.SIGKILL
    pids = [int(p) for p in out.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for p in left:  # a failed run must not leave its workers behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    assert not left
