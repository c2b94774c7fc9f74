"""Encoded images: a class-per-folder directory or TFRecords of `image/encoded` +
`image/class/label`.

A directory is laid out as `keras.utils.image_dataset_from_directory` reads it: one sub-directory
per class (labels in sorted name order), JPEG or PNG files inside. Anyone may have filled it, so
it is checked when it is listed (by `plan` as by `start`): a class folder that loops (a link
cycle, a link back up) or repeats another is refused in one line; each image's type, size, first
bytes, end marker and declared pixel size (image_headers) are checked without decoding it, and one
that cannot be read is skipped and counted (`data.images.on_error = "skip"`, named in the plan's
warnings) or refused, named ("fail"). Paths reach tf.data as bytes, so a name that is not UTF-8 is
read like any other. The file list is listed once at start and put in a fixed order drawn from
the seed, so the validation split (the first examples) holds every class. TFRecords are read with
a parallel interleave, sharded by file across workers, like the tfrecord source.

The work is split where the tf.data guide splits it: `decode` (read, decode, resize to
`image_size`, kept as uint8: a quarter of float32's cache) is deterministic and is cached after
the first pass; `preprocess` scales to float32 in [0, 1]; `augment` (flip, crop, brightness from
`[data.augment]`) is random and runs every pass, for training only.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from distagent.data import Source
from distagent.data.image_headers import (
    MAX_PIXELS,
    fits_declared,
    jpeg_size,
    png_size,
    size_problem,
)
from distagent.data.tfrecord import MAX_PARALLEL_FILES
from distagent.schema import AugmentConfig, JobConfig
from distcore.errors import DistmonError
from distcore.textsafe import terminal_text
from distcore.wording import counted

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
ENCODED = "image/encoded"
LABEL = "image/class/label"
CHANNELS = 3


JPEG_START, JPEG_END = b"\xff\xd8\xff", b"\xff\xd9"
PNG_START, PNG_END = b"\x89PNG\r\n\x1a\n", b"IEND"
TAIL_BYTES = 1024  # where the end marker must be: a JPEG may carry a little padding after it
NAMED_SKIPS = 5  # unreadable images named in the log and run.json; the rest are counted


@dataclass(frozen=True)
class Listing:
    """A class-per-folder directory as the job will read it."""

    files: list[bytes]  # file system paths as bytes: any name, UTF-8 or not, reaches tf.data
    labels: list[int]
    classes: list[str]
    skipped: tuple[str, ...] = ()  # the first NAMED_SKIPS unreadable images, "path (why)"
    skipped_count: int = 0


def image_problem(path: str) -> str | None:
    """Why `path` cannot be an image tf.io.decode_image reads, or None. Cheap: the file type,
    the size, the format's first bytes, its end marker (a truncated JPEG or PNG has none) and
    the pixel size its header declares (image_headers), without decoding."""
    fd = -1
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size == 0:
            return "empty"
        return _content_problem(fd, st.st_size)
    except OSError as err:
        return "a symbolic link loop" if err.errno == errno.ELOOP else (
            err.strerror or type(err).__name__).lower()
    finally:
        if fd >= 0:
            os.close(fd)


def _content_problem(fd: int, file_size: int) -> str | None:
    head = os.pread(fd, 8, 0)
    tail = os.pread(fd, TAIL_BYTES, max(0, file_size - TAIL_BYTES))
    if head.startswith(JPEG_START):
        if JPEG_END not in tail:
            return "truncated JPEG (no end marker)"
        return size_problem(jpeg_size(fd, file_size))
    if head.startswith(PNG_START):
        if PNG_END not in tail:
            return "truncated PNG (no IEND chunk)"
        return size_problem(png_size(fd))
    return "not a JPEG or PNG"


def _class_folders(directory: Path) -> list[tuple[str, str]]:
    """(name, resolved path) of each class folder, sorted; a DistmonError for a folder that loops
    (a link cycle, or a link back to the directory or above it) or repeats another one."""
    root = os.path.realpath(directory)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as err:
        raise DistmonError(f"data.images.directory: {terminal_text(directory)}: cannot be "
                           f"listed ({err.strerror or err})") from None
    folders: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for entry in entries:
        where = terminal_text(entry.path)
        try:
            is_dir = entry.is_dir()
        except OSError as err:
            if err.errno != errno.ELOOP:
                continue  # not a folder we can read: not a class
            is_dir = False
        real = os.path.realpath(entry.path)
        if entry.is_symlink() and not is_dir and _loops(entry.path):
            raise DistmonError(f"data.images.directory: class folder {where} is a symbolic link "
                               "loop")
        if not is_dir:
            continue
        if real == root or root.startswith(real.rstrip(os.sep) + os.sep):
            raise DistmonError(f"data.images.directory: class folder {where} links back to "
                               f"{terminal_text(real)}, which holds it (a loop)")
        if real in seen:
            raise DistmonError(f"data.images.directory: class folders {terminal_text(seen[real])} "
                               f"and {where} are the same folder ({terminal_text(real)}): its "
                               "images would count under two labels")
        seen[real] = entry.path
        folders.append((entry.name, entry.path))
    return folders


def _loops(path: str) -> bool:
    try:
        os.stat(path)
    except OSError as err:
        return err.errno == errno.ELOOP
    return False


def list_directory(directory: Path, on_error: str = "skip") -> Listing:
    """The class folders' images, in sorted order, each checked (`image_problem`): an unreadable
    one is skipped and counted (`on_error = "skip"`) or a DistmonError naming it ("fail")."""
    if not directory.is_dir():
        raise DistmonError(f"data.images.directory: {terminal_text(directory)} is not a "
                           f"directory{_make_hint(directory)}")
    folders = _class_folders(directory)
    files: list[bytes] = []
    labels: list[int] = []
    skipped: list[str] = []
    count = 0
    for label, (_, path) in enumerate(folders):
        try:
            found = sorted(e.path for e in os.scandir(path)
                           if e.name.lower().endswith(IMAGE_EXTENSIONS) and not _is_dir(e))
        except OSError as err:
            raise DistmonError(f"data.images.directory: class folder {terminal_text(path)}: "
                               f"cannot be listed ({err.strerror or err})") from None
        for image in found:
            problem = image_problem(image)
            if problem is None:
                files.append(os.fsencode(image))
                labels.append(label)
                continue
            named = f"{terminal_text(image)} ({problem})"
            if on_error == "fail":
                raise DistmonError(f"data.images: {named}; set data.images.on_error = "
                                   '"skip" to leave unreadable images out')
            count += 1
            if len(skipped) < NAMED_SKIPS:
                skipped.append(named)
    classes = [name for name, _ in folders]
    if len(classes) < 2 or not files:
        also = f" ({count} unreadable skipped: {', '.join(skipped)})" if count else ""
        raise DistmonError(f"data.images.directory: {terminal_text(directory)} holds "
                           f"{counted(len(files), 'image')} in "
                           f"{counted(len(classes), 'class folder')}"
                           f"{also}; expected at least 2 folders of JPEG/PNG images"
                           f"{_make_hint(directory)}")
    return Listing(files, labels, classes, tuple(skipped), count)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def skipped_warning(listing: Listing) -> str | None:
    """The plan's warning for skipped images: the count and the first few, named."""
    if not listing.skipped_count:
        return None
    more = listing.skipped_count - len(listing.skipped)
    rest = f" and {more} more" if more else ""
    return (f"{counted(listing.skipped_count, 'unreadable image')} skipped "
            f'(data.images.on_error = "skip"): {", ".join(listing.skipped)}{rest}')


def _make_hint(directory: Path) -> str:
    return ("; to make sample images: python -m distagent.data.samples "
            f"{directory}") if not any(directory.glob("*/*")) else ""


def open_source(cfg: JobConfig) -> Source:
    images = cfg.data.images
    height, width = (int(d) for d in images.image_size)
    notes: tuple[str, ...] = ()
    if images.directory:
        read, count, classes, num_files, listing = _directory_reader(cfg)
        note = skipped_warning(listing)
        notes = (note,) if note else ()
    else:
        read, count, classes, num_files, note = _tfrecord_reader(cfg)
        notes = (note,) if note else ()
    return Source(
        read=read, decode=make_decode(height, width, from_path=bool(images.directory)),
        num_examples=count, input_shape=(height, width, CHANNELS), num_classes=classes,
        num_files=num_files,
        example_bytes=height * width * CHANNELS + 4,
        preprocess=_to_float, augment=make_augment(cfg.data.augment, height, width),
        notes=notes, class_ids_in_range=bool(images.directory),
    )


def _directory_reader(cfg: JobConfig) -> tuple[Any, int, int, None, Listing]:
    listing = list_directory(Path(cfg.data.images.directory), cfg.data.images.on_error)
    order = np.random.default_rng(cfg.run.seed).permutation(len(listing.files))
    paths = [listing.files[i] for i in order]
    ordered_labels = np.asarray(listing.labels, dtype=np.int32)[order]

    def read(parallel: Any) -> Any:
        import tensorflow as tf

        # Reading happens in the decode map (tf.io.read_file), in parallel with decoding.
        return tf.data.Dataset.from_tensor_slices((np.asarray(paths, dtype=object),
                                                   ordered_labels))

    return read, len(paths), max(len(listing.classes), 2), None, listing


def _tfrecord_reader(cfg: JobConfig) -> tuple[Any, int, int, int, str | None]:
    import tensorflow as tf

    images = cfg.data.images
    files = tuple(sorted(tf.io.gfile.glob(images.files)))
    if not files:
        raise DistmonError(f"data.images.files: no files match {images.files!r}")
    spec = {ENCODED: tf.io.FixedLenFeature([], tf.string),
            LABEL: tf.io.FixedLenFeature([], tf.int64)}

    def parse(record: Any) -> tuple[Any, Any, Any]:
        example = tf.io.parse_single_example(record, spec)
        encoded = example[ENCODED]
        return encoded, tf.cast(example[LABEL], tf.int32), fits_declared(encoded)

    def flagged(parallel: Any) -> Any:
        ds = tf.data.Dataset.from_tensor_slices(list(files))
        if parallel == 1:
            return ds.interleave(tf.data.TFRecordDataset, cycle_length=1).map(parse)
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files),
                           MAX_PARALLEL_FILES), num_parallel_calls=parallel, deterministic=True)
        return ds.map(parse, num_parallel_calls=parallel, deterministic=True)

    def read(parallel: Any) -> Any:
        # The header check runs in the parallel map; the sequential filter only reads its flag.
        return flagged(parallel).filter(lambda x, y, ok: ok).map(lambda x, y, ok: (x, y))

    count, classes, note = images.num_examples, images.num_classes, None
    if not count or not classes:
        found, largest, refused = _count(tf, flagged(tf.data.AUTOTUNE))
        count, classes = count or found, classes or max(largest + 1, 2)
        note = _refused_note(refused, images.on_error)
    if count == 0:
        raise DistmonError(f"data.images.files: {counted(len(files), 'file')} but no records")
    return read, count, classes, len(files), note


def _count(tf: Any, flagged: Any) -> tuple[int, int, int]:
    """(records kept, the largest label among them, records left out by their declared size)."""
    def add(s: tuple[Any, Any, Any], x: Any, y: Any, ok: Any) -> tuple[Any, Any, Any]:
        kept = tf.cast(ok, tf.int64)
        label = tf.where(ok, tf.cast(y, tf.int64), s[1])
        return s[0] + kept, tf.maximum(s[1], label), s[2] + 1 - kept

    start = (tf.constant(0, tf.int64), tf.constant(-1, tf.int64), tf.constant(0, tf.int64))
    count, largest, refused = flagged.reduce(start, lambda s, e: add(s, *e))
    return int(count), int(largest), int(refused)


def _refused_note(refused: int, on_error: str) -> str | None:
    """TFRecords hold no file names: the refused images are counted, in one line."""
    if not refused:
        return None
    what = (f"{counted(refused, 'record')} in data.images.files declare more than "
            f"{MAX_PIXELS:,} pixels, or none")
    if on_error == "fail":
        raise DistmonError(f"data.images: {what}; set data.images.on_error = \"skip\" to "
                           "leave them out")
    return f"{what}: left out (data.images.on_error = \"skip\")"


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
