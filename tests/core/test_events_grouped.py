"""The decoder yields exactly what its reference path (the per-record decoder) yields.

The reference (`reference=True`) runs every record through the per-record decoder with
TensorBoard's protos; the kernel's path must agree on every point, restart, hparam, problem and
plugin, bit for bit, whatever the bytes: writers mixed, tags of any length and bytes, varints of
1-10 bytes, restarts, damage and records that are not scalars.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.events_helpers import (
    WILD,
    assert_files_decode_alike,
    assert_grouped_equals_per_record,
    require_wild,
)
from tests.core.wire_builder import event_file, events, run_file

# Each test once on the compiled kernel and once on the reference (tests/core/conftest.py).
pytestmark = pytest.mark.usefixtures("decoder_path")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_file())
def test_grouped_equals_per_record_on_generated_files(data: bytes) -> None:
    assert_grouped_equals_per_record(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_file())
def test_grouped_equals_per_record_on_long_runs_of_one_shape(data: bytes) -> None:
    assert_grouped_equals_per_record(data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([b"loss", b"\xff", b"\xfe"]), min_size=1, max_size=3).flatmap(
    lambda tags: st.lists(events(tags), min_size=1, max_size=60)
), st.sampled_from([{}, {"loss": "scalars"}, {"\udcff": "histograms"}]))
def test_grouped_equals_per_record_with_plugins_from_earlier_reads(
    records: list[bytes], plugins: dict[str, str]
) -> None:
    from tests.kit.writers import record

    assert_grouped_equals_per_record(b"".join(record(r) for r in records), plugins)


def test_grouped_equals_per_record_on_wild_files() -> None:
    require_wild()
    roots = sorted(p for p in WILD.iterdir() if p.is_dir())
    assert len(roots) >= 10  # one folder per project (SOURCES.md)
    for root in roots:
        assert_files_decode_alike(root)
