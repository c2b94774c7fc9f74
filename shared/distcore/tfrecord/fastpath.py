"""Vectorised decoding of the common case: an Event that holds one scalar and nothing else.

Writers serialise fields in field-number order, so such an event has a fixed layout with a few
optional parts: wall_time, [step], summary{value{tag, simple_value | tensor[, metadata]}}. Each
check below runs on every record of a batch at once; a record that fails any of them is left to
the general decoder (record.py), so this path may be strict without being wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Final

import numpy as np
import numpy.typing as npt

import distcore.tfrecord.fields as s
import distcore.tfrecord.kernel as kernel
from distcore.tfrecord.buffers import I64, U8, Bools, at, clamp, equals, varints

F64 = npt.NDArray[np.float64]
_MAX_TAG: Final = 96
_F32_PREFIX: Final = s.F32_TENSOR_PREFIX
_F64_PREFIX: Final = s.F64_TENSOR_PREFIX
_SCALARS_MD: Final = s.SCALARS_METADATA


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


def _field_len(buf: U8, pos: I64, limit: int) -> tuple[I64, I64]:
    """(length, offset of the payload) of the length-delimited field whose key is at pos."""
    value, width = varints(buf, pos + 1)
    return clamp(value, limit), pos + 1 + width


def decode_scalars(buf: U8, starts: I64, lengths: I64) -> FastScalars:
    compiled = kernel.ACTIVE
    if compiled is not None:
        return _compiled(compiled, buf, starts, lengths)
    limit = len(buf) - 16
    ends = starts + lengths
    ok = buf[starts] == s.K_WALL
    walls = at(buf, "<f8")[starts + 1].astype(np.float64)
    pos = starts + 9
    has_step = buf[pos] == s.K_STEP
    step_raw, step_width = varints(buf, pos + 1)
    steps = np.where(has_step, step_raw.view(np.int64), 0)
    ok &= ~has_step | (step_width > 0)
    pos = np.minimum(pos + np.where(has_step, 1 + step_width, 0), limit)
    ok &= buf[pos] == s.K_SUMMARY
    size, pos = _field_len(buf, pos, limit)
    ok &= pos + size == ends
    pos = np.minimum(pos, limit)
    ok &= buf[pos] == s.K_VALUE
    size, pos = _field_len(buf, pos, limit)
    ok &= pos + size == ends
    pos = np.minimum(pos, limit)
    ok &= buf[pos] == s.K_TAG
    tag_len, tag_start = _field_len(buf, pos, limit)
    ok &= (tag_len <= _MAX_TAG) & (tag_start + tag_len < ends)
    pos = np.minimum(tag_start + tag_len, limit)
    values, is_tensor, has_md, ok = _value(buf, pos, ends, ok, limit)
    index = np.flatnonzero(ok)
    tag_ids, tags, same = _tag_ids(buf, tag_start[index], tag_len[index])
    index, tag_ids = index[same], tag_ids[same]
    return FastScalars(
        index, tag_ids, tags, steps[index], walls[index], values[index],
        is_tensor[index], has_md[index],
    )


_KEYS: Final = bytes(
    [s.K_WALL, s.K_STEP, s.K_SUMMARY, s.K_VALUE, s.K_TAG, s.K_SIMPLE, s.K_TENSOR, s.K_METADATA]
)


def _compiled(compiled: ModuleType, buf: U8, starts: I64, lengths: I64) -> FastScalars:
    """The same checks record by record in C (_kernel_scalars.c), with tags interned exactly."""
    index, tag_ids, tags, steps, walls, values, is_tensor, has_md = compiled.scalars(
        buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(lengths, np.int64),
        _KEYS, _F32_PREFIX, _F64_PREFIX, _SCALARS_MD, _MAX_TAG,
    )
    return FastScalars(
        np.frombuffer(index, np.int64), np.frombuffer(tag_ids, np.int64), tags,
        np.frombuffer(steps, np.int64), np.frombuffer(walls, np.float64),
        np.frombuffer(values, np.float64), np.frombuffer(is_tensor, np.bool_),
        np.frombuffer(has_md, np.bool_),
    )


def _value(buf: U8, pos: I64, ends: I64, ok: Bools, limit: int) -> tuple[F64, Bools, Bools, Bools]:
    """The value after the tag: simple_value, or a 0-d float tensor with optional metadata."""
    kind = buf[pos]
    simple = ok & (kind == s.K_SIMPLE) & (pos + 5 == ends)
    tensor = ok & (kind == s.K_TENSOR)
    size, body = _field_len(buf, pos, limit)
    body = np.minimum(body, limit)
    f32 = tensor & (size == len(_F32_PREFIX) + 4)
    f64 = tensor & (size == len(_F64_PREFIX) + 8)
    f32[f32] = equals(buf, body[f32], _F32_PREFIX)
    f64[f64] = equals(buf, body[f64], _F64_PREFIX)
    after = np.minimum(body + size, limit)
    no_md = after == ends
    md_size, md_body = _field_len(buf, after, limit)
    has_md = (f32 | f64) & (buf[after] == s.K_METADATA) & (md_body + md_size == ends)
    has_md &= md_size == len(_SCALARS_MD)
    has_md[has_md] = equals(buf, np.minimum(md_body[has_md], limit), _SCALARS_MD)
    tensor_ok = (f32 | f64) & (no_md | has_md)
    with np.errstate(invalid="ignore"):  # a signalling NaN is quieted, as struct.unpack does
        values = at(buf, "<f4")[np.minimum(pos + 1, limit)].astype(np.float64)
    values[f32] = at(buf, "<f4")[body[f32] + len(_F32_PREFIX)]
    values[f64] = at(buf, "<f8")[body[f64] + len(_F64_PREFIX)]
    return values, tensor_ok, has_md, simple | tensor_ok


def _tag_ids(buf: U8, starts: I64, lengths: I64) -> tuple[I64, list[str], Bools]:
    """Group equal tags: a hash of the bytes to find candidates, then an exact comparison."""
    if len(starts) == 0:
        return np.zeros(0, np.int64), [], np.zeros(0, dtype=bool)
    words = _tag_words(buf, starts, lengths)
    digest = lengths.astype(np.uint64)
    for j in range(words.shape[1]):
        digest = (digest * np.uint64(0x9E3779B97F4A7C15)) ^ words[:, j]
    _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    same = (words == words[first][inverse]).all(axis=1) & (lengths == lengths[first][inverse])
    tags = [
        bytes(buf[s : s + n]).decode("utf-8", "surrogateescape")
        for s, n in zip(starts[first].tolist(), lengths[first].tolist(), strict=True)
    ]
    return inverse.astype(np.int64), tags, same


def _tag_words(buf: U8, starts: I64, lengths: I64) -> npt.NDArray[np.uint64]:
    """Each tag as little-endian u64 words, the bytes past its end zeroed: (n, words)."""
    width = -(-int(lengths.max()) // 8)
    view = at(buf, "<u8")
    out = np.empty((len(starts), width), dtype=np.uint64)
    for k in range(width):
        valid = np.clip(lengths - 8 * k, 0, 8).astype(np.uint64)
        # (1 << 64) - 1 overflows: build the mask as ~0 >> (64 - 8 * valid), zero when invalid.
        mask = np.where(valid > 0, ~np.uint64(0) >> (np.uint64(64) - np.uint64(8) * valid), 0)
        out[:, k] = view[np.minimum(starts + 8 * k, len(view) - 1)] & mask.astype(np.uint64)
    return out
