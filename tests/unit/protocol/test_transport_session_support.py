"""Shared harness for the CIP-11 session tests (no tests here): a runner/validator pair joined by real bytes.

Every frame one side queues is encoded with ``encode_frame``, the byte stream is cut into
small chunks and fed through a ``FrameDecoder``, and the decoded frames are handed to the
other side — so what the sessions exchange is exactly what would cross a QUIC stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import Frame, Goodbye, encode_frame
from cowboy_protocol.transport.framing import FrameDecoder
from cowboy_protocol.transport.preimages import RunnerKey, ValidatorKey, validator_set_hash
from cowboy_protocol.transport.protocol_errors import RemoteProtocolError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import Closed, Event, SessionBase
from cowboy_protocol.transport.validator_session import Admission, ValidatorSession

CHAIN = "cowboy-devnet"
RUNNER = RunnerKey(b"\x01" * 32)
VALIDATOR = ValidatorKey(b"\x02" * 32)
OTHER_RUNNER = RunnerKey(b"\x03" * 32)
OTHER_VALIDATOR = ValidatorKey(b"\x04" * 32)
OUTSIDER_VALIDATOR = ValidatorKey(b"\x05" * 32)  # not in the snapshot
VSET = (VALIDATOR.pubkey.key, OTHER_VALIDATOR.pubkey.key)
VSH = validator_set_hash(VSET)
EPOCH = 0
CB1 = b"\x55" * 32
CB2 = b"\x56" * 32
R_NONCE = b"\x66" * 32
V_NONCE = b"\x77" * 32
ADDRESS = RUNNER.pubkey.address()
RUNNER_INDEX = 7
ADMIT_OK = Admission(True, None, RUNNER_INDEX, ADDRESS)
JOB_SPEC = bytes.fromhex("a10001")  # any bytes: the session hashes what is sent, it does not parse JobSpecV1
TX = bytes.fromhex("00000003a10000")  # u32_be(3) ‖ CBOR {0: 0}
START_HEIGHT = 100


def wire(frames: Iterable[Frame], chunk: int = 7) -> list[Frame]:
    """Encode, concatenate, split into ``chunk``-byte pieces, and decode again."""
    data = b"".join(encode_frame(f) for f in frames)
    decoder = FrameDecoder()
    out: list[Frame] = []
    for i in range(0, len(data), chunk):
        out += decoder.feed(data[i:i + chunk])
    decoder.close()
    return out


def deliver(session: SessionBase, frames: Sequence[Frame], now: float) -> list[Event]:
    """Feed ``frames`` (through real bytes) to ``session``; decode errors go to ``receive_error``."""
    events: list[Event] = []
    try:
        decoded = wire(frames)
    except RemoteProtocolError as e:
        return session.receive_error(e, now)
    for f in decoded:
        events += session.receive(f, now)
    return events


def deliver_bytes(session: SessionBase, data: bytes, now: float) -> list[Event]:
    """Feed raw wire bytes (possibly invalid) to ``session`` the way the QUIC adapter would."""
    decoder = FrameDecoder()
    try:
        frames = decoder.feed(data)
        decoder.close()
    except RemoteProtocolError as e:
        return session.receive_error(e, now)
    events: list[Event] = []
    for f in frames:
        events += session.receive(f, now)
    return events


def goodbye_of(session: SessionBase) -> Goodbye:
    """The single frame a session queued on a fatal error."""
    out = session.take_outbound()
    assert len(out) == 1 and isinstance(out[0], Goodbye), out
    return out[0]


def closed(events: Sequence[Event]) -> Closed:
    """The Closed event among ``events`` (there must be exactly one, last)."""
    assert events and isinstance(events[-1], Closed), events
    assert sum(isinstance(e, Closed) for e in events) == 1
    return events[-1]


def make_validator(*, binding: bytes = CB1, nonce: bytes = V_NONCE, admission: Admission = ADMIT_OK,
                   admit: Callable[[PubKey], Admission] | None = None, key: ValidatorKey = VALIDATOR,
                   vsh: bytes = VSH, now: float = 0.0, height: list[int] | None = None,
                   **kw: float) -> ValidatorSession:
    """A validator session; ``height`` is a one-item list the test may mutate."""
    h = height if height is not None else [START_HEIGHT]
    return ValidatorSession(chain_id=CHAIN, key=key, validator_set_hash=vsh, subset_epoch=EPOCH,
                            channel_binding=binding, challenge_nonce=nonce, admit=admit or (lambda _pk: admission),
                            height=lambda: h[0], now=now, **kw)


def make_runner(*, binding: bytes = CB1, nonce: bytes = R_NONCE, key: RunnerKey = RUNNER,
                expected: PubKey | None = VALIDATOR.pubkey, vset: Sequence[bytes] = VSET,
                **kw: float) -> RunnerSession:
    """A runner session (not started)."""
    return RunnerSession(chain_id=CHAIN, key=key, expected_validator=expected, validator_set=vset,
                         subset_epoch=EPOCH, channel_binding=binding, challenge_nonce=nonce, **kw)


@dataclass
class Pair:
    """A runner and a validator session on one connection, with a shared mutable chain height."""

    binding: bytes = CB1
    admission: Admission = ADMIT_OK
    validator_kw: dict[str, float] = field(default_factory=dict)
    runner_kw: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.height = [START_HEIGHT]
        self.v = make_validator(binding=self.binding, admission=self.admission, height=self.height,
                                **self.validator_kw)
        self.r = make_runner(binding=self.binding, **self.runner_kw)
        self.sent_r: list[Frame] = []  # every frame the runner sent, in order
        self.sent_v: list[Frame] = []

    def r_to_v(self, now: float = 0.0) -> list[Event]:
        """Move the runner's queued frames to the validator."""
        frames = self.r.take_outbound()
        self.sent_r += frames
        return deliver(self.v, frames, now)

    def v_to_r(self, now: float = 0.0) -> list[Event]:
        """Move the validator's queued frames to the runner."""
        frames = self.v.take_outbound()
        self.sent_v += frames
        return deliver(self.r, frames, now)

    def handshake(self, now: float = 0.0) -> tuple[list[Event], list[Event]]:
        """Run Hello → Hello+HelloAck → HelloAck; return (validator events, runner events)."""
        self.r.start(now, self.height[0])
        v_events = self.r_to_v(now)
        r_events = self.v_to_r(now)
        v_events += self.r_to_v(now)
        return v_events, r_events


def reasons(frames: Sequence[Frame]) -> list[GoodbyeReason]:
    """Goodbye reasons among ``frames``."""
    return [f.reason for f in frames if isinstance(f, Goodbye)]
