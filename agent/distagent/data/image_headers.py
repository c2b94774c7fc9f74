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

MAX_PIXELS = 89_478_485
"""Pillow's MAX_IMAGE_PIXELS: about 0.25 GiB decoded as RGB."""
MAX_JPEG_SEGMENTS = 1024
"""Markers walked before the frame header: real files have a handful (APPn, DQT, DHT)."""

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
