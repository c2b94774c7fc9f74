"""The input-stall rule from a TensorFlow profile, for jobs that write no input-wait series.

A job distagent runs writes `perf/input_wait_fraction` and `series.input_stall` judges it; a
foreign job (any Keras or custom loop with a TensorBoard logdir) writes none, but its profile
says the same from the trace: the share of each step spent waiting for input, by the same
bands (`series.input_stall_severity`), and which tf.data stage holds it back, with what to
change. Where both exist the series wins: it is newer than any one profile.
"""

from __future__ import annotations

from collections.abc import Mapping

from distcore import names
from distcore.alerts import Alert, RunLike
from distcore.alerts.series import input_stall_severity
from distcore.profile import ProfileSummary

KIND = "profile_input_bound"


def _duration(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


def profile_input_bound(
    profile: ProfileSummary, parts: Mapping[str, RunLike], run: str, now: float
) -> Alert | None:
    """The alert for `run` (the job's run the profile belongs to), or None: none of the job's
    parts writes an input-wait series, the profile found steps, and their input share is in a
    band. The message names the bottleneck stage and its remedy where the profile has one."""
    if any(names.INPUT_WAIT_FRACTION in p.scalars for p in parts.values()):
        return None
    if not profile.step_count or profile.total.step_ms <= 0:
        return None
    severity = input_stall_severity(profile.input_percent / 100.0)
    if severity is None:
        return None
    level = "highly" if severity == "critical" else "moderately"
    steps = f"{profile.step_count} step" + ("" if profile.step_count == 1 else "s")
    message = (f"Your program is {level} input-bound (its profile, {steps}): "
               f"{profile.input_percent:.0f}% of the step time is spent waiting for input.")
    if profile.bottleneck is not None:
        stage = profile.bottleneck.stage
        message += (f" Bottleneck: the tf.data stage {stage.path}, "
                    f"{_duration(stage.self_ms)} self time; {profile.bottleneck.remedy}.")
    else:
        message += " The profile names no tf.data stage: is the input a Python generator?"
    return Alert(KIND, severity, run, message, now)
