"""The dashboard's way to its first screen: parsing the command line loads no reader.

The event reader (numpy, protobuf, watchdog) is imported by the producers, off the UI thread,
while Textual draws the first frame; imported while the CLI parses its sources (distcore.remote
did, for a type annotation), it cost the main thread about 0.2 s before Textual even loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

READER = {"numpy", "google", "watchdog", "tensorboard", "textual", "fsspec"}
# --serve's webhook client (distcore.notify: urllib.request, http.client, email): 0.05-0.1 s of
# CPU that a dashboard's start paid for nothing.
SERVE_ONLY = {"distcore.notify", "distmon.serve", "urllib.request", "http.client", "email"}


@pytest.mark.parametrize(
    "argv",
    [
        ["LOGDIR"],
        ["--poll", "--sort", "-lr", "--filter", "lr<0.01", "LOGDIR"],
        ["--once", "--json", "LOGDIR", "LOGDIR"],
    ],
)
def test_parsing_the_command_line_loads_no_reader(tmp_path: Path, argv: list[str]) -> None:
    args = [str(tmp_path) if a == "LOGDIR" else a for a in argv]
    probe = (
        "import json, sys\nimport distmon.cli\nfrom distmon.arguments import parse_options\n"
        f"options = parse_options({args!r})\n"
        "print(json.dumps([sorted(sys.modules), [str(p) for p in options.logdirs]]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                         text=True).stdout
    modules, logdirs = json.loads(out.strip().splitlines()[-1])
    assert logdirs == [str(tmp_path)] * argv.count("LOGDIR")  # it did parse them
    assert not READER & {m.split(".")[0] for m in modules}
    assert not SERVE_ONLY & (set(modules) | {m.split(".")[0] for m in modules})


@pytest.mark.parametrize(("given", "kept"), [(None, "1"), ("3", "3")])
def test_numpy_loads_one_blas_thread_unless_told_otherwise(given: str | None, kept: str) -> None:
    """OpenBLAS starts a thread per core as numpy loads (0.04 s of CPU on the way to the first
    row); distmon does no linear algebra. A user's own setting stays."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    probe = (
        "import os\nfrom distmon.cli import main\nmain(['--version'])\n"
        "import numpy\nprint(os.environ['OPENBLAS_NUM_THREADS'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, env=env
    ).stdout
    assert out.strip().splitlines()[-1] == kept


# What of NVML a start may load: distcore's NVML source and the library itself (nvidia-ml-py's
# pynvml); and the simulated devices.
NVML = {"distcore.telemetry.nvml", "pynvml"}
SIMULATED = {"distcore.telemetry.simulated"}
DASHBOARD = """
import json, sys, time
from distmon.cli import parse_options
from distmon.producers import ProducerSet, make_producers
options = parse_options(ARGS)
made = make_producers(options)
producers = ProducerSet(made, options)
producers.start()
deadline = time.monotonic() + 60  # bounds a failure only
while made.telemetry.samples < 1 and time.monotonic() < deadline:
    time.sleep(0.01)
samples = made.telemetry.samples
producers.close()
print(json.dumps([sorted(sys.modules), samples]))
"""
ONCE = """
import contextlib, io, json, sys
from distmon.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(["--once", "--json", *ARGS])
gpus = json.loads(out.getvalue())["gpus"]
print(json.dumps([sorted(sys.modules), code == 0 and gpus["sampled_at"] is not None]))
"""


@pytest.mark.parametrize(
    ("probe", "flags", "loaded"),
    [
        (DASHBOARD, ["--no-gpu"], set()),
        (ONCE, ["--no-gpu"], set()),
        (DASHBOARD, ["--simulate-gpus", "2"], SIMULATED),
        (DASHBOARD, [], NVML),  # the probe sees them: without --no-gpu NVML is asked
    ],
    ids=["dashboard-no-gpu", "once-no-gpu", "dashboard-simulated", "dashboard-nvml"],
)
def test_no_gpu_loads_nothing_of_nvml(
    tmp_path: Path, probe: str, flags: list[str], loaded: set[str]
) -> None:
    """The GPU sources the flags do not ask for are never imported: the dashboard's producers
    started until the sampler took a sample (or `--once`), in a fresh interpreter."""
    code = probe.replace("ARGS", repr([*flags, str(tmp_path)]))
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    modules, sampled = json.loads(out.strip().splitlines()[-1])
    assert sampled  # the telemetry was sampled
    assert (NVML | SIMULATED) & set(modules) == loaded
