"""distcore.notify: which alerts are new, the payload, the redacted URL, and delivery to a real
HTTP receiver on 127.0.0.1 (http.server) that answers, fails with 500s, or hangs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore.alerts import Alert, AlertKey
from distcore.errors import DistmonError
from distcore.jobs.snapshots import JobsSnapshot
from distcore.notify import Notifier, check_url, new_alerts, payload, redact_url

SECRET = "T000/B000/XXXXsecretXXXX"


class Receiver:
    """A webhook receiver: records each JSON body; `fail` answers that many posts with 500;
    `hang` holds each request until released."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.tries = 0
        self.auth: str | None = None
        self.fail = 0
        self.hang = threading.Event()  # set: requests wait on `release`
        self.release = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.auth = self.headers.get("Authorization")
                if receiver.hang.is_set():
                    receiver.release.wait(30)
                with receiver._lock:
                    receiver.tries += 1
                    failing = receiver.fail > 0
                    receiver.fail -= 1 if failing else 0
                    if not failing:
                        receiver.bodies.append(json.loads(body))
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="receiver")
        self.thread.start()
        self.url = f"http://user:pw@127.0.0.1:{self.server.server_address[1]}/hooks/{SECRET}?t=1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def wait_for(what: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def alert(kind: str = "job_diverged", severity: str = "critical", run: str | None = "j") -> Alert:
    return Alert(kind, severity, run, f"{kind} happened", 1.0)  # type: ignore[arg-type]


def snap(*alerts: Alert) -> JobsSnapshot:
    return JobsSnapshot(generated_at=2.0, logdirs=(), jobs=(), hosts=(), alerts=tuple(alerts))


# --- what is new -------------------------------------------------------------------------------

D, S, W = alert(), alert("input_stall", "critical", "j/train"), alert("loss_rising", "warning")


def gpu_alert(host: str, gpu: int | None = None, kind: str = "gpu_imbalance") -> Alert:
    """A run-less alert, as distcore.jobs.judge.host_alerts raises it for one host (one GPU)."""
    return Alert(kind, "warning", None, f"{kind} on {host}", 1.0, host=host, gpu=gpu)


A, B = gpu_alert("node-a"), gpu_alert("node-b")
A0, A1 = gpu_alert("node-a", 0, "gpu_memory_full"), gpu_alert("node-a", 1, "gpu_memory_full")


@pytest.mark.parametrize(
    ("rounds", "level", "posted"),
    [
        ([[D]], "critical", [["job_diverged"]]),
        ([[D], [D], [D, S]], "critical", [["job_diverged"], [], ["input_stall"]]),
        ([[D], [], [D]], "critical", [["job_diverged"], [], ["job_diverged"]]),  # cleared, back
        ([[W, D]], "critical", [["job_diverged"]]),
        ([[W, D]], "warning", [["loss_rising", "job_diverged"]]),
        ([[W], [W]], "info", [["loss_rising"], []]),
        ([[alert("gpu_imbalance", "warning", None)]], "critical", [[]]),
        # Run-less alerts are told apart by host and GPU: two at once are two posts, and one
        # that clears while another appears never hides the newcomer.
        ([[A, B]], "warning", [["node-a", "node-b"]]),
        ([[A], [B]], "warning", [["node-a"], ["node-b"]]),
        ([[A], [A, B], [B], [A, B]], "warning", [["node-a"], ["node-b"], [], ["node-a"]]),
        ([[A0, A1], [A1], [A0, A1]], "warning", [["node-a/0", "node-a/1"], [], ["node-a/0"]]),
    ],
)
def test_each_alert_is_new_once_until_it_clears(
    rounds: list[list[Alert]], level: str, posted: list[list[str]]
) -> None:
    active: frozenset[AlertKey] = frozenset()
    for alerts, want in zip(rounds, posted, strict=True):
        found, active = new_alerts(active, alerts, level)
        assert [what(a) for a in found] == want


def what(alert: Alert) -> str:
    if alert.host is None:
        return alert.kind
    return alert.host if alert.gpu is None else f"{alert.host}/{alert.gpu}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://hooks.slack.com/services/{SECRET}", "https://hooks.slack.com/…"),
        ("https://user:hunter2@example.org:8443/", "https://example.org:8443"),
        ("http://example.org/?token=hunter2", "http://example.org/…"),
        ("http://[::1]:9000/x", "http://[::1]:9000/…"),
        ("http://[::1", "<invalid URL>"),
    ],
)
def test_urls_are_shown_without_their_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    "url", ["ftp://example.org/x", "example.org/hook", "http:///nohost", "http://h:0/", "http://[::1"]
)
def test_bad_urls_are_refused_in_one_redacted_line(url: str) -> None:
    with pytest.raises(DistmonError) as err:
        check_url(url.replace("example.org", "user:hunter2@example.org"))
    assert "hunter2" not in str(err.value) and "\n" not in str(err.value)


@given(st.text(), st.text() | st.none(), st.text() | st.none())
def test_the_payload_is_valid_json_with_slack_text_whatever_the_names(
    message: str, run: str | None, host: str | None
) -> None:
    body = payload(Alert("job_failed", "critical", run, message, None, host=host), run, "h")
    text = json.dumps(body, allow_nan=False)  # lone surrogates would raise when encoded
    text.encode("utf-8")
    assert "<" not in body["text"] and ">" not in body["text"]
    assert body["severity"] == "critical" and body["kind"] == "job_failed"


# --- delivery ------------------------------------------------------------------------------------


def test_each_new_alert_is_posted_once_with_its_fields(receiver: Receiver) -> None:
    notifier = Notifier(receiver.url, "critical", hostname="node-1")
    notifier.start()
    try:
        for alerts in ([D], [D], [D, W], [], [D]):
            notifier.observe(snap(*alerts))
        wait_for(lambda: len(receiver.bodies) == 2 and notifier.pending() == 0)
    finally:
        notifier.close()
    first = receiver.bodies[0]
    assert first["kind"] == "job_diverged" and first["severity"] == "critical"
    assert first["run"] == "j" and first["distmon_host"] == "node-1" and first["since"] == 1.0
    assert first["host"] is None and first["gpu"] is None
    assert first["text"] == "[critical] j: job_diverged happened (distmon on node-1)"
    assert [b["kind"] for b in receiver.bodies] == ["job_diverged", "job_diverged"]
    assert receiver.tries == 2
    assert receiver.auth == "Basic dXNlcjpwdw=="  # user:pw from the URL


def test_run_less_alerts_of_two_hosts_are_each_posted_and_return_alone(
    receiver: Receiver,
) -> None:
    """Through a real receiver: node-a's and node-b's imbalance are two posts naming their host;
    node-a clearing while node-b stays, then returning, posts node-a once more (and node-b never
    again)."""
    notifier = Notifier(receiver.url, "warning", hostname="login1")
    notifier.start()
    try:
        for alerts in ([A, B], [B], [A, B], [A, B, A1]):
            notifier.observe(snap(*alerts))
        wait_for(lambda: len(receiver.bodies) == 4 and notifier.pending() == 0)
    finally:
        notifier.close()
    got = [(b["kind"], b["host"], b["gpu"]) for b in receiver.bodies]
    assert got == [("gpu_imbalance", "node-a", None), ("gpu_imbalance", "node-b", None),
                   ("gpu_imbalance", "node-a", None), ("gpu_memory_full", "node-a", 1)]
    assert receiver.bodies[1]["text"] == (
        "[warning] node-b: gpu_imbalance on node-b (distmon on login1)")
    assert all(b["run"] is None and b["distmon_host"] == "login1" for b in receiver.bodies)


def test_a_failing_receiver_is_retried_with_backoff_until_it_recovers(receiver: Receiver) -> None:
    receiver.fail = 3
    lines: list[str] = []
    notifier = Notifier(receiver.url, first_backoff=0.05, report=lines.append)
    notifier.start()
    try:
        notifier.observe(snap(D))
        wait_for(lambda: len(receiver.bodies) == 1)
    finally:
        notifier.close()
    assert receiver.tries == 4 and notifier.sent == 1
    assert [line.split(";")[0] for line in lines[:3]] == [
        f"notify: post to http://127.0.0.1:{receiver.server.server_address[1]}/… failed (HTTP 500)"
    ] * 3
    assert "retry in 0.05 s" in lines[0] and "retry in 0.1 s" in lines[1]
    assert "accepts posts again" in lines[-1]
    assert not any(SECRET in line or "pw" in line for line in lines)


def test_a_hung_receiver_never_blocks_the_caller(receiver: Receiver) -> None:
    receiver.hang.set()
    lines: list[str] = []
    notifier = Notifier(receiver.url, timeout=0.3, first_backoff=0.05, report=lines.append)
    notifier.start()
    try:
        notifier.observe(snap(D))  # returns while the receiver holds the request
        notifier.observe(snap(D, S))
        assert notifier.pending() == 2 and receiver.bodies == []
        wait_for(lambda: any("no answer in 0.3 s" in line for line in lines))
        receiver.hang.clear()
        receiver.release.set()
        wait_for(lambda: notifier.pending() == 0)
    finally:
        notifier.close()
    kinds = [b["kind"] for b in receiver.bodies]
    assert kinds[-1] == "input_stall" and set(kinds) == {"job_diverged", "input_stall"}


def test_closing_while_a_receiver_is_down_ends_at_once() -> None:
    notifier = Notifier("http://127.0.0.1:9/hook", first_backoff=60.0, report=lambda _: None)
    notifier.start()
    notifier.observe(snap(D))
    wait_for(lambda: notifier.sent == 0 and notifier.pending() == 1)
    notifier.close()  # waits for the thread: the backoff sleep is interrupted
