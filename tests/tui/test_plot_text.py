"""`distmon --once --plot REGEX`: the dashboard's charts as text, through the real CLI over a
real Keras `fit` logdir (train and validation, per-step and per-epoch series)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.errors import DistmonError
from distmon.arguments import parse_options
from distmon.plot_text import run_plot
from tests.untrusted import Point, points, write_run

KERAS_FIT = """
import sys, keras, numpy as np
keras.utils.set_random_seed(1)
m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
m.compile(optimizer="sgd", loss="mse")
x = np.random.rand(64, 2); y = x.sum(1, keepdims=True)
m.fit(x, y, epochs=3, batch_size=8, verbose=0, validation_split=0.25,
      callbacks=[keras.callbacks.TensorBoard(sys.argv[1], update_freq=1)])
"""


@pytest.fixture(scope="module")
def fit_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tensorflow", reason="pip install -e .[agent] runs the Keras fit")
    root = tmp_path_factory.mktemp("plot") / "fit"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", KERAS_FIT, str(root)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return root.parent


def distmon(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return subprocess.run([sys.executable, "-m", "distmon", "--once", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env)


def _charts(text: str) -> dict[str, list[str]]:
    """Each chart's lines by its title (titles are the lines that hold a `·`), one chart a
    row (a width under two charts'); the legend, the last line, is no chart's."""
    charts: dict[str, list[str]] = {}
    title = ""
    for line in text.splitlines()[:-1]:
        if " · " in line:
            title = line.strip()
            charts[title] = []
        elif title and line.strip():
            charts[title].append(line)
    return charts


def test_each_tag_is_a_chart_and_epoch_series_are_read_in_epochs(fit_logdir: Path) -> None:
    done = distmon("--plot", "loss", "--width", "72", fit_logdir)
    assert done.returncode == 0, done.stderr
    charts = _charts(done.stdout)
    assert set(charts) == {
        "batch_loss · step", "epoch_loss · epoch", "evaluation_loss_vs_iterations · step",
    }
    epoch_axis = charts["epoch_loss · epoch"][-1].split()
    assert epoch_axis == ["0", "2"]  # three epochs, on an axis of their own
    batch_axis = charts["batch_loss · step"][-1].split()
    assert int(batch_axis[-1]) - int(batch_axis[0]) >= 5  # the batches' own steps
    assert all(len(line) <= 72 for lines in charts.values() for line in lines)
    assert "\x1b[" not in done.stdout  # no terminal: no colour codes


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_colour_the_jobs_share_a_chart_with_a_legend(
    fit_logdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    out = Terminal()
    assert run_plot(parse_options(["--once", "--plot", "^epoch_loss$", "--width", "80",
                                   str(fit_logdir)]), out) == 0
    text = out.getvalue()
    assert "\x1b[" in text
    titles = [line for line in text.splitlines() if " · " in line]
    assert len(titles) == 1 and "epoch_loss · epoch" in titles[0]
    legend = text.splitlines()[-1]
    assert "fit/train" in legend and "fit/validation" in legend  # both curves, one chart
    assert "ema 0.6 over faint raw" in legend


def test_no_colour_tells_the_curves_by_line_style(
    fit_logdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out = Terminal()
    run_plot(parse_options(["--once", "--plot", "^epoch_loss$", str(fit_logdir)]), out)
    assert "\x1b[" not in out.getvalue()
    assert len(_charts(out.getvalue())) == 1
    legend = out.getvalue().splitlines()[-1]
    assert "fit/train (solid)" in legend and "fit/validation (dashed)" in legend


def test_a_pattern_no_tag_matches_is_one_line_naming_the_tags(fit_logdir: Path) -> None:
    done = distmon("--plot", "nope", fit_logdir)
    assert done.returncode == 2 and not done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("distmon: --plot: no tag matches 'nope' (tags: batch_loss")


@pytest.mark.parametrize(("args", "error"), [
    (["--plot", "loss"], "--plot needs --once"),
    (["--once", "--width", "80"], "--width needs --plot"),
    (["--once", "--plot", "(", "."], "--plot: not a regular expression"),
    (["--once", "--plot", "loss", "--json"], "--json and --plot: choose one"),
])
def test_plot_usage_errors(args: list[str], error: str) -> None:
    done = subprocess.run([sys.executable, "-m", "distmon", *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and error in done.stderr


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(points, min_size=1, max_size=12), st.booleans())
def test_any_logdir_plots_escaped_or_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drawn: list[Point], colour: bool
) -> None:
    """Hostile names, values and steps: charts whose every outside string is escaped (nothing
    but the chart's own colour codes reaches the terminal), or one DistmonError line."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    root = tmp_path / f"logs{len(list(tmp_path.iterdir()))}"
    write_run(root / "j", drawn)
    out = Terminal() if colour else io.StringIO()
    try:
        assert run_plot(parse_options(["--once", "--plot", ".", str(root)]), out) == 0
    except DistmonError as err:
        assert "\n" not in str(err) and "\x1b" not in str(err)
        return
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert not any(unicodedata.category(c) == "Cc" and c != "\n" for c in plain)


def write_fit_like(root: Path) -> Path:
    """A Keras fit's logdir as its TensorBoard callback lays it out, by the real event writer:
    batch_loss at steps, epoch_loss at x = epoch (12 steps an epoch), validation at epochs."""
    train = [Point(b"batch_loss", i, 2.0 - i / 40, 1000.0 + i) for i in range(60)]
    train += [Point(b"epoch_loss", e, 1.5 / (e + 1), 1011.0 + 12 * e) for e in range(5)]
    write_run(root / "fit" / "train", train)
    write_run(root / "fit" / "validation",
              [Point(b"epoch_loss", e, 1.7 / (e + 1), 1011.5 + 12 * e) for e in range(5)])
    return root


def test_plot_prints_the_grid_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out = Terminal()
    root = write_fit_like(tmp_path)
    assert run_plot(parse_options(["--once", "--plot", "loss", "--width", "110", str(root)]),
                    out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["batch_loss", "·", "step", "epoch_loss", "·", "epoch"]
    assert lines[-2].split() == ["0", "59", "0", "4"]  # steps beside epochs, each its own axis
    assert lines[-1] == "━━━━ fit/train (solid)  ━━━  fit/validation (dashed)  (ema 0.6)"
    assert all(len(line) <= 110 for line in lines)
