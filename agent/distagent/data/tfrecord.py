"""TFRecord files of tf.train.Example: read in parallel with interleave, sharded by file.

`[data.tfrecord] features` names a "label" (int64) and one input feature with its dtype and
shape: float32/int64 values (`"float32[28,28,1]"`) or raw uint8 bytes decoded to the shape
(`"uint8[28,28,1]"`, scaled to [0, 1]). `write_examples` writes such files (tests, converters).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from distagent.data import Source
from distagent.schema import JobConfig
from distcore.cli_parser import OneLineParser
from distcore.errors import DistmonError
from distcore.wording import counted

LABEL = "label"
MAX_PARALLEL_FILES = 8
_SPEC = re.compile(r"^(\w+)(?:\[([0-9, ]*)\])?$")


def parse_spec(spec: str) -> tuple[str, tuple[int, ...]]:
    """"float32[28,28,1]" -> ("float32", (28, 28, 1)); "int64" -> ("int64", ())."""
    match = _SPEC.match(spec.replace(" ", ""))
    if not match:
        raise DistmonError(f"data.tfrecord.features: cannot read the spec {spec!r}")
    dims = match.group(2)
    return match.group(1), tuple(int(d) for d in dims.split(",") if d) if dims else ()


def _input_feature(features: Sequence[tuple[str, str]]) -> tuple[str, str, tuple[int, ...]]:
    inputs = [(name, spec) for name, spec in features if name != LABEL]
    if len(inputs) != 1:
        raise DistmonError("data.tfrecord.features: expected one input feature besides "
                           f'"label", got {len(inputs)}')
    name, spec = inputs[0]
    dtype, shape = parse_spec(spec)
    return name, dtype, shape


def _parser(tf: Any, name: str, dtype: str, shape: tuple[int, ...]) -> Any:
    raw = dtype in ("uint8", "bytes", "string")
    spec = {
        LABEL: tf.io.FixedLenFeature([], tf.int64),
        name: tf.io.FixedLenFeature([] if raw else list(shape), tf.string if raw else dtype),
    }

    def parse(record: Any) -> tuple[Any, Any]:
        example = tf.io.parse_single_example(record, spec)
        if raw:
            pixels = tf.reshape(tf.io.decode_raw(example[name], tf.uint8), shape)
            features = tf.cast(pixels, tf.float32) / 255.0
        else:
            features = tf.cast(example[name], tf.float32)
        return features, tf.cast(example[LABEL], tf.int32)

    return parse


def open_source(cfg: JobConfig) -> Source:
    import tensorflow as tf

    tfr = cfg.data.tfrecord
    files = tuple(sorted(tf.io.gfile.glob(tfr.files)))
    if not files:
        raise DistmonError(
            f"data.tfrecord.files: no files match {tfr.files!r}{_export_hint(tfr.files)}")
    name, dtype, shape = _input_feature(tfr.features)
    parse = _parser(tf, name, dtype, shape)

    def read(parallel: Any) -> Any:
        ds = tf.data.Dataset.from_tensor_slices(list(files))
        if parallel == 1:  # the naive pipeline: one file after the other
            return ds.interleave(tf.data.TFRecordDataset, cycle_length=1).map(parse)
        ds = ds.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(len(files), MAX_PARALLEL_FILES),
            num_parallel_calls=parallel,
            deterministic=True,  # the validation split must be the same records every pass
        )
        return ds.map(parse, num_parallel_calls=parallel, deterministic=True)

    num_examples, num_classes = tfr.num_examples, tfr.num_classes
    if not num_examples or not num_classes:
        found, largest = _count(tf, files)
        num_examples = num_examples or found
        num_classes = num_classes or max(largest + 1, 2)
    if num_examples == 0:
        raise DistmonError(f"data.tfrecord.files: {counted(len(files), 'file')} but no records")
    return Source(read=read, num_examples=num_examples, input_shape=shape,
                  num_classes=num_classes, num_files=len(files),
                  example_bytes=math.prod(shape) * 4 + 4)


def _export_hint(pattern: str) -> str:
    """How to write files the glob would match, from a config's synthetic data."""
    prefix, sep, _ = pattern.partition("-*")
    if not sep or any(c in prefix for c in "*?["):
        return ""
    return (f"; to write them from a config's synthetic data: python -m distagent.data.tfrecord "
            f"sample_configs/quickstart.toml {prefix} --files 8")


def _count(tf: Any, files: Sequence[str]) -> tuple[int, int]:
    """Records in the files and the largest label, in one pass over the labels."""
    spec = {LABEL: tf.io.FixedLenFeature([], tf.int64)}
    labels = tf.data.TFRecordDataset(list(files), num_parallel_reads=tf.data.AUTOTUNE).map(
        lambda r: tf.io.parse_single_example(r, spec)[LABEL], num_parallel_calls=tf.data.AUTOTUNE
    )
    start = (tf.constant(0, tf.int64), tf.constant(-1, tf.int64))
    count, largest = labels.reduce(start, lambda s, y: (s[0] + 1, tf.maximum(s[1], y)))
    return int(count), int(largest)


def write_examples(prefix: Path, x: np.ndarray, y: np.ndarray, *, num_files: int = 1,
                   feature: str = "image") -> list[Path]:
    """Write (x, y) as `num_files` TFRecord files `<prefix>-<i>-of-<n>.tfrecord`, round robin;
    float arrays as float_list, uint8 as raw bytes."""
    import tensorflow as tf

    paths = [Path(f"{prefix}-{i:05d}-of-{num_files:05d}.tfrecord") for i in range(num_files)]
    writers = [tf.io.TFRecordWriter(str(p)) for p in paths]
    try:
        for i, (features, label) in enumerate(zip(x, y, strict=True)):
            writers[i % num_files].write(_example(tf, feature, features, int(label)))
    finally:
        for writer in writers:
            writer.close()
    return paths


def _example(tf: Any, feature: str, features: np.ndarray, label: int) -> bytes:
    if features.dtype == np.uint8:
        value = tf.train.Feature(bytes_list=tf.train.BytesList(value=[features.tobytes()]))
    else:
        value = tf.train.Feature(float_list=tf.train.FloatList(value=features.ravel().tolist()))
    label_feature = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
    example = tf.train.Example(features=tf.train.Features(
        feature={feature: value, LABEL: label_feature}))
    return bytes(example.SerializeToString())


def export_source(cfg: JobConfig, prefix: Path, num_files: int) -> list[Path]:
    """Write the examples of `cfg`'s source (e.g. the synthetic one) as TFRecord files."""
    from distagent.data import open_source

    source = open_source(cfg)
    xs, ys = [], []
    for features, label in source.read(1).as_numpy_iterator():
        xs.append(features)
        ys.append(label)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    return write_examples(prefix, np.stack(xs), np.asarray(ys), num_files=num_files)


def main(argv: Sequence[str] | None = None) -> int:
    """python -m distagent.data.tfrecord CONFIG PREFIX [--files N]: export a source to files."""
    import sys

    from distagent.config import load_config

    parser = OneLineParser(prog="python -m distagent.data.tfrecord",
                           description=main.__doc__)
    parser.add_argument("config")
    parser.add_argument("prefix", type=Path, help="files are PREFIX-00000-of-0000N.tfrecord")
    parser.add_argument("--files", type=int, default=8)
    args = parser.parse_args(argv)
    from distagent.quiet import QuietStderr

    quiet = QuietStderr().start() if argv is None else None  # TensorFlow's start-up noise
    try:
        paths = export_source(load_config(Path(args.config)), args.prefix, args.files)
    except DistmonError as err:
        print(f"distagent: {err}", file=sys.stderr)
        return err.exit_code
    finally:
        if quiet is not None:
            quiet.close()
    print(f"wrote {counted(len(paths), 'file')}: "
          f"{paths[0].parent}/{paths[0].name.split('-')[0]}-*.tfrecord")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
