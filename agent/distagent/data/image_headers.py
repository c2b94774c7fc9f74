"""The pixel size a JPEG or PNG declares, read from its header without decoding it.

TensorFlow's decoders allocate what the header declares before they read a pixel: a 2 KB PNG
that declares 30000×30000 asks for 2.7 GB and ends the job in a traceback (or the kernel's OOM
killer). The listing reads the declared size first and refuses an image over `MAX_PIXELS`, the
limit Pillow applies to untrusted images (`PIL.Image.MAX_IMAGE_PIXELS`), so what is decoded is
bounded whoever filled the folder.

PNG: the IHDR chunk must come first (width and height, big-endian, at bytes 16-23). JPEG: the
markers are walked from the start of the image to the first frame header (SOF0-SOF15 but DHT,
JPG and DAC), whose payload holds the height and the width; a scan (SOS) or the end before one
means there is no frame to decode.
"""

from __future__ import annotations

import os
import struct
from typing import Any

MAX_PIXELS = 89_478_485
"""Pillow's MAX_IMAGE_PIXELS: about 0.25 GiB decoded as RGB."""
MAX_JPEG_SEGMENTS = 1024
"""Markers walked before the frame header: real files have a handful (APPn, DQT, DHT)."""

PNG_MAGIC, JPEG_MAGIC = b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"
_PNG_IHDR = struct.Struct(">I4sII")  # length, type, width, height
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RST0-7: no length field
_SOS, _EOI = 0xDA, 0xD9


def png_size(fd: int) -> tuple[int, int] | str:
    """(width, height) of the PNG open at `fd`, or why it has none."""
    data = os.pread(fd, _PNG_IHDR.size, 8)
    if len(data) < _PNG_IHDR.size:
        return "truncated PNG (no IHDR header)"
    length, kind, width, height = _PNG_IHDR.unpack(data)
    if kind != b"IHDR" or length != 13:
        return "not a PNG (its first chunk is not IHDR)"
    return width, height


def jpeg_size(fd: int, file_size: int) -> tuple[int, int] | str:
    """(width, height) of the JPEG open at `fd`, or why it has none."""
    offset = 2  # past SOI
    for _ in range(MAX_JPEG_SEGMENTS):
        head = os.pread(fd, 9, offset)
        if len(head) < 2 or head[0] != 0xFF:
            return "corrupt JPEG (no frame header before the data ends)"
        marker = head[1]
        if marker == 0xFF:  # fill byte before a marker
            offset += 1
            continue
        if marker in _STANDALONE:
            offset += 2
            continue
        if marker in (_SOS, _EOI):
            return "corrupt JPEG (no frame header before its scan)"
        if len(head) < 4:
            return "truncated JPEG (in a marker segment)"
        (length,) = struct.unpack(">H", head[2:4])
        if marker in _SOF:
            if len(head) < 9:
                return "truncated JPEG (in its frame header)"
            height, width = struct.unpack(">HH", head[5:9])
            return width, height
        if length < 2 or offset + 2 + length > file_size:
            return "corrupt JPEG (a marker segment runs past the end)"
        offset += 2 + length
    return f"corrupt JPEG (no frame header in its first {MAX_JPEG_SEGMENTS} markers)"


def size_problem(size: tuple[int, int] | str) -> str | None:
    """Why a declared size cannot be decoded here, or None."""
    if isinstance(size, str):
        return size
    width, height = size
    if width == 0 or height == 0:
        return f"declares {width}×{height} pixels (no image)"
    if width * height > MAX_PIXELS:
        return (f"declares {width}×{height} pixels, more than the {MAX_PIXELS:,} decoded "
                "(a decompression bomb, or an image to shrink first)")
    return None



def fits_declared(data: Any) -> Any:
    """A boolean tensor for encoded image bytes in a TFRecord (no file to read a header from):
    False when a PNG's IHDR or a JPEG's frame header declares more than MAX_PIXELS, or none.
    Other bytes pass; decode_image refuses them itself. Graph ops only, the same walk as
    png_size and jpeg_size (libjpeg's own header reader errors past 65500 pixels a side)."""
    import tensorflow as tf

    # Zeros past the end: a read there is no marker, so a walk that runs off the end stops.
    padded = tf.strings.join([data, tf.constant(bytes(_PNG_IHDR.size + 9))])
    length = tf.strings.length(data, unit="BYTE")

    def read(offset: Any, n: int) -> Any:
        at = tf.minimum(offset, tf.cast(length, tf.int64))
        return tf.cast(tf.io.decode_raw(tf.strings.substr(padded, at, n), tf.uint8), tf.int64)

    def png_pixels() -> Any:
        b = read(tf.constant(8, tf.int64), _PNG_IHDR.size)
        word = lambda i: ((b[i] * 256 + b[i + 1]) * 256 + b[i + 2]) * 256 + b[i + 3]  # noqa: E731
        ihdr = (word(0) == 13) & tf.reduce_all(b[4:8] == tf.constant(list(b"IHDR"), tf.int64))
        whole = length >= 8 + _PNG_IHDR.size  # as png_size: a cut header declares nothing
        return tf.where(ihdr & whole, word(8) * word(12), tf.constant(0, tf.int64))

    prefix = tf.strings.substr(data, 0, 8)
    is_png = prefix == PNG_MAGIC
    is_jpeg = tf.strings.substr(data, 0, 3) == JPEG_MAGIC
    pixels = tf.case([(is_png, png_pixels),
                      (is_jpeg, lambda: _jpeg_pixels(tf, read, tf.cast(length, tf.int64)))],
                     default=lambda: tf.constant(1, tf.int64))
    return (pixels > 0) & (pixels <= MAX_PIXELS)


def _jpeg_pixels(tf: Any, read: Any, length: Any) -> Any:
    """jpeg_size's marker walk as a tf.while_loop: width × height, or 0 for no frame header."""
    sof = tf.constant(sorted(_SOF), tf.int64)
    standalone = tf.constant(sorted(_STANDALONE), tf.int64)
    zero = tf.constant(0, tf.int64)

    def step(i: Any, offset: Any, pixels: Any, done: Any) -> tuple[Any, Any, Any, Any]:
        b = read(offset, 9)
        marker, seg = b[1], b[2] * 256 + b[3]
        is_sof = tf.reduce_any(sof == marker)
        stop = (b[0] != 0xFF) | (marker == _SOS) | (marker == _EOI) | is_sof | (
            (marker != 0xFF) & ~tf.reduce_any(standalone == marker) & (seg < 2))
        whole = offset + 9 <= length  # as jpeg_size: a frame header cut short declares nothing
        found = tf.where(is_sof & (b[0] == 0xFF) & whole,
                         (b[5] * 256 + b[6]) * (b[7] * 256 + b[8]), zero)
        advance = tf.where(marker == 0xFF, tf.constant(1, tf.int64), tf.where(
            tf.reduce_any(standalone == marker), tf.constant(2, tf.int64), 2 + seg))
        return i + 1, offset + advance, found, stop

    _, _, pixels, _ = tf.while_loop(
        lambda i, offset, pixels, done: ~done & (i < MAX_JPEG_SEGMENTS), step,
        (tf.constant(0), tf.constant(2, tf.int64), zero, tf.constant(False)))
    return pixels
