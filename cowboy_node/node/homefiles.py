"""Creating the private files and directories of a node home (``init`` and ``testnet`` write the same way)."""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) with mode 0700 whatever the umask; an existing directory we did not
    create keeps its mode (``--home /srv`` must not chmod /srv)."""
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=0o700)
    os.chmod(path, 0o700)


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist) with mode 0600 whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(data)
