"""Images are refused by the pixel size their header declares, before TensorFlow decodes them.

Headers are built here byte by byte (PNG chunks with their CRC, JPEG marker segments), so the
declared size is whatever the test says, and the oracle is that size against Pillow's limit,
never a value read back from the code. A crafted bomb (a 30000×30000 PNG of a few KB) is
refused in one line; test_images_safety's real `distagent start` skips and names one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distagent.data.images import image_problem, list_directory
from distcore.errors import DistmonError
from tests.agent.crafted_images import chunk, jpeg, png, segment

PILLOW_LIMIT = 89_478_485  # PIL.Image.MAX_IMAGE_PIXELS
SIDE = st.integers(0, 2**16 - 1)


def expected(width: int, height: int) -> str | None:
    if width == 0 or height == 0:
        return "no image"
    return "more than" if width * height > PILLOW_LIMIT else None


@settings(max_examples=150, deadline=None)
@given(width=SIDE, height=SIDE, fmt=st.sampled_from(["png", "jpeg"]),
       app_sizes=st.lists(st.integers(0, 3000), max_size=6), fill=st.integers(0, 3),
       sof=st.sampled_from([0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD,
                            0xCE, 0xCF]))
def test_the_declared_size_decides_before_decoding(
    tmp_path_factory: pytest.TempPathFactory, width: int, height: int, fmt: str,
    app_sizes: list[int], fill: int, sof: int,
) -> None:
    path = tmp_path_factory.mktemp("img") / f"x.{fmt}"
    path.write_bytes(png(width, height) if fmt == "png" else jpeg(width, height, app_sizes,
                                                                  fill, sof))
    problem = image_problem(str(path))
    want = expected(width, height)
    if want is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(f"declares {width}×{height} pixels")
        assert want in problem and "\n" not in problem


@pytest.mark.parametrize(("data", "phrase"), [
    (b"\xff\xd8" + segment(0xDB, bytes(64)) + segment(0xDA, bytes(6)) + b"\xff\xd9",
     "no frame header before its scan"),
    (b"\xff\xd8" + b"\xff\xe1\xff\xf0" + bytes(16) + b"\xff\xd9", "runs past the end"),
    (b"\xff\xd8" + segment(0xE0, b"") + b"\x12\x34\xff\xd9",
     "no frame header before the data ends"),
    (b"\x89PNG\r\n\x1a\n" + chunk(b"tEXt", b"a\0b") + chunk(b"IEND", b""), "not IHDR"),
    (b"\x89PNG\r\n\x1a\nIEND", "no IHDR header"),
])
def test_a_header_without_a_size_is_named(tmp_path: Path, data: bytes, phrase: str) -> None:
    path = tmp_path / "x.img"
    path.write_bytes(data)
    problem = image_problem(str(path))
    assert problem is not None and phrase in problem, problem


def test_a_jpeg_s_markers_are_walked_a_bounded_number_of_times(tmp_path: Path) -> None:
    path = tmp_path / "x.jpg"
    path.write_bytes(jpeg(8, 8, [0] * 2000, 0, 0xC0))  # 2,000 empty APPn before the frame
    problem = image_problem(str(path))
    assert problem is not None and "first 1024 markers" in problem


def bomb_folder(root: Path) -> Path:
    """Two classes of decodable 12×12 PNGs and a 30000×30000 PNG of a few KB in one; the bomb."""
    for cls in ("cat", "dog"):
        (root / cls).mkdir(parents=True)
        for i in range(2):
            (root / cls / f"{i}.png").write_bytes(png(12, 12, rows=12))
    bomb = root / "cat" / "bomb.png"
    bomb.write_bytes(png(30000, 30000, rows=30000))
    return bomb


def test_on_error_fail_refuses_the_bomb_in_one_line(tmp_path: Path) -> None:
    bomb = bomb_folder(tmp_path)
    with pytest.raises(DistmonError) as caught:
        list_directory(tmp_path, on_error="fail")
    assert str(caught.value) == (
        f"data.images: {bomb} (declares 30000×30000 pixels, more than the 89,478,485 decoded "
        "(a decompression bomb, or an image to shrink first)); set data.images.on_error = "
        '"skip" to leave unreadable images out')
