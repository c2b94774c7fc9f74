"""Each alert rule, table-tested at the edges of its bands, on real RunSnapshot/GpuDevice facts."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from distcore import names
from distcore.alerts import Alert, keep_since, sort_alerts
from distcore.alerts.cadence import IDLE, STALLED, run_stalled, silence, usual_interval
from distcore.alerts.outcomes import agent_outcome
from distcore.alerts.series import RISING_WINDOW, input_stall, loss_rising
from distcore.events.snapshots import RunSnapshot, Series
from distcore.jobs.judge import host_alerts, job_facts, judge_job
from distcore.jobs.snapshots import AgentRecord, Host
from distcore.telemetry.samples import GpuDevice
from tests.tui import fixed

NOW = 10_000.0


def series(tag: str, values: Sequence[float], *, interval: float = 1.0, end: float = NOW) -> Series:
    """One point a step, every `interval` seconds, the newest at `end`."""
    return fixed.series(tag, values, end=end, every=interval, step_every=1)


run = fixed.run


def gpu(
    index: int, util: float | None, used: float | None = 1000.0, total: float | None = 16000.0
) -> GpuDevice:
    """A telemetry GpuDevice with the fields alerts read (index, utilization, memory), the
    rest unknown."""
    return GpuDevice(
        index=index, name=None, uuid=None, utilization_gpu=util, utilization_memory=None,
        memory_used_mib=used, memory_total_mib=total, temperature_c=None, power_w=None,
        power_limit_w=None, sm_clock_mhz=None, fan_percent=None, pcie_rx_kib_s=None,
        pcie_tx_kib_s=None, processes=(),
    )  # fmt: skip


def evaluate(
    runs: Sequence[RunSnapshot],
    gpus: Sequence[GpuDevice],
    *,
    now: float,
    agent_status: dict[str, str] | None = None,
) -> tuple[Alert, ...]:
    """The rules as users get them: each run a job judged by distcore.jobs.judge (as the job
    index does, run.json's status where given), the GPUs this machine's host."""
    found: list[Alert] = []
    for version, r in enumerate(runs):
        status = (agent_status or {}).get(r.name)
        agent = AgentRecord(status=status) if status else None
        facts = job_facts(r.name, {"": r}, agent, version)
        found += judge_job(facts, now, gpus).alerts
    here = Host("local", "here", "local", gpus=tuple(gpus))
    found += host_alerts((here,), now)
    return sort_alerts(found)


def kinds(found: Sequence[Alert]) -> list[tuple[str, str, str | None]]:
    return [(a.kind, a.severity, a.run) for a in found]


@pytest.mark.parametrize(
    ("fraction", "severity"),
    [
        (0.0, None),
        (0.0499, None),
        (0.05, "warning"),
        (0.12, "warning"),
        (0.1999, "warning"),
        (0.20, "critical"),
        (0.85, "critical"),
        (math.nan, None),
    ],
)
def test_input_stall_bands(fraction: float, severity: str | None) -> None:
    r = run("job/train", series(names.INPUT_WAIT_FRACTION, [0.01, 0.02, fraction]))
    found = [a for a in evaluate([r], [], now=NOW) if a.kind == "input_stall"]
    assert [a.severity for a in found] == ([severity] if severity else [])
    if severity:
        assert "input-bound" in found[0].message
        assert "prefetch" in found[0].message and "parallel" in found[0].message
        assert "cache" in found[0].message


def test_input_stall_since_is_the_start_of_the_stall() -> None:
    s = series(names.INPUT_WAIT_FRACTION, [0.01, 0.3, 0.25, 0.4], interval=5.0)
    alert = input_stall(run("j/train", s))
    assert alert is not None and alert.since == s.wall_times[1]


@pytest.mark.parametrize(
    ("values", "fires"),
    [
        ([2.0, 1.5, math.nan], True),
        ([2.0, 1.5, math.inf], True),
        ([2.0, 1.5, -math.inf], True),
        ([2.0, math.nan, 1.0], False),  # recovered: only the newest value counts
        ([2.0, 1.5, 1.0], False),
    ],
)
def test_loss_nan(values: list[float], fires: bool) -> None:
    found = kinds(evaluate([run("r", series("epoch_loss", values))], [], now=NOW))
    assert (("loss_nan", "critical", "r") in found) is fires


def _rising(rise: float, n: int = 30) -> list[float]:
    """Falls for n-20 points, then climbs linearly by `rise` (relative) over the last 20."""
    fall = [2.0 - 0.05 * i for i in range(n - RISING_WINDOW)]
    base = fall[-1]
    return fall + [base * (1 + rise * i / (RISING_WINDOW - 1)) for i in range(1, 21)]


@pytest.mark.parametrize(
    ("values", "fires"),
    [
        (_rising(0.5), True),
        (_rising(0.3), True),
        (_rising(0.02), False),  # rises, but by less than RISING_FRACTION
        ([2.0 - 0.05 * i for i in range(30)], False),  # falling
        ([1.0 + 0.3 * (-1) ** i for i in range(30)], False),  # noisy but flat
        (_rising(0.5)[-(RISING_WINDOW - 1) :], False),  # too few points to judge
    ],
)
def test_loss_rising(values: list[float], fires: bool) -> None:
    found = kinds(evaluate([run("r", series("loss", values))], [], now=NOW))
    assert (("loss_rising", "warning", "r") in found) is fires


@pytest.mark.parametrize(
    ("interval", "gap", "agent_status", "fires"),
    [
        (1.0, 5.0, None, False),  # a normal gap
        (1.0, 30.0, None, False),  # at the floor: STALL_MIN_SECONDS
        (1.0, 30.5, None, True),
        (10.0, 100.0, None, False),  # exactly STALL_FACTOR x interval
        (10.0, 101.0, None, True),
        (1.0, 601.0, None, False),  # long silent without run.json: an old, idle run
        (1.0, 601.0, "running", True),  # run.json says it should be writing
        (1.0, 100.0, "finished", False),
        (1.0, 100.0, "stopped", False),
    ],
)
def test_run_stalled(interval: float, gap: float, agent_status: str | None, fires: bool) -> None:
    r = run("j/train", series("loss", [1.0] * 40, interval=interval, end=NOW - gap))
    statuses = {"j/train": agent_status} if agent_status else None
    found = kinds(evaluate([r], [], now=NOW, agent_status=statuses))
    assert (("run_stalled", "warning", "j/train") in found) is fires


@pytest.mark.parametrize(
    ("agent_status", "files", "gap", "says"),
    [
        ("running", "live", 20.0, None),  # within the run's own limit (30 s here)
        ("running", "live", 31.0, STALLED),  # run.json says it should be writing
        ("running", "idle", 700.0, STALLED),  # however long: it still says running
        ("finished", "live", 31.0, None),  # ended (a job's, or the monitor's end): never
        ("stopped", "idle", 400.0, None),
        ("failed", "live", 31.0, None),
        (None, "live", 20.0, None),
        (None, "live", 31.0, STALLED),  # no run.json, files still live: it may be stuck
        (None, "idle", 31.0, IDLE),  # files idle: ended or stopped writing, not a warning
        (None, "idle", 400.0, IDLE),
        (None, "idle", 601.0, None),  # old: the status column says idle
        (None, "gone", 31.0, None),
        ("running", "gone", 31.0, None),
    ],
)
def test_what_a_silence_says(agent_status: str | None, files: str, gap: float,
                             says: str | None) -> None:
    assert silence(agent_status, files, gap, limit=30.0) == says


def test_a_plain_run_whose_files_went_idle_is_idle_not_stalled() -> None:
    """A script of the user's own that ended: no run.json says so, its files went idle."""
    r = run("j/train", series("loss", [1.0] * 40, interval=1.0, end=NOW - 400), status="idle")
    found = kinds(evaluate([r], [], now=NOW))
    assert ("run_idle", "info", "j/train") in found
    assert not [k for k in found if k[0] == "run_stalled"]
    (idle,) = [a for a in evaluate([r], [], now=NOW) if a.kind == "run_idle"]
    assert idle.message == "idle: no new data for 400 s (usually every 1 s)"


def test_gone_run_is_not_stalled() -> None:
    r = run("j/train", series("loss", [1.0] * 10, end=NOW - 100), status="gone")
    assert run_stalled(r, NOW) is None


@pytest.mark.parametrize(
    ("utils", "fires"),
    [
        ([95.0, 90.0], False),
        ([60.0, 30.0], False),  # spread exactly at the threshold
        ([60.0, 29.0], True),
        ([100.0, 95.0, 10.0], True),
        ([50.0, None], False),  # unknown is not zero
        ([5.0], False),
    ],
)
def test_gpu_imbalance(utils: list[float | None], fires: bool) -> None:
    gpus = [gpu(i, u) for i, u in enumerate(utils)]
    found = kinds(evaluate([], gpus, now=NOW))
    assert (("gpu_imbalance", "warning", None) in found) is fires


@pytest.mark.parametrize(
    ("used", "total", "fires"),
    [
        (15000.0, 16000.0, False),
        (15199.0, 16000.0, False),
        (15200.0, 16000.0, True),
        (16000.0, 16000.0, True),
        (None, 16000.0, False),
        (100.0, None, False),
    ],
)
def test_gpu_memory_full(used: float | None, total: float | None, fires: bool) -> None:
    found = kinds(evaluate([], [gpu(0, 90.0, used, total)], now=NOW))
    assert (("gpu_memory_full", "warning", None) in found) is fires


@pytest.mark.parametrize(
    ("utils", "has_wait_tag", "gap", "fires"),
    [
        ([10.0, 12.0], False, 1.0, True),
        ([29.0], False, 1.0, True),
        ([30.0], False, 1.0, False),  # at the threshold: not low
        ([10.0], True, 1.0, False),  # distagent measures input wait exactly: input_stall instead
        ([10.0], False, 1000.0, False),  # steps are not advancing: nothing to blame the input for
        ([None], False, 1.0, False),  # unknown utilization
        ([], False, 1.0, False),  # no GPU
    ],
)
def test_input_bound_suspected(
    utils: list[float | None], has_wait_tag: bool, gap: float, fires: bool
) -> None:
    many = [series("loss", [2.0 - 0.01 * i for i in range(40)], end=NOW - gap)]
    if has_wait_tag:
        many.append(series(names.INPUT_WAIT_FRACTION, [0.01] * 10, end=NOW - gap))
    gpus = [gpu(i, u) for i, u in enumerate(utils)]
    found = kinds(evaluate([run("keras/train", *many)], gpus, now=NOW))
    assert (("input_bound_suspected", "warning", "keras/train") in found) is fires


def test_evaluate_orders_by_severity_and_serialises() -> None:
    runs = [
        run("a", series("loss", [1.0, math.nan])),
        run("b", series(names.INPUT_WAIT_FRACTION, [0.1, 0.1])),
    ]
    found = evaluate(runs, [gpu(0, 99.0, 16000.0, 16000.0)], now=NOW)
    assert [a.severity for a in found] == ["critical", "warning", "warning"]
    doc = found[0].to_json()
    assert set(doc) == {"kind", "severity", "run", "host", "gpu", "message", "since"}


def test_keep_since_keeps_the_first_time_seen() -> None:
    old = Alert("gpu_imbalance", "warning", None, "x", 5.0)
    new = Alert("gpu_imbalance", "warning", None, "y", 9.0)
    other = Alert("loss_nan", "critical", "r", "z", 9.0)
    assert [a.since for a in keep_since([old], [new, other])] == [5.0, 9.0]


def test_keep_since_tells_run_less_alerts_apart_by_host_and_gpu() -> None:
    """Two hosts' imbalance (or two GPUs' full memory) are two alerts: one's since is never
    the other's."""
    old = [Alert("gpu_imbalance", "warning", None, "x", 5.0, host="a"),
           Alert("gpu_memory_full", "warning", None, "x", 6.0, host="a", gpu=0)]
    new = [Alert("gpu_imbalance", "warning", None, "y", 9.0, host="b"),
           Alert("gpu_imbalance", "warning", None, "y", 9.0, host="a"),
           Alert("gpu_memory_full", "warning", None, "x", 9.0, host="a", gpu=1)]
    kept = keep_since(old, new)
    assert [a.since for a in kept] == [9.0, 5.0, 9.0]
    assert [(a.host, a.gpu) for a in kept] == [("b", None), ("a", None), ("a", 1)]


def test_a_burst_writer_is_not_stalled() -> None:
    """Everything logged at once (a finished history dumped by one call), then silence."""
    r = run("burst", series("loss", [1.0] * 500, interval=0.0001, end=NOW - 120))
    assert usual_interval(r) is None
    assert run_stalled(r, NOW) is None


def test_bursts_follow_the_pause_between_them() -> None:
    """Ten points at once every 60 s: the cadence is the 60 s pause, not the 0 s gaps."""
    walls = [NOW - 600 + 60 * (i // 10) + 0.001 * (i % 10) for i in range(100)]
    base = fixed.series("loss", [1.0] * 100, end=NOW, every=1.0, step_every=1)
    r = run("bursts", base.__class__(**{**base.__dict__, "wall_times": tuple(walls),
                                         "last_wall_time": walls[-1]}))
    assert usual_interval(r) == pytest.approx(60.0, abs=0.01)
    quiet = run("bursts", *r.scalars.values())
    assert run_stalled(quiet, walls[-1] + 300) is None  # 5 pauses: not yet
    late = run_stalled(quiet, walls[-1] + 601, "running")
    assert late is not None and "usually every 60 s" in late.message


@pytest.mark.parametrize(
    ("status", "error", "severity", "words"),
    [
        ("diverged", "loss became NaN or infinite at step 40", "critical", "diverged at step 42"),
        ("failed", "OSError: disk full", "critical", "failed at step 42: OSError: disk full"),
        ("stopped", None, "info", "stopped at step 42"),
        ("finished", None, None, ""),
        ("running", None, None, ""),
        (None, None, None, ""),
    ],
)
def test_agent_outcome(
    status: str | None, error: str | None, severity: str | None, words: str
) -> None:
    found = agent_outcome("job", status, 42, error, NOW)
    if severity is None:
        assert found is None
    else:
        assert found is not None and found.severity == severity and words in found.message
        assert found.run == "job" and (error is None or error in found.message)


def test_rules_on_the_tail_match_the_whole_curve() -> None:
    """loss_rising smooths only the tail: the same verdict and numbers as the whole series."""
    values = [2.0 - 0.001 * i for i in range(1500)] + [0.5 + 0.05 * i for i in range(30)]
    r = run("r", series("loss", values))
    found = loss_rising(r)
    assert found is not None
    from distcore.smoothing import debiased_ema

    whole = debiased_ema(values)[-RISING_WINDOW:]
    assert f"{whole[-1]:.4g}" in found.message and f"{min(whole):.4g}" in found.message
