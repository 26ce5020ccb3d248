"""``make testnet`` operations (issue 37 item 5), with the real script and four real validators: one validator is
stopped and started again under the same supervisor (so Ctrl-C still stops it), a validator that dies is reported
while the network runs (not only at shutdown), ``status`` shows each validator's consensus state, and Ctrl-C
leaves no validator behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.integration.nodeproc import BIN, cli, wait_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "testnet.sh"
pytestmark = pytest.mark.timeout(900)  # a bound against hangs, sized for a loaded host


def _as_a_terminal_job() -> None:
    """SIGINT at its default in the supervisor, as in a terminal's foreground job. A suite started in the
    background (``make test &``, a CI runner) has SIGINT ignored, the child inherits that, and a shell cannot trap
    a signal ignored on entry (POSIX), so Ctrl-C would not reach the script's trap."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Supervisor:
    """``deploy/testnet.sh DIR`` in its own process group, its output collected line by line."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.lines: list[str] = []
        self.proc = subprocess.Popen(["bash", str(SCRIPT), str(out)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                     env={**os.environ, "COWBOY_NODE": str(BIN / "cowboy-node")},
                                     preexec_fn=_as_a_terminal_job)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def interrupt_or_kill(self, bound_s: float = 120) -> int | None:
        """Ctrl-C the supervisor and return its exit code; if it has not exited within ``bound_s``, kill its whole
        process group (the validators it started are in it) so that a failed run leaves nothing behind, and return
        None. After a clean exit nothing is killed here: the caller checks that no validator outlived it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            rc: int | None = self.proc.wait(timeout=bound_s)
        except subprocess.TimeoutExpired:
            rc = None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return rc

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(SCRIPT), *args, str(self.out)], capture_output=True, text=True,
                              timeout=300, check=False, env={**os.environ, "COWBOY_NODE": str(BIN / "cowboy-node")})


def _rpc(home: Path) -> str:
    conf = (home / "config.toml").read_text().split("[rpc]", 1)[1]
    return "http://" + next(line.split('"')[1] for line in conf.splitlines() if line.startswith("addr"))


def _height(home: Path) -> int:
    try:
        with urllib.request.urlopen(_rpc(home) + "/status", timeout=3) as r:
            return int(json.load(r)["height"])
    except OSError:
        return -1


def _pid(home: Path) -> int | None:
    try:
        return int((home / "node.pid").read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def test_stop_start_one_validator_deaths_reported_as_they_happen(tmp_path: Path) -> None:
    out = tmp_path / "testnet-home"
    res = cli("testnet", "--validators", "4", "--output", str(out), "--base-port", "0", "--block-time-ms", "500",
              check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    homes = [out / f"validator-{i}" for i in range(4)]
    sup = Supervisor(out)
    started: list[int] = []
    try:
        wait_for("all four validators finalize", lambda: all(_height(h) >= 2 for h in homes), timeout=90)
        started = [p for p in (_pid(h) for h in homes) if p is not None]
        assert len(started) == 4

        status = sup.ctl("status")
        assert status.returncode == 0, status.stderr
        assert "== validator-2: running" in status.stdout and "peers:       3 of 3 connected" in status.stdout, \
            status.stdout

        # stop one: reported as stopped (not as a death); the other three keep finalizing
        old = _pid(homes[2])
        assert old is not None
        stop = sup.ctl("stop", "2")
        assert stop.returncode == 0, stop.stderr
        assert not _alive(old)
        wait_for("the supervisor notes the stop", lambda: sup.said("validator-2 stopped"), timeout=60)
        h = max(_height(homes[0]), 0)
        wait_for("three validators keep finalizing", lambda: _height(homes[0]) >= h + 2, timeout=60)
        assert "== validator-2: NOT running" in sup.ctl("status").stdout

        # start it again: a child of the same supervisor, catching up with the others
        start = sup.ctl("start", "2")
        assert start.returncode == 0, start.stderr
        new = _pid(homes[2])
        assert new is not None and new != old
        assert Path(f"/proc/{new}/stat").read_text().split(") ", 1)[1].split()[1] == str(sup.proc.pid)  # ppid
        started.append(new)
        target = _height(homes[0])
        wait_for("the restarted validator catches up", lambda: _height(homes[2]) >= target, timeout=90)

        # a death is reported while the network runs
        victim = _pid(homes[1])
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        wait_for("the death report", lambda: sup.said("validator-1 DIED"), timeout=60)
        assert sup.proc.poll() is None  # the supervisor and the others keep running
        assert any("killed by signal 9" in line for line in sup.lines if "validator-1 DIED" in line), sup.lines
    finally:
        rc = sup.interrupt_or_kill()
        left = [pid for pid in started if _alive(pid)]  # seen before the clean-up below kills them
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert rc == 0, sup.lines
    assert not left, "Ctrl-C left a validator running"
