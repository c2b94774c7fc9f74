"""The kit's wait: returns the first truthy value, and a timeout names what was awaited."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.kit.wait import WaitTimeout, until, wait_until


def test_the_first_truthy_value_is_returned() -> None:
    counts = itertools.count()
    assert wait_until(lambda: next(counts) >= 3 and "there", "the third poll", every=0.001) == (
        "there")


def test_a_timeout_names_what_was_awaited_and_is_both_kinds_of_failure() -> None:
    with pytest.raises(WaitTimeout, match="waiting for the answer\nlog line") as raised:
        wait_until(lambda: False, "the answer", timeout=0.05, detail=lambda: "log line")
    assert isinstance(raised.value, AssertionError) and isinstance(raised.value, TimeoutError)


def test_without_a_name_the_predicate_s_source_is_named() -> None:
    with pytest.raises(WaitTimeout, match=r"lambda: 1 \+ 1 == 3"):
        wait_until(lambda: 1 + 1 == 3, timeout=0.05)


class Pilot:
    def __init__(self) -> None:
        self.pauses = 0

    async def pause(self, seconds: float) -> None:
        self.pauses += 1
        await asyncio.sleep(seconds)


def test_until_pauses_the_pilot_between_polls() -> None:
    pilot = Pilot()
    assert asyncio.run(until(pilot, lambda: pilot.pauses >= 2, "two pauses", every=0.001))
    with pytest.raises(WaitTimeout, match="never"):
        asyncio.run(until(pilot, lambda: False, "never", timeout=0.05))


