"""Sample data written to disk, for the sample configs, the demo, tests and benchmarks: nothing is
downloaded.

`ring_images`: noisy concentric rings, one ring frequency per class, around a random centre with a
random tint and contrast and strong pixel noise. Neighbouring classes differ by a fraction of a
ring, so a model learns them over a few epochs rather than in a few steps, and a left-right flip
or a small crop keeps the class (the augmentations preserve labels).

    python -m distagent.data.samples DIR [--per-class 128] [--classes 10] [--size 256] [--tfrecord]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from distagent.quiet import QuietStderr
from distcore.cli_parser import OneLineParser
from distcore.safefile import write_atomic
from distcore.wording import counted

NOISE = 0.4
"""Standard deviation of the noise blotches, on a [0, 1] scale."""
CYCLES_APART = 0.3
"""Ring frequencies of neighbouring classes, in cycles per image width."""
CHUNK = 64
"""Images made and written at a time by the command line (its memory, and its progress)."""


def ring_images(n: int, num_classes: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 [n, size, size, 3] images, int64 [n] labels), reproducible from the seed."""
    return next(ring_chunks(n, num_classes, size, seed, chunk=max(1, n)))


def ring_chunks(n: int, num_classes: int, size: int, seed: int,
                chunk: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """`ring_images` `chunk` images at a time: the noise of 1,280 256x256 images at once
    is 2 GB of float64 and minutes of a small machine, with nothing to show until the end."""
    rng = np.random.default_rng(seed)
    all_labels = rng.permutation(np.arange(n) % num_classes)  # the same count in every class
    grid = np.arange(size, dtype=np.float32)
    for start in range(0, n, chunk):
        labels = all_labels[start:start + chunk]
        m = len(labels)
        centres = rng.uniform(0.3 * size, 0.7 * size, (m, 2)).astype(np.float32)
        dy = grid[None, :, None] - centres[:, 0, None, None]
        dx = grid[None, None, :] - centres[:, 1, None, None]
        radius = np.sqrt(dy * dy + dx * dx) / size
        cycles = (1.5 + CYCLES_APART * labels).astype(np.float32)[:, None, None]
        phase = rng.uniform(0, 2 * np.pi, (m, 1, 1)).astype(np.float32)
        rings = 0.5 + 0.5 * np.sin(2 * np.pi * cycles * radius + phase)
        contrast = rng.uniform(0.3, 1.0, (m, 1, 1, 1)).astype(np.float32)
        tint = rng.uniform(0.5, 1.0, (m, 1, 1, 3)).astype(np.float32)
        pixels = 0.5 + contrast * (rings[..., None] * tint - 0.5) + _noise(rng, m, size)
        yield np.clip(pixels * 255.0 + 0.5, 0, 255).astype(np.uint8), labels.astype(np.int64)


def _noise(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """Blotches (noise drawn on a coarse grid, blown up) plus fine pixel noise: harder to see
    through than pixel noise alone, and lighter on JPEG files."""
    block = max(1, size // 16)
    coarse = rng.normal(0.0, NOISE, (n, -(-size // block), -(-size // block), 3))
    blotches = np.repeat(np.repeat(coarse, block, axis=1), block, axis=2)[:, :size, :size]
    fine = rng.normal(0.0, NOISE / 3, (n, size, size, 3))
    return (blotches + fine).astype(np.float32)


def _encode(tf: Any, image: np.ndarray, fmt: str) -> bytes:
    encoded = tf.io.encode_png(image) if fmt == "png" else tf.io.encode_jpeg(image, quality=90)
    return bytes(encoded.numpy())


def write_image_folders(directory: Path, images: np.ndarray, labels: np.ndarray, *,
                        fmt: str = "jpeg", start: int = 0) -> int:
    """One folder per class (`class_00`, ...), one file per image, numbered from `start`;
    returns the files written."""
    import tensorflow as tf

    suffix = ".png" if fmt == "png" else ".jpg"
    for label in sorted(set(labels.tolist())):
        (directory / f"class_{label:02d}").mkdir(parents=True, exist_ok=True)
    for i, (image, label) in enumerate(zip(images, labels, strict=True), start):
        path = directory / f"class_{int(label):02d}" / f"{i:06d}{suffix}"
        write_atomic(path, _encode(tf, image, fmt), mode=0o644)  # never through a link
    return len(images)


def write_image_tfrecords(prefix: Path, images: np.ndarray, labels: np.ndarray, *,
                          num_files: int = 4) -> list[Path]:
    """`<prefix>-<i>-of-<n>.tfrecord` files of tf.train.Example with image/encoded (JPEG) and
    image/class/label, round robin."""
    import tensorflow as tf

    prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = [Path(f"{prefix}-{i:05d}-of-{num_files:05d}.tfrecord") for i in range(num_files)]
    writers = [tf.io.TFRecordWriter(str(p)) for p in paths]
    try:
        for i, (image, label) in enumerate(zip(images, labels, strict=True)):
            feature = {
                "image/encoded": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[_encode(tf, image, "jpeg")])),
                "image/class/label": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[int(label)])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writers[i % num_files].write(example.SerializeToString())
    finally:
        for writer in writers:
            writer.close()
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m distagent.data.samples",
                           description="Write noisy ring images (class per folder).")
    parser.add_argument("directory", type=Path, help="where the class folders are written")
    # Large enough that decoding costs what a photo's decode does (the sample configs resize
    # them down to 16x16): a naive pipeline then keeps a small model waiting.
    parser.add_argument("--per-class", type=int, default=128, help="images per class (128)")
    parser.add_argument("--classes", type=int, default=10, help="classes, at least 2 (10)")
    parser.add_argument("--size", type=int, default=256, help="width and height in pixels (256)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0)")
    parser.add_argument("--tfrecord", action="store_true",
                        help="write DIRECTORY/train-*.tfrecord instead of folders")
    args = parser.parse_args(argv)
    quiet = QuietStderr().start() if argv is None else None  # TensorFlow's start-up noise
    try:
        return _write(args)
    finally:
        if quiet is not None:
            quiet.close()


def _write(args: argparse.Namespace) -> int:
    if min(args.per_class, args.size) < 1 or args.classes < 2:
        print("distagent: --per-class and --size must be >= 1, --classes >= 2", file=sys.stderr)
        return 2
    n = args.per_class * args.classes
    if args.tfrecord:
        images, labels = ring_images(n, args.classes, args.size, args.seed)
        paths = write_image_tfrecords(args.directory / "train", images, labels)
        print(f"wrote {counted(len(images), 'image')} into {counted(len(paths), 'file')} "
              f"{args.directory}/train-*")
        return 0
    written = 0
    for images, labels in ring_chunks(n, args.classes, args.size, args.seed, CHUNK):
        written += write_image_folders(args.directory, images, labels, start=written)
    print(f"wrote {counted(written, 'image')} into {counted(args.classes, 'folder')} "
          f"under {args.directory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
