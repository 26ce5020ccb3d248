"""A real multi-validator network on loopback for end-to-end tests: :class:`Testnet`.

``Testnet.create`` generates the homes with ``cowboy-node testnet`` (``OUTPUT/validator-<i>/`` with config.toml,
genesis.json, keys/, data/; ``OUTPUT/faucet.key``; ``OUTPUT/testnet.json``). Validator ``i`` of the harness is
validator ``i`` of genesis (``validators[i]``, matched by Ed25519 key), the index ``/status`` reports as
``consensus.leader``.

With ``proxied=True`` every directed peer link ``i → j`` goes through its own :class:`~tests.e2e.udp_proxy.UdpLink`:
``i``'s ``[p2p] peers`` entry for ``j`` is rewritten to dial the link's port, which relays to ``j``'s ``[p2p] addr``.
:meth:`Testnet.partition` cuts every link to and from a validator, :meth:`Testnet.heal` restores them.

Every process runs ``cowboy-node run --home HOME`` with its output appended to ``HOME/node.log``. :meth:`close`
kills every process the harness started and closes every link, whatever happened before (use it in a ``finally``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cowboy_node.node.keys import load_validator_key
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.ed25519 import public_key_from_seed
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.e2e.udp_proxy import UdpLink
from tests.integration.nodeproc import BIN, cli

HOST = "127.0.0.1"
HTTP_TIMEOUT_S = 5.0
"""Timeout of one RPC request (a paused validator's requests hang until it)."""
_PEER = re.compile(r"^(?P<key>(?:0x)?[0-9a-fA-F]{64})@(?P<host>[^@]+):(?P<port>\d+)$")
DEFAULT_SINK = bytes(19) + b"\x77"
"""Recipient of the harness's transfers unless told otherwise."""


class RpcUnavailable(Exception):
    """The validator's HTTP API did not answer (not running, paused, or refused the connection)."""


def _cmd() -> list[str]:
    exe = BIN / "cowboy-node"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cowboy_node.cli.main"]


def _http(url: str, data: bytes | None = None, timeout: float = HTTP_TIMEOUT_S) -> tuple[int, Any]:
    """``(status, JSON body)`` of one request; :class:`RpcUnavailable` when nothing answered."""
    headers = {"Content-Type": "application/octet-stream"} if data is not None else {}
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            body = json.loads(e.read())
        except ValueError:
            body = None
        finally:
            e.close()
        return e.code, body
    except (OSError, ValueError) as e:  # refused, reset, timed out (URLError is an OSError), truncated body
        raise RpcUnavailable(f"{url}: {e}") from None


def _peer_entries(text: str) -> list[str]:
    doc = tomllib.loads(text)
    peers = doc.get("p2p", {}).get("peers", [])
    assert isinstance(peers, list) and all(isinstance(p, str) for p in peers), f"[p2p] peers is not a list: {peers}"
    return list(peers)


def rewrite_peers(text: str, peers: Sequence[str]) -> str:
    """``text`` (a config.toml) with ``[p2p] peers`` replaced by ``peers`` (the rest byte for byte)."""
    m = re.search(r"^\[p2p\][ \t]*$", text, re.M)
    assert m is not None, "config.toml has no [p2p] section"
    start = m.end()
    nxt = re.search(r"^\[[^\]\n]+\][ \t]*$", text[start:], re.M)
    end = start + nxt.start() if nxt else len(text)
    section = text[start:end]
    body = "[" + "".join(f'\n    "{p}",' for p in peers) + "\n]" if peers else "[]"
    new_section, count = re.subn(r"^peers[ \t]*=[ \t]*\[[^\]]*\]", lambda _: f"peers = {body}", section,
                                 count=1, flags=re.M)
    if count == 0:  # no peers key yet: add one at the top of the section
        new_section = f"\npeers = {body}" + section
    out = text[:start] + new_section + text[end:]
    assert _peer_entries(out) == list(peers), "rewriting [p2p] peers failed"
    return out


def _port(addr: str) -> int:
    return int(addr.rsplit(":", 1)[1])


@dataclass
class Validator:
    """One validator home and (while started) its process."""

    index: int
    home: Path
    name: str
    rpc_url: str
    p2p_port: int
    public_key: str
    """``0x`` + 64 hex digits (Ed25519)."""
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    paused: bool = False
    starts: int = 0

    @property
    def running(self) -> bool:
        """Started and not exited (it may be paused)."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def live(self) -> bool:
        """Running and not paused: it should answer RPC and take part in consensus."""
        return self.running and not self.paused

    @property
    def log_path(self) -> Path:
        return self.home / "node.log"

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no node.log)"
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class Sender:
    """An account the harness signs transfers with; its next nonce is kept locally once read from the chain."""

    sk: bytes
    address: bytes
    next_nonce: int | None = None
    sent: list[str] = field(default_factory=list)


class Testnet:
    """Validators of one generated network (see the module docstring). Indices are genesis indices, 0-based."""

    __test__ = False  # not a pytest test class

    def __init__(self, out: Path, validators: list[Validator], links: dict[tuple[int, int], UdpLink],
                 faucet_key: Path) -> None:
        self.out = out
        self.validators = validators
        self.links = links
        """The proxy of each directed link ``(i, j)``: ``i`` dials it to reach ``j`` (empty when not proxied)."""
        sk, address = load_account_private_key(faucet_key)
        self.faucet = Sender(sk, address)
        self._rr = 0
        self._closed = False

    # -- creation -----------------------------------------------------------------------------
    @classmethod
    def create(cls, tmp_path: Path, n: int = 4, block_time_ms: int = 500, proxied: bool = True,
               extra_args: Sequence[str] = ()) -> Testnet:
        """Generate ``n`` validator homes under ``tmp_path/testnet`` (free ports); with ``proxied`` route every
        peer link through its own :class:`UdpLink`. Nothing is started."""
        out = tmp_path / "testnet"
        res = cli("testnet", "--validators", str(n), "--output", str(out), "--base-port", "0",
                  "--block-time-ms", str(block_time_ms), *extra_args, check=False, timeout=120)
        assert res.returncode == 0, f"cowboy-node testnet failed ({res.returncode}):\n{res.stderr}\n{res.stdout}"
        genesis = json.loads((out / "validator-0" / "genesis.json").read_text()) \
            if (out / "validator-0" / "genesis.json").exists() else None
        homes = sorted((p for p in out.iterdir() if p.is_dir() and re.fullmatch(r"validator-\d+", p.name)),
                       key=lambda p: int(p.name.split("-")[1]))
        assert len(homes) == n, f"expected {n} validator homes in {out}, found {[p.name for p in homes]}"
        by_key: dict[str, tuple[Path, dict[str, Any]]] = {}
        for home in homes:
            seed = load_validator_key(home / "keys" / "validator.key").ed25519_seed
            by_key["0x" + public_key_from_seed(seed).hex()] = (home, tomllib.loads((home / "config.toml").read_text()))
        if genesis is not None:
            order = [str(v["ed25519_public_key"]).lower() for v in genesis["validators"]]
            assert sorted(order) == sorted(by_key), "validator keys do not match genesis validators"
        else:
            order = list(by_key)
        validators: list[Validator] = []
        for i, key in enumerate(order):
            home, conf = by_key[key]
            rpc = conf["rpc"]["addr"]
            assert rpc.startswith(HOST + ":"), f"{home.name}: RPC is not on loopback: {rpc}"
            p2p = conf.get("p2p", {}).get("addr")
            assert isinstance(p2p, str) and p2p.startswith(HOST + ":"), f"{home.name}: [p2p] addr missing: {p2p}"
            data_dir = home / conf.get("node", {}).get("data_dir", "data")
            validators.append(Validator(i, home, home.name, f"http://{rpc}", _port(p2p), key, data_dir))
        links: dict[tuple[int, int], UdpLink] = {}
        try:
            if proxied:
                links = cls._proxy(validators)
            faucet = out / "faucet.key"
            assert faucet.exists(), f"{faucet} missing"
            return cls(out, validators, links, faucet)
        except BaseException:
            for link in links.values():
                link.close()
            raise

    @staticmethod
    def _proxy(validators: list[Validator]) -> dict[tuple[int, int], UdpLink]:
        """Give every directed link its own relay and point each ``[p2p] peers`` entry at it."""
        by_port = {v.p2p_port: v for v in validators}
        by_key = {v.public_key: v for v in validators}
        links: dict[tuple[int, int], UdpLink] = {}
        try:
            for v in validators:
                path = v.home / "config.toml"
                text = path.read_text()
                entries = _peer_entries(text)
                assert entries, f"{v.name}: [p2p] peers is empty"
                rewritten: list[str] = []
                for entry in entries:
                    m = _PEER.match(entry)
                    assert m is not None, f"{v.name}: unexpected [p2p] peers entry {entry!r}"
                    key = m["key"].lower()
                    key = key if key.startswith("0x") else "0x" + key
                    target = by_key.get(key) or by_port.get(int(m["port"]))
                    assert target is not None and target is not v, f"{v.name}: peer {entry!r} is no other validator"
                    link = UdpLink(0, (HOST, target.p2p_port), name=f"p2p {v.index}->{target.index}")
                    links[(v.index, target.index)] = link
                    rewritten.append(f"{m['key']}@{link.addr}")
                path.write_text(rewrite_peers(text, rewritten))
        except BaseException:
            for link in links.values():
                link.close()
            raise
        return links

    # -- processes ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.validators)

    def fund_in_genesis(self, addrs: list[bytes], amount: int = 10**24) -> None:
        """Give each of ``addrs`` ``amount`` in every home's genesis (before the first start: every validator
        derives the same genesis)."""
        for v in self.validators:
            path = v.home / "genesis.json"
            g = json.loads(path.read_text())
            for a in addrs:
                g["balances"][to_checksum_address(a)] = str(amount)
            path.write_text(json.dumps(g, indent=2))

    def set_p2p_transport(self, transport: str) -> None:
        """Write ``[p2p] transport`` into every home (before the first start; an unproxied network only: the
        :class:`UdpLink` relays carry UDP)."""
        assert not self.links or transport == "quic", "the UDP proxies cannot carry a TCP link"
        for v in self.validators:
            path = v.home / "config.toml"
            text = path.read_text()
            assert '# transport = "quic"' in text, "config.toml template changed"
            path.write_text(text.replace('# transport = "quic"', f'transport = "{transport}"'))

    def indices(self, among: Iterable[int] | None = None) -> list[int]:
        """``among`` as a list, or every live (running, not paused) validator."""
        return list(among) if among is not None else [v.index for v in self.validators if v.live]

    def others(self, i: int) -> list[int]:
        """Every validator but ``i``."""
        return [v.index for v in self.validators if v.index != i]

    def start(self, i: int | None = None, timeout: float = 30.0) -> None:
        """Start validator ``i`` (or every one not running) and wait until its HTTP API answers ``/status``."""
        targets = [i] if i is not None else [v.index for v in self.validators if not v.running]
        for t in targets:
            v = self.validators[t]
            assert not v.running, f"{v.name} is already running"
            if v.log is not None:
                v.log.close()
            v.log = open(v.log_path, "ab")  # noqa: SIM115 - closed in stop/kill/close
            v.log.write(f"\n===== harness: start #{v.starts + 1} of {v.name} at {time.time():.3f} =====\n".encode())
            v.log.flush()
            v.proc = subprocess.Popen([*_cmd(), "run", "--home", str(v.home)], stdout=v.log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            v.paused = False
            v.starts += 1
        deadline = time.monotonic() + timeout
        for t in targets:
            v = self.validators[t]
            while True:
                assert v.proc is not None
                if v.proc.poll() is not None:
                    raise AssertionError(f"{v.name} exited with {v.proc.returncode} at start-up:\n{v.tail()}")
                try:
                    code, _ = _http(v.rpc_url + "/status", timeout=2)
                    if code == 200:
                        break
                except RpcUnavailable:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"{v.name}: HTTP API not up within {timeout} s:\n{v.tail()}")
                time.sleep(0.1)

    def _signal(self, i: int, sig: signal.Signals) -> subprocess.Popen[bytes]:
        v = self.validators[i]
        assert v.proc is not None and v.proc.poll() is None, f"{v.name} is not running"
        v.proc.send_signal(sig)
        return v.proc

    def _reaped(self, v: Validator) -> None:
        if v.log is not None:
            v.log.close()
            v.log = None
        v.paused = False

    def stop(self, i: int, timeout: float = 20.0) -> int:
        """SIGTERM validator ``i`` (continued first if paused) and wait for it; SIGKILL after ``timeout``.
        Returns its exit code."""
        v = self.validators[i]
        proc = self._signal(i, signal.SIGTERM)
        if v.paused:
            proc.send_signal(signal.SIGCONT)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            self._reaped(v)
            raise AssertionError(f"{v.name} did not stop within {timeout} s of SIGTERM:\n{v.tail()}") from None
        self._reaped(v)
        return rc

    def kill(self, i: int) -> None:
        """SIGKILL validator ``i`` and reap it."""
        proc = self._signal(i, signal.SIGKILL)
        proc.wait(10)
        self._reaped(self.validators[i])

    def pause(self, i: int) -> None:
        """SIGSTOP validator ``i`` (it keeps its sockets but does nothing)."""
        self._signal(i, signal.SIGSTOP)
        self.validators[i].paused = True

    def resume(self, i: int) -> None:
        """SIGCONT a paused validator."""
        self._signal(i, signal.SIGCONT)
        self.validators[i].paused = False

    def wipe(self, i: int) -> None:
        """Delete the data directory of a stopped validator (it restarts from genesis)."""
        v = self.validators[i]
        assert not v.running, f"{v.name} must be stopped before its data is wiped"
        shutil.rmtree(v.data_dir)
        v.data_dir.mkdir(mode=0o700)

    # -- partitions ---------------------------------------------------------------------------
    def _links_of(self, i: int) -> list[UdpLink]:
        assert self.links, "the network is not proxied (Testnet.create(..., proxied=True))"
        return [link for (a, b), link in self.links.items() if i in (a, b)]

    def partition(self, i: int) -> None:
        """Cut every proxied link to and from validator ``i``."""
        for link in self._links_of(i):
            link.cut()

    def heal(self, i: int | None = None) -> None:
        """Restore the links of validator ``i`` (or every link)."""
        for link in self._links_of(i) if i is not None else self.links.values():
            link.heal()

    # -- queries ------------------------------------------------------------------------------
    def get(self, i: int, path: str, timeout: float = HTTP_TIMEOUT_S) -> tuple[int, Any]:
        """``(status, JSON)`` of ``GET path`` on validator ``i``; :class:`RpcUnavailable` if it does not answer."""
        return _http(self.validators[i].rpc_url + path, timeout=timeout)

    def status(self, i: int) -> dict[str, Any]:
        """``GET /status`` of validator ``i``."""
        code, body = self.get(i, "/status")
        assert code == 200 and isinstance(body, dict), f"{self.validators[i].name} /status: {code} {body}"
        return body

    def height(self, i: int) -> int:
        """Committed (finalized) height of validator ``i``."""
        return int(self.status(i)["height"])

    def heights(self, among: Iterable[int] | None = None) -> dict[int, int | None]:
        """Height of each validator (None for one that does not answer)."""
        out: dict[int, int | None] = {}
        for i in self.indices(among):
            try:
                out[i] = self.height(i)
            except (RpcUnavailable, AssertionError, KeyError):
                out[i] = None
        return out

    def block(self, i: int, h: int) -> dict[str, Any] | None:
        """Header JSON (``hash``, ``state_root``, ...) of block ``h`` on validator ``i``; None if it has none."""
        code, body = self.get(i, f"/block/{h}")
        if code == 404:
            return None
        assert code == 200 and isinstance(body, dict), f"{self.validators[i].name} /block/{h}: {code} {body}"
        return body

    def leader(self, among: Iterable[int] | None = None) -> int:
        """The current view's leader as a live validator reports it (``/status`` ``consensus.leader``, a genesis
        index); 0 when no validator reports one."""
        for i in self.indices(among):
            try:
                consensus = self.status(i).get("consensus")
            except (RpcUnavailable, AssertionError):
                continue
            if isinstance(consensus, dict) and isinstance(consensus.get("leader"), int) \
                    and 0 <= consensus["leader"] < len(self.validators):
                return int(consensus["leader"])
        return 0

    def wait_for(self, what: str, cond: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
        """Poll ``cond()`` until truthy (returned); on timeout fail naming ``what`` and every height."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = cond()
            except RpcUnavailable:
                got = None
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}; heights "
                                     f"{self.heights(range(len(self.validators)))}")
            time.sleep(interval)

    def wait_heights(self, h: int, timeout: float, among: Iterable[int] | None = None) -> dict[int, int]:
        """Wait until every validator of ``among`` (default: every live one) has height ≥ ``h``; their heights."""
        idx = self.indices(among)
        assert idx, "no validator to wait for"

        def reached() -> dict[int, int] | None:
            hs = self.heights(idx)
            if all(x is not None and x >= h for x in hs.values()):
                return {i: int(x) for i, x in hs.items() if x is not None}
            return None

        got: dict[int, int] = self.wait_for(f"validators {idx} to reach height {h}", reached, timeout)
        return got

    def wait_progress(self, blocks: int, timeout: float, among: Iterable[int] | None = None) -> dict[int, int]:
        """Wait until every validator of ``among`` is ``blocks`` above the highest of them now."""
        idx = self.indices(among)
        start = max((x for x in self.heights(idx).values() if x is not None), default=0)
        return self.wait_heights(start + blocks, timeout, idx)

    def assert_agreement(self, up_to: int, among: Iterable[int] | None = None, from_height: int = 1) -> None:
        """Every validator of ``among`` (default: every live one) has the same block hash and state root at every
        height ``from_height..up_to`` (a long run checks each new stretch once)."""
        idx = self.indices(among)
        assert idx, "no validator to compare"
        for i in idx:
            got = self.height(i)
            assert got >= up_to, f"{self.validators[i].name} is at height {got}, below {up_to}"
        for h in range(max(1, from_height), up_to + 1):
            seen: dict[tuple[str, str], list[int]] = {}
            for i in idx:
                b = self.block(i, h)
                assert b is not None, f"{self.validators[i].name} has no block {h}"
                assert int(b["height"]) == h, f"{self.validators[i].name} /block/{h} answered height {b['height']}"
                seen.setdefault((b["hash"], b["state_root"]), []).append(i)
            assert len(seen) == 1, f"validators disagree at height {h}: " + "; ".join(
                f"{v} hash {k[0]} state_root {k[1]}" for k, v in seen.items())

    # -- transactions -------------------------------------------------------------------------
    def send_tx(self, i: int, tx_bytes: bytes) -> tuple[int, Any]:
        """``POST /submit`` raw transaction bytes to validator ``i``: ``(status, JSON)``."""
        return _http(self.validators[i].rpc_url + "/submit", data=tx_bytes)

    def transfer(self, i: int, to: bytes = DEFAULT_SINK, amount: int = 1, sender: Sender | None = None) -> str:
        """Sign a transfer from ``sender`` (default the faucet) with its next nonce and submit it to validator
        ``i``; its ``0x`` hash. Fails unless the validator admits it."""
        s = sender or self.faucet
        st = self.status(i)
        if s.next_nonce is None:
            code, acct = self.get(i, "/account/0x" + s.address.hex())
            assert code == 200, f"/account: {code} {acct}"
            s.next_nonce = int(acct["next_pending_nonce"])
        bf = st["basefee"]
        tx = Transaction(chain_id=st["chain_id"], nonce=s.next_nonce, sender=s.address,
                         instruction=Transfer(to=to, amount=amount), cycles_limit=50_000, cells_limit=2_000,
                         max_fee_per_cycle=4 * int(bf["cycle"]) + 10, max_priority_fee_per_cycle=10,
                         max_fee_per_cell=4 * int(bf["cell"]) + 10, max_priority_fee_per_cell=10).signed(s.sk)
        code, body = self.send_tx(i, tx.to_bytes())
        assert code == 200 and isinstance(body, dict) and "tx_hash" in body, \
            f"{self.validators[i].name} refused the transfer with nonce {s.next_nonce}: {code} {body}"
        s.next_nonce += 1
        tx_hash = str(body["tx_hash"])
        s.sent.append(tx_hash)
        return tx_hash

    def faucet_transfers(self, count: int, among: Iterable[int] | None = None, interval: float = 0.0) -> list[str]:
        """``count`` faucet transfers, submitted round-robin to the validators of ``among`` (default: every live
        one); their hashes."""
        idx = self.indices(among)
        assert idx, "no validator to send to"
        hashes: list[str] = []
        for _ in range(count):
            hashes.append(self.transfer(idx[self._rr % len(idx)]))
            self._rr += 1
            if interval:
                time.sleep(interval)
        return hashes

    def receipt(self, i: int, tx_hash: str) -> dict[str, Any] | None:
        """The receipt of ``tx_hash`` on validator ``i`` (None while not committed there)."""
        code, body = self.get(i, f"/tx/{tx_hash}/receipt")
        if code == 200 and isinstance(body, dict) and "height" in body:
            return body
        return None

    def wait_included(self, tx_hashes: str | Iterable[str], timeout: float,
                      among: Iterable[int] | None = None) -> dict[str, dict[str, Any]]:
        """Wait until every transaction has a receipt on a validator of ``among`` (default: every live one);
        the receipt of each (``height``, ``index``, ``status``, ...)."""
        pending = [tx_hashes] if isinstance(tx_hashes, str) else list(tx_hashes)
        found: dict[str, dict[str, Any]] = {}

        def done() -> bool:
            for h in list(pending):
                for i in self.indices(among):
                    try:
                        r = self.receipt(i, h)
                    except RpcUnavailable:
                        continue
                    if r is not None:
                        found[h] = r
                        pending.remove(h)
                        break
            return not pending

        try:
            self.wait_for(f"{len(pending)} transactions to be included", done, timeout, interval=0.2)
        except AssertionError as e:
            raise AssertionError(f"{e}; not included: {pending[:10]}{' ...' if len(pending) > 10 else ''}") from None
        return found

    # -- teardown -----------------------------------------------------------------------------
    def logs(self, lines: int = 60) -> str:
        """The last ``lines`` lines of every validator's node.log."""
        return "\n".join(f"----- {v.name} ({v.home / 'node.log'}), last {lines} lines -----\n{v.tail(lines)}"
                         for v in self.validators)

    def close(self) -> None:
        """Kill every process the harness started and close every link (idempotent, never raises for a process
        that is already gone)."""
        if self._closed:
            return
        self._closed = True
        errors: list[str] = []
        for v in self.validators:
            if v.proc is not None:
                try:
                    if v.proc.poll() is None:
                        v.proc.kill()  # SIGKILL also ends a stopped (paused) process
                    v.proc.wait(10)
                except (OSError, subprocess.TimeoutExpired) as e:
                    errors.append(f"{v.name}: {e}")
            self._reaped(v)
        for link in self.links.values():
            try:
                link.close()
            except RuntimeError as e:
                errors.append(str(e))
        if errors:
            raise RuntimeError("closing the testnet: " + "; ".join(errors))

    def __enter__(self) -> Testnet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
