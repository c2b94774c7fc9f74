"""The CPU packages' energy through Linux's powercap (Intel/AMD RAPL), where it is readable.

Each package zone `<root>/intel-rapl:<n>/` has `energy_uj` (microjoules, wrapping at
`max_energy_range_uj`); its sub-zones (`intel-rapl:<n>:<m>`, cores, uncore, DRAM) are parts of
the package and are not added again. Since Linux 5.10 `energy_uj` is readable by root only:
elsewhere, or without powercap at all (a VM, a container, another architecture), the energy is
unknown (None), never a zero. The files are untrusted numbers: a value that is not a
non-negative integer, or a range that is not a positive one, makes that zone unknown.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

POWERCAP: Final = Path("/sys/class/powercap")
_PACKAGE = re.compile(r"intel-rapl:\d{1,4}")
MAX_RANGE_UJ: Final = 2**64  # no counter is wider


def _microjoules(path: Path) -> int | None:
    """A counter file's integer in [0, MAX_RANGE_UJ], or None (absent, unreadable, odd). A
    longer file is refused whole: cut, it would read as another number."""
    try:
        with path.open("rb") as file:
            raw = file.read(64)
        text = raw.decode("ascii").strip()
    except (OSError, ValueError):
        return None
    if not text.isdigit() or len(text) > 20:
        return None
    value = int(text)
    return value if value <= MAX_RANGE_UJ else None


class RaplReader:
    """A counter of the packages' joules that only grows: each read adds every package's
    increase since the last read (across a wrap: up to its range, then from zero). `read()`
    is None while no package is readable."""

    def __init__(self, root: Path = POWERCAP) -> None:
        try:
            zones = sorted(p for p in root.iterdir() if _PACKAGE.fullmatch(p.name))
        except OSError:
            zones = []
        self._zones = zones
        self._last: dict[Path, int] = {}
        self._joules: float | None = None

    def read(self) -> float | None:
        for zone in self._zones:
            raw = _microjoules(zone / "energy_uj")
            if raw is None:
                continue
            before = self._last.get(zone)
            self._last[zone] = raw
            if self._joules is None:
                self._joules = 0.0
            if before is not None:
                self._joules += self._increase(zone, before, raw) / 1e6
        return self._joules

    @staticmethod
    def _increase(zone: Path, before: int, now: int) -> int:
        if now >= before:
            return now - before
        span = _microjoules(zone / "max_energy_range_uj")
        if span is None or not before < span <= MAX_RANGE_UJ:
            return 0  # a counter gone back without a range to wrap at: no increase known
        return span - before + now
