"""``cowboy-node`` command line: init, run, replay, and the client commands."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from importlib import metadata
from pathlib import Path

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.cli import commands, snapshot_commands, testnet_command
from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, JournalError, create_empty_journal
from cowboy_node.node.config import INT_BOUNDS, load_config, render_config, split_host_port
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.node.homefiles import private_dir, write_private
from cowboy_node.node.keys import write_validator_key
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.keys import new_account_key
from cowboy_protocol.types.params import Cip11Flags

DEFAULT_FAUCET_BALANCE = 10**27
"""1e9 CBY in wei for the development faucet."""


def _version() -> str:
    """The installed package's version (``unknown`` when running from a tree that was never installed)."""
    try:
        return metadata.version("cowboy-node")
    except metadata.PackageNotFoundError:
        return "unknown"


def _addr(text: str, flag: str) -> str:
    try:
        split_host_port(text, path="command line", key=flag)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def cmd_init(args: argparse.Namespace) -> int:
    """Write config.toml, genesis.json and keys into a new home directory.

    Directories it creates (home, keys/, data/) are 0700 and files 0600, whatever the umask.
    """

    home = Path(args.home)
    for existing in ("config.toml", "genesis.json", "keys/validator.key"):
        if (home / existing).exists():
            print(f"error: {home / existing} already exists; refusing to overwrite an initialised home",
                  file=sys.stderr)
            return 1
    private_dir(home)
    if home.stat().st_mode & 0o022:
        print(f"warning: {home} is writable by group or others; `chmod 700 {home}` keeps its files safe",
              file=sys.stderr)
    (home / "keys").mkdir(mode=0o700, exist_ok=True)
    os.chmod(home / "keys", 0o700)
    private_dir(home / "data")
    faucet = new_account_key(home / "keys" / "faucet.key")
    fee_recipient = new_account_key(home / "keys" / "fee_recipient.key")
    dev = create_dev_genesis(
        chain_id=args.chain_id, balances={faucet: DEFAULT_FAUCET_BALANCE}, system_deployers=(faucet,),
        fee_recipient=fee_recipient, genesis_time_ms=int(time.time() * 1000),
        block_time_ms=args.block_time_ms or 1000, cip11=Cip11Flags.for_phase(args.cip11_phase))
    write_validator_key(home / "keys" / "validator.key", dev.validator_key)
    try:  # the key was made just now and never signed: its (empty) journal lets it vote at once
        create_empty_journal(home / "data" / VOTE_JOURNAL_FILE)
    except JournalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_private(home / "genesis.json", dev.genesis.raw)
    write_private(home / "config.toml", render_config(
        chain_id=args.chain_id, rpc_addr=args.rpc_addr, quic_addr=args.quic_addr,
        metrics_addr=args.metrics_addr, block_time_ms=args.block_time_ms).encode())
    print(json.dumps({"home": str(home), "chain_id": args.chain_id,
                      "faucet": {"address": to_checksum_address(faucet),
                                 "key": str(home / "keys" / "faucet.key")},
                      "validator": "0x" + dev.genesis.validators[0].ed25519_public_key.hex()}, indent=2))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run the validator until SIGTERM/SIGINT."""
    # Imported here, not at the top: the daemon's servers (aiohttp, aioquic, uvloop, LevelDB) would add ~0.6 s
    # to every other cowboy-node command (tx, query, keys...), which never need them.
    import uvloop

    from cowboy_node.node.startup import NodeFailed, StartupError, run_node

    try:
        return uvloop.run(run_node(Path(args.home), fresh_key=args.fresh_key, halt_height=args.halt_height))
    except StartupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except NodeFailed as e:
        print(f"fatal: {e}", file=sys.stderr)
        return 3


def cmd_replay(args: argparse.Namespace) -> int:
    """Re-execute the stored chain from genesis and compare every state root."""
    from cowboy_node.chain.genesis import check_interpreter, load_genesis  # lazily: only replay needs LevelDB
    from cowboy_node.node.replay import replay
    from cowboy_node.state.leveldb import LevelDBStore

    try:
        cfg = load_config(Path(args.home))
        genesis = load_genesis(cfg.genesis_path)
        check_interpreter(genesis.pvm_version, cfg.genesis_path)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    store = LevelDBStore(cfg.data_path, create_if_missing=False)
    try:
        last = None
        for height, root in replay(store, genesis):
            last = (height, root)
        out = {"ok": True, "height": None if last is None else last[0],
               "state_root": None if last is None else "0x" + last[1].hex()}
        print(json.dumps(out))
        return 0
    except Exception as e:  # report any verification failure as a result, not a traceback
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 1
    finally:
        store.close()


def cmd_rollback(args: argparse.Namespace) -> int:
    """Undo the last committed block's state, block and indexes (the node must be stopped)."""
    from cowboy_node.chain.chain import ChainError
    from cowboy_node.chain.genesis import check_interpreter, load_genesis
    from cowboy_node.chain.rollback import RollbackError, rollback
    from cowboy_node.state.kv_store import StoreError
    from cowboy_node.state.leveldb import LevelDBStore

    try:
        cfg = load_config(Path(args.home))
        genesis = load_genesis(cfg.genesis_path)
        check_interpreter(genesis.pvm_version, cfg.genesis_path)
        store = LevelDBStore(cfg.data_path, create_if_missing=False)
    except (ConfigError, StoreError) as e:  # a running node holds the LevelDB lock: StoreError names the path
        print(json.dumps({"ok": False, "code": "cannot_open", "error": str(e)}))
        return 1
    try:
        done = rollback(store, genesis)
    except RollbackError as e:
        print(json.dumps({"ok": False, "code": e.code, "error": str(e)}))
        return 1
    except ChainError as e:
        print(json.dumps({"ok": False, "code": "damaged", "error": f"{cfg.data_path}: {e}"}))
        return 1
    finally:
        store.close()
    print(json.dumps({"ok": True, "rolled_back_height": done.height, "rolled_back_hash": "0x" + done.block_hash.hex(),
                      "height": done.head_height, "state_root": "0x" + done.state_root.hex()}))
    return 0


def _height(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a block height, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a block height of at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The full command-line parser."""
    p = argparse.ArgumentParser(prog="cowboy-node", description="Cowboy validator node")
    p.add_argument("--version", action="version", version=f"cowboy-node {_version()}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True)

    init = sub.add_parser("init", help="create a home directory with config, genesis and keys")
    init.add_argument("--home", required=True)
    init.add_argument("--chain-id", default="cowboy-devnet-1")
    init.add_argument("--rpc-addr", default="127.0.0.1:4000", type=lambda s: _addr(s, "--rpc-addr"))
    init.add_argument("--quic-addr", default="127.0.0.1:4433", type=lambda s: _addr(s, "--quic-addr"))
    init.add_argument("--metrics-addr", default="127.0.0.1:9464", type=lambda s: _addr(s, "--metrics-addr"))
    init.add_argument("--block-time-ms", type=int, default=None)
    init.add_argument("--cip11-phase", type=int, choices=(0, 1, 2, 3), default=2,
                      help="0 all CIP-11 flags off; 1 transport+shadow; 2 present-first (default); 3 poll disabled")
    init.set_defaults(func=cmd_init)

    testnet_command.register(sub)

    run = sub.add_parser("run", help="run the validator")
    run.add_argument("--home", required=True)
    run.add_argument("--fresh-key", action="store_true",
                     help="vote at once even without the vote journal (data/consensus-votes.journal): only for a "
                          "key that has never signed in this network; otherwise a validator without its journal "
                          "watches [consensus] double_sign_check_views views before voting")
    run.add_argument("--halt-height", type=_height, default=None, metavar="H",
                     help="commit block H, then stop and exit 0 (a coordinated upgrade); overrides [node] halt_height")
    run.set_defaults(func=cmd_run)

    rb = sub.add_parser("rollback", help="undo the last committed block (state, block, indexes); the node must be "
                                         "stopped. Only one block can be undone")
    rb.add_argument("--home", required=True)
    rb.set_defaults(func=cmd_rollback)

    snapshot_commands.register(sub)

    rp = sub.add_parser("replay", help="re-execute the stored chain from genesis and check every state root")
    rp.add_argument("--home", required=True)
    rp.set_defaults(func=cmd_replay)

    commands.register(sub)
    return p


DAEMON_COMMANDS = frozenset({"run"})
"""Long-running commands: they keep Python's SIGPIPE disposition (ignored; a closed pipe or socket is an error)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cowboy-node`` console script."""
    args = build_parser().parse_args(argv)
    lo, hi = INT_BOUNDS["node.block_time_ms"]
    if getattr(args, "block_time_ms", None) is not None and not lo <= args.block_time_ms <= hi:
        print(f"error: --block-time-ms must be in {lo}..{hi}", file=sys.stderr)
        return 2
    if argv is None and args.command not in DAEMON_COMMANDS:
        # `cowboy-node status | head`: a closed pipe ends a printing command quietly, as it does any Unix filter
        # (Python ignores SIGPIPE and would die with BrokenPipeError). Not for the daemon: with SIGPIPE at its
        # default, any write to a closed pipe or socket would kill the validator instead of raising an error it
        # handles. And only as the process's own entry point (argv None): called in-process (tests, embedding) it
        # must not change the host process's signal disposition.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
