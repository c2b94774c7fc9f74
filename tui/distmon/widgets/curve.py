"""What a chart draws: its x-axis modes and one line (`Curve`), shared by the scalar charts
(widgets.view_model) and the histogram bands (widgets.distribution) without either importing the
other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

XMode = Literal["step", "relative", "wall"]
X_MODES: tuple[XMode, ...] = ("step", "relative", "wall")


@dataclass(frozen=True)
class Curve:
    """One line on a chart."""

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: int  # index into the palette; a job's parts share it, validation is dimmed
    dim: bool = False
