"""JPEG and PNG files built byte by byte: the header declares whatever size a test says."""

from __future__ import annotations

import struct
import zlib


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, rows: int = 1) -> bytes:
    """A PNG declaring width×height whose data holds `rows` zero rows (a valid zlib stream)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\0" * (rows * (1 + 3 * min(width, 64))))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", pixels)
            + chunk(b"IEND", b""))


def segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def jpeg(width: int, height: int, app_sizes: list[int], fill: int, sof: int) -> bytes:
    """SOI, APPn segments of the given sizes, fill bytes, a frame header, a scan, EOI."""
    body = b"".join(segment(0xE0 + i % 16, bytes(n)) for i, n in enumerate(app_sizes))
    frame = segment(sof, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00")
    scan = segment(0xDA, b"\x01\x01\x00\x00\x3f\x00") + b"\x12\x34"
    return b"\xff\xd8" + body + b"\xff" * fill + frame + scan + b"\xff\xd9"
