"""What a chart draws: its x-axis modes and one line (`Curve`), shared by the scalar charts
(render.view_model) and the histogram bands (render.distribution) without either importing the
other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

XMode = Literal["step", "relative", "wall"]
X_MODES: tuple[XMode, ...] = ("step", "relative", "wall")


@dataclass(frozen=True, eq=False)
class Curve:
    """One line on a chart. `xs` and `ys` are the snapshot's own `Column` views where nothing
    was computed (steps, wall times, raw values), else a `Column` over the computed array
    (smoothed values, relative times): the chart reads the arrays, never a Python object per
    point. Plain tuples work too (tests, histogram bands)."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: int  # index into the palette; a job's parts share it, validation is dimmed
    dim: bool = False

    def __eq__(self, other: object) -> bool:
        """Equal as the tuples they replace compare (value by value), over the arrays."""
        if not isinstance(other, Curve):
            return NotImplemented
        return (
            (self.label, self.color, self.dim) == (other.label, other.color, other.dim)
            and _same(self.xs, other.xs)
            and _same(self.ys, other.ys)
        )

    def __hash__(self) -> int:
        return hash((self.label, self.color, self.dim, len(self.xs), len(self.ys)))


def _same(a: Sequence[float], b: Sequence[float]) -> bool:
    if a is b:
        return True
    if len(a) != len(b):
        return False
    import numpy as np  # loaded by then: the store's arrays are numpy's

    return bool(np.array_equal(np.asarray(a), np.asarray(b)))
