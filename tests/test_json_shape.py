"""The checker of the published JSON shape finds what it should (tests/json_shape.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.json_shape import documented_keys, undocumented


def test_the_published_block_is_found() -> None:
    keys = documented_keys()
    assert {"version", "runs", "jobs", "ledger", "workers", "wait_share", "gpm_reason"} <= keys


@pytest.mark.parametrize(("doc", "missing"), [
    ({"version": 1, "runs": [{"name": "a", "scalars": {"any tag": {"count": 1}}}]}, []),
    ({"jobs": [{"ledger": {"seconds": {"anything": 1.0}}}]}, []),
    ({"host": {"per_core": []}, "gpus": {"devices": [{"sm_activity": 1}]}}, []),
    ({"jobs": [{"name": "j", "secret_key": 1}]}, ["jobs[].secret_key"]),
    ({"gpus": {"bogus": 1}}, ["gpus.bogus"]),
    ({"hosts": [{"gpus": [{"x": 1}], "shiny": 2}]}, ["hosts[].shiny"]),
])
def test_undocumented_keys_are_named(doc: dict[str, Any], missing: list[str]) -> None:
    assert undocumented(doc) == missing
