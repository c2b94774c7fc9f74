"""distcore.notify: which alerts are new, the payload, the redacted URL, and delivery to a real
HTTP receiver on 127.0.0.1 (http.server) that answers, fails with 500s, hangs, dribbles its
answer, redirects, or refuses with a 4xx."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distcore import notify
from distcore.alerts import Alert, AlertKey
from distcore.errors import DistmonError
from distcore.jobs.snapshots import JobsSnapshot
from distcore.notify import Notifier, check_url, payload, redact_url
from distcore.webhook.hold import Held, at_or_above, hold_alerts
from tests.kit.wait import wait_until
from tests.kit.webhook import SECRET, Receiver


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
def test_with_no_hold_each_alert_is_new_once_until_it_clears(
    rounds: list[list[Alert]], level: str, posted: list[list[str]]
) -> None:
    state: dict[AlertKey, Held] = {}
    for now, (alerts, want) in enumerate(zip(rounds, posted, strict=True)):
        found, state = hold_alerts(state, alerts, level, float(now), hold=0.0)
        assert [what(a) for a, _ in found] == want
        assert all(held.count == 1 for _, held in found)
        assert set(state) == {a.key for a in alerts if at_or_above(a, level)}


# Each round: (seconds, the alerts active then); what is posted then, as (kind, count).
F = alert("input_stall", "critical", "j/train")
Ws, Cs = alert("loss_spike", "warning", "s/train"), alert("loss_spike", "critical", "s/train")


@pytest.mark.parametrize(
    ("rounds", "posted"),
    [
        # The flapping alert: up and down 4 times in 10 s is one post.
        ([(0, [F]), (2, []), (4, [F]), (6, []), (8, [F]), (9, []), (10, [F]), (11, [])],
         [[("input_stall", 1)], [], [], [], [], [], [], []]),
        # Still flapping once the hold is over: said again at its next raise, with its count.
        ([(0, [F]), (30, []), (40, [F]), (50, []), (61, [F])],
         [[("input_stall", 1)], [], [], [], [("input_stall", 3)]]),
        # Back within the hold and up ever since: said once more when the hold ends.
        ([(0, [F]), (5, []), (10, [F]), (59, [F]), (60, [F]), (61, [F]), (200, [F])],
         [[("input_stall", 1)], [], [], [], [("input_stall", 2)], [], []]),
        # Clear for the whole hold: forgotten, the next return is new.
        ([(0, [F]), (1, []), (61, []), (62, [F])],
         [[("input_stall", 1)], [], [], [("input_stall", 1)]]),
        ([(0, [F]), (1, []), (62, [F])], [[("input_stall", 1)], [], [("input_stall", 1)]]),
        # Up all along: one post, never repeated.
        ([(0, [F]), (61, [F]), (500, [F])], [[("input_stall", 1)], [], []]),
        # Each key is held alone; a level below the least posted is never counted.
        ([(0, [F, D]), (1, [D]), (2, [F, D, W])],
         [[("input_stall", 1), ("job_diverged", 1)], [], []]),
        ([(0, [W]), (1, []), (2, [W])], [[], [], []]),
    ],
)
def test_a_return_within_the_hold_is_counted_not_posted(
    rounds: list[tuple[float, list[Alert]]], posted: list[list[tuple[str, int]]]
) -> None:
    state: dict[AlertKey, Held] = {}
    for (now, alerts), want in zip(rounds, posted, strict=True):
        found, state = hold_alerts(state, alerts, "critical", float(now), hold=60.0)
        assert [(a.kind, held.count) for a, held in found] == want
    assert len(state) <= 2  # what stayed clear for the hold is forgotten: bounded memory


def test_an_alert_that_turns_more_severe_is_posted_at_once() -> None:
    """At level warning: a loss spike's warning that turns critical is news (posted within the
    hold); swinging back and forth after that is not."""
    state: dict[AlertKey, Held] = {}
    posted = []
    for now, alerts in [(0, [Ws]), (1, [Cs]), (2, [Ws]), (3, [Cs]), (4, []), (5, [Ws])]:
        found, state = hold_alerts(state, alerts, "warning", float(now), hold=60.0)
        posted.append([(a.severity, held.count) for a, held in found])
    assert posted == [[("warning", 1)], [("critical", 1)], [], [], [], []]


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


@given(st.lists(st.tuples(st.floats(0.0, 50.0), st.booleans()), max_size=40))
def test_one_alert_is_posted_at_most_once_per_hold_and_counts_every_raise(
    steps: list[tuple[float, bool]],
) -> None:
    """Whatever the flapping: two posts are a hold apart unless it stayed clear a whole hold in
    between (then the count starts again), and each post counts the raises since."""
    state: dict[AlertKey, Held] = {}
    now, was_up, raises, clear_since = 0.0, False, 0, 0.0
    last_post: float | None = None
    for dt, up in steps:
        now += dt
        if up and not was_up:
            raises = 1 if now - clear_since >= 60.0 or last_post is None else raises + 1
        if not up and was_up:
            clear_since = now
        found, state = hold_alerts(state, [F] if up else [], "critical", now, hold=60.0)
        for _, held in found:
            fresh = held.count == 1
            assert last_post is None or fresh or now - last_post >= 60.0
            assert held.count == raises
            last_post = now
        was_up = up


def test_each_new_alert_is_posted_once_with_its_fields(receiver: Receiver) -> None:
    notifier = Notifier(receiver.url, "critical", hostname="node-1", hold=0.0)
    notifier.start()
    try:
        for alerts in ([D], [D], [D, W], [], [D]):
            notifier.observe(snap(*alerts))
        wait_until(lambda: len(receiver.bodies) == 2 and notifier.pending() == 0)
    finally:
        notifier.close()
    first = receiver.bodies[0]
    assert first["kind"] == "job_diverged" and first["severity"] == "critical"
    assert first["run"] == "j" and first["distmon_host"] == "node-1" and first["since"] == 1.0
    assert first["host"] is None and first["gpu"] is None and first["count"] == 1
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
    notifier = Notifier(receiver.url, "warning", hostname="login1", hold=0.0)
    notifier.start()
    try:
        for alerts in ([A, B], [B], [A, B], [A, B, A1]):
            notifier.observe(snap(*alerts))
        wait_until(lambda: len(receiver.bodies) == 4 and notifier.pending() == 0)
    finally:
        notifier.close()
    got = [(b["kind"], b["host"], b["gpu"]) for b in receiver.bodies]
    assert got == [("gpu_imbalance", "node-a", None), ("gpu_imbalance", "node-b", None),
                   ("gpu_imbalance", "node-a", None), ("gpu_memory_full", "node-a", 1)]
    assert receiver.bodies[1]["text"] == (
        "[warning] node-b: gpu_imbalance on node-b (distmon on login1)")
    assert all(b["run"] is None and b["distmon_host"] == "login1" for b in receiver.bodies)


def test_a_flapping_alert_reaches_a_receiver_once_then_with_its_count(receiver: Receiver) -> None:
    """Through a real receiver, on a clock the test moves: four raises in 10 s are one post;
    still up when the hold ends, it is posted once more, saying how often it came back."""
    now = [0.0]
    notifier = Notifier(receiver.url, "critical", hostname="h", clock=lambda: now[0])
    notifier.start()
    try:
        for t, alerts in [(0, [F]), (2, []), (4, [F]), (6, []), (8, [F]), (9, []), (10, [F])]:
            now[0] = t
            notifier.observe(snap(*alerts))
        wait_until(lambda: notifier.pending() == 0 and len(receiver.bodies) == 1)
        now[0] = 60.0
        notifier.observe(snap(F))
        wait_until(lambda: notifier.pending() == 0 and len(receiver.bodies) == 2)
    finally:
        notifier.close()
    assert [b["count"] for b in receiver.bodies] == [1, 4]
    assert receiver.bodies[1]["text"].endswith("(distmon on h; raised 4 times in 60 s)")
    assert notifier.counts()["delivered"] == receiver.tries == 2


def test_a_failing_receiver_is_retried_with_backoff_until_it_recovers(receiver: Receiver) -> None:
    receiver.fail = 3
    lines: list[str] = []
    notifier = Notifier(receiver.url, first_backoff=0.05, report=lines.append)
    notifier.start()
    try:
        notifier.observe(snap(D))
        wait_until(lambda: len(receiver.bodies) == 1)
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
        wait_until(lambda: any("no answer in 0.3 s" in line for line in lines))
        receiver.hang.clear()
        receiver.release.set()
        wait_until(lambda: notifier.pending() == 0)
    finally:
        notifier.close()
    kinds = [b["kind"] for b in receiver.bodies]
    assert kinds[-1] == "input_stall" and set(kinds) == {"job_diverged", "input_stall"}


def test_closing_while_a_receiver_is_down_ends_at_once() -> None:
    notifier = Notifier("http://127.0.0.1:9/hook", first_backoff=60.0, report=lambda _: None)
    notifier.start()
    notifier.observe(snap(D))
    wait_until(lambda: notifier.sent == 0 and notifier.pending() == 1)
    notifier.close()  # waits for the thread: the backoff sleep is interrupted


def test_a_redirect_is_never_followed_and_the_post_is_dropped(receiver: Receiver) -> None:
    """The credentials in the URL must never reach the host a receiver points to: the post is
    refused once, said in one line, and never retried."""
    elsewhere = Receiver()
    receiver.status, receiver.location = 302, elsewhere.url.replace("user:pw@", "")
    lines: list[str] = []
    notifier = Notifier(receiver.url, first_backoff=0.05, report=lines.append)
    notifier.start()
    try:
        notifier.observe(snap(D))
        wait_until(lambda: notifier.refused == 1 and notifier.pending() == 0)
    finally:
        notifier.close()
        elsewhere.close()
    assert elsewhere.tries == 0 and elsewhere.auth is None
    assert receiver.tries == 1 and notifier.sent == 0
    assert len(lines) == 1 and "redirected with HTTP 302, not followed" in lines[0]
    assert not any(SECRET in line or "pw" in line for line in lines)


def test_a_4xx_is_dropped_and_a_429_is_retried(receiver: Receiver) -> None:
    lines: list[str] = []
    notifier = Notifier(receiver.url, first_backoff=0.05, report=lines.append)
    notifier.start()
    try:
        receiver.status = 400
        notifier.observe(snap(D))
        wait_until(lambda: notifier.refused == 1 and notifier.pending() == 0)
        assert receiver.tries == 1 and lines == [
            f"notify: post to {notifier.shown_url} refused (HTTP 400); dropped"
        ]
        receiver.status, receiver.fail, receiver.fail_code = 200, 2, 429
        notifier.observe(snap(S))
        wait_until(lambda: notifier.sent == 1 and notifier.pending() == 0)
    finally:
        notifier.close()
    assert receiver.tries == 4 and notifier.refused == 1
    assert notifier.counts() == {"delivered": 1, "failed": 2, "refused": 1, "queue_full": 0}
    assert [b["kind"] for b in receiver.bodies] == ["input_stall"]
    assert sum("HTTP 429" in line for line in lines) == 2


def assert_one_deadline_per_dribbled_post(receiver: Receiver) -> None:
    """A byte every 0.2 s never trips a 1 s read timeout; the deadline is for the whole post."""
    receiver.dribble.set()
    lines: list[str] = []
    notifier = Notifier(receiver.url, timeout=1.0, first_backoff=60.0, report=lines.append)
    notifier.start()
    try:
        started = time.monotonic()
        notifier.observe(snap(D))
        wait_until(lambda: any("no answer in 1 s" in line for line in lines), timeout=20)
        took = time.monotonic() - started
    finally:
        notifier.close()
    assert receiver.tries == 1 and notifier.sent == 0 and notifier.pending() == 1
    assert took < 5.0  # the 1 s deadline, with room for a loaded machine


def test_a_dribbling_receiver_costs_one_deadline_per_post(receiver: Receiver) -> None:
    assert_one_deadline_per_dribbled_post(receiver)


def test_an_alert_storm_says_its_drops_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notify, "MAX_QUEUED", 2)
    now = [0.0]
    lines: list[str] = []
    notifier = Notifier("http://127.0.0.1:9/hook", report=lines.append,
                        drop_report_interval=60.0, clock=lambda: now[0])  # fmt: skip
    storm = [alert(f"kind{i}") for i in range(60)]
    for i in range(50):  # never started: each snapshot's new alerts only queue
        notifier.observe(snap(*storm[: i + 1]))
    assert lines == [] and notifier.dropped == 48
    now[0] = 61.0
    notifier.observe(snap(*storm[:51]))
    assert lines == ["notify: 49 alerts dropped: queue full (http://127.0.0.1:9/…)"]
    notifier.observe(snap(*storm[:53]))
    assert len(lines) == 1
    notifier.close()  # the rest of the storm is said as it ends
    assert lines[1:] == ["notify: 2 alerts dropped: queue full (http://127.0.0.1:9/…)"]
    assert notifier.dropped == 51
