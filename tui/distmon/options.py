"""The dashboard's options, parsed from the command line into one frozen dataclass."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Options:
    logdirs: tuple[Path, ...]
    poll: bool = False
    refresh: float = 1.0
    no_gpu: bool = False
    simulate_gpus: int = 0
    once: bool = False
    json: bool = False
    check: bool = False  # --once --check: exit 1 on any critical alert
    max_points: int = 2000
