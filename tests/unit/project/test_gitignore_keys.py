"""Private keys never land where ``git add .`` would commit them (issue 37 item 3).

The homes that ``make devnet`` (with ``DEVNET_RUNNER=1``: its runner home inside), ``make testnet`` and the README's
runner steps create are generated for real in a scratch git repository holding this checkout's ``.gitignore``:
afterwards ``git status`` shows nothing to add. And every key file or home the README writes with ``--out`` /
``--home`` / ``--output`` is outside the tree or ignored.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=30).stdout


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "clone"
    repo.mkdir()
    _git(repo, "init", "-q")
    shutil.copy(REPO / ".gitignore", repo / ".gitignore")
    _git(repo, "add", ".gitignore")
    return repo


@pytest.mark.timeout(300)
def test_homes_the_make_targets_and_readme_create_are_all_ignored(scratch: Path) -> None:
    node, runner = str(BIN / "cowboy-node"), str(BIN / "cowboy-runner")
    env = {**os.environ, "COWBOY_NODE": node}
    # make devnet: deploy/devnet.sh initialises ./devnet-home (DEVNET_RUNNER=1 puts its runner in devnet-home/runner)
    subprocess.run(["bash", str(REPO / "deploy" / "devnet.sh"), "init"], cwd=scratch, env=env, check=True,
                   capture_output=True, timeout=60)
    subprocess.run([runner, "init", "--home", "devnet-home/runner", "--validator-rpc", "http://127.0.0.1:4000"],
                   cwd=scratch, check=True, capture_output=True, timeout=30)
    # make testnet: cowboy-node testnet --output ./testnet-home (the Makefile's TESTNET_DIR default)
    subprocess.run([node, "testnet", "--validators", "2", "--output", "testnet-home"], cwd=scratch, check=True,
                   capture_output=True, timeout=60)
    # a runner home or an example key written into the tree by hand, as older READMEs did
    subprocess.run([runner, "init", "--home", "runner-home", "--validator-rpc", "http://127.0.0.1:4000"],
                   cwd=scratch, check=True, capture_output=True, timeout=30)
    subprocess.run([node, "keys", "new", "--out", "alice.key"], cwd=scratch, check=True, capture_output=True,
                   timeout=30)
    created = [p for p in scratch.rglob("*") if p.is_file() and ".git" not in p.relative_to(scratch).parts[:1]]
    assert any(p.name == "faucet.key" for p in created) and any(p.name == "runner.key" for p in created)
    assert _git(scratch, "status", "--porcelain", "--untracked-files=all").splitlines() == ["A  .gitignore"]


def test_every_path_the_readme_writes_keys_to_is_outside_the_tree_or_ignored(scratch: Path) -> None:
    readme = (REPO / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```[a-z]*\n(.*?)```", readme, re.S))
    paths = re.findall(r"(?:keys new --out|init --home|--output)\s+(\S+)", blocks)
    assert paths, "the README's commands write no key files?"
    inside = [p for p in paths if not p.startswith(("/", "~", "$"))]

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=scratch,
                              timeout=30).returncode == 0

    # a file is ignored itself; a home directory is ignored when a file inside it is (not by the *.key rule)
    not_ignored = [p for p in inside if not ignored(p) and not ignored(f"{p}/runner.toml")]
    assert not_ignored == [], f"README writes keys into the tree at {not_ignored}"
