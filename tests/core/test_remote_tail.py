"""LogdirTail, the transport-free core of the remote readers: whatever the growth pattern (how a
file's bytes arrive between refreshes, records cut anywhere, damaged records, objects replaced
whole with a longer copy), the runs end up exactly as the local reader reads the final files."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.events import load_once
from distcore.events.snapshots import RunSnapshot
from distcore.events.store import RunStore
from distcore.location import RunLocation
from distcore.remote.tail import OVERLAP, FileMeta, LogdirTail
from tests.kit.writers import record, scalar_event, session_start

TAGS = st.sampled_from(["loss", "acc", "l\xe9", "a/b"])
EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("scalar"), TAGS, st.integers(-5, 2**40), st.floats(width=32)),
        st.tuples(st.just("restart"), st.just(""), st.integers(0, 50), st.just(0.0)),
        st.tuples(st.just("damaged"), TAGS, st.integers(0, 50), st.just(1.0)),
    ),
    min_size=1,
    max_size=40,
)


def encode(events: list[tuple[str, str, int, float]]) -> bytes:
    out = b""
    for kind, tag, step, value in events:
        if kind == "restart":
            out += record(session_start(step))
            continue
        rec = bytearray(record(scalar_event(tag, step, value)))
        if kind == "damaged":
            rec[-1] ^= 0x5A
        out += bytes(rec)
    return out


def view(run: RunSnapshot | None) -> object:
    assert run is not None
    series = {t: (s.steps, [repr(v) for v in s.values], s.count) for t, s in run.scalars.items()}
    return series, run.problems


def feed(tail: LogdirTail, files: dict[str, bytes], identity: object = None) -> None:
    """One refresh through an in-memory transport."""
    listing = {rel: FileMeta(identity, len(data), 1.0) for rel, data in files.items()}
    for fetch in tail.plan(listing, limit=97):  # a small limit: many partial reads
        tail.deliver(
            fetch.rel, fetch.start, files[fetch.rel][fetch.start : fetch.start + fetch.length]
        )
    tail.finish()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=EVENTS, cuts=st.lists(st.floats(0, 1), max_size=8), overlap=st.booleans())
def test_any_growth_pattern_reads_like_the_local_reader(
    tmp_path: Path, events: list[tuple[str, str, int, float]], cuts: list[float], overlap: bool
) -> None:
    data = encode(events)
    store = RunStore()
    place = RunLocation.on_host("h", "/root")
    tail = LogdirTail(store, "h:", "h:root", place, overlap=OVERLAP if overlap else 0)
    for cut in sorted(cuts):
        feed(tail, {"run/events.out.tfevents.1": data[: int(cut * len(data))]})
    for _ in range(len(data) // 97 + 2):  # until caught up (97 bytes per file per refresh)
        feed(tail, {"run/events.out.tfevents.1": data})
    local = tmp_path / "local" / "run"
    local.mkdir(parents=True, exist_ok=True)
    (local / "events.out.tfevents.1").write_bytes(data)
    (expected,) = load_once([tmp_path / "local"])
    assert view(store.get("h:run")) == view(expected)


def test_a_replaced_object_is_read_again_from_its_start() -> None:
    store = RunStore()
    tail = LogdirTail(store, "s3://b/", "s3://b", RunLocation.at_url("s3://b"), overlap=OVERLAP)
    first = record(scalar_event("loss", 1, 1.0)) + record(scalar_event("loss", 2, 1.0))
    feed(tail, {"r/events.out.tfevents.1": first})
    # Same name, longer, different bytes before the old offset: another object.
    second = record(scalar_event("loss", 1, 7.0)) * 3 + record(scalar_event("loss", 5, 7.0))
    for _ in range(4):  # one refresh notices, the next ones read it (97 bytes at a time)
        feed(tail, {"r/events.out.tfevents.1": second})
    run = store.get("s3://b/r")
    assert run is not None and run.scalars["loss"].values[-1] == 7.0
    assert run.scalars["loss"].last_step == 5


def test_a_run_whose_files_vanish_is_gone_and_keeps_its_points() -> None:
    store = RunStore()
    tail = LogdirTail(store, "h:", "h:root", RunLocation.on_host("h", "/root"))
    feed(tail, {"a/events.out.tfevents.1": record(scalar_event("loss", 1, 1.0))}, identity="1:2")
    feed(tail, {})
    run = store.get("h:a")
    assert run is not None and run.status == "gone" and run.scalars["loss"].count == 1


def test_files_of_a_run_in_name_order_none_before_an_earlier_one_is_read() -> None:
    """TensorBoard's order: a later file of a run waits while an earlier one has bytes to come
    (otherwise the restart rule would see the resumed session before the first one)."""
    first = b"".join(record(scalar_event("loss", s, 1.0)) for s in range(10))
    second = b"".join(record(scalar_event("loss", s, 2.0)) for s in range(5, 8))
    files = {"run/events.out.tfevents.2.h": second, "run/events.out.tfevents.1.h": first}
    store = RunStore()
    tail = LogdirTail(store, "h:", "h:root", RunLocation.on_host("h", "/root"))
    listing = {rel: FileMeta(None, len(data), 1.0) for rel, data in files.items()}
    fetches = tail.plan(listing, limit=len(first) // 2)
    assert [f.rel for f in fetches] == ["run/events.out.tfevents.1.h"]  # not finished by it
    while fetches:
        for f in fetches:
            tail.deliver(f.rel, f.start, files[f.rel][f.start : f.start + f.length])
        fetches = tail.plan(listing, limit=len(first) // 2)
    tail.finish()
    run = store.get("h:run")
    assert run is not None
    assert list(run.scalars["loss"].steps) == list(range(8))
    assert run.scalars["loss"].values == (1.0,) * 5 + (2.0,) * 3
