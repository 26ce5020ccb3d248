"""The runner daemon stays up when its validator is unreachable at start (issue: "Unreachable validator … the
daemon stays up"), says why in its log, and stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.nodeproc import free_port

RUNNER = Path(sys.executable).parent / "cowboy-runner"


def test_runner_started_before_its_validator_keeps_retrying_and_stops_on_sigterm(tmp_path: Path) -> None:
    home = tmp_path / "runner"
    rpc = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    subprocess.run([str(RUNNER), "init", "--home", str(home), "--validator-rpc", rpc], check=True,
                   capture_output=True, timeout=60)
    proc = subprocess.Popen([str(RUNNER), "run", "--home", str(home)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        # `status` sees the running daemon and says why it is not serving yet: polled until its first bootstrap
        # attempt has failed (a fixed delay raced the daemon's start-up on a loaded machine)
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate(timeout=5)[0]  # still running
            st = subprocess.run([str(RUNNER), "status", "--home", str(home)], capture_output=True, text=True,
                                timeout=60)
            if "last error:" in st.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert st.returncode == 0, st.stdout + st.stderr
        assert f"running (pid {proc.pid})" in st.stdout and "waiting for the validator" in st.stdout
        assert "last error: runner.validator_rpc: validator unreachable" in st.stdout
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert "validator not reachable yet" in out
    assert "runner.validator_rpc" in out  # the message names the config key
    assert proc.returncode == 4  # stopped before it ever reached the validator
