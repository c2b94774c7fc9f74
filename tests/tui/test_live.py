"""Pilot tests over real watched logdirs: real writers -> LogdirWatcher -> RunStore -> JobIndex
-> app. No fixed store: what the screen shows is what the files say, as they change."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from distmon.app import DistmonApp
from distmon.options import Options
from distmon.widgets.panels import Panel
from distmon.widgets.runs import RunsTable
from tests.kit.wait import until

TIMEOUT = 60.0  # generous: a loaded 2-core machine


def writer(run_dir: Path) -> Any:
    from tensorboardX import SummaryWriter

    return SummaryWriter(str(run_dir), flush_secs=1)


def add(w: Any, step: int, value: float) -> None:
    w.add_scalar("loss", value, step, walltime=time.time())
    w.flush()


def app_over(logdir: Path) -> DistmonApp:
    return DistmonApp(Options(logdirs=(logdir,), refresh=0.2, no_gpu=True))


def rows(app: DistmonApp) -> dict[str, tuple[str, str]]:
    """job -> (status, step) as the table shows them."""
    table = app.query_one(RunsTable)
    return {r.key: (r.status, r.step) for r in table._rows}


async def test_runs_appear_grow_vanish_and_finish(tmp_path: Path) -> None:
    a = writer(tmp_path / "a" / "train")
    add(a, 0, 1.0)
    app = app_over(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: rows(app).get("a") == ("live", "0"), "job a")

        b = writer(tmp_path / "b")
        add(b, 0, 2.0)
        b.close()
        await until(pilot, lambda: set(rows(app)) == {"a", "b"}, "a new run")

        add(a, 10, 0.5)
        await until(pilot, lambda: rows(app)["a"][1] == "10", "a new point")

        shutil.rmtree(tmp_path / "b")
        await until(pilot, lambda: rows(app).get("b", ("",))[0] == "gone", "b gone")

        run_json = tmp_path / "a" / "run.json"
        run_json.write_text(json.dumps({"status": "running", "last_step": 10}))
        await until(pilot, lambda: rows(app)["a"][0] == "running", "a running")
        a.close()
        run_json.write_text(json.dumps({"status": "finished", "last_step": 10}))
        later = time.time() + 2  # a new mtime even on a coarse-grained filesystem
        os.utime(run_json, (later, later))
        await until(pilot, lambda: rows(app)["a"][0] == "finished", "a finished")
        await pilot.press("enter")  # focus a: the details say what run.json says
        details = app.query_one("#details", Panel)
        await until(pilot, lambda: "distagent: finished; step 10" in str(details.render()), "a")
