"""Recovering from divergence: what a divergence does, and the record of each rollback.

`train.on_divergence`: "stop" ends the run `diverged` (today's behaviour), "continue" ignores it
(`stop_on_nan = false`), "rollback" restores the newest checkpoint (only checkpoints taken while
the loss was finite exist: a boundary checks before it saves, and the initial state is saved
first), multiplies the learning-rate schedule by `recovery_lr_factor`, leaves the data iterator
where it is (past the window that blew up) and goes on, at most `max_recoveries` times, as
TensorFlow Model Garden's trainer does (`recovery_max_trials`, `loss_upper_bound`).

Multi-worker jobs decide together without a message: the divergence is found in the step on the
all-reduced loss and gradient norm, so every worker sees the same first bad step, reaches the
same boundary, restores the same (chief's) checkpoint and scales by the same factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from distcore.wording import counted

STOP, ROLLBACK, CONTINUE = "stop", "rollback", "continue"


def divergence_action(on_divergence: str, stop_on_nan: bool) -> str:
    """The action in force: `stop_on_nan = false` keeps meaning "continue"."""
    return CONTINUE if not stop_on_nan else on_divergence


@dataclass(frozen=True)
class Recovery:
    """One rollback, as run.json's `recoveries` lists it."""

    step: int
    """The first step whose loss (or gradient) diverged."""
    loss: float
    """That step's mean loss (NaN or ±inf: written as null in run.json, `reason` says which)."""
    reason: str
    """nan, inf, above_bound (loss_upper_bound) or gradient (a non-finite gradient norm)."""
    lr_before: float
    lr_after: float
    restored_step: int
    skipped_batches: int
    """Batches of data the run moved past (the window from the restored step to the boundary)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "loss": self.loss if math.isfinite(self.loss) else None,
            # The rates are float32 in the graph: 6 digits say all they hold.
            "reason": self.reason, "lr_before": float(f"{self.lr_before:.6g}"),
            "lr_after": float(f"{self.lr_after:.6g}"),
            "restored_step": self.restored_step, "skipped_batches": self.skipped_batches,
        }

    def message(self, number: int, limit: int) -> str:
        loss = f"{self.loss:.4g}" if math.isfinite(self.loss) else str(self.loss)
        return (f"warning: loss diverged at step {self.step} ({loss}); rolled back to step "
                f"{self.restored_step}, learning rate {self.lr_before:.4g} -> "
                f"{self.lr_after:.4g}, skipping "
                f"{counted(self.skipped_batches, 'batch', 'batches')} "
                f"(recovery {number} of {limit})")


def relative_bound(first_loss: float, factor: float) -> float | None:
    """The loss bound `factor` times the first logged loss's size (at least 1: a loss that
    starts near 0 would make any noise a divergence); None: no bound (factor 0, or a first
    loss that is not finite, which is a divergence of its own)."""
    if factor <= 0 or not math.isfinite(first_loss):
        return None
    return factor * max(abs(first_loss), 1.0)


def divergence_reason(loss: float, bound: float) -> str:
    if math.isnan(loss):
        return "nan"
    if math.isinf(loss):
        return "inf"
    return "above_bound" if bound > 0 and loss > bound else "gradient"


def divergence_message(step: int, loss: float, bound: float) -> str:
    reason = divergence_reason(loss, bound)
    if reason == "above_bound":
        return f"loss {loss:.4g} above loss_upper_bound {bound:g} at step {step}"
    if reason == "gradient":
        return f"gradient norm became NaN or infinite at step {step} (loss {loss:.4g})"
    return f"loss became NaN or infinite at step {step}"
