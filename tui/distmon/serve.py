"""`distmon --serve SOURCE...`: the dashboard's producers and job index, headless, until signalled.

No terminal, no Textual: for cron, systemd, a Slurm job or a login node. The same
`make_producers` and `JobIndex` as the dashboard, run by one `ProducerSet`; the index's
snapshots go to Prometheus (`--metrics`: distcore.metrics_http's bounded HTTP server, whose
collector renders the latest snapshot at each scrape, and the webhook's posts by outcome) and to
a webhook (`--notify-file`, `DISTMON_NOTIFY_URL` or `--notify`: new alerts at or above
`--notify-level`, held by `--notify-hold`, on the notifier's own thread). Its log (stderr)
says where it serves and posts, and which decoder reads where the C kernel is not used
(distmon.decoder_note). SIGTERM or SIGINT closes everything and exits 0; what a user gets wrong
(a port in use, a bad URL or URL file) is one line and exit 2.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from distcore.errors import DistmonError
from distcore.jobs.snapshots import JobsSnapshot
from distcore.notify import Notifier
from distcore.textsafe import terminal_text
from distmon.decoder_note import decoder_line
from distmon.options import Options
from distmon.producers import ProducerSet, make_producers

if TYPE_CHECKING:
    from distcore.metrics_http import MetricsServer


def parse_listen(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` (HOST may be `[::1]`) -> (host, port); 127.0.0.1 unless a host is given."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if sep and not host:
        raise DistmonError(f"--metrics: no host before ':' in {text!r} (give PORT or HOST:PORT)")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise DistmonError(f"--metrics: expected [HOST:]PORT with a port 0-65535, got {text!r}")
    return host, port


def start_metrics(
    options: Options,
    latest: Callable[[], JobsSnapshot | None],
    notify_counts: Callable[[], Mapping[str, int]] | None = None,
) -> MetricsServer:
    """Serve /metrics on its own thread (with the webhook's posts by outcome, where there is
    one); a port in use or a bad host is a DistmonError."""
    from prometheus_client import CollectorRegistry

    from distcore.metrics import SnapshotCollector
    from distcore.metrics_http import start_metrics_server

    assert options.metrics is not None
    host, port = options.metrics
    registry = CollectorRegistry(auto_describe=True)
    registry.register(SnapshotCollector(latest, options.max_series, notify_counts))
    try:
        server = start_metrics_server(host, port, registry)
    except OSError as err:  # EADDRINUSE, EACCES below 1024, an unknown host name
        why = err.strerror or str(err)
        raise DistmonError(f"--metrics {host}:{port}: cannot listen ({why})") from None
    return server


class _Errors:
    """Each producer error printed once (headless: stderr is the only place it can go)."""

    def __init__(self, out: TextIO) -> None:
        self._out, self._shown = out, set[tuple[str, str]]()

    def __call__(self, snap: JobsSnapshot) -> None:
        current = {(e.producer, e.message) for e in snap.errors}
        for producer, message in sorted(current - self._shown):
            line = f"distmon: error ({terminal_text(producer, 80)}): {terminal_text(message, 300)}"
            print(line, file=self._out, flush=True)
        self._shown = current


@contextlib.contextmanager
def _stop_on_signals(done: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `done` (from the start: a signal during start-up stops us cleanly
    too); the previous handlers come back after."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _start_in_background(producers: ProducerSet, done: threading.Event) -> list[BaseException]:
    """Start the producers on a thread (the first scan may be long: a signal during it still
    ends us at once); a failure is kept and ends the wait, so that it is reported as a crash."""
    failures: list[BaseException] = []

    def start() -> None:
        try:
            producers.start()
        except BaseException as err:
            failures.append(err)
            done.set()

    threading.Thread(target=start, name="serve-start", daemon=True).start()
    return failures


def _make_notifier(options: Options, err: TextIO) -> Notifier | None:
    if options.notify is None:
        return None
    from distcore.notify import Notifier

    def report(line: str) -> None:
        print(f"distmon: {terminal_text(line, 300)}", file=err, flush=True)

    return Notifier(options.notify, options.notify_level, report=report, hold=options.notify_hold)


def _levels(least: str) -> str:
    """'critical', 'warning and critical', 'info, warning and critical'."""
    from distcore.notify import LEVELS

    shown = LEVELS[LEVELS.index(least) :]
    return " and ".join([", ".join(shown[:-1]), shown[-1]] if len(shown) > 1 else shown)


def run_serve(options: Options, err: TextIO | None = None) -> int:
    """Watch and export until SIGTERM/SIGINT, then close everything and return 0."""
    done = threading.Event()
    with _stop_on_signals(done):
        _serve(options, err or sys.stderr, done)
    print("distmon: stopped", file=err or sys.stderr, flush=True)
    return 0


def _serve(options: Options, err: TextIO, done: threading.Event) -> None:
    notifier = _make_notifier(options, err)  # a bad URL ends here, before anything starts
    producers = ProducerSet(make_producers(options), options)
    server = None
    try:
        if options.metrics is not None:
            counts = notifier.counts if notifier is not None else None
            server = start_metrics(options, producers.index.latest, counts)
            host, port = str(server.server_address[0]), int(server.server_address[1])
            shown = f"[{host}]" if ":" in host else host
            print(f"distmon: serving metrics at http://{shown}:{port}/metrics", file=err)
        if notifier is not None:
            notifier.start()
            producers.index.subscribe(notifier.observe)
            levels = _levels(options.notify_level)
            print(f"distmon: posting {levels} alerts to {notifier.shown_url} (URL from "
                  f"{terminal_text(options.notify_source, 200)})", file=err)  # fmt: skip
            if options.notify_source == "--notify":
                print("distmon: note: --notify's URL is in every user's `ps`; --notify-file PATH "
                      "or DISTMON_NOTIFY_URL keep it private", file=err)  # fmt: skip
        producers.index.subscribe(_Errors(err))
        decoder = decoder_line()  # the plain-Python decoder: more CPU, and how to have the kernel
        if decoder is not None:
            print(f"distmon: {decoder}", file=err)
        err.flush()
        failures = _start_in_background(producers, done)
        # Short waits, not one long one: CPython runs a signal's handler on the main thread
        # only when that thread wakes, and SIGTERM is often delivered to another thread (the
        # kernel picks any that does not block it), which leaves a long wait asleep.
        while not done.wait(0.25):
            pass
        if failures:
            raise failures[0]
    finally:
        if server is not None:
            server.close()
        producers.close()
        if notifier is not None:
            notifier.close()
