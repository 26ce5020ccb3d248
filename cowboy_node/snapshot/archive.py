"""``snapshot export`` / ``import`` files: a plain tar of one snapshot directory (``manifest.cbor`` and
``chunk-NNNNN.cbor``), read back without trusting it: only those names, regular files, no paths."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from cowboy_node.snapshot.create import MANIFEST_FILE
from cowboy_node.snapshot.manifest import SnapshotError

_NAME = re.compile(r"^(manifest\.cbor|chunk-\d{5}\.cbor)$")


def export_snapshot(directory: Path, out: Path) -> int:
    """Write ``directory``'s files into the tar ``out`` (created; refused when it exists); its size in bytes."""
    if out.exists():
        raise SnapshotError("exists", f"{out} already exists")
    with tarfile.open(out, "x") as tar:
        for p in sorted(directory.iterdir()):
            if _NAME.match(p.name):
                tar.add(p, arcname=p.name, recursive=False)
    return out.stat().st_size


def unpack_snapshot(archive: Path, into: Path) -> Path:
    """Extract a snapshot tar into the empty directory ``into``; refuses any member that is not one of its files."""
    try:
        with tarfile.open(archive, "r:") as tar:
            members = tar.getmembers()
            for m in members:
                if not m.isfile() or not _NAME.match(m.name):
                    raise SnapshotError("bad_archive", f"{archive}: unexpected member {m.name!r}")
            tar.extractall(into, members=members, filter="data")
    except (tarfile.TarError, OSError) as e:
        raise SnapshotError("bad_archive", f"{archive}: {e}") from None
    if not (into / MANIFEST_FILE).is_file():
        raise SnapshotError("bad_archive", f"{archive}: no {MANIFEST_FILE}")
    return into
