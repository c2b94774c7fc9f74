"""What a platform team joins and alerts on in `/metrics`: the job info series with its
scheduler, the job's end, no empty label anywhere, and `--max-series` as an exact bound.

Jobs are judged by the real distcore.jobs.judge over fixed runs, with run.json records parsed
by distcore.jobs.agent and Slurm states parsed from Slurm 22.05's real squeue answer
(tests/core/slurm_outputs.py); the text is rendered by prometheus_client and read back with its
parser (tests/tui/test_serve_prometheus.py joins the info series in a real Prometheus).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.alerts import sort_alerts
from distcore.jobs.agent import agent_record_from
from distcore.jobs.judge import job_facts, judge_job
from distcore.jobs.slurm_text import parse_squeue
from distcore.jobs.snapshots import Job, JobsSnapshot
from distcore.metrics import JOB_STATES
from tests.core.slurm_outputs import SQUEUE
from tests.core.test_metrics import _control_bytes, exposition, named, samples, snapshot
from tests.tui.fixed import keras_job, run, series, system_run

# Slurm job 1 RUNNING, 2 COMPLETED (ended), 3 PENDING, 4 CANCELLED (ended).
SLURM = parse_squeue(SQUEUE)


def judged(name: str, doc: Mapping[str, Any] | None, now: float = 2e9) -> Job:
    """Job `name` (one train run) with run.json `doc`, judged at `now` with Slurm's answer."""
    parts = {"train": run(f"{name}/train", series("loss", [1.0, 0.5]))}
    facts = job_facts(name, parts, agent_record_from(doc) if doc is not None else None, 1)
    return judge_job(facts, now, [], SLURM)


def exported(*jobs: Job, max_series: int = 10_000) -> list[tuple[str, dict[str, str], float]]:
    alerts = sort_alerts([a for j in jobs for a in j.alerts])
    snap = JobsSnapshot(generated_at=2e9, logdirs=(), jobs=jobs, hosts=(), alerts=alerts)
    return samples(exposition(snap, max_series))


def slurm(job_id: str, **more: str) -> dict[str, str]:
    return {"kind": "slurm", "job_id": job_id, **more}


@pytest.mark.parametrize(
    ("doc", "labels"),
    [
        (None, {"job": "j"}),
        ({"status": "running"}, {"job": "j"}),
        (
            {"status": "running", "scheduler": slurm("1", partition="gpu")},
            {
                "job": "j",
                "scheduler": "slurm",
                "slurm_job_id": "1",
                "partition": "gpu",
                "state": "RUNNING",
            },
        ),
        (
            {"status": "finished", "scheduler": slurm("2")},
            {"job": "j", "scheduler": "slurm", "slurm_job_id": "2", "state": "COMPLETED"},
        ),
        # Slurm does not know job 99 (yet, or any more): no state, never an empty one.
        (
            {"status": "running", "scheduler": slurm("99")},
            {"job": "j", "scheduler": "slurm", "slurm_job_id": "99"},
        ),
        # An id of another form never names a Slurm job (it never reaches squeue either).
        ({"status": "running", "scheduler": slurm("1; rm")}, {"job": "j", "scheduler": "slurm"}),
        (
            {"status": "running", "scheduler": {"kind": "kubernetes", "pod": "train-0"}},
            {"job": "j", "scheduler": "kubernetes", "pod": "train-0"},
        ),
    ],
)
def test_every_job_has_one_info_series_with_what_is_known(
    doc: Mapping[str, Any] | None, labels: dict[str, str]
) -> None:
    (info,) = named(exported(judged("j", doc)), "distmon_job_info")
    assert info[1:] == (labels, 1.0)


@pytest.mark.parametrize(
    ("doc", "end"),
    [
        (None, None),  # no run.json: no end is known
        ({"status": "running"}, None),
        ({"status": "running", "scheduler": slurm("1")}, None),  # Slurm says RUNNING
        ({"status": "finished", "end_time": 1234.5}, 1234.5),
        ({"status": "failed", "end_time": 77}, 77.0),
        ({"status": "diverged"}, "newest point"),  # no end_time: the newest point's time
        ({"status": "stopped", "end_time": True}, "newest point"),  # not a time
        # Slurm ended it while run.json still says running (the agent died): Slurm's end.
        ({"status": "running", "scheduler": slurm("2")}, "slurm"),
    ],
)
def test_the_end_of_a_job_is_when_it_ended(doc: Mapping[str, Any] | None, end: Any) -> None:
    job = judged("j", doc)
    found = [s[2] for s in named(exported(job), "distmon_job_end_timestamp_seconds")]
    expected = {"newest point": job.parts["train"].last_update,
                "slurm": SLURM["2"].ended_at}.get(end, end)  # fmt: skip
    assert found == ([] if expected is None else [expected])


def test_the_dead_agent_and_the_failed_job_are_critical_alerts_of_their_job() -> None:
    dead = judged("dead", {"status": "running", "scheduler": slurm("2")})
    failed = judged("broke", {"status": "failed", "error": "OOM"})
    alerts = {(s[1]["job"], s[1]["kind"], s[1]["severity"])
              for s in named(exported(dead, failed), "distmon_alert")}  # fmt: skip
    assert alerts == {("dead", "agent_died", "critical"), ("broke", "job_failed", "critical")}


def test_no_series_carries_an_empty_label() -> None:
    runs = [*keras_job("q", wait=0.3), system_run("q", 0, host="n")]
    found = samples(exposition(snapshot(runs, gpus=1)))
    assert [s for s in found if "" in s[1].values()] == []
    # This machine's GPU belongs to no job and no worker: those labels are absent.
    (local,) = [s for s in named(found, "distmon_gpu_utilization_ratio")
                if s[1]["source"] == "local"]  # fmt: skip
    assert set(local[1]) == {"host", "source", "gpu", "uuid"}
    worker = [s for s in named(found, "distmon_host_cpu_ratio") if s[1]["source"] == "logdir"]
    assert [(s[1]["job"], s[1]["worker"]) for s in worker] == [("q", "0")]
    # A run's alert names its job and run, and no host or GPU.
    assert all(set(s[1]) == {"job", "run", "kind", "severity"}
               for s in named(found, "distmon_alert") if "run" in s[1])  # fmt: skip


def _total(runs: Any) -> int:
    return len(samples(exposition(snapshot(runs, gpus=1))))


BIG = [run("big/train", *(series(f"tag{i}", [float(i)]) for i in range(30)))]
ALL = _total(BIG)


@pytest.mark.parametrize(
    "bound", [1, 2, 3, 9, 10, 11, 50, 51, ALL - 2, ALL - 1, ALL, ALL + 1, 10 * ALL]
)
def test_max_series_is_exact_with_the_dropped_counter_counted(bound: int) -> None:
    found = samples(exposition(snapshot(BIG, gpus=1), max_series=bound))
    (dropped,) = named(found, "distmon_series_dropped")
    assert len(found) <= bound
    assert len(found) - 1 + dropped[2] == ALL - 1  # every series sent or counted, none twice
    if bound >= ALL:
        assert len(found) == ALL and dropped[2] == 0
    else:
        assert dropped[2] > 0
    # The family of the states is whole or absent, never cut.
    states = named(found, "distmon_job_status")
    assert len(states) in (0, len(JOB_STATES))


def test_before_the_first_snapshot_a_bound_of_one_is_kept() -> None:
    assert [s[0] for s in samples(exposition(None, max_series=1))] == ["distmon_series_dropped"]


_text = st.text(st.characters(codec="utf-8") | st.sampled_from(["\udcff", "\n", "\x00", '"', "\\"]),
                max_size=30)  # fmt: skip
_value = st.one_of(st.none(), st.integers(-5, 10**13), st.booleans(), _text, st.lists(_text))
scheduler_st = st.one_of(
    _value,
    st.fixed_dictionaries(
        {"kind": st.one_of(st.sampled_from(["slurm", "kubernetes"]), _value)},
        optional={k: _value for k in ("job_id", "partition", "pod", "step_id", "node_list")},
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduler_st, st.sampled_from([None, "running", "failed", "finished"]))
def test_any_scheduler_record_gives_one_clean_info_series(scheduler: Any, status: Any) -> None:
    """run.json is untrusted: whatever its `scheduler` holds, each job has one info series,
    with no empty label, no control byte, and a Slurm id only of digits."""
    doc = {"status": status, "scheduler": scheduler}
    text = exposition(JobsSnapshot(2e9, (), (judged("j", doc),), (), ()))
    assert _control_bytes(text) == set()
    (info,) = named(samples(text), "distmon_job_info")
    assert info[1]["job"] == "j" and "" not in info[1].values()
    assert set(info[1]) <= {"job", "scheduler", "slurm_job_id", "partition", "state", "pod"}
    slurm_id = info[1].get("slurm_job_id", "0")
    assert slurm_id.isascii() and slurm_id.isdigit()
