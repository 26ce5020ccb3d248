"""Heartbeat micro-benchmark (prints JSON): validator CPU for one HeartbeatPing → signed HeartbeatPong, no QUIC.

What is timed is exactly the validator's per-heartbeat path above aioquic, with the real code:
``FrameDecoder.feed`` of the ping's wire bytes (what stream 0 delivers) → ``_RunnerConnection.on_frame`` of
:class:`~cowboy_node.transport.service.TransportService` (metrics, ``ValidatorSession.receive``: rate bucket,
nonce rule, secp256k1 signature check over the §12.6 heartbeat preimage, HeartbeatPong built and Ed25519-signed;
presence refresh) → ``FrameConnection.send`` stand-in that runs ``encode_frame`` as the adapter does. Each of
``--sessions`` sessions is authenticated first by a real in-memory handshake with a RunnerSession (channel-bound
Hello/HelloAck through real bytes); the pings are real signed pings from those RunnerSessions, pre-generated
so that their signing is not timed. A fake clock advances one second and one block per round, so the 1 Hz
pings stay within the rate limit exactly as in production. ``tick_us_per_session`` is the 0.2 s deadline
ticker's cost per session per tick (five ticks a second per heartbeat at 1 Hz); ``block_us_per_session`` is
``on_block_committed`` of a block without jobs per session (the §5.3 epoch and registry re-checks every live
session gets at each block, i.e. about once per heartbeat at 1 s blocks).

Baselines measured in the same run (same process, same load):

* ``floor_us`` — one secp256k1 ECDSA verify against an already-parsed public key (libsecp256k1 through
  coincurve's cffi, no recovery) + one Ed25519 sign with a prepared ``SigningKey``: the cryptography a
  heartbeat cannot avoid;
* ``recover_address_us`` — ``crypto.secp256k1.recover_address``, the generic recover-then-hash check;
* ``stages`` — the pieces of the path timed alone (decode, verify, sign, encode);
* ``relay_us`` — with ``[quic] workers = N > 1`` the validator process gets the ping from a worker over the local
  channel instead of from stream 0, and ships the pong back: ipc ``Decoder.feed`` of the FRAME message +
  ``decode_frame`` + ``ipc.encode`` of the SEND message, timed alone. ``validator_process_us_with_workers`` =
  heartbeat − decode_ping_bytes + relay: that mode's per-heartbeat CPU in the validator process, above the
  event loop and socket calls.

``ratio_to_floor`` = heartbeat / floor. Timing is ``time.process_time`` (CPU of this process); the machine is
shared, so compare ratios, and take the best of ``--repeat`` repetitions.

Usage: python bench/heartbeat_cost.py [--sessions 100] [--rounds 30] [--repeat 5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coincurve import PublicKey as CcPublicKey
from coincurve._libsecp256k1 import ffi, lib
from coincurve.context import GLOBAL_CONTEXT
from nacl.signing import SigningKey

from bench.bench_harness import CHAIN_ID, quiet_logs, runner_keys
from cowboy_node.transport.service import TransportConfig, TransportService, _RunnerConnection
from cowboy_node.transport.workers import ipc
from cowboy_protocol.crypto import secp256k1
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.transport.enums import Role
from cowboy_protocol.transport.frames import Frame, Goodbye, HeartbeatPing, HeartbeatPong, encode_frame
from cowboy_protocol.transport.framing import FrameDecoder, decode_frame
from cowboy_protocol.transport.preimages import RunnerKey, ValidatorKey, sign_frame, validator_set_hash, verify_frame
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import Authenticated
from cowboy_protocol.transport.subset import EpochSnapshot
from cowboy_protocol.types.params import Cip11Params

VALIDATOR = ValidatorKey(bytes(range(1, 33)))
VSET = (VALIDATOR.pubkey.key,)
SNAPSHOT = EpochSnapshot(0, VSET)
KEY_BASE = 0x9000


class Clock:
    """The fake time of the service (seconds) and chain (height)."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.height = 1


class Registry:
    """NodeLink over a fixed registry (same as ``bench/runner_capacity.py``, with the fake clock's height)."""

    chain_id = CHAIN_ID

    def __init__(self, addresses: list[bytes], clock: Clock) -> None:
        self.index = {a: i for i, a in enumerate(addresses)}
        self.clock = clock

    def head_height(self) -> int:
        """The fake clock's height."""
        return self.clock.height

    def admission(self, runner: PubKey, subset_epoch: int | None = None, offered_hash: bytes | None = None) -> Any:
        """Registered iff the key's address is in the table (and the Hello offers the one epoch-0 snapshot)."""
        from cowboy_protocol.transport.enums import GoodbyeReason
        from cowboy_protocol.transport.validator_session import Admission

        if subset_epoch is not None and (subset_epoch, offered_hash) != (0, SNAPSHOT.set_hash):
            return Admission(False, GoodbyeReason.WRONG_VALIDATOR_SET)
        address = runner.address()
        i = self.index.get(address)
        return Admission(True, runner_index=i, address=address) if i is not None else Admission(False)

    def cip11_params(self) -> Cip11Params:
        """The §13 defaults (no governance here)."""
        return Cip11Params()

    def valid_snapshots(self) -> tuple[EpochSnapshot, ...]:
        """The static one-validator set."""
        return (SNAPSHOT,)

    def assignment_for(self, job_id: bytes) -> None:
        """No jobs."""
        return None

    def runner_health(self, addresses: list[bytes]) -> list[Any]:
        """Every registered runner healthy (the per-block registry re-check)."""
        from cowboy_protocol.types.runner import Health

        return [Health.HEALTHY if a in self.index else None for a in addresses]

    def forward_transaction(self, tx_bytes: bytes) -> None:
        """No results."""
        raise RuntimeError("not used")


class Metrics:
    """Counts events like ``runner_capacity``'s CountingMetrics (so the same per-frame work is done)."""

    def __init__(self) -> None:
        self.events: dict[str, int] = {}

    def transport_event(self, kind: str, label: str) -> None:
        """Count ``kind:label``."""
        key = f"{kind}:{label}"
        self.events[key] = self.events.get(key, 0) + 1

    def transport_gauges(self, *, connected: int, present: int) -> None:
        """Ignored."""

    def push_latency(self, seconds: float) -> None:
        """Ignored."""


class FakeConn:
    """Stands in for ``quic.FrameConnection``: ``send`` encodes like the adapter; bytes are kept for the runner."""

    def __init__(self) -> None:
        self.channel_binding = secrets.token_bytes(32)
        self.closed = False
        self.out: list[bytes] = []

    def send(self, frame: Frame) -> None:
        """What ``FramedProtocol.send_frame`` does before handing bytes to aioquic."""
        self.out.append(encode_frame(frame))

    def close(self, goodbye: Goodbye | None = None) -> None:
        """Closing is a failure in this benchmark."""
        self.closed = True
        raise RuntimeError(f"session closed: {goodbye}")

    def mark_authenticated(self, goodbye_signer: object = None) -> None:
        """Nothing to do."""


def _feed(decoder: FrameDecoder, data: list[bytes]) -> list[Frame]:
    frames: list[Frame] = []
    for chunk in data:
        frames += decoder.feed(chunk)
    return frames


def setup(n: int, rounds: int) -> tuple[TransportService, Clock, list[tuple[_RunnerConnection, FrameDecoder,
                                                                              list[bytes]]]]:
    """``n`` authenticated sessions and ``rounds`` pre-signed ping byte strings for each."""
    clock = Clock()
    sks = runner_keys(n, KEY_BASE)
    link = Registry([private_key_to_address(sk) for sk in sks], clock)
    service = TransportService(link, VALIDATOR, validator_set_hash=validator_set_hash(VSET),
                               config=TransportConfig(port=0), metrics=Metrics())
    service.now = lambda: clock.t  # type: ignore[method-assign]
    conns = []
    for sk in sks:
        fake = FakeConn()
        rc = _RunnerConnection(service, fake)  # type: ignore[arg-type]
        rc.on_open(fake)  # type: ignore[arg-type]
        runner = RunnerSession(chain_id=CHAIN_ID, key=RunnerKey(sk), expected_validator=PubKey.validator(VSET[0]),
                               validator_set=VSET, subset_epoch=0, channel_binding=fake.channel_binding,
                               challenge_nonce=secrets.token_bytes(32))
        runner.start(clock.t, clock.height)
        server_dec, runner_dec = FrameDecoder(), FrameDecoder()
        authenticated = False
        for _ in range(4):
            for f in _feed(server_dec, [encode_frame(f) for f in runner.take_outbound()]):
                rc.on_frame(f)
            for f in _feed(runner_dec, fake.out):
                authenticated |= any(isinstance(e, Authenticated) for e in runner.receive(f, clock.t))
            fake.out.clear()
        if not authenticated:
            raise RuntimeError("handshake failed")
        pings = []
        for r in range(rounds):
            runner.ping(clock.t + r, clock.height + r)
            pings.append(encode_frame(runner.take_outbound()[0]))
        conns.append((rc, server_dec, pings))
    return service, clock, conns


def run_rounds(service: TransportService, clock: Clock, conns: list[tuple[_RunnerConnection, FrameDecoder,
                                                                          list[bytes]]], rounds: int) -> float:
    """CPU seconds for every session to receive ``rounds`` pings (one per simulated second)."""
    cpu = 0.0
    for r in range(rounds):
        clock.t += 1.0
        clock.height += 1
        t0 = time.process_time()
        for rc, decoder, pings in conns:
            for frame in decoder.feed(pings[r]):
                rc.on_frame(frame)
        cpu += time.process_time() - t0
        for rc, _, _ in conns:
            out = rc.conn.out  # type: ignore[attr-defined]
            if len(out) != 1:
                raise RuntimeError(f"expected one pong, got {len(out)}")
            out.clear()
    return cpu


def per_call_us(f: Callable[[], object], n: int = 2000, repeat: int = 5) -> float:
    """Best-of-``repeat`` CPU µs per call of ``f``."""
    f()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(n):
            f()
        best = min(best, time.process_time() - t0)
    return 1e6 * best / n


def baselines(service: TransportService, conns: list[tuple[_RunnerConnection, FrameDecoder,
                                                              list[bytes]]]) -> dict[str, Any]:
    """The floor (verify + sign) and the path's stages timed alone."""
    rc, _, pings = conns[0]
    assert rc.session is not None and rc.session.context is not None
    ctx = rc.session.context
    ping = FrameDecoder().feed(pings[0])[0]
    assert isinstance(ping, HeartbeatPing)
    digest = keccak256(b"heartbeat")
    sk = runner_keys(1, KEY_BASE)[0]
    rsig = secp256k1.sign_recoverable(sk, digest)
    known = CcPublicKey(secp256k1.private_key_to_public_key(sk, compressed=True)).public_key
    raw_sig = ffi.new("secp256k1_ecdsa_signature *")
    cctx = GLOBAL_CONTEXT.ctx

    def verify_known() -> None:
        lib.secp256k1_ecdsa_signature_parse_compact(cctx, raw_sig, rsig[:64])
        if not lib.secp256k1_ecdsa_verify(cctx, raw_sig, digest, known):
            raise AssertionError("verify failed")

    signer = SigningKey(VALIDATOR.seed)
    verify_us = per_call_us(verify_known)
    sign_us = per_call_us(lambda: signer.sign(digest).signature)
    pong = HeartbeatPong(ping.nonce, True, ping.block_height, bytes(64))
    signed_pong = sign_frame(ctx, VALIDATOR, pong)
    stages = {
        "decode_ping_bytes": per_call_us(lambda: FrameDecoder().feed(pings[0])),
        "verify_ping (verify_frame)": per_call_us(lambda: verify_frame(ctx, ping, Role.RUNNER)),
        "sign_pong (sign_frame)": per_call_us(lambda: sign_frame(ctx, VALIDATOR, pong)),
        "encode_pong (encode_frame)": per_call_us(lambda: encode_frame(signed_pong)),
        "presence_ping": per_call_us(lambda: service.presence.ping(0, 10)),
    }
    framed_ping = ipc.encode(ipc.Kind.FRAME, 7, pings[0])
    pong_bytes = encode_frame(signed_pong)
    relay = ipc.Decoder()

    def relay_in_out() -> None:
        (m,) = relay.feed(framed_ping)
        decode_frame(m.payload)
        ipc.encode(ipc.Kind.SEND, m.conn, pong_bytes)

    return {"secp256k1_verify_known_key_us": round(verify_us, 2), "ed25519_sign_prepared_key_us": round(sign_us, 2),
            "relay_us": round(per_call_us(relay_in_out), 2),
            "floor_us": round(verify_us + sign_us, 2),
            "recover_address_us": round(per_call_us(lambda: secp256k1.recover_address(digest, rsig)), 2),
            "stages_us": {k: round(v, 2) for k, v in stages.items()}}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print one JSON document (and, with --profile, cProfile's top lines on stderr)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of the whole measurement (best kept)")
    parser.add_argument("--profile", action="store_true", help="cProfile one repetition; top functions to stderr")
    args = parser.parse_args(argv)
    quiet_logs()
    runs_us: list[float] = []
    ticks_us: list[float] = []
    blocks_us: list[float] = []
    base: dict[str, Any] = {}
    for rep in range(args.repeat):
        service, clock, conns = setup(args.sessions, args.rounds)
        if args.profile and rep == 0:
            prof = cProfile.Profile()
            prof.enable()
            run_rounds(service, clock, conns, args.rounds)
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
            print(s.getvalue(), file=sys.stderr)
            continue
        cpu = run_rounds(service, clock, conns, args.rounds)
        runs_us.append(1e6 * cpu / (args.sessions * args.rounds))
        t0 = time.process_time()
        for _ in range(20):
            service.tick()
        ticks_us.append(1e6 * (time.process_time() - t0) / (20 * args.sessions))
        t0 = time.process_time()
        for _ in range(20):  # a committed block without jobs: the service's per-session re-checks
            clock.height += 1
            service.on_block_committed((), ())
        blocks_us.append(1e6 * (time.process_time() - t0) / (20 * args.sessions))
        if not base:
            base = baselines(service, conns)
    if not runs_us:
        return
    hb = min(runs_us)
    print(json.dumps({
        "benchmark": "heartbeat_cost",
        "params": {"sessions": args.sessions, "rounds": args.rounds, "repeat": args.repeat},
        "heartbeat_us": round(hb, 2), "heartbeat_us_runs": [round(x, 2) for x in runs_us],
        "tick_us_per_session": round(min(ticks_us), 3),
        "block_us_per_session": round(min(blocks_us), 3),
        "baseline": base,
        "ratio_to_floor": round(hb / base["floor_us"], 3),
        "validator_process_us_with_workers": round(hb - base["stages_us"]["decode_ping_bytes"] + base["relay_us"], 2),
        "note": "CPU of this process, best of the repetitions; the machine is shared: compare ratios",
    }, indent=2))


if __name__ == "__main__":
    main()
