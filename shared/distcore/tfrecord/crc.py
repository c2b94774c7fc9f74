"""Masked CRC-32C, as TFRecord framing uses it (google_crc32c: C, SSE4.2 where there is one).

The compiled kernel has its own (_kernel_crc.c); this one is the reference path's and the
writers' in tests and benchmarks."""

from __future__ import annotations

from typing import Final

import google_crc32c

_MASK_DELTA: Final = 0xA282EAD8


def mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    return mask(google_crc32c.value(data))
