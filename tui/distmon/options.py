"""The dashboard's options, parsed from the command line into one frozen dataclass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distcore.webhook.hold import DEFAULT_HOLD_SECONDS, MAX_HOLD_SECONDS

# Seconds after a job ended that its critical alerts still fail `--check`: a cron job that runs
# at most this often hears of each ended job's failure once.
DEFAULT_ENDED_WITHIN = 3600.0

if TYPE_CHECKING:
    from distcore.remote.spec import SshSpec, UrlSpec

# Sane ranges: a refresh below 0.1 s only burns CPU, above an hour is no monitor; a bound on
# simulated GPUs and kept points keeps a typo from eating the machine's memory.
MIN_REFRESH = 0.1
MAX_REFRESH = 3600.0
MAX_SIMULATED_GPUS = 64
MAX_POINTS = 1_000_000
# --serve --metrics: the default bound on exported series (docs/serve.md, "the cardinality bound").
DEFAULT_MAX_SERIES = 10_000
MAX_SERIES = 10_000_000
__all__ = ["DEFAULT_HOLD_SECONDS", "DEFAULT_MAX_SERIES", "MAX_HOLD_SECONDS", "Options"]


@dataclass(frozen=True)
class Options:
    logdirs: tuple[Path, ...]
    poll: bool = False
    refresh: float = 1.0
    no_gpu: bool = False
    simulate_gpus: int = 0
    once: bool = False
    json: bool = False
    check: bool = False  # --once --check: exit 1 on a critical alert (distcore.jobs.ended)
    ended_within: float = DEFAULT_ENDED_WITHIN  # --ended-within
    max_points: int = 2000
    screenshot_dir: Path | None = None  # the palette's screenshot; None: the current directory
    # Remote sources: `[user@]host:PATH` and fsspec URLs, beside the local logdirs.
    remotes: tuple[SshSpec | UrlSpec, ...] = ()
    ssh_config: Path | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    # --serve: headless, long-running; metrics over HTTP and/or alerts to a webhook.
    serve: bool = False
    metrics: tuple[str, int] | None = None  # (host, port) to listen on; port 0: any free port
    # The webhook URL (a secret: never printed whole, not even in a repr) and where it came from.
    notify: str | None = field(default=None, repr=False)
    notify_source: str = ""  # "--notify", "--notify-file PATH" or "DISTMON_NOTIFY_URL"
    notify_level: str = "critical"
    notify_hold: float = DEFAULT_HOLD_SECONDS  # a return within it is counted, not posted
    max_series: int = DEFAULT_MAX_SERIES
    # The comparison table of a sweep: --once --table / --csv / --points, and the initial
    # sort (`[-]COLUMN`) and filter expression (`NAME OP VALUE,...`) of the dashboard too.
    table: bool = False
    csv: bool = False
    points: bool = False
    plot: str | None = None  # --once --plot REGEX: the matching tags' charts as text
    width: int | None = None  # the charts' width; None: the terminal's
    sort: str | None = None
    filter: str = ""
    # USD per GPU-hour and per kWh (--price-gpu-hour, --price-kwh); None: the job's own, if any.
    price_gpu_hour: float | None = None
    price_kwh: float | None = None
