"""The fast path's scalars: the records that hold one scalar and nothing else, decoded by the
compiled kernel (_kernel_scalars.c) in one call.

Writers serialise fields in field-number order, so such an event has a fixed layout with a few
optional parts: wall_time, [step], summary{value{tag, simple_value | tensor[, metadata]}}. The
kernel checks each record against it; a record that fails any check is left to the per-record
decoder (record.py), so this path may be strict without being wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Final

import numpy as np
import numpy.typing as npt

import distcore.tfrecord.fields as s
from distcore.tfrecord.framing import F64, I64, U8

Bools = npt.NDArray[np.bool_]
_MAX_TAG: Final = 96
_KEYS: Final = bytes(
    [s.K_WALL, s.K_STEP, s.K_SUMMARY, s.K_VALUE, s.K_TAG, s.K_SIMPLE, s.K_TENSOR, s.K_METADATA]
)


@dataclass
class FastScalars:
    index: I64  # which records (positions in the batch) were decoded here
    tag_ids: I64  # into `tags`
    tags: list[str]
    steps: I64
    wall_times: F64
    values: F64
    is_tensor: Bools  # a TF2 tensor scalar (needs the tag's plugin to be "scalars")
    has_metadata: Bools  # carried the plain scalars metadata


def decode_scalars(compiled: ModuleType, buf: U8, starts: I64, lengths: I64) -> FastScalars:
    """The single-scalar records among buf's records at `starts`, with tags interned exactly."""
    index, tag_ids, tags, steps, walls, values, is_tensor, has_md = compiled.scalars(
        buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64),
        _KEYS, s.F32_TENSOR_PREFIX, s.F64_TENSOR_PREFIX, s.SCALARS_METADATA, _MAX_TAG,
    )  # fmt: skip
    return FastScalars(
        np.frombuffer(index, np.int64), np.frombuffer(tag_ids, np.int64), tags,
        np.frombuffer(steps, np.int64), np.frombuffer(walls, np.float64),
        np.frombuffer(values, np.float64), np.frombuffer(is_tensor, np.bool_),
        np.frombuffer(has_md, np.bool_),
    )  # fmt: skip
