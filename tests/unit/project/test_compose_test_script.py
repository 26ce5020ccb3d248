"""``make compose-test`` where no registry is reachable (issue 37 item 2), driven against a stand-in container
engine (a shell script named ``docker`` first on PATH that records its calls): a base-image pull failure prints
the ``BASE_IMAGE=`` override to use, and the teardown removes the project's network (podman-compose 1.0 leaves
``<project>_default`` behind after ``down``). The real engine run is ``make compose-test`` itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "deploy" / "compose" / "compose-test.sh"
FAKE_ENGINE = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
case "$1" in
  build)
    if [[ "$FAKE_MODE" == pullfail ]]; then
      echo "Error: initializing source docker://python:3.11-slim-bookworm: pinging container registry" \
           "registry-1.docker.io: dial tcp: lookup registry-1.docker.io: no such host"
      exit 125
    fi ;;
  images) echo "localhost/python:3.11-slim-local" ;;
  compose) [[ "$FAKE_MODE" == upfail && " $* " == *" up "* ]] && exit 1 ;;
esac
exit 0
"""


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], list[str], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"
    fake.write_text(FAKE_ENGINE)
    fake.chmod(0o755)
    log = tmp_path / "engine.log"
    project = f"cowboy-compose-unit-{os.getpid()}"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CONTAINER_ENGINE": "docker",
           "COMPOSE_PROJECT": project, "FAKE_LOG": str(log), "FAKE_MODE": mode, "BASE_IMAGE": ""}
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)
    for suffix in ("build", "up"):
        Path(f"/tmp/{project}-{suffix}.log").unlink(missing_ok=True)
    return proc, log.read_text().splitlines() if log.exists() else [], project


@pytest.mark.timeout(300)
def test_a_base_image_that_cannot_be_pulled_names_the_override(tmp_path: Path) -> None:
    proc, _, _ = _run(tmp_path, "pullfail")
    assert proc.returncode == 1
    assert "could not pull its base image python:3.11-slim-bookworm@sha256:" in proc.stdout, proc.stdout
    assert "make compose-test BASE_IMAGE=localhost/python:3.11-slim-local" in proc.stdout, proc.stdout
    assert "FAIL: build" in proc.stdout


@pytest.mark.timeout(300)
def test_teardown_removes_the_project_network(tmp_path: Path) -> None:
    proc, calls, project = _run(tmp_path, "upfail")
    assert proc.returncode == 1 and "FAIL: up" in proc.stdout, proc.stdout
    downs = [i for i, c in enumerate(calls) if c.startswith(f"compose -p {project} down -v")]
    assert f"network rm {project}_default" in calls, calls
    assert calls.index(f"network rm {project}_default") > downs[-1], calls  # after the last `down`
