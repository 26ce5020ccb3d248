"""``cowboy-node snapshot create|list|export|import`` (issue 34 §1; docs/operations.md §15.3).

``create`` and ``import`` open the data directory, so the node must be stopped (a running node takes snapshots
itself every ``[snapshot] interval_blocks``). Every command prints one JSON object; errors are
``{"ok": false, "code": ..., "error": ...}`` with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.node.config import load_config
from cowboy_node.snapshot.create import SNAPSHOT_DIR


def _fail(code: str, error: str) -> int:
    print(json.dumps({"ok": False, "code": code, "error": error}))
    return 1


def _manifest_json(m: Any, directory: Path) -> dict[str, Any]:
    from cowboy_node.types.block import Block

    header = Block.decode(m.block).header
    return {"height": m.height, "hash": "0x" + header.digest().hex(), "state_root": "0x" + header.state_root.hex(),
            "chunks": len(m.chunks), "entries": m.entries, "bytes": sum(c.size for c in m.chunks),
            "path": str(directory)}


def _guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from cowboy_node.chain.chain import ChainError
        from cowboy_node.snapshot.manifest import SnapshotError
        from cowboy_node.state.kv_store import StoreError

        try:
            return fn(args)
        except SnapshotError as e:
            return _fail(e.code, str(e))
        except (ConfigError, StoreError) as e:  # a running node holds the LevelDB lock: StoreError names the path
            return _fail("cannot_open", str(e))
        except ChainError as e:
            return _fail("damaged", str(e))
    return run


def cmd_create(args: argparse.Namespace) -> int:
    """Take a snapshot of the stopped node's head."""
    from cowboy_node.chain.chain import Chain
    from cowboy_node.chain.genesis import load_genesis
    from cowboy_node.snapshot.create import create_snapshot
    from cowboy_node.snapshot.manifest import decode_manifest
    from cowboy_node.state.leveldb import LevelDBStore

    home = Path(args.home)
    cfg = load_config(home)
    genesis = load_genesis(cfg.genesis_path)
    store = LevelDBStore(cfg.data_path, create_if_missing=False)
    try:
        chain = Chain(store, genesis)
        view = store.snapshot()
        try:
            out = create_snapshot(view, height=chain.height, chain_id=genesis.chain_id, genesis_hash=genesis.hash(),
                                  out_root=home / SNAPSHOT_DIR)
        finally:
            view.close()
    finally:
        store.close()
    m = decode_manifest((out / "manifest.cbor").read_bytes())
    print(json.dumps({"ok": True, **_manifest_json(m, out)}))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """The home's complete snapshots, oldest first."""
    from cowboy_node.snapshot.create import list_snapshots

    root = Path(args.home) / SNAPSHOT_DIR
    print(json.dumps({"ok": True, "snapshots": [_manifest_json(m, root / str(m.height))
                                                for m in list_snapshots(root)]}))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write one snapshot (default: the newest) into a tar file."""
    from cowboy_node.snapshot.archive import export_snapshot
    from cowboy_node.snapshot.create import list_snapshots
    from cowboy_node.snapshot.manifest import SnapshotError

    root = Path(args.home) / SNAPSHOT_DIR
    heights = [m.height for m in list_snapshots(root)]
    height = args.height if args.height is not None else (heights[-1] if heights else None)
    if height is None or height not in heights:
        raise SnapshotError("not_found", f"no snapshot at height {height} in {root} (have {heights})")
    size = export_snapshot(root / str(height), Path(args.out))
    print(json.dumps({"ok": True, "height": height, "out": args.out, "bytes": size}))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Verify a snapshot (a tar from ``export`` or a snapshot directory) and install it into the empty data dir."""
    from cowboy_node.chain.genesis import load_genesis
    from cowboy_node.consensus.simplex.scheme import ThresholdScheme
    from cowboy_node.snapshot.archive import unpack_snapshot
    from cowboy_node.snapshot.create import MANIFEST_FILE, chunk_file
    from cowboy_node.snapshot.install import install_snapshot
    from cowboy_node.state.leveldb import LevelDBStore

    cfg = load_config(Path(args.home))
    genesis = load_genesis(cfg.genesis_path)
    scheme = ThresholdScheme(genesis.group_public_key, genesis.share_public_keys(), genesis.threshold, None)
    source = Path(args.source)
    with tempfile.TemporaryDirectory(prefix="cowboy-snapshot-") as tmp:
        directory = source if source.is_dir() else unpack_snapshot(source, Path(tmp))
        cfg.data_path.mkdir(mode=0o700, parents=True, exist_ok=True)
        store = LevelDBStore(cfg.data_path)
        try:
            done = install_snapshot(store, cfg.data_path, genesis, scheme, (directory / MANIFEST_FILE).read_bytes(),
                                    lambda i: (directory / chunk_file(i)).read_bytes())
        finally:
            store.close()
    print(json.dumps({"ok": True, "height": done.height, "state_root": "0x" + done.state_root.hex(),
                      "entries": done.entries, "derived": done.derived, "restarted": done.restarted}))
    return 0


def register(sub: Any) -> None:
    """Add ``snapshot`` and its subcommands."""
    sp = sub.add_parser("snapshot", help="state snapshots: create, list, export, import (docs/operations.md §15.3)")
    ss = sp.add_subparsers(dest="snapshot_command", required=True)
    for name, fn, text in (("create", cmd_create, "take a snapshot of the stopped node's head"),
                           ("list", cmd_list, "list this home's snapshots"),
                           ("export", cmd_export, "write a snapshot into a tar file"),
                           ("import", cmd_import, "verify a snapshot and install it into the empty data dir")):
        p = ss.add_parser(name, help=text)
        p.add_argument("--home", required=True)
        if name == "export":
            p.add_argument("--height", type=int, default=None, help="default: the newest")
            p.add_argument("--out", required=True, help="tar file to create")
        if name == "import":
            p.add_argument("--from", dest="source", required=True, help="a tar from `snapshot export`, or a directory")
        p.set_defaults(func=_guarded(fn))
