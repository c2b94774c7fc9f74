"""The learning rate over a run: gradual warmup to the planned rate, then the configured decay.

Goyal et al. (2017): start at the base rate (the one tuned for the base batch) and ramp linearly to
the scaled rate over the warmup steps, then follow the decay. The optimizer evaluates the schedule
at its own step counter (the number of updates already applied), so the first update uses the base
rate and update `warmup_steps` is the first at the full rate.

Decays, over the steps after warmup (p runs from 0 to 1 across them):
- none: the scaled rate throughout;
- cosine: scaled × ½(1 + cos πp), reaching 0 at the last step;
- step: scaled × 0.1 from p = ½, × 0.01 from p = ¾;
- exponential: scaled × 0.01^p, reaching 1% of the rate at the last step.

`scale` (a variable, optional) multiplies the whole schedule: a rollback after divergence lowers
it (`train.recovery_lr_factor`), warmup and decay keep their shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
from keras import ops

DECAYS = ("none", "cosine", "step", "exponential")
_EXPONENTIAL_END = 0.01
_STEP_FACTOR = 0.1


class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(
        self,
        *,
        base_rate: float,
        scaled_rate: float,
        warmup_steps: int,
        total_steps: int,
        decay: str = "none",
        scale: Any = None,
    ) -> None:
        if decay not in DECAYS:
            raise ValueError(f"unknown decay {decay!r}; expected one of {DECAYS}")
        self.base_rate = float(base_rate)
        self.scaled_rate = float(scaled_rate)
        self.warmup_steps = max(0, int(warmup_steps))
        self.total_steps = max(1, int(total_steps))
        self.decay = decay
        self.scale = scale

    def __call__(self, step: Any) -> Any:
        step = ops.cast(step, "float32")
        warmup = float(self.warmup_steps)
        ramp = self.base_rate + (self.scaled_rate - self.base_rate) * step / max(warmup, 1.0)
        decayed = self._decayed(step)
        rate = ops.where(step < warmup, ramp, decayed)
        return rate if self.scale is None else rate * ops.cast(self.scale, "float32")

    def _decayed(self, step: Any) -> Any:
        span = max(float(self.total_steps - self.warmup_steps), 1.0)
        progress = ops.clip((step - float(self.warmup_steps)) / span, 0.0, 1.0)
        rate = self.scaled_rate
        if self.decay == "cosine":
            return rate * 0.5 * (1.0 + ops.cos(math.pi * progress))
        if self.decay == "step":
            factor = ops.where(progress >= 0.5, _STEP_FACTOR, 1.0)
            factor = factor * ops.where(progress >= 0.75, _STEP_FACTOR, 1.0)
            return rate * factor
        if self.decay == "exponential":
            return rate * ops.power(_EXPONENTIAL_END, progress)
        return rate + 0.0 * progress

    def get_config(self) -> dict[str, Any]:
        return {
            "base_rate": self.base_rate,
            "scaled_rate": self.scaled_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "decay": self.decay,
        }


def rate_reader(schedule: Callable[[Any], Any]) -> Callable[[int], float]:
    """The rate at a step, for a log point, in memory that stays flat over a run.

    Called eagerly with a Python step, the schedule turns that int and its own Python floats
    into tensors at every call, and TensorFlow (2.21) keeps every Python number it converted:
    a job's memory grew with each log point. Compiled once and given a numpy-backed step, it
    converts nothing per call."""
    import numpy as np
    import tensorflow as tf

    compiled = tf.function(schedule)
    return lambda step: float(compiled(tf.constant(np.asarray(step, np.int64))))
