"""The per-record decoder, one event at a time, and what a decode gives (Batch, Segment).

decode_event is the one decoding of an event: every record of the reference path
(reference.py), and on the kernel's path (batch.py) whatever its scalars leave: values with
metadata that is not the plain scalars one, several values per event, hparams (the kernel
decodes the plugin's usual record), session logs, odd tensor types. Images, audio and
histograms are skipped by field number, their payloads never parsed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Final

import numpy as np
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2
from tensorboard.plugins.hparams import plugin_data_pb2

import distcore.tfrecord.wire as s
from distcore.histograms import decode as histo
from distcore.histograms.buckets import Buckets
from distcore.histograms.records import HistogramPoint
from distcore.tensors import DTYPES, tensor_values
from distcore.tfrecord.framing import F64, I64
from distcore.tfrecord.wire import (
    WireError,
    as_bytes,
    as_double,
    as_float,
    as_int64,
    expected_wire_types,
    fields,
    validate,
)

_EVENT: Final = expected_wire_types(event_pb2.Event.DESCRIPTOR)
_SUMMARY: Final = expected_wire_types(summary_pb2.Summary.DESCRIPTOR)
_VALUE: Final = expected_wire_types(summary_pb2.Summary.Value.DESCRIPTOR)
_HPARAMS_KEYS: Final = bytes(s.HPARAMS_RECORD_KEYS)  # the kernel's hparams_event, in its order
_HPARAMS_PLUGIN: Final = s.HPARAMS_PLUGIN.encode()
UNDECODABLE: Final = "undecodable record"


@dataclass
class Segment:
    """Points per tag and histograms, then (if not None) a session restart at that step for the
    whole run: what comes before a restart in the same read is purged by it."""

    points: dict[str, tuple[I64, F64, F64]]  # tag -> (steps, wall_times, values)
    restart_at: int | None = None
    histograms: list[tuple[str, HistogramPoint]] = field(default_factory=list)  # written order


@dataclass
class Batch:
    """What one read decodes; built outside the store's lock, which only appends it."""

    segments: list[Segment] = field(default_factory=list)
    hparams: dict[str, Any] = field(default_factory=dict)
    problems: list[tuple[str, int]] = field(default_factory=list)  # (kind, offset in chunk)
    newest_wall_time: float | None = None


def newest(walls: F64) -> float | None:
    """The largest finite wall time, if any."""
    if len(walls) == 0:
        return None
    top = walls.max()
    if np.isfinite(top):  # no NaN, no +inf: the largest of all is the largest finite one
        return float(top)
    walls = walls[np.isfinite(walls)]
    return float(walls.max()) if len(walls) else None


class UndecodableError(ValueError):
    """A record whose CRC held but whose payload is not an event we can read."""


@dataclass
class Decoded:
    wall_time: float = 0.0
    step: int = 0
    scalars: list[tuple[str, float]] = field(default_factory=list)
    session_start: bool = False
    hparams: dict[str, Any] | None = None
    histograms: list[tuple[str, Buckets]] = field(default_factory=list)


def decode_event(
    data: bytes, plugins: dict[str, str], updates: list[tuple[str, str]] | None = None,
    compiled: ModuleType | None = None,
) -> Decoded:  # fmt: skip
    """Decode one record; `plugins` (tag -> plugin name, per run) is read and updated, and each
    update is also appended to `updates` (kept even when the record then proves undecodable).
    `compiled`: the kernel, which decodes the hparams plugin's usual record (a sweep has one a
    run, and protobuf's parse of it was most of a small run's decode)."""
    found = None if compiled is None else compiled.hparams_event(data, _HPARAMS_KEYS,
                                                                  _HPARAMS_PLUGIN)  # fmt: skip
    if found is not None:
        wall_time, step, tag, hparams = found
        plugins[tag] = s.HPARAMS_PLUGIN
        if updates is not None:
            updates.append((tag, s.HPARAMS_PLUGIN))
        return Decoded(wall_time, step, hparams=hparams)
    try:
        return _decode(data, plugins, updates if updates is not None else [])
    except (WireError, DecodeError, ValueError) as err:
        raise UndecodableError(str(err) or type(err).__name__) from err


def _decode(data: bytes, plugins: dict[str, str], updates: list[tuple[str, str]]) -> Decoded:
    # A message field that occurs twice is merged, as protobuf does: on the wire, merging two
    # messages is concatenating their bytes. Scalars: the last one wins.
    out = Decoded()
    summary: bytes | None = None
    log: bytes | None = None
    for number, _, raw in fields(data, _EVENT):
        if number == s.EVENT_WALL_TIME:
            out.wall_time = as_double(raw)
        elif number == s.EVENT_STEP:
            out.step = as_int64(raw)
        elif number == s.EVENT_SUMMARY:
            summary = (summary or b"") + as_bytes(raw)
        elif number == s.EVENT_SESSION_LOG:
            log = (log or b"") + as_bytes(raw)
    if log is not None:
        validate(log, event_pb2.SessionLog.DESCRIPTOR)
        out.session_start = event_pb2.SessionLog.FromString(log).status == s.SESSION_START
    if summary is not None:
        for number, _, raw in fields(summary, _SUMMARY):
            if number == s.SUMMARY_VALUE:
                _value(as_bytes(raw), plugins, updates, out)
    return out


def _value(
    data: bytes, plugins: dict[str, str], updates: list[tuple[str, str]], out: Decoded
) -> None:
    tag = ""
    simple: float | None = None
    metadata: bytes | None = None
    tensor: bytes | None = None
    histogram: bytes | None = None
    skipped = False
    # Every field is walked, past an image or histogram too: a malformed one rejects the record.
    for number, _, raw in fields(data, _VALUE):
        if number == s.VALUE_TAG:
            tag = as_bytes(raw).decode("utf-8", "surrogateescape")
        elif number == s.VALUE_SIMPLE:
            simple = as_float(raw)
        elif number == s.VALUE_METADATA:
            metadata = (metadata or b"") + as_bytes(raw)
        elif number == s.VALUE_TENSOR:
            tensor = (tensor or b"") + as_bytes(raw)
        elif number == histo.HISTO_FIELD:  # tf1, tensorboardX, PyTorch (distcore.histograms)
            histogram = (histogram or b"") + as_bytes(raw)
        elif number in s.VALUE_SKIPPED:
            skipped = True
    if metadata is not None:
        validate(metadata, summary_pb2.SummaryMetadata.DESCRIPTOR)
    if skipped:
        return
    content = b""
    if metadata is not None:
        meta = summary_pb2.SummaryMetadata.FromString(metadata)
        if meta.plugin_data.plugin_name:
            plugins[tag] = meta.plugin_data.plugin_name
            updates.append((tag, meta.plugin_data.plugin_name))
        content = meta.plugin_data.content
    plugin = plugins.get(tag)
    if simple is not None:
        out.scalars.append((tag, simple))
    elif plugin == s.SCALARS_PLUGIN and tensor is not None:
        out.scalars.append((tag, tensor_scalar(tensor)))
    elif histogram is not None:
        out.histograms.append((tag, histo.from_histo_proto(histogram)))
    elif plugin == histo.HISTOGRAMS_PLUGIN and tensor is not None:
        buckets = histo.from_tensor(tensor)
        if buckets is not None:
            out.histograms.append((tag, buckets))
    elif plugin == s.HPARAMS_PLUGIN and content:
        hparams = session_hparams(content)
        if hparams is not None:
            out.hparams = {**(out.hparams or {}), **hparams}


def tensor_scalar(data: bytes) -> float:
    validate(data, tensor_pb2.TensorProto.DESCRIPTOR)
    proto = tensor_pb2.TensorProto.FromString(data)
    if proto.dtype not in DTYPES:
        raise UndecodableError(f"scalar tensor of unsupported dtype {proto.dtype}")
    values = tensor_values(proto)
    if values.size != 1:
        raise UndecodableError(f"scalar tensor with {values.size} elements")
    return float(values.reshape(-1)[0])


def session_hparams(content: bytes) -> dict[str, Any] | None:
    """The hparams of an HParams plugin session-start record, as plain Python values.

    Walked on the wire rather than parsed with the proto: its names are proto3 strings, which
    protobuf refuses when they are not UTF-8; here they keep their bytes (surrogateescape),
    like tags."""
    validate(content, plugin_data_pb2.HParamsPluginData.DESCRIPTOR)
    start: bytes | None = None
    for number, _, raw in fields(content):
        if number == s.HPARAMS_SESSION_START:
            start = as_bytes(raw)
    if start is None:
        return None
    result: dict[str, Any] = {}
    for number, _, raw in fields(start):
        if number == s.SESSION_START_HPARAMS:
            name, value = "", None
            for entry_number, _, entry in fields(as_bytes(raw)):
                if entry_number == s.MAP_KEY:
                    name = as_bytes(entry).decode("utf-8", "surrogateescape")
                elif entry_number == s.MAP_VALUE:
                    value = _hparam_value(as_bytes(entry))
            result[name] = value
    return result


def _hparam_value(data: bytes) -> Any:
    """A google.protobuf.Value: number, string or bool; anything else (null, struct, list) is
    None. The last kind on the wire wins, as in a oneof."""
    value: Any = None
    for number, _, raw in fields(data):
        if number == s.VALUE_NUMBER:
            value = as_double(raw)
        elif number == s.VALUE_STRING:
            value = as_bytes(raw).decode("utf-8", "surrogateescape")
        elif number == s.VALUE_BOOL:
            value = bool(as_int64(raw))
        else:
            value = None
    return value
