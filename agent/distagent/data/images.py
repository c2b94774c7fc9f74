"""Encoded images: a class-per-folder directory or TFRecords of `image/encoded` +
`image/class/label`.

A directory is laid out as `keras.utils.image_dataset_from_directory` reads it: one sub-directory
per class (labels in sorted name order), JPEG or PNG files inside. The file list is listed once
at start and put in a fixed order drawn from the seed, so the validation split (the first
examples) holds every class. TFRecords are read with a parallel interleave, sharded by file
across workers, like the tfrecord source.

The work is split where the tf.data guide splits it: `decode` (read, decode, resize to
`image_size`, kept as uint8: a quarter of float32's cache) is deterministic and is cached after
the first pass; `preprocess` scales to float32 in [0, 1]; `augment` (flip, crop, brightness from
`[data.augment]`) is random and runs every pass, for training only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from distagent.data import Source
from distagent.data.tfrecord import MAX_PARALLEL_FILES
from distagent.schema import AugmentConfig, JobConfig
from distcore.errors import DistmonError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
ENCODED = "image/encoded"
LABEL = "image/class/label"
CHANNELS = 3


def list_directory(directory: Path) -> tuple[list[str], list[int], list[str]]:
    """(files, labels, class names) of a class-per-folder directory, in sorted order."""
    if not directory.is_dir():
        raise DistmonError(f"data.images.directory: {directory} is not a directory"
                           f"{_make_hint(directory)}")
    classes = sorted(e.name for e in os.scandir(directory) if e.is_dir())
    files: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        found = sorted(e.path for e in os.scandir(directory / name)
                       if e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS))
        files.extend(found)
        labels.extend([label] * len(found))
    if len(classes) < 2 or not files:
        raise DistmonError(f"data.images.directory: {directory} holds {len(files)} images in "
                           f"{len(classes)} class folders; expected at least 2 folders of "
                           f"JPEG/PNG images{_make_hint(directory)}")
    return files, labels, classes


def _make_hint(directory: Path) -> str:
    return ("; to make sample images: python -m distagent.data.samples "
            f"{directory}") if not any(directory.glob("*/*")) else ""


def open_source(cfg: JobConfig) -> Source:
    images = cfg.data.images
    height, width = (int(d) for d in images.image_size)
    if images.directory:
        read, count, classes, num_files = _directory_reader(cfg)
    else:
        read, count, classes, num_files = _tfrecord_reader(cfg)
    return Source(
        read=read, decode=make_decode(height, width, from_path=bool(images.directory)),
        num_examples=count, input_shape=(height, width, CHANNELS), num_classes=classes,
        num_files=num_files,
        example_bytes=height * width * CHANNELS + 4,
        preprocess=_to_float, augment=make_augment(cfg.data.augment, height, width),
    )


def _directory_reader(cfg: JobConfig) -> tuple[Any, int, int, None]:
    files, labels, classes = list_directory(Path(cfg.data.images.directory))
    order = np.random.default_rng(cfg.run.seed).permutation(len(files))
    paths = [files[i] for i in order]
    ordered_labels = np.asarray(labels, dtype=np.int32)[order]

    def read(parallel: Any) -> Any:
        import tensorflow as tf

        # Reading happens in the decode map (tf.io.read_file), in parallel with decoding.
        return tf.data.Dataset.from_tensor_slices((paths, ordered_labels))

    return read, len(paths), max(len(classes), 2), None


def _tfrecord_reader(cfg: JobConfig) -> tuple[Any, int, int, int]:
    import tensorflow as tf

    images = cfg.data.images
    files = tuple(sorted(tf.io.gfile.glob(images.files)))
    if not files:
        raise DistmonError(f"data.images.files: no files match {images.files!r}")
    spec = {ENCODED: tf.io.FixedLenFeature([], tf.string),
            LABEL: tf.io.FixedLenFeature([], tf.int64)}

    def parse(record: Any) -> tuple[Any, Any]:
        example = tf.io.parse_single_example(record, spec)
        return example[ENCODED], tf.cast(example[LABEL], tf.int32)

    def read(parallel: Any) -> Any:
        ds = tf.data.Dataset.from_tensor_slices(list(files))
        if parallel == 1:
            return ds.interleave(tf.data.TFRecordDataset, cycle_length=1).map(parse)
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files),
                           MAX_PARALLEL_FILES), num_parallel_calls=parallel, deterministic=True)
        return ds.map(parse, num_parallel_calls=parallel, deterministic=True)

    count, classes = images.num_examples, images.num_classes
    if not count or not classes:
        counted, largest = _count(tf, files)
        count, classes = count or counted, classes or max(largest + 1, 2)
    if count == 0:
        raise DistmonError(f"data.images.files: {len(files)} files but no records")
    return read, count, classes, len(files)


def _count(tf: Any, files: tuple[str, ...]) -> tuple[int, int]:
    spec = {LABEL: tf.io.FixedLenFeature([], tf.int64)}
    labels = tf.data.TFRecordDataset(list(files), num_parallel_reads=tf.data.AUTOTUNE).map(
        lambda r: tf.io.parse_single_example(r, spec)[LABEL])
    start = (tf.constant(0, tf.int64), tf.constant(-1, tf.int64))
    count, largest = labels.reduce(start, lambda s, y: (s[0] + 1, tf.maximum(s[1], y)))
    return int(count), int(largest)


def make_decode(height: int, width: int, *, from_path: bool) -> Any:
    """(path or encoded bytes, label) -> (uint8 [height, width, 3], label)."""

    def decode(source: Any, label: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        data = tf.io.read_file(source) if from_path else source
        image = tf.io.decode_image(data, channels=CHANNELS, expand_animations=False)
        resized = tf.image.resize(image, [height, width])
        pixels = tf.saturate_cast(tf.round(resized), tf.uint8)
        return tf.ensure_shape(pixels, [height, width, CHANNELS]), label

    return decode


def _to_float(image: Any, label: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    return tf.cast(image, tf.float32) / 255.0, label


def make_augment(cfg: AugmentConfig, height: int, width: int) -> Any:
    """Random flip, crop (resized back) and brightness on float32 images; None when all are off."""
    if not cfg.flip and cfg.crop <= 0 and cfg.brightness <= 0:
        return None

    def augment(image: Any, label: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        if cfg.flip:
            image = tf.image.random_flip_left_right(image)
        if cfg.crop > 0:
            keep = tf.random.uniform([], 1.0 - cfg.crop, 1.0)
            size = tf.cast(tf.round(keep * tf.constant([height, width], tf.float32)), tf.int32)
            crop = tf.image.random_crop(image, tf.concat([tf.maximum(size, 1), [CHANNELS]], 0))
            image = tf.image.resize(crop, [height, width])
        if cfg.brightness > 0:
            image = tf.clip_by_value(tf.image.random_brightness(image, cfg.brightness), 0.0, 1.0)
        return tf.ensure_shape(image, [height, width, CHANNELS]), label

    return augment
