"""runs_to_json: the runs' keys named once per set of keys (a sweep's runs share them), each
run's element what run_to_json makes of it alone."""

from __future__ import annotations

import dataclasses
import math

import pytest

from distcore.events.jsonify import run_to_json, runs_to_json
from distcore.events.snapshots import RunSnapshot
from distcore.textsafe import json_names
from tests.tui.fixed import run, series


def _sweep() -> list[RunSnapshot]:
    alike = ("x\udcff", "x\\xff")  # tags that print alike: " #2"
    runs = []
    for i in range(6):
        tags = ("loss", "accuracy") if i % 2 else (*alike, "loss")
        base = run(f"sweep/{i}", *(series(t, [1.0 / (i + 1), math.nan]) for t in tags))
        hparams = {"lr": 0.1 * i, "optimizer": "adam\udcff" if i == 3 else "sgd"}
        if i == 4:
            hparams = {"optimizer": "sgd", "lr": 0.4}  # the same names, another order
        runs.append(dataclasses.replace(base, hparams=hparams))
    return runs


def test_each_run_is_what_run_to_json_makes_of_it() -> None:
    runs = _sweep()
    names = json_names(r.name for r in runs)
    assert runs_to_json(runs) == [run_to_json(r, names[r.name]) for r in runs]


@pytest.mark.parametrize("which", [0, 2])
def test_tags_that_print_alike_stay_apart_in_each_run(which: int) -> None:
    element = runs_to_json(_sweep())[which]
    assert list(element["scalars"]) == ["x\\xff #2", "x\\xff", "loss"]  # the byte: " #2"
    assert element["scalars"]["x\\xff"]["last_value"] == "nan"


def test_a_run_keeps_its_own_order_of_the_same_names() -> None:
    elements = runs_to_json(_sweep())
    assert list(elements[4]["hparams"]) == ["optimizer", "lr"]
    assert list(elements[2]["hparams"]) == ["lr", "optimizer"]
    assert elements[3]["hparams"]["optimizer"] == "adam\\xff"
