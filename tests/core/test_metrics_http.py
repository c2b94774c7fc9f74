"""distcore.metrics_http: the bounded /metrics server, started here on 127.0.0.1 and spoken to
over real sockets: its connection bound, its idle timeout, and hostile names through a real
scrape in both of Prometheus' formats."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.registry import Collector

from distcore.jobs.snapshots import JobsSnapshot
from distcore.metrics import SnapshotCollector, label_text
from distcore.metrics_http import MetricsServer, connection_limit, start_metrics_server
from tests.core.test_metrics import _control_bytes, named, names_st, samples, snapshot
from tests.kit.wait import wait_until
from tests.tui.fixed import run, series, system_run

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def serve(collector: Collector, **bounds: float) -> MetricsServer:
    registry = CollectorRegistry()
    registry.register(collector)
    return start_metrics_server("127.0.0.1", 0, registry, **bounds)  # type: ignore[arg-type]


class Latest(Collector):
    """The snapshot a test sets, rendered at each scrape as distmon's collector renders it."""

    def __init__(self) -> None:
        self.snap: JobsSnapshot | None = None

    def collect(self) -> Iterable[Metric]:
        return SnapshotCollector(lambda: self.snap).collect()


class Held(Collector):
    """A collector that holds each scrape until `go` is set: connections being answered."""

    def __init__(self) -> None:
        self.go, self.inside = threading.Event(), threading.Semaphore(0)

    def collect(self) -> Iterator[Metric]:
        self.inside.release()
        self.go.wait(30)
        yield GaugeMetricFamily("held", "A scrape that waited", value=1)


def scrape(server: MetricsServer, accept: str | None = None, timeout: float = 10.0) -> str:
    port = server.server_address[1]
    headers = {"Accept": accept} if accept else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return str(response.read().decode("utf-8"))


def connect(server: MetricsServer) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10)
    return conn


def hung_up(conn: socket.socket, within: float = 10.0) -> bool:
    """Whether the server ended `conn` (EOF or a reset) within `within` seconds."""
    conn.settimeout(within)
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def still_open(conn: socket.socket) -> bool:
    conn.setblocking(False)
    try:
        return conn.recv(1) != b""  # data would be a surprise: it never asked
    except BlockingIOError:
        return True
    except OSError:
        return False


@pytest.fixture
def latest() -> Iterator[tuple[Latest, MetricsServer]]:
    collector = Latest()
    server = serve(collector)
    yield collector, server
    server.close()


def test_an_idle_connection_loses_its_thread_after_the_idle_timeout() -> None:
    server = serve(Latest(), idle_timeout=0.3)
    try:
        idle = connect(server)
        wait_until(lambda: server.held() == 1)
        started = time.monotonic()
        assert hung_up(idle)
        assert 0.2 < time.monotonic() - started < 5
        wait_until(lambda: server.held() == 0)
        assert "distmon_series_dropped" in scrape(server)
    finally:
        server.close()


def test_at_the_bound_a_new_connection_displaces_the_one_waiting_longest() -> None:
    server = serve(Latest(), max_connections=3)
    try:
        idle = [connect(server) for _ in range(3)]
        wait_until(lambda: server.held() == 3)
        newest = connect(server)
        assert hung_up(idle[0])
        assert all(still_open(c) for c in [*idle[1:], newest])
        # A scrape, at the bound, takes the place of the next idle one and is answered.
        assert "distmon_series_dropped" in scrape(server)
        assert hung_up(idle[1], within=5)
    finally:
        server.close()


def test_a_connection_beyond_the_bound_with_all_being_answered_is_closed_at_once() -> None:
    held = Held()
    server = serve(held, max_connections=2)
    answers: list[str] = []
    scrapes = [threading.Thread(target=lambda: answers.append(scrape(server))) for _ in range(2)]
    try:
        for t in scrapes:
            t.start()
        for _ in scrapes:
            assert held.inside.acquire(timeout=10)
        extra = connect(server)
        started = time.monotonic()
        assert hung_up(extra, within=5) and time.monotonic() - started < 2
    finally:
        held.go.set()
        for t in scrapes:
            t.join(10)
        server.close()
    assert len(answers) == 2 and all("held 1.0" in a for a in answers)


def test_many_idle_connections_hold_at_most_the_bound_and_a_scrape_is_answered() -> None:
    server = serve(Latest(), max_connections=8)
    threads_before = threading.active_count()
    idle: list[socket.socket] = []
    try:
        for _ in range(300):
            idle.append(connect(server))
            assert server.held() <= 16  # the held ones and those being hung up
        started = time.monotonic()
        assert "distmon_series_dropped" in scrape(server, timeout=5)
        assert time.monotonic() - started < 2
        assert threading.active_count() - threads_before <= 16
    finally:
        for c in idle:
            c.close()
        server.close()


def test_close_hangs_up_idle_connections_at_once() -> None:
    server = serve(Latest())
    idle = connect(server)
    wait_until(lambda: server.held() == 1)
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 2
    assert hung_up(idle, within=2)


def test_the_bound_is_a_quarter_of_the_open_file_limit_where_that_is_less() -> None:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert connection_limit(64) == min(64, max(1, soft // 4))
    assert connection_limit(10**9) == max(1, soft // 4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.lists(names_st, min_size=1, max_size=4, unique=True), names_st, names_st)
def test_hostile_names_reach_a_real_scrape_escaped_in_both_formats(
    latest: tuple[Latest, MetricsServer], tags: list[str], job: str, host: str
) -> None:
    """Names from logdirs (a job directory, a tag, a worker's recorded host) and every control
    character: none reaches the text Prometheus reads, which parses in both formats."""
    collector, server = latest
    job = job.replace("/", "_").replace("\x00", "_") or "_"  # a directory name
    runs = [run(f"{job}/train", *(series(tag, [float(i)]) for i, tag in enumerate(tags))),
            system_run(job, 0, host=host)]  # fmt: skip
    collector.snap = snapshot(runs)
    text = scrape(server)
    assert _control_bytes(text) == set()
    found = named(samples(text), "distmon_scalar")
    assert sorted(s[1]["tag"] for s in found) == sorted(label_text(t) for t in tags)
    assert {s[1]["job"] for s in found} == {label_text(job)}
    hosts = {s[1].get("host") for s in named(samples(text), "distmon_host_gpus")}
    assert label_text(host) in hosts
    openmetrics = scrape(server, accept=OPENMETRICS)
    assert _control_bytes(openmetrics) == set() and openmetrics.endswith("# EOF\n")
    om_tags = {s.labels["tag"] for f in om_families(openmetrics) for s in f.samples
               if s.name == "distmon_scalar"}  # fmt: skip
    assert om_tags == {label_text(t) for t in tags}


def test_a_client_sending_a_byte_at_a_time_loses_its_connection_at_the_deadline() -> None:
    server = serve(Latest(), idle_timeout=0.5)
    try:
        slow = connect(server)
        started = time.monotonic()
        sent = 0
        with pytest.raises(OSError):  # a reset, or a broken pipe, once it is hung up
            for byte in b"GET /metrics HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 1000:
                slow.send(bytes([byte]))
                sent += 1
                time.sleep(0.05)  # the client's pace: each read on its own is prompt
        assert 0.4 < time.monotonic() - started < 5 and sent < 200
    finally:
        server.close()
