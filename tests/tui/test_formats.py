"""A number shown in too little room keeps its value: fewer digits, a short exponent, or an
ellipsis; never the first characters of its text, which read as another number."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distmon.formats import compact, fitted
from distmon.render.braille import Y_LABEL_WIDTH, Axis, Frame, _x_axis, _y_label


def _keeps_value(shown: str, value: float) -> bool:
    """`shown` reads as `value` rounded: the same sign, off by at most half a unit of its last
    shown digit (exact decimal arithmetic: `2e308` is 1.5e308 rounded, though no float)."""
    number, exact = Decimal(shown), Decimal(value)
    if exact == 0:
        return number == 0
    mantissa = shown.lower().split("e")[0].lstrip("-")
    digits = len(mantissa.replace(".", "").lstrip("0")) or 1
    scale = Decimal(10) ** (exact.adjusted() - digits + 1)
    return number.is_signed() == exact.is_signed() and abs(number - exact) <= scale / 2


@pytest.mark.parametrize(("value", "width", "shown"), [
    (0.02, 4, "0.02"),
    (0.02134, 4, "0.02"),
    (0.02134, 3, None),
    (2e-2 / 7, 4, "3e-3"),
    (123456789.0, 3, "1e8"),
    (-123456789.0, 3, None),
    (1e308, 5, "1e308"),
    (float("nan"), 3, "nan"),
    (float("-inf"), 3, None),
])
def test_compact_forms(value: float, width: int, shown: str | None) -> None:
    assert compact(value, width) == shown


@given(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(min_value=1, max_value=12),
)
def test_a_fitted_number_is_the_same_number_or_an_ellipsis(value: float, width: int) -> None:
    shown = fitted(repr(value), width)
    assert len(shown) <= width
    assert shown in ("…", "") or _keeps_value(shown, value), shown


@given(st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_a_chart_label_is_the_same_number(value: float) -> None:
    label = _y_label(value, log_y=False)
    assert len(label) == Y_LABEL_WIDTH and label.endswith("┤")
    text = label[:-1].strip()
    assert text == "…" or _keeps_value(text, value), label


def test_an_x_axis_too_narrow_for_both_ends_cuts_neither() -> None:
    frame = Frame(Axis(0.0, 123456.0), Axis(1.0, 2.0))
    axis = _x_axis(frame, 6, "step", 0)
    labels = axis.split()
    assert labels == ["0"]  # the right end does not fit beside it: left out, not cut
