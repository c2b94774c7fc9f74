"""The training package's pure parts: boundaries, interval scalars, progress text, status rows,
the learning-rate schedule, and the builtin models."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest

from distagent.commands.status import format_table, table_row
from distagent.train.bare import BARE_ENV, is_bare
from distagent.train.loop import LoopSettings, steps_until_boundary
from distagent.train.progress import Progress, format_progress, input_wait_band
from distagent.train.summaries import Timing, epoch_scalars, interval_scalars
from distcore import names


@pytest.mark.parametrize(
    ("step", "per_call", "log", "ckpt", "epoch", "total", "expected"),
    [
        (0, 1, 10, 100, 50, 200, 1),
        (0, 8, 10, 100, 50, 200, 8),
        (8, 8, 10, 100, 50, 200, 2),  # stops at the log point
        (40, 20, 0, 45, 50, 200, 5),  # at the checkpoint; log_every 0 never limits
        (45, 20, 100, 0, 50, 200, 5),  # at the epoch's end
        (195, 20, 100, 100, 100, 198, 3),  # at the last step
    ],
)
def test_steps_until_boundary(
    step: int, per_call: int, log: int, ckpt: int, epoch: int, total: int, expected: int
) -> None:
    settings = LoopSettings(total_steps=total, steps_per_epoch=epoch, global_batch_size=8,
                            log_every=log, checkpoint_every=ckpt, steps_per_call=per_call)
    assert steps_until_boundary(step, settings) == expected


def test_interval_scalars_are_means_and_rates() -> None:
    counters = {"loss_sum": 64.0, "metric:accuracy": 16.0, "examples": 32.0, "wait_seconds": 0.05}
    timing = Timing(steps=4, wall_seconds=0.2, wait_seconds=0.05)
    out = interval_scalars(counters, timing, global_batch_size=8, learning_rate=0.1)
    assert out == pytest.approx({
        names.LOSS: 2.0, names.ACCURACY: 0.5, names.LEARNING_RATE: 0.1,
        names.EXAMPLES_PER_SECOND: 160.0, names.STEP_TIME_MS: 50.0,
        names.INPUT_WAIT_MS: 12.5, names.INPUT_WAIT_FRACTION: 0.25,
    })


@pytest.mark.parametrize(
    ("flops_per_step", "peak", "rate", "mfu"),
    [
        (1e9, 1e12, 2e10, 0.02),  # 4 steps of 1 GFLOP in 0.2 s over a 1 TFLOP/s peak
        (1e9, None, 2e10, None),  # no peak known: the rate, never a made-up MFU
        (None, 1e12, None, None),  # FLOPs not counted: neither
    ],
)
def test_interval_scalars_give_model_flops_and_mfu(
    flops_per_step: float | None, peak: float | None, rate: float | None, mfu: float | None
) -> None:
    counters = {"loss_sum": 1.0, "metric:accuracy": 1.0, "examples": 2.0, "wait_seconds": 0.0}
    out = interval_scalars(counters, Timing(4, 0.2, 0.0), global_batch_size=8, learning_rate=0.1,
                           flops_per_step=flops_per_step, peak_flops=peak)
    assert out.get(names.MODEL_FLOPS_PER_SECOND) == pytest.approx(rate)
    assert out.get(names.MFU) == pytest.approx(mfu)


def test_the_progress_line_ends_with_the_mfu_where_there_is_one() -> None:
    line = format_progress(10, 30, 1, 1, {names.LOSS: 1.0, names.MFU: 0.4123})
    assert line == "step 10/30  epoch 1/1  loss 1.0000  MFU 41.2%"


def test_interval_with_no_timed_steps_writes_no_perf_tags() -> None:
    counters = {"loss_sum": 4.0, "metric:accuracy": 1.0, "examples": 8.0, "wait_seconds": 3.0}
    out = interval_scalars(counters, Timing(0, 0.0, 0.0), global_batch_size=8, learning_rate=1.0)
    assert set(out) == {names.LOSS, names.ACCURACY, names.LEARNING_RATE}


def test_a_step_not_timed_inside_writes_no_input_wait() -> None:
    """A bare step's timers are NaN: no input wait tags (not a fraction of 1), the wall's kept."""
    counters = {"loss_sum": 4.0, "metric:accuracy": 1.0, "examples": 8.0}
    out = interval_scalars(counters, Timing(2, 0.5, math.nan), global_batch_size=8,
                           learning_rate=1.0)
    assert set(out) == {names.LOSS, names.ACCURACY, names.LEARNING_RATE,
                        names.EXAMPLES_PER_SECOND, names.STEP_TIME_MS}


@pytest.mark.parametrize(("value", "bare"), [
    (None, False), ("", False), ("0", False), (" 0 ", False), ("1", True), ("yes", True),
])
def test_the_bench_switch(value: str | None, bare: bool) -> None:
    assert is_bare({} if value is None else {BARE_ENV: value}) is bare


def test_epoch_scalars_unknown_without_examples() -> None:
    sums = ("loss_sum", "metric:accuracy", "examples")
    assert epoch_scalars(dict.fromkeys(sums, 0.0)) == {}
    assert epoch_scalars(dict(zip(sums, (3.0, 1.0, 2.0), strict=True))) == {
        names.EPOCH_LOSS: 1.5, names.EPOCH_ACCURACY: 0.5}


@pytest.mark.parametrize(
    ("fraction", "band"),
    [(0.0, "ok"), (0.049, "ok"), (0.05, "moderately input-bound"),
     (0.19, "moderately input-bound"), (0.2, "highly input-bound"), (0.9, "highly input-bound")],
)
def test_input_wait_bands(fraction: float, band: str) -> None:
    assert input_wait_band(fraction) == band


def test_progress_plain_lines_are_throttled_but_keep_the_last() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = Progress(out, tty=False, min_interval=1.0, clock=lambda: now[0])
    scalars = {names.LOSS: 1.5, names.INPUT_WAIT_FRACTION: 0.3}
    for step in (10, 20, 30):
        progress.update(step, 30, 1, 1, scalars)
        now[0] += 0.4
    lines = out.getvalue().splitlines()
    assert lines == [format_progress(10, 30, 1, 1, scalars), format_progress(30, 30, 1, 1, scalars)]
    assert "input wait 30% (highly input-bound)" in lines[0]


def test_progress_on_a_terminal_redraws_one_line() -> None:
    out = io.StringIO()
    progress = Progress(out, tty=True)
    progress.update(5, 10, 1, 2, {names.LOSS: 1.0})
    progress.update(10, 10, 2, 2, {names.LOSS: 0.5})
    progress.close()
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and "step 10/10" in text


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ({"name": "a", "status": "finished", "last_step": 30, "total_steps": 30,
          "metrics": {names.LOSS: 0.25, names.EXAMPLES_PER_SECOND: 1234.4,
                      names.INPUT_WAIT_FRACTION: 0.31}},
         ("a", "finished", "30/30", "0.2500", "1,234", "31%")),
        ({"name": "b", "status": "running", "alive": False, "last_step": 7, "total_steps": 30},
         ("b", "running (dead)", "7/30", "-", "-", "-")),
        ({"name": "d", "status": "running", "alive": False, "died": True, "last_step": 7,
          "total_steps": 30}, ("d", "died", "7/30", "-", "-", "-")),
        ({"name": "c", "status": None}, ("c", "unknown", "-/-", "-", "-", "-")),
    ],
)
def test_status_rows(summary: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert table_row(summary) == expected
    assert format_table([expected]).splitlines()[0].startswith("RUN")


WARMUP_DECAY_TABLE = [
    # decay, step, expected rate (base 0.1 -> scaled 0.4 over 10 warmup steps, 110 total)
    ("none", 0, 0.1),
    ("none", 5, 0.25),
    ("none", 10, 0.4),
    ("none", 109, 0.4),
    ("cosine", 10, 0.4),
    ("cosine", 60, 0.2),
    ("cosine", 110, 0.0),
    ("step", 59, 0.4),
    ("step", 60, 0.04),
    ("step", 85, 0.004),
    ("exponential", 60, 0.04),
    ("exponential", 110, 0.004),
]


@pytest.mark.parametrize(("decay", "step", "expected"), WARMUP_DECAY_TABLE)
def test_warmup_then_decay(tf: Any, decay: str, step: int, expected: float) -> None:
    from distagent.train.schedule import WarmupDecay

    schedule = WarmupDecay(base_rate=0.1, scaled_rate=0.4, warmup_steps=10, total_steps=110,
                           decay=decay)
    assert float(schedule(step)) == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_no_warmup_starts_at_the_scaled_rate(tf: Any) -> None:
    from distagent.train.schedule import WarmupDecay

    schedule = WarmupDecay(base_rate=0.1, scaled_rate=0.4, warmup_steps=0, total_steps=10)
    assert float(schedule(0)) == pytest.approx(0.4)
    assert WarmupDecay.from_config(schedule.get_config()).get_config() == schedule.get_config()


@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet_small"])
def test_builtin_models_output_logits(tf: Any, name: str) -> None:
    from distagent.models import build_model

    model = build_model(name, (28, 28, 1), 7)
    logits = model(tf.zeros([2, 28, 28, 1]))
    assert tuple(logits.shape) == (2, 7)
    assert logits.dtype == tf.float32


@pytest.mark.parametrize(
    ("hidden_units", "widths"), [(None, [128, 64, 3]), ((512, 256), [512, 256, 3]), ((7,), [7, 3])]
)
def test_mlp_hidden_units(
    tf: Any, hidden_units: tuple[int, ...] | None, widths: list[int]
) -> None:
    from distagent.models import build_model

    model = build_model("mlp", (4,), 3, hidden_units=hidden_units)
    assert [layer.units for layer in model.layers if hasattr(layer, "units")] == widths


def test_user_model_by_import_path(tf: Any) -> None:
    from distagent.models import build_model

    model = build_model("distagent.models:mlp", (4,), 3)
    assert model.name == "mlp"


@pytest.mark.parametrize("name", ["vgg", "distagent.models:nothing_here", "no_such_pkg:f"])
def test_unknown_models_are_config_errors(tf: Any, name: str) -> None:
    from distagent.models import build_model
    from distcore.errors import ConfigError

    with pytest.raises(ConfigError, match=r"model\.name"):
        build_model(name, (4,), 3)


def test_schedule_values_are_finite_everywhere(tf: Any) -> None:
    from distagent.train.schedule import DECAYS, WarmupDecay

    for decay in DECAYS:
        schedule = WarmupDecay(base_rate=0.01, scaled_rate=0.08, warmup_steps=3, total_steps=3,
                               decay=decay)
        assert all(math.isfinite(float(schedule(s))) for s in range(6))


def test_status_and_stop_do_not_load_tensorflow() -> None:
    import json
    import subprocess
    import sys

    probe = (
        "import distagent.commands.status, distagent.commands.stop, distagent.train.loop\n"
        "import json, sys\nprint(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                         text=True).stdout
    loaded = {m.split(".")[0] for m in json.loads(out.strip().splitlines()[-1])}
    assert not {"tensorflow", "keras"} & loaded


def test_interval_scalars_split_each_workers_step_at_the_reduction() -> None:
    counters = {"loss_sum": 8.0, "metric:accuracy": 4.0, "examples": 8.0}
    timing = Timing(steps=4, wall_seconds=0.4, wait_seconds=0.04, compute_seconds=0.24,
                    reduce_seconds=0.08)
    out = interval_scalars(counters, timing, global_batch_size=2, learning_rate=0.1)
    assert out[names.STEP_COMPUTE_SECONDS] == pytest.approx(0.06)
    assert out[names.REDUCE_WAIT_SECONDS] == pytest.approx(0.02)
    untimed = interval_scalars(counters, Timing(4, 0.4, 0.04), global_batch_size=2,
                               learning_rate=0.1)
    assert names.STEP_COMPUTE_SECONDS not in untimed  # not measured: not written as zero
