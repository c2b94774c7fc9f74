"""What one profile says, as plain data: `ProfileSummary` (or `ProfileError`), JSON-able both
ways, so that it crosses from the parsing subprocess to its caller as one JSON document.

Every name in it was escaped for a terminal (`textsafe.terminal_text`) and elided where it was
made; every time is in milliseconds, from clamped picoseconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Final, TypeVar

NAME_LIMIT: Final = 160
UNREADABLE: Final = "profile unreadable"

T = TypeVar("T")


@dataclass(frozen=True)
class StepTime:
    """One step's time (or, as `ProfileSummary.total`, all steps' together), in ms."""

    number: int
    step_ms: float
    input_ms: float
    device_compute_ms: float
    host_compute_ms: float
    communication_ms: float
    other_ms: float


@dataclass(frozen=True)
class Stage:
    """A tf.data stage: its iterator path (`Iterator::Root::...::MapAndBatch`), self time,
    its share of the input pipeline's time (0-1), and the stats it was recorded with."""

    path: str
    self_ms: float
    share: float
    stats: dict[str, int | float | str]


@dataclass(frozen=True)
class Bottleneck:
    stage: Stage
    remedy: str


@dataclass(frozen=True)
class OpTime:
    name: str  # the op type on the host, the kernel's name on a device
    where: str  # "host", or the device plane ("/device:GPU:0")
    kind: str  # "compute" or "communication"
    count: int
    self_ms: float


@dataclass(frozen=True)
class StreamTime:
    device: str
    stream: str
    kernels: int
    kernel_ms: float
    copies: int
    copy_ms: float


@dataclass(frozen=True)
class ProfileSummary:
    path: str
    hostnames: tuple[str, ...]
    events: int
    step_source: str  # "step markers", "get-next" or "none"
    steps: tuple[StepTime, ...]  # the first ones, at most MAX_STEPS_SHOWN
    step_count: int
    total: StepTime
    input_percent: float
    input_verdict: str
    stages: tuple[Stage, ...]
    bottleneck: Bottleneck | None
    top_ops: tuple[OpTime, ...]
    streams: tuple[StreamTime, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "summary", **asdict(self)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ProfileSummary:
        bottleneck = doc["bottleneck"]
        return cls(
            path=doc["path"],
            hostnames=tuple(doc["hostnames"]),
            events=doc["events"],
            step_source=doc["step_source"],
            steps=tuple(_build(StepTime, s) for s in doc["steps"]),
            step_count=doc["step_count"],
            total=_build(StepTime, doc["total"]),
            input_percent=doc["input_percent"],
            input_verdict=doc["input_verdict"],
            stages=tuple(_build(Stage, s) for s in doc["stages"]),
            bottleneck=None if bottleneck is None else Bottleneck(
                _build(Stage, bottleneck["stage"]), bottleneck["remedy"]),
            top_ops=tuple(_build(OpTime, o) for o in doc["top_ops"]),
            streams=tuple(_build(StreamTime, s) for s in doc["streams"]),
        )


@dataclass(frozen=True)
class ProfileError:
    """A profile that could not be read; `message` is the one line to show for its run."""

    path: str
    reason: str

    @property
    def message(self) -> str:
        return f"{UNREADABLE}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "error", "path": self.path, "reason": self.reason}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ProfileError:
        return cls(doc["path"], doc["reason"])


def _build(kind: type[T], doc: dict[str, Any]) -> T:
    names = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    return kind(**{k: v for k, v in doc.items() if k in names})


def from_json(doc: dict[str, Any]) -> ProfileSummary | ProfileError:
    if doc.get("kind") == "error":
        return ProfileError.from_json(doc)
    return ProfileSummary.from_json(doc)
