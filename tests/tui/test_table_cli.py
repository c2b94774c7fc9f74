"""`distmon --once --table / --csv / --points` through the real CLI, over a sweep written by the
real writers (TensorFlow's hparams API, tensorboardX's add_hparams, distagent's run.json), the
CSV checked against TensorBoard's own EventAccumulator."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcore.snapshot import SNAPSHOT_VERSION
from tests.tui.sweep_writers import JOBS, write_sweep

TIMEOUT = 120


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sweep(tmp_path_factory.mktemp("sweep"))


def distmon(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distmon", "--once", *map(str, args)],
        capture_output=True, text=True, timeout=TIMEOUT, env={**os.environ},
    )  # fmt: skip


def csv_rows(*args: str | Path) -> list[dict[str, str]]:
    done = distmon("--csv", *args)
    assert done.returncode == 0, done.stderr
    return list(csv.DictReader(io.StringIO(done.stdout)))


def names(capsys: pytest.CaptureFixture[str], *args: str | Path) -> list[str]:
    """The jobs `distmon --once --csv ARGS` lists, through the CLI's main() in this process
    (the many sort and filter cases; the subprocess tests below cover the process edge)."""
    from distmon.cli import main

    capsys.readouterr()
    assert main(["--once", "--csv", *map(str, args)]) == 0
    return [row["job"] for row in csv.DictReader(io.StringIO(capsys.readouterr().out))]


def test_the_table_shows_every_writers_hparams_and_metrics(sweep: Path) -> None:
    done = distmon("--table", sweep)
    assert done.returncode == 0, done.stderr
    header, *lines = done.stdout.splitlines()
    for column in [
        "job",
        "status",
        "step",
        "lr",
        "optimizer",
        "units",
        "bn",
        "lr_rule",
        "global_batch",
        "replicas",
        "model",
        "loss",
        "loss.min",
        "loss.max",
    ]:
        assert column in header.split(), column
    assert [line.split()[0] for line in lines] == JOBS  # the add_hparams sub-run is no job
    adam_sqrt = lines[0].split()
    for value in ["finished", "0.002", "sqrt", "64", "4", "cnn", "adam"]:
        assert value in adam_sqrt


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("lr", ["tf/c", "agent/adam_sqrt", "tf/b", "tbx/y", "agent/quickstart", "tbx/x", "tf/a"]),
        ("-lr", ["tf/a", "agent/quickstart", "tbx/x", "tbx/y", "tf/b", "agent/adam_sqrt", "tf/c"]),
        ("units", ["tf/a", "tf/b", "tf/c", *JOBS[:4]]),  # the jobs without units last, in order
        ("-units", ["tf/c", "tf/b", "tf/a", *JOBS[:4]]),
        ("optimizer", [JOBS[0], "tbx/y", "tf/b", "tf/c", JOBS[1], "tbx/x", "tf/a"]),
        ("loss.min", ["tf/c", "tf/b", "tbx/y", "tbx/x", "tf/a", *JOBS[:2]]),
        ("-step", ["tbx/x", "tbx/y", "tf/a", "tf/b", "tf/c", *JOBS[:2]]),
    ],
)  # fmt: skip
def test_sort_by_any_column_numbers_as_numbers_missing_last(
    sweep: Path, sort: str, expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert names(capsys, "--sort", sort, sweep) == expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("lr<0.01", ["agent/adam_sqrt", "tbx/y", "tf/b", "tf/c"]),
        ("lr<0.01,optimizer=adam", ["agent/adam_sqrt", "tbx/y", "tf/b", "tf/c"]),
        ("optimizer!=adam", ["agent/quickstart", "tbx/x", "tf/a"]),
        ("units>=32", ["tf/b", "tf/c"]),
        ("units>=32, lr > 0.001", ["tf/b"]),
        ("bn=true", ["tbx/x"]),
        ("model=cnn,lr_rule=sqrt,replicas=4", ["agent/adam_sqrt"]),
        ("global_batch=64", ["agent/adam_sqrt", "agent/quickstart"]),
        ("status=finished", ["agent/adam_sqrt", "agent/quickstart"]),
        ("hparam/best>0.99", ["tbx/y"]),
        ("validation/epoch_loss.min<=0.25", ["agent/adam_sqrt", "agent/quickstart"]),
        ("optimizer<1", []),  # a string cell never matches a number
        ("'optimizer'='adam',\"lr\"<0.01", ["agent/adam_sqrt", "tbx/y", "tf/b", "tf/c"]),
        ("lr<'0.01'", []),  # a quoted value is a string: no numeric cell matches it
    ],
)  # fmt: skip
def test_filter_expressions(
    sweep: Path, expr: str, expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert names(capsys, "--filter", expr, sweep) == expected


def test_sort_and_filter_through_the_process(sweep: Path) -> None:
    done = distmon("--table", "--sort", "-lr", "--filter", "optimizer=adam", sweep)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["tbx/y", "tf/b", "agent/adam_sqrt", "tf/c"]
    assert [r["job"] for r in csv_rows("--sort=lr", "--filter", "lr>0.01", sweep)] == [
        "agent/quickstart", "tbx/x", "tf/a"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "expr"), [("--table", "lr<<0.01"), ("--csv", "a=1,,b=2"), ("--table", "\x1b[31m")]
)
def test_a_malformed_filter_is_one_line_naming_it_and_exit_2(
    sweep: Path, mode: str, expr: str
) -> None:
    done = distmon(mode, "--filter", expr, sweep)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.count("\n") == 1 and "bad filter expression" in done.stderr
    assert "Traceback" not in done.stderr and "\x1b" not in done.stderr


def test_an_unknown_sort_column_and_clashing_modes_are_usage_errors(sweep: Path) -> None:
    done = distmon("--table", "--sort", "nope", sweep)
    assert done.returncode == 2 and "no column 'nope'" in done.stderr and not done.stdout
    done = distmon("--table", "--csv", sweep)
    assert done.returncode == 2 and "choose one" in done.stderr


def _accumulator(path: Path) -> object:
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea

    acc = pea.EventAccumulator(str(path), size_guidance={pea.TENSORS: 0})
    acc.Reload()
    return acc


def _ea_points(acc: object) -> dict[str, list[tuple[int, float, float]]]:
    from tensorboard.util import tensor_util

    out = {}
    for tag in acc.Tags()["tensors"]:  # type: ignore[attr-defined]
        events = acc.Tensors(tag)  # type: ignore[attr-defined]
        values = [tensor_util.make_ndarray(e.tensor_proto) for e in events]
        if all(v.size == 1 and v.dtype.kind == "f" for v in values):
            out[tag] = [
                (e.step, e.wall_time, float(v)) for e, v in zip(events, values, strict=True)
            ]
    return out


def test_points_csv_equals_tensorboards_event_accumulator(sweep: Path) -> None:
    done = distmon("--points", sweep)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert rows[0] == ["run", "tag", "step", "wall_time", "value"]
    ours: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    for run, tag, step, wall, value in rows[1:]:
        ours.setdefault((run, tag), []).append((int(step), float(wall), float(value)))
    session = next(p.name for p in (sweep / "tbx/x").iterdir() if p.is_dir())
    assert ("tbx/x/" + session, "hparam/best") in ours  # add_hparams' sub-run is read too
    theirs = {}
    for run in {run for run, _ in ours}:
        for tag, points in _ea_points(_accumulator(sweep / run)).items():
            theirs[(run, tag)] = points
    theirs = {k: v for k, v in theirs.items() if v}
    assert ours == theirs  # every kept point, bit for bit (the sub-run's metric too)


def test_max_points_bounds_what_points_keeps(sweep: Path) -> None:
    done = distmon("--points", "--max-points", "5", sweep)
    by_series: dict[tuple[str, str], list[int]] = {}
    for run, tag, step, _, _ in list(csv.reader(io.StringIO(done.stdout)))[1:]:
        by_series.setdefault((run, tag), []).append(int(step))
    assert by_series[("tbx/x", "loss")][-1] == 29 and by_series[("tbx/x", "loss")][0] == 0
    assert max(len(steps) for steps in by_series.values()) <= 5


def test_table_csv_round_trips_against_the_event_accumulator(sweep: Path) -> None:
    from tensorboard.plugins.hparams import plugin_data_pb2

    rows = {row["job"]: row for row in csv_rows(sweep)}
    assert list(rows) == JOBS
    for job in ["tf/a", "tf/b", "tf/c"]:
        acc = _accumulator(sweep / job)
        for tag, points in _ea_points(acc).items():
            values = [v for _, _, v in points]
            assert float(rows[job][tag]) == values[-1]
            assert float(rows[job][f"{tag}.min"]) == min(values)
            assert float(rows[job][f"{tag}.max"]) == max(values)
        content = acc.PluginTagToContent("hparams")  # type: ignore[attr-defined]
        data = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
        for name, value in data.session_start_info.hparams.items():
            kind = value.WhichOneof("kind")
            expected = getattr(value, kind)
            got = rows[job][name]
            assert (float(got) if kind == "number_value" else got) == expected


def test_keras_hparams_callback_and_tensorboard_callback_are_one_job(sweep: Path) -> None:
    (row,) = csv_rows(sweep.parent / "keras")
    assert row["job"] == "fit" and float(row["units"]) == 1 and row["optimizer"] == "sgd"
    assert float(row["epoch_loss"]) >= 0 and float(row["validation/epoch_loss"]) >= 0
    assert int(row["step"]) >= 1  # two epochs (Keras also logs per-iteration tags)


def test_json_is_the_snapshot_document(sweep: Path) -> None:
    done = distmon("--json", sweep)
    doc = json.loads(done.stdout)
    assert doc["version"] == SNAPSHOT_VERSION and [j["name"] for j in doc["jobs"]] == JOBS
    assert all(
        not math.isnan(r["scalars"].get("loss", {}).get("last_value", 0)) for r in doc["runs"]
    )


def test_goodput_reads_as_the_ledger_writes_it(tmp_path: Path) -> None:
    """One form per quantity: the table's goodput column is a share, as the ledger line says
    it (`goodput 79%`), never `0.7912` beside it; the CSV keeps the number for a spreadsheet."""
    from tensorboardX import SummaryWriter

    from distcore.jobs.ledger import BUCKETS, TIME_PREFIX

    seconds = dict.fromkeys(BUCKETS, 0.0) | {"compute": 79.12, "input_wait": 20.88}
    with SummaryWriter(str(tmp_path / "job" / "train")) as writer:
        for bucket, value in seconds.items():
            writer.add_scalar(TIME_PREFIX + bucket, value, 10)
        writer.add_scalar("loss", 0.5, 10)
    done = distmon("--table", tmp_path)
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert row.split()[header.split().index("goodput")] == "79%"
    assert csv_rows(tmp_path)[0]["goodput"].startswith("0.791")
