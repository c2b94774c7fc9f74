"""distcore.profile: TensorFlow profiler files (`*.xplane.pb`, an XSpace protobuf) read
without TensorFlow, for the terminal.

`summarize(path, *, max_bytes, timeout_s, max_memory) -> ProfileSummary | ProfileError` reads
one file in a resource-limited subprocess and says, per step, how the time split between
input, compute and communication, which tf.data stage holds the input back and what to change
about it, the top ops by self time, and the GPU streams' kernels and copies where the profile
has a GPU. `find_profiles(run_dir)` lists a run's profiles (`profiles_at(dir)`: those of one
folder, not of its children). Nothing here imports TensorFlow.
"""

from __future__ import annotations

from distcore.profile.discover import find_profiles, profiles_at
from distcore.profile.runner import MAX_BYTES, MAX_MEMORY, TIMEOUT_S, summarize
from distcore.profile.summary import (
    Bottleneck,
    OpTime,
    ProfileError,
    ProfileSummary,
    Stage,
    StepTime,
    StreamTime,
)

__all__ = [
    "MAX_BYTES",
    "MAX_MEMORY",
    "TIMEOUT_S",
    "Bottleneck",
    "OpTime",
    "ProfileError",
    "ProfileSummary",
    "Stage",
    "StepTime",
    "StreamTime",
    "find_profiles",
    "profiles_at",
    "summarize",
]
