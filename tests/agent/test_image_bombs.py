"""Images are refused by the pixel size their header declares, before TensorFlow decodes them.

Headers are built here byte by byte (PNG chunks with their CRC, JPEG marker segments), so the
declared size is whatever the test says, and the oracle is that size against Pillow's limit,
never a value read back from the code. A crafted bomb (a 30000×30000 PNG of a few KB) is
refused in one line (test_images_safety's real `distagent start` skips and names one); in
TFRecords, where there is no file to name, the same walk runs in the graph.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distagent.data.image_headers import jpeg_size, png_size, size_problem
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


def write_records(path: Path, encoded: list[bytes], labels: list[int]) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for data, label in zip(encoded, labels, strict=True):
            feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                           value=[data])),
                       "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                           value=[label]))}
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())


def test_tfrecord_images_are_left_out_by_their_declared_size(tf: Any, tmp_path: Path) -> None:
    """No file to name in a TFRecord: the header is read in the graph (the same walk), the
    refused records counted in the plan's warning, and the epoch holds only the others."""
    from distagent.config import config_from_dict
    from distagent.data import open_source
    from distagent.pipeline import build_input, plan_for

    good = [png(12, 12, rows=12), jpeg(12, 12, [20], 1, 0xC0)]
    bombs = [png(30000, 30000, rows=64), jpeg(65535, 65535, [300, 0], 2, 0xC2), png(0, 9)]
    write_records(tmp_path / "a.tfrecord", [good[0], bombs[0], good[0], bombs[1], bombs[2]],
                  [0, 1, 1, 0, 1])
    sets = ["data.source=images", "data.images.image_size=[8,8]", "model.name=mlp",
            f"data.images.files={tmp_path}/*.tfrecord", "strategy.cpu_replicas=1",
            "data.per_replica_batch_size=1", "data.validation_fraction=0.0",
            "data.deterministic=true"]
    source = open_source(config_from_dict({}, overrides=sets))
    assert (source.num_examples, source.num_classes) == (2, 2)
    assert source.notes == ("3 records in data.images.files declare more than 89,478,485 "
                            'pixels, or none: left out (data.images.on_error = "skip")',)
    cfg = config_from_dict({}, overrides=sets)
    plan = plan_for(cfg, replicas=1, devices=("CPU:0",), source=source)
    data = build_input(cfg, plan, source=source)
    labels = [int(y) for _, ys in data.train.take(2).as_numpy_iterator() for y in ys]
    assert sorted(labels) == [0, 1]
    with pytest.raises(DistmonError, match=r"^data\.images: 3 records in data\.images\.files "):
        open_source(config_from_dict({}, overrides=[*sets, "data.images.on_error=fail"]))


@pytest.fixture(scope="module")
def in_graph(tf: Any) -> Any:
    from distagent.data.image_headers import fits_declared

    return tf.function(fits_declared, input_signature=[tf.TensorSpec([], tf.string)])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(width=SIDE, height=SIDE, fmt=st.sampled_from(["png", "jpeg"]),
       app_sizes=st.lists(st.integers(0, 3000), max_size=4), fill=st.integers(0, 3),
       cut=st.one_of(st.none(), st.integers(0, 40)))
def test_the_graph_s_walk_agrees_with_the_listing_s(
    in_graph: Any, tmp_path_factory: pytest.TempPathFactory, width: int, height: int, fmt: str,
    app_sizes: list[int], fill: int, cut: int | None,
) -> None:
    data = png(width, height) if fmt == "png" else jpeg(width, height, app_sizes, fill, 0xC0)
    if cut is not None:  # a header cut short: no size in either reading
        data = data[:cut]
    path = tmp_path_factory.mktemp("img") / "x"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:  # the listing's reading of the header alone (the end marker is checked apart)
        size = png_size(fd) if fmt == "png" else jpeg_size(fd, len(data))
    finally:
        os.close(fd)
    magic = data.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"))
    assert bool(in_graph(data)) == (size_problem(size) is None or not magic), size
