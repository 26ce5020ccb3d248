"""The fault-injection UDP relay (:mod:`tests.e2e.udp_proxy`) against a UDP echo server on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.e2e.udp_proxy import Counters, UdpLink

pytestmark = pytest.mark.timeout(120)


class Echo:
    """A UDP echo server on loopback in its own thread; remembers the source address of every datagram."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = int(self.sock.getsockname()[1])
        self.sources: list[tuple[str, int]] = []
        self.received = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        while not self._stop.is_set():
            try:
                data, src = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            self.received += 1
            self.sources.append(src)
            self.sock.sendto(b"echo:" + data, src)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def echo() -> Iterator[Echo]:
    e = Echo()
    try:
        yield e
    finally:
        e.close()


@pytest.fixture
def client() -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(1.0)
    try:
        yield s
    finally:
        s.close()


def _roundtrip(client: socket.socket, link: UdpLink, payload: bytes, timeout: float = 1.0) -> bytes | None:
    client.settimeout(timeout)
    client.sendto(payload, ("127.0.0.1", link.port))
    try:
        data, src = client.recvfrom(65535)
    except TimeoutError:
        return None
    assert src == ("127.0.0.1", link.port), "the reply must come from the relay's listening address"
    return data


def _settled(link: UdpLink, cond: Callable[[Counters], bool], timeout: float = 1.0) -> Counters:
    """The link's counters once ``cond`` holds (the relay counts a datagram just after sending it)."""
    deadline = time.monotonic() + timeout
    while True:
        c = link.counters()
        if cond(c) or time.monotonic() > deadline:
            return c
        time.sleep(0.005)


def _collect(client: socket.socket, quiet_s: float) -> list[bytes]:
    """Every datagram until none arrives for ``quiet_s``."""
    got: list[bytes] = []
    client.settimeout(quiet_s)
    try:
        while True:
            got.append(client.recvfrom(65535)[0])
    except TimeoutError:
        return got


def _drain(client: socket.socket) -> None:
    client.settimeout(0.05)
    try:
        while True:
            client.recvfrom(65535)
    except TimeoutError:
        pass


def test_relays_both_ways(echo: Echo, client: socket.socket) -> None:
    with UdpLink(0, ("127.0.0.1", echo.port)) as link:
        for i in range(20):
            assert _roundtrip(client, link, b"m%d" % i) == b"echo:m%d" % i
        c = _settled(link, lambda c: c.relayed_down == 20)  # counted just after the send
        assert (c.relayed_up, c.relayed_down, c.dropped_up, c.dropped_down) == (20, 20, 0, 0)
        assert link.relayed == 40 and link.dropped == 0
        # the target sees the relay's upstream socket, not the client
        assert all(src != client.getsockname() for src in echo.sources)
        assert len(set(echo.sources)) == 1


def test_one_upstream_socket_per_client(echo: Echo, client: socket.socket) -> None:
    with UdpLink(0, ("127.0.0.1", echo.port)) as link, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
        other.bind(("127.0.0.1", 0))
        other.settimeout(1.0)
        assert _roundtrip(client, link, b"a") == b"echo:a"
        assert _roundtrip(other, link, b"b") == b"echo:b"  # each reply goes back to its own client
        assert _roundtrip(client, link, b"c") == b"echo:c"
        assert link.clients == 2
        assert len(set(echo.sources)) == 2


def test_cut_drops_both_ways_and_heal_restores(echo: Echo, client: socket.socket) -> None:
    with UdpLink(0, ("127.0.0.1", echo.port)) as link:
        assert _roundtrip(client, link, b"before") == b"echo:before"
        link.cut()
        assert link.is_cut
        for i in range(5):
            client.sendto(b"cut%d" % i, ("127.0.0.1", link.port))
        client.settimeout(0.2)
        with pytest.raises(TimeoutError):
            client.recvfrom(65535)
        assert echo.received == 1, "nothing may reach the target while cut"
        assert link.counters().dropped_up == 5
        # the other direction: cut while the reply is on its way back
        link.heal()
        link.set_delay(300)
        client.sendto(b"late", ("127.0.0.1", link.port))
        threading.Event().wait(0.4)  # the request has been relayed (after 300 ms), the echo is now delayed
        link.cut()
        client.settimeout(0.6)
        with pytest.raises(TimeoutError):
            client.recvfrom(65535)
        assert echo.received == 2
        assert link.counters().dropped_down >= 1
        link.set_delay(0)
        link.heal()
        _drain(client)
        assert _roundtrip(client, link, b"after") == b"echo:after"


def test_down_direction_cut_on_arrival(echo: Echo, client: socket.socket) -> None:
    """A reply that arrives from the target while the link is cut is dropped, not queued for later."""
    with UdpLink(0, ("127.0.0.1", echo.port)) as link:
        link.set_delay(200)
        client.sendto(b"x", ("127.0.0.1", link.port))
        threading.Event().wait(0.25)  # relayed up; now the echo is in the relay's queue or arriving
        link.cut()
        threading.Event().wait(0.4)
        link.heal()
        client.settimeout(0.3)
        with pytest.raises(TimeoutError):
            client.recvfrom(65535)
        c = _settled(link, lambda c: c.dropped_down == 1)
        assert c.relayed_up == 1 and c.relayed_down == 0


def test_loss_is_seeded_and_partial(echo: Echo, client: socket.socket) -> None:
    with UdpLink(0, ("127.0.0.1", echo.port)) as link:
        link.set_loss(0.5, rng_seed=7)
        for i in range(40):
            client.sendto(b"p%d" % i, ("127.0.0.1", link.port))
        got = _collect(client, 0.3)
        assert 0 < len(got) < 40  # each way drops half: about 10 of 40 come back
        c = _settled(link, lambda c: c.relayed_down == len(got))
        assert c.relayed_up + c.dropped_up == 40 and c.relayed_down + c.dropped_down == c.relayed_up
        assert c.dropped_up > 0 and c.dropped_down > 0
        assert link.dropped > 0
        link.set_loss(0.0)
        _drain(client)
        assert _roundtrip(client, link, b"clean") == b"echo:clean"
        with pytest.raises(ValueError):
            link.set_loss(1.5)


def test_delay_holds_datagrams(echo: Echo, client: socket.socket) -> None:
    with UdpLink(0, ("127.0.0.1", echo.port)) as link:
        link.set_delay(100)
        t0 = time.monotonic()
        assert _roundtrip(client, link, b"slow") == b"echo:slow"
        assert time.monotonic() - t0 >= 0.19  # held 100 ms each way


def test_close_stops_the_thread_and_frees_the_port(echo: Echo, client: socket.socket) -> None:
    before = threading.active_count()
    link = UdpLink(0, ("127.0.0.1", echo.port))
    port = link.port
    assert _roundtrip(client, link, b"x") == b"echo:x"
    link.close()
    assert not link.alive
    assert threading.active_count() == before
    link.close()  # idempotent
    assert _roundtrip(client, link, b"y", timeout=0.2) is None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", port))  # the listening socket is closed


def test_fixed_listen_port(echo: Echo, client: socket.socket) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with UdpLink(port, ("127.0.0.1", echo.port)) as link:
        assert link.port == port and link.addr == f"127.0.0.1:{port}"
        assert _roundtrip(client, link, b"z") == b"echo:z"


class Sink:
    """A UDP socket on loopback that only receives, read by its own thread (so a burst does not overflow the
    socket buffer): ``(payload, arrival monotonic time)`` of every datagram."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = int(self.sock.getsockname()[1])
        self._got: list[tuple[bytes, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recvfrom(65535)[0]
            except TimeoutError:
                continue
            except OSError:
                return
            self._got.append((data, time.monotonic()))

    def collect(self, quiet_s: float) -> list[tuple[bytes, float]]:
        """Everything received once nothing more has arrived for ``quiet_s`` (bounded: 10 s)."""
        deadline = time.monotonic() + 10
        seen = -1
        while len(self._got) != seen and time.monotonic() < deadline:
            seen = len(self._got)
            self._stop.wait(quiet_s)
        return list(self._got)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def _one_way(link: UdpLink, sink: Sink, client: socket.socket, n: int,
             spacing_s: float = 0.0) -> tuple[dict[int, float], list[int]]:
    """Send ``n`` numbered datagrams through ``link`` to ``sink``: each delivered one's one-way seconds, and the
    order they arrived in."""
    sent: dict[int, float] = {}
    for i in range(n):
        sent[i] = time.monotonic()
        client.sendto(b"%d" % i, ("127.0.0.1", link.port))
        if spacing_s:
            time.sleep(spacing_s)  # pacing the sender, not waiting for a result
    got = sink.collect(0.5)
    order = [int(p) for p, _ in got]
    return {int(p): t - sent[int(p)] for p, t in got}, order


def test_delay_with_jitter_stays_in_bounds_spreads_and_reorders(client: socket.socket) -> None:
    sink = Sink()
    try:
        with UdpLink(0, ("127.0.0.1", sink.port)) as link:
            link.set_delay(100, jitter_ms=50, rng_seed=5)
            lat, order = _one_way(link, sink, client, 200, spacing_s=0.001)
            assert len(lat) == 200, "jitter alone must not lose anything"
            assert min(lat.values()) >= 0.049, min(lat.values())
            assert max(lat.values()) <= 0.150 + 0.1, max(lat.values())  # + scheduling slack on a loaded host
            assert max(lat.values()) - min(lat.values()) >= 0.06, "the hold does not vary"
            assert order != sorted(order), "100 ± 50 ms at 1 ms spacing must reorder some datagrams"
            with pytest.raises(ValueError):
                link.set_delay(10, jitter_ms=20)
    finally:
        sink.close()


def test_loss_draws_repeat_for_the_same_seed(client: socket.socket) -> None:
    """With a target that never answers, only the up direction draws: the same seed drops the same datagrams."""
    runs: list[set[int]] = []
    for _ in range(2):
        sink = Sink()
        try:
            with UdpLink(0, ("127.0.0.1", sink.port)) as link:
                link.impair(loss=0.05, rng_seed=11)
                # Spaced so that the kernel drops nothing on a loaded host (only the relay's draws may drop).
                lat, _ = _one_way(link, sink, client, 400, spacing_s=0.003)
                runs.append(set(lat))
                c = _settled(link, lambda c: c.relayed_up + c.dropped_up == 400)
                assert c.dropped_up == 400 - len(lat)
        finally:
            sink.close()
    assert runs[0] == runs[1]
    assert 5 <= 400 - len(runs[0]) <= 40, f"5 % loss dropped {400 - len(runs[0])} of 400"


def test_impair_sets_delay_jitter_and_loss_and_clears_them(echo: Echo, client: socket.socket) -> None:
    with UdpLink(0, ("127.0.0.1", echo.port)) as link:
        link.impair(delay_ms=60, jitter_ms=20, loss=0.0, rng_seed=1)
        t0 = time.monotonic()
        assert _roundtrip(client, link, b"held") == b"echo:held"
        assert time.monotonic() - t0 >= 0.079  # two holds of at least 40 ms
        link.impair()
        t0 = time.monotonic()
        assert _roundtrip(client, link, b"clean") == b"echo:clean"
        assert time.monotonic() - t0 < 0.04
