"""What the store contract tests share (the fixture over both backends is in ``conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.state.kv_store import StateStore

StoreFactory = Callable[[], StateStore]
"""Opens a fresh store of the backend under test (closed by the fixture)."""


def reference(data: dict[bytes, bytes], prefix: bytes, start: bytes | None,
              reverse: bool) -> list[tuple[bytes, bytes]]:
    """What an ordered prefix iteration of ``data`` must return (the contract, computed the obvious way)."""
    keys = sorted(k for k in data if k.startswith(prefix))
    if start is not None:
        keys = [k for k in keys if (k <= start if reverse else k >= start)]
    if reverse:
        keys.reverse()
    return [(k, data[k]) for k in keys]
