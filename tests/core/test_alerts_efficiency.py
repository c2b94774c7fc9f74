"""The efficiency rules as tables: busy but not computing (GPM), and MFU below its own level."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from distcore import names
from distcore.alerts.efficiency import busy_not_computing, job_mfu, mfu_dropped
from distcore.jobs.judge import job_facts, judge_job
from distcore.jobs.snapshots import AgentRecord
from tests.tui import fixed

NOW = 10_000.0


@dataclass(frozen=True)
class Gpu:
    index: int
    utilization_gpu: float | None
    sm_activity: float | None
    tensor_activity: float | None = None


@pytest.mark.parametrize(
    ("gpus", "mixed", "shown"),
    [
        # A memory-copy loop: util 100 %, a tenth of the SMs busy.
        ([Gpu(0, 100.0, 12.0, 0.0)], False, "GPU 0 util 100% with SM activity 12%"),
        ([Gpu(0, 95.0, 80.0, 60.0)], False, None),  # busy and computing
        ([Gpu(0, 89.0, 10.0)], False, None),  # not busy by util%: other rules' business
        ([Gpu(0, 99.0, None)], False, None),  # no GPM (before Hopper): unknown, no alert
        ([Gpu(0, 99.0, 85.0, 2.0)], True, "GPU 0 util 99% with tensor-core activity 2%"),
        ([Gpu(0, 99.0, 85.0, 2.0)], False, None),  # float32 need not use tensor cores
        ([Gpu(0, 99.0, 85.0, None)], True, None),
        ([Gpu(0, 97.0, 30.0), Gpu(1, 96.0, 90.0), Gpu(2, 98.0, 20.0)], False,
         "GPU 0 util 97% with SM activity 30%, GPU 2 util 98% with SM activity 20%"),
        ([Gpu(0, 100.0, 49.9)], False, "SM activity 50%"),
        ([Gpu(0, 100.0, 50.0)], False, None),
    ],
)
def test_busy_but_not_computing(gpus: list[Gpu], mixed: bool, shown: str | None) -> None:
    alert = busy_not_computing(gpus, NOW, "job", mixed_precision=mixed)
    if shown is None:
        assert alert is None
        return
    assert alert is not None and alert.kind == "busy_not_computing" and alert.run == "job"
    assert shown in alert.message and "busy but not computing" in alert.message


def _mfu_run(values: list[float]) -> object:
    return fixed.run("job/train", fixed.series(names.MFU, values, end=NOW - 1))


@pytest.mark.parametrize(
    ("values", "shown"),
    [
        ([0.40] * 10 + [0.12] * 3, "MFU fell to 12.0% (median of steps 100-120) from the "
                                   "job's own 40.0% (steps 0-90)"),
        ([0.40] * 10 + [0.30] * 3, None),  # lower, not well below
        ([0.40] * 10 + [0.10, 0.40, 0.40], None),  # one slow log point is not a drop
        ([0.40] * 4 + [0.05] * 3, None),  # too few earlier points to call a level
        ([0.40] * 10 + [0.40, 0.05, 0.05], "MFU fell to 5.0%"),
        ([0.0] * 10 + [0.0] * 3, None),  # no earlier level to fall from
        ([float("nan")] * 10 + [0.01] * 3, None),  # NaN is no level
        ([0.05] * 5 + [0.40] * 10 + [0.10] * 3, "from the job's own 40.0%"),  # a slow start
    ],
)
def test_mfu_dropped(values: list[float], shown: str | None) -> None:
    alert = mfu_dropped(_mfu_run(values), NOW)  # type: ignore[arg-type]
    if shown is None:
        assert alert is None
        return
    assert alert is not None and alert.kind == "mfu_dropped" and shown in alert.message


@pytest.mark.parametrize(("waits", "shown", "never"), [
    # The input wait rose with the fall: the input pipeline is the advice.
    ([0.01] * 10 + [0.35] * 3, "the input wait rose from 1% to 35% of the step: check the "
                               "input pipeline", None),
    # A straggler or slower collectives: the input wait stayed where it was.
    ([0.01] * 10 + [0.02] * 3, "the input wait did not rise (1% -> 2% of the step): check the "
                               "workers' step times (a straggler)", "input pipeline"),
    # An input-bound job all along whose MFU fell for another reason.
    ([0.30] * 13, "did not rise (30% -> 30%", "input pipeline"),
    (None, ": check the workers' step times (a straggler)", "input pipeline"),  # not measured
])
def test_mfu_dropped_advises_the_input_pipeline_only_where_input_wait_rose(
        waits: list[float] | None, shown: str, never: str | None) -> None:
    mfu = fixed.series(names.MFU, [0.40] * 10 + [0.12] * 3, end=NOW - 1)
    wait = [] if waits is None else [fixed.series(names.INPUT_WAIT_FRACTION, waits, end=NOW - 1)]
    alert = mfu_dropped(fixed.run("job/train", mfu, *wait), NOW)
    assert alert is not None and shown in alert.message, alert
    assert never is None or never not in alert.message


def test_the_job_index_raises_both_for_a_running_job_only() -> None:
    # A point every 10 s: a cadence to be advancing at.
    train = fixed.run("job/train", fixed.series(names.LOSS, [2.0 - 0.01 * i for i in range(13)],
                                                end=NOW - 1, every=10.0),
                      fixed.series(names.MFU, [0.4] * 10 + [0.1] * 3, end=NOW - 1, every=10.0))
    busy = replace(fixed.gpu(0, 100.0, 1000.0), sm_activity=8.0, tensor_activity=0.0)
    kinds = {}
    for status in ("running", "finished"):
        agent = AgentRecord(status=status, mixed_precision=True)
        facts = job_facts("job", {"train": train}, agent, 0)
        kinds[status] = {a.kind for a in judge_job(facts, NOW, [busy]).alerts}
    assert {"busy_not_computing", "mfu_dropped"} <= kinds["running"]
    assert not {"busy_not_computing", "mfu_dropped"} & kinds["finished"]
    assert job_mfu({"train": train}) == pytest.approx(0.1)


def test_mfu_is_in_the_json_and_a_ratio_per_job_in_the_metrics() -> None:
    from distcore.jobs.index import JobIndex
    from distcore.jobs.jsonify import to_json
    from tests.core.test_metrics import exposition, named, samples

    runs = [fixed.run("fast/train", fixed.series(names.MFU, [0.3, 0.41])),
            fixed.run("plain/train", fixed.series(names.LOSS, [1.0, 0.9]))]
    snap = JobIndex(fixed.FixedRuns(runs), clock=lambda: NOW).refresh()
    assert snap is not None
    mfu = {s[1]["job"]: s[2] for s in named(samples(exposition(snap)), "distmon_mfu_ratio")}
    assert mfu == {"fast": pytest.approx(0.41)}  # a job without MFU has none, not 0
    jobs = {j["name"]: j["mfu"] for j in to_json(snap)["jobs"]}
    assert jobs == {"fast": pytest.approx(0.41), "plain": None}
