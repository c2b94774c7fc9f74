"""distcore.metrics: the job index's snapshot as Prometheus text, names, labels and bounds.

Snapshots come from the real JobIndex over fixed runs; the text is rendered by prometheus_client
and read back with its parser (the real Prometheus reads it in tests/tui/test_serve_prometheus.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from distcore.events.snapshots import RunSnapshot
from distcore.jobs.index import JobIndex
from distcore.jobs.snapshots import Host, JobsSnapshot
from distcore.metrics import LABEL_LIMIT, SnapshotCollector, label_text
from tests.tui.fixed import (
    NOW,
    FixedRuns,
    gpu,
    keras_job,
    run,
    sampler,
    series,
    system_run,
    telemetry,
)

Sample = tuple[str, dict[str, str], float]


def snapshot(runs: Sequence[RunSnapshot], gpus: int = 0) -> JobsSnapshot:
    tel = sampler([telemetry([gpu(i, 90.0, 40_000.0) for i in range(gpus)])], history=2)
    snap = JobIndex(FixedRuns(runs), telemetry=tel, clock=lambda: NOW).refresh()
    assert snap is not None
    return snap


def exposition(snap: JobsSnapshot | None, max_series: int = 10_000) -> str:
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: snap, max_series))
    return generate_latest(registry).decode("utf-8")


def samples(text: str) -> list[Sample]:
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def named(found: list[Sample], name: str) -> list[Sample]:
    return [s for s in found if s[0] == name]


def test_scalars_status_alerts_and_gpus_are_exported_with_their_labels() -> None:
    snap = snapshot([*keras_job("quick", wait=0.02), *keras_job("slow", wait=0.34)], gpus=2)
    found = samples(exposition(snap))
    loss = {
        (s[1]["job"], s[1]["run"]): s[2]
        for s in named(found, "distmon_scalar")
        if s[1]["tag"] == "epoch_loss"
    }
    last = {r.name: r.scalars["epoch_loss"].last_value for j in snap.jobs for r in j.parts.values()}
    assert loss == {("quick", "quick/train"): last["quick/train"],
                    ("quick", "quick/validation"): last["quick/validation"],
                    ("slow", "slow/train"): last["slow/train"],
                    ("slow", "slow/validation"): last["slow/validation"]}  # fmt: skip
    steps = {s[1]["run"]: s[2] for s in named(found, "distmon_scalar_step")
             if s[1]["tag"] == "epoch_loss"}  # fmt: skip
    assert steps["quick/train"] == 590
    states = {(s[1]["job"], s[1]["distmon_job_status"]): s[2]
              for s in named(found, "distmon_job_status")}  # fmt: skip
    assert states[("quick", "live")] == 1 and states[("quick", "running")] == 0
    assert sum(v for (job, _), v in states.items() if job == "slow") == 1
    alerts = {(s[1]["job"], s[1]["kind"], s[1]["severity"]) for s in named(found, "distmon_alert")}
    assert ("slow", "input_stall", "critical") in alerts
    assert not any(job == "quick" for job, _, _ in alerts)
    util = {(s[1]["source"], s[1]["gpu"], s[1]["uuid"]): s[2]
            for s in named(found, "distmon_gpu_utilization_ratio")}  # fmt: skip
    assert util == {("local", "0", "GPU-0"): 0.9, ("local", "1", "GPU-1"): 0.9}
    used = named(found, "distmon_gpu_memory_used_bytes")
    assert {s[2] for s in used} == {40_000.0 * 1024 * 1024}
    assert named(found, "distmon_series_dropped")[0][2] == 0


def test_each_workers_system_run_is_a_host_with_its_job_and_gpus() -> None:
    runs = [*keras_job("mw"), system_run("mw", 0, host="node-a"), system_run("mw", 1, host="b")]
    found = samples(exposition(snapshot(runs)))
    logdir = [s for s in named(found, "distmon_gpu_utilization_ratio")
              if s[1]["source"] == "logdir"]  # fmt: skip
    util = {(s[1]["host"], s[1]["job"], s[1]["worker"], s[1]["gpu"]): s[2] for s in logdir}
    assert util == {("node-a", "mw", "0", "0"): 0.40, ("node-a", "mw", "0", "1"): 0.50,
                    ("b", "mw", "1", "0"): 0.41, ("b", "mw", "1", "1"): 0.51}  # fmt: skip
    # system/ series are GPUs and hosts, not scalars.
    assert not any("system" in s[1]["run"] for s in named(found, "distmon_scalar"))
    sampled = named(found, "distmon_host_last_sample_timestamp_seconds")
    assert {s[1]["host"] for s in sampled} >= {"node-a", "b"}


class RefusedHost:
    """A host source whose one host went over a cap (remote/bounds.py)."""

    def start(self) -> None: ...
    def close(self) -> None: ...

    def hosts(self) -> tuple[Host, ...]:
        return (Host("ssh:gpu9", "gpu9", "ssh", gpu_reason="refused: more than 64 GPUs on one "
                     "host", refused=True),)  # fmt: skip


def test_a_refused_host_is_exported_as_refused() -> None:
    snap = JobIndex(FixedRuns(keras_job("j")), hosts=[RefusedHost()], clock=lambda: NOW).refresh()
    assert snap is not None
    refused = {s[1]["host"]: s[2] for s in named(samples(exposition(snap)), "distmon_host_refused")}
    assert refused["gpu9"] == 1.0 and set(refused.values()) == {0.0, 1.0}  # this machine: 0


def test_unknown_values_are_absent_never_zero() -> None:
    found = samples(exposition(snapshot(keras_job("j"), gpus=1)))
    assert named(found, "distmon_gpu_power_watts")
    assert not named(found, "distmon_gpu_fan_speed_ratio")  # the fixture's fan is unknown
    assert not named(found, "distmon_gpu_pcie_rx_bytes_per_second")


def test_before_the_first_snapshot_only_the_bound_is_exported() -> None:
    found = samples(exposition(None, max_series=77))
    assert {s[0] for s in found} == {"distmon_series_limit", "distmon_series_dropped"}
    assert named(found, "distmon_series_limit")[0][2] == 77


@pytest.mark.parametrize(("bound", "posts", "dropped"), [(10, 4, 0), (3, 1, 3), (1, 0, 5)])
def test_a_webhooks_post_counters_are_exported_before_the_first_snapshot(
    bound: int, posts: int, dropped: int
) -> None:
    """Counters exist at zero from the first scrape (a rate() over them needs the zero), within
    the same bound as every later scrape."""
    counts = {"delivered": 0, "failed": 0, "refused": 0, "queue_full": 0}
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: None, bound, notify_counts=lambda: counts))
    found = samples(generate_latest(registry).decode("utf-8"))
    shown = named(found, "distmon_notify_posts_total")
    assert len(shown) == posts and all(s[2] == 0 for s in shown)
    assert named(found, "distmon_series_dropped")[0][2] == dropped


HOSTILE = ['say "hi"', "back\\slash", "new\nline", "bytes\udcff\udcfe", "tab\tand\x1b[31m", "é∑"]


def test_hostile_names_round_trip_escaped_through_the_exposition() -> None:
    runs = [run(f"{name}/train", series(name, [1.0, 2.0])) for name in HOSTILE]
    text = exposition(snapshot(runs))
    found = named(samples(text), "distmon_scalar")
    assert {s[1]["tag"] for s in found} == {label_text(n) for n in HOSTILE}
    assert {s[1]["job"] for s in found} == {label_text(n) for n in HOSTILE}
    assert label_text("bytes\udcff\udcfe") == "bytes\\xff\\xfe"
    # One sample per line: no raw newline survives inside a label value.
    assert all(line.startswith(("#", "distmon_")) for line in text.splitlines())


def test_names_equal_once_elided_keep_one_series_and_count_the_other() -> None:
    a, b = "x" * 300 + "a" + "x" * 300, "x" * 300 + "b" + "x" * 300  # they differ mid-ellipsis
    found = samples(exposition(snapshot([run("a/train", series(a, [1.0]), series(b, [2.0]))])))
    assert len(named(found, "distmon_scalar")) == 1
    assert named(found, "distmon_series_dropped")[0][2] == 3  # value, step and time


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("nul\x00", "nul\\x00"),
        ("cr\r", "cr\\r"),
        ("esc\x1b[31m", "esc\\x1b[31m"),
        ("bel\x07", "bel\\x07"),
        ("del\x7f", "del\\x7f"),
        ("c1\x9b", "c1\\u009b"),  # CSI as one character: \x9b would be the byte 0x9B
        ("byte\udc9b", "byte\\x9b"),
        ("lone\ud800", "lone\\ud800"),
        ("back\\slash", "back\\\\slash"),
        ("plain-é∑", "plain-é∑"),
    ],
)
def test_control_characters_become_visible_escapes(name: str, shown: str) -> None:
    assert label_text(name) == shown
    job = _dir_name(name)
    text = exposition(snapshot([run(f"{job}/train", series(name, [1.0]))]))
    assert _control_bytes(text) == set()
    found = named(samples(text), "distmon_scalar")
    assert {(s[1]["job"], s[1]["tag"]) for s in found} == {(label_text(job), shown)}


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("a\x1b", "a\\x1b"),  # the byte ESC and the text of its escape
        ("a\udcff", "a\\xff"),  # an undecodable byte and the text of its escape
        ("a\x85", "a\udc85"),  # the C1 character NEL and the undecodable byte 0x85
        ("a\n", "a\\n"),
        ("a\\", "a\\\\"),
    ],
)
def test_names_that_differ_keep_distinct_label_values(one: str, other: str) -> None:
    assert label_text(one) != label_text(other)
    runs = [run("j/train", series(one, [1.0]), series(other, [2.0]))]
    found = samples(exposition(snapshot(runs)))
    assert len(named(found, "distmon_scalar")) == 2
    assert named(found, "distmon_series_dropped")[0][2] == 0


def _dir_name(name: str) -> str:
    """`name` as a directory could be named: no NUL, and no lone surrogate but those of
    undecodable bytes (surrogateescape)."""
    return "".join(
        "_" if c == "\x00" or ("\ud800" <= c <= "\udfff" and not "\udc80" <= c <= "\udcff")
        else c
        for c in name
    )


def _control_bytes(text: str) -> set[str]:
    """The control characters of an exposition other than the newline ending each line."""
    return {c for c in text if c != "\n" and (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F)}


_controls = st.characters(min_codepoint=0, max_codepoint=0x9F, exclude_categories=["L", "N"])
names_st = st.text(
    st.characters(codec="utf-8") | _controls | st.sampled_from(["\udcff", "\ud800", "\\"]),
    min_size=1,
    max_size=40,  # escaped, at most 6 characters each: short of LABEL_LIMIT, never elided
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(names_st, min_size=1, max_size=5, unique=True))
def test_any_names_give_exposition_without_control_bytes(names: list[str]) -> None:
    runs = [run("j/train", *(series(name, [float(i)]) for i, name in enumerate(names)))]
    text = exposition(snapshot(runs))
    assert _control_bytes(text) == set()
    assert all("\r" not in line for line in text.split("\n"))
    found = named(samples(text), "distmon_scalar")
    # Distinct names, distinct label values: none of them dropped as a duplicate.
    assert sorted(s[1]["tag"] for s in found) == sorted(label_text(n) for n in names)
    assert len({label_text(n) for n in names}) == len(names)


def test_long_label_values_are_elided() -> None:
    found = samples(exposition(snapshot([run("j/train", series("t" * 5000, [1.0]))])))
    (tag,) = {s[1]["tag"] for s in named(found, "distmon_scalar")}
    assert len(tag) == LABEL_LIMIT and "…" in tag  # distcore.textsafe.elide keeps both ends


def test_the_series_bound_drops_scalars_first_and_says_how_many() -> None:
    runs = [run("big/train", *(series(f"tag{i}", [float(i)]) for i in range(500)))]
    snap = snapshot(runs, gpus=1)
    everything = samples(exposition(snap))
    found = samples(exposition(snap, max_series=200))
    counted = [s for s in found if s[0] not in ("distmon_series_dropped",)]
    assert len(counted) <= 200
    dropped = named(found, "distmon_series_dropped")[0][2]
    assert dropped == len(everything) - 1 - len(counted)
    # What matters most survives: the job's status, its alerts, the GPUs.
    assert named(found, "distmon_job_status") and named(found, "distmon_gpu_utilization_ratio")
    assert len(named(found, "distmon_scalar")) < 500


_hostile = st.sampled_from(["\udcff", "\udc80", '"', "\\", "\n", "\x00"])
tags_st = st.text(st.characters(codec="utf-8") | _hostile, min_size=1, max_size=30)
# A directory name holds neither "/" nor NUL.
jobs_st = tags_st.map(lambda s: s.replace("/", "_").replace("\x00", "_"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(jobs_st, tags_st), min_size=1, max_size=6), st.integers(5, 60))
def test_any_names_give_parseable_text_within_the_bound(
    pairs: list[tuple[str, str]], bound: int
) -> None:
    runs = {f"{job}/train": run(f"{job}/train", series(tag, [0.5])) for job, tag in pairs}
    text = exposition(snapshot(list(runs.values())), max_series=bound)
    found = samples(text)
    keys = [(s[0], tuple(sorted(s[1].items()))) for s in found]
    assert len(keys) == len(set(keys))  # Prometheus refuses a scrape with duplicate series
    assert len(found) <= bound + 1
    tags = {s[1]["tag"] for s in named(found, "distmon_scalar")}
    assert tags <= {label_text(tag) for _, tag in pairs}
