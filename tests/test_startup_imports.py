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
