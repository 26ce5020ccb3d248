"""Snapshots on real processes and data directories (issue 34 §1): a node takes them every N blocks and keeps K;
``snapshot export`` writes one into a file; a second home with an empty data directory imports it and the node
continues from that height; a tampered chunk is refused, typed, and nothing is installed."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

from tests.integration.nodeproc import NodeProcess, cli
from tests.integration.test_halt_rollback_process import _run_to_exit


def _json(*args: str) -> dict[str, object]:
    done = cli(*args, check=False, timeout=120)
    out: dict[str, object] = json.loads(done.stdout)
    assert (done.returncode == 0) == bool(out["ok"]), (done.stdout, done.stderr)
    return out


def test_periodic_snapshots_export_and_import_into_an_empty_home(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "a", block_time_ms=100)
    text = (node.home / "config.toml").read_text().replace("interval_blocks = 0\nkeep = 2",
                                                          "interval_blocks = 4\nkeep = 2")
    (node.home / "config.toml").write_text(text)
    rc, log = _run_to_exit(node, "--halt-height", "13")
    assert rc == 0, log[-3000:]
    listed = _json("snapshot", "list", "--home", str(node.home))["snapshots"]
    heights = [int(s["height"]) for s in listed]  # type: ignore[index]
    # Every 4 blocks from the last snapshot, at a head that holds its own finalization certificate: on a loaded
    # host a block can be final only through its child, and the next certified head is taken (snapshotter.py).
    # So the heights are 8 and 12 on a quiet host, and at least 4 apart, the newest at most 13, under load.
    assert len(heights) == 2 and heights[1] - heights[0] >= 4 and 8 <= heights[1] <= 13, listed
    newest = heights[1]
    exported = _json("snapshot", "export", "--home", str(node.home), "--out", str(tmp_path / "s.tar"))
    assert exported["height"] == newest

    joiner = tmp_path / "b"
    joiner.mkdir(mode=0o700)
    for part in ("config.toml", "genesis.json", "keys"):
        src = node.home / part
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, joiner / part)
    # A tampered copy first: one chunk's bytes changed.
    bad = tmp_path / "bad.tar"
    with tarfile.open(tmp_path / "s.tar") as t, tarfile.open(bad, "w") as out:
        for m in t.getmembers():
            data = t.extractfile(m).read()  # type: ignore[union-attr]
            if m.name == "chunk-00000.cbor":
                data = data[:-1] + bytes([data[-1] ^ 1])
            info = tarfile.TarInfo(m.name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    refused = _json("snapshot", "import", "--home", str(joiner), "--from", str(bad))
    assert refused["code"] == "chunk_digest"
    started = cli("run", "--home", str(joiner), "--halt-height", "14", check=False, timeout=60)
    assert started.returncode == 1 and "interrupted" in started.stderr  # nothing half-installed is opened

    imported = _json("snapshot", "import", "--home", str(joiner), "--from", str(tmp_path / "s.tar"))
    assert imported["height"] == newest and imported["restarted"] is True
    assert imported["state_root"] == listed[1]["state_root"]  # type: ignore[index]
    b = NodeProcess.__new__(NodeProcess)
    b.home = joiner
    rc, log = _run_to_exit(b, "--halt-height", "15")
    assert rc == 0 and "halt height reached" in log, log[-3000:]
    started_line = next(line for line in log.splitlines() if "node started" in line)
    assert f" height={newest} " in started_line, started_line  # it continued from the snapshot's height
