"""Untrusted run.json and names through the whole path: index -> JSON, text report, panels.

Anyone may write a shared logdir: whatever run.json holds (any JSON, any bytes) and whatever a
run is called, the index never fails, `--once --json` stays valid JSON, and every terminal line
comes out with control characters escaped.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.events import LogdirWatcher, RunStore
from distcore.jobs.agent import agent_record_from
from distcore.jobs.index import JobIndex
from distcore.jobs.jsonify import index_to_json
from distcore.telemetry import DisabledGpuSource, TelemetrySource
from distcore.telemetry.sampler import TelemetrySampler
from distcore.telemetry.samples import TelemetrySnapshot
from distmon.once import render_text
from distmon.widgets.panels import render_alerts, render_details
from tests.kit.writers import write_scalars

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(["status", "last_step", "error", "plan", "replicas", "host", "end_time"])
RUN_JSON = st.dictionaries(KEYS, JSON, max_size=7) | JSON


@given(RUN_JSON)
def test_any_json_is_a_record_or_none(doc: Any) -> None:
    record = agent_record_from(doc)
    assert record is None or record.status is None or isinstance(record.status, str)


def _no_control_characters(text: str) -> None:
    assert not any(ord(c) < 32 and c != "\n" for c in text), repr(text)
    assert "\x1b" not in text and "\x9b" not in text


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.one_of(RUN_JSON.map(lambda d: json.dumps(d).encode()), st.binary(max_size=200)))
def test_whatever_run_json_holds_the_report_and_panels_survive(
    tmp_path_factory: Any, content: bytes
) -> None:
    root = tmp_path_factory.mktemp("logs")
    job = root / "job\x1b[31m\nred"  # a name that tries to colour the terminal
    write_scalars(job / "train", [1.0 / (step + 1) for step in range(3)], time.time() - 3)
    (job / "run.json").write_bytes(content)
    store = RunStore()
    LogdirWatcher([root], store).scan_once()
    snap = JobIndex(store, logdirs=[str(root)]).refresh()
    assert snap is not None and [j.status for j in snap.jobs]
    doc = {"runs": [], "logdirs": [str(root)], "gpus": {}, "host": None, **index_to_json(snap)}
    json.loads(json.dumps(doc, allow_nan=False))  # valid JSON, whatever the input
    out = io.StringIO()
    render_text(snap, out)
    for line in out.getvalue().splitlines():
        _no_control_characters(line)
    _no_control_characters(render_details(snap.jobs[0], snap.alerts).plain)
    _no_control_characters(render_alerts(snap.alerts, snap.errors).plain)


class Broken(TelemetrySource):
    def __init__(self) -> None:
        super().__init__(DisabledGpuSource(), None)

    def sample(self) -> TelemetrySnapshot:
        raise RuntimeError("NVML went away")


def test_a_failing_sampler_is_an_error_in_the_snapshot(tmp_path: Path) -> None:
    sampler = TelemetrySampler(Broken(), interval=1.0, wait=lambda _: True)
    sampler.sample_once()
    snap = JobIndex(RunStore(), telemetry=sampler).refresh()
    assert snap is not None
    assert [(e.producer, e.message) for e in snap.errors] == [
        ("telemetry", "sampling failed: NVML went away")
    ]
    sampler.close()
