"""Any image folder contents through the listing, the plan and the real tf.data pipeline, and
through the real CLI (`plan`, `start`): an unreadable image is skipped and counted or refused,
named; a looping or repeated class folder is refused; any file name is read.

Generated folders (hypothesis) mix good 12×12 JPEGs and PNGs with empty, truncated, text and
random files named `.jpg`, directories and FIFOs named `.png`, broken and looping links,
names that are not UTF-8, and class folders that are links (to a class, to the root, in a
cycle). The oracle is written out from what each entry is, never read back from the code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from distagent.config import config_from_dict
from distagent.data import open_source
from distagent.data.images import list_directory
from distagent.devices import resolve_strategy
from distagent.pipeline import build_input, plan_for
from distcore.errors import DistmonError
from distcore.textsafe import terminal_text
from tests.agent.crafted_images import png

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
SIZE = 8


@pytest.fixture(scope="module")
def encoded(tf: Any) -> dict[str, bytes]:
    image = (np.arange(12 * 12 * 3) % 251).astype(np.uint8).reshape(12, 12, 3)
    return {"jpeg": bytes(tf.io.encode_jpeg(image).numpy()),
            "png": bytes(tf.io.encode_png(image).numpy())}


GOOD = ("jpeg", "png")
BAD = ("empty", "truncated-jpeg", "truncated-png", "text", "random", "directory", "fifo",
       "broken-link", "link-loop")
FILE = st.tuples(st.sampled_from(GOOD + BAD), st.booleans(), st.integers(1, 10**6))
FOLDER = st.tuples(st.sampled_from(["dir", "dir", "dir", "link-to-class", "link-to-root",
                                    "cycle"]),
                   st.lists(FILE, max_size=4))


def make_file(path: Path, kind: str, seed: int, encoded: dict[str, bytes]) -> None:
    if kind in GOOD:
        path.write_bytes(encoded[kind])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind.startswith("truncated"):
        data = encoded[kind.split("-")[1]]
        path.write_bytes(data[: 1 + seed % (len(data) - 1)])
    elif kind == "text":
        path.write_text("this is not an image\n")
    elif kind == "random":
        path.write_bytes(np.random.default_rng(seed).bytes(1 + seed % 300))
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "broken-link":
        path.symlink_to("nowhere.jpg")
    else:
        path.symlink_to(path.name)


def build(root: Path, folders: list[tuple[str, list[tuple[str, bool, int]]]],
          encoded: dict[str, bytes]) -> tuple[str | None, int, int, list[str]]:
    """Make the folder; (refusal phrase or None, good images, bad images, bad paths). The class
    folders are checked first, then each image (where "fail" stops), then the count."""
    refusal = None
    good = bad = 0
    bad_paths: list[str] = []
    made: list[Path] = []
    for i, (kind, files) in enumerate(folders):
        folder = root / f"c{i}"
        if kind == "link-to-class" and made:
            folder.symlink_to(made[0].name)
            refusal = refusal or "are the same folder"
            continue
        if kind == "link-to-root":
            folder.symlink_to(".")
            refusal = refusal or "links back"
            continue
        if kind == "cycle":
            folder.symlink_to(f"c{i}-b")
            (root / f"c{i}-b").symlink_to(folder.name)
            refusal = refusal or "symbolic link loop"
            continue
        folder.mkdir()
        made.append(folder)
        for j, (file_kind, odd_name, seed) in enumerate(files):
            name = os.fsdecode(b"\xff\xfe-%d.jpg" % j) if odd_name else f"{j}.{file_kind[:3]}.png"
            path = folder / name
            make_file(path, file_kind, seed, encoded)
            if file_kind == "directory":
                continue  # a sub-folder named like an image is no image: neither read nor skipped
            if file_kind in GOOD:
                good += 1
            else:
                bad += 1
                bad_paths.append(str(path))
    return refusal, good, bad, bad_paths if len(made) >= 2 and good else [*bad_paths, "few"]


def _cfg(root: Path, on_error: str) -> Any:
    return config_from_dict({}, overrides=[
        "data.source=images", f"data.images.image_size=[{SIZE},{SIZE}]",
        f"data.images.directory={root}", f"data.images.on_error={on_error}",
        "strategy.cpu_replicas=1", "data.per_replica_batch_size=1",
        "data.validation_fraction=0.0", "model.name=mlp", "data.optimize=true"])


@settings(max_examples=30, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(folders=st.lists(FOLDER, min_size=1, max_size=4), on_error=st.sampled_from(["skip",
                                                                                   "fail"]))
@example(folders=[("dir", [("jpeg", False, 1), ("empty", False, 1)]),
                  ("dir", [("png", False, 2)])], on_error="skip")  # one skipped: "1 ... image"
def test_any_image_folder_is_planned_and_read_or_refused_in_one_line(
    tf: Any, encoded: dict[str, bytes], tmp_path_factory: pytest.TempPathFactory,
    folders: list[tuple[str, list[tuple[str, bool, int]]]], on_error: str,
) -> None:
    root = tmp_path_factory.mktemp("images")
    refusal, good, bad, bad_paths = build(root, folders, encoded)
    too_few = bad_paths[-1:] == ["few"]
    bad_paths = [p for p in bad_paths if p != "few"]
    cfg = _cfg(root, on_error)
    if refusal is None and on_error == "fail" and bad:
        with pytest.raises(DistmonError) as err:
            open_source(cfg)
        message = str(err.value)
        assert "\n" not in message and any(terminal_text(p) in message for p in bad_paths)
        return
    if refusal is not None or too_few:
        with pytest.raises(DistmonError, match=refusal or r" images? in ") as err:
            open_source(cfg)
        assert "\n" not in str(err.value)
        return
    setup = resolve_strategy(cfg.strategy)
    plan = plan_for(cfg, replicas=setup.replicas, devices=setup.devices)
    assert plan.num_examples == good  # the plan counts the images it will use
    skipped = [w for w in plan.warnings if " unreadable image" in w]
    assert len(skipped) == (1 if bad else 0)
    if bad:
        assert skipped[0].startswith(f"{bad} unreadable {'image' if bad == 1 else 'images'} "
                                     "skipped")
        assert any(terminal_text(p) in skipped[0] for p in bad_paths)
    data = build_input(cfg, plan)
    seen = sum(int(x.shape[0]) for x, _ in data.train.take(plan.steps_per_epoch))
    assert seen == plan.steps_per_epoch  # every planned step has a real, decoded image


def test_the_listing_names_the_first_five_and_counts_the_rest(
    encoded: dict[str, bytes], tmp_path: Path
) -> None:
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        (tmp_path / cls / "ok.jpg").write_bytes(encoded["jpeg"])
    for i in range(8):
        (tmp_path / "a" / f"bad{i}.jpg").write_bytes(b"")
    listing = list_directory(tmp_path)
    assert (len(listing.files), listing.skipped_count, len(listing.skipped)) == (2, 8, 5)
    assert listing.skipped[0] == f"{tmp_path}/a/bad0.jpg (empty)"


def _plan_cli(config: Path, *sets: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distagent", "plan", str(config), "--json",
                           *[a for s in sets for a in ("--set", s)]], capture_output=True,
                          text=True, env=ENV, timeout=180, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_plan_and_start_through_the_cli(encoded: dict[str, bytes], tmp_path: Path) -> None:
    images = tmp_path / "pictures"
    for cls in ("cat", "dog"):
        (images / cls).mkdir(parents=True)
        for i in range(4):
            (images / cls / f"{i}.jpg").write_bytes(encoded["jpeg"])
    (images / "cat" / "empty.jpg").write_bytes(b"")
    (images / "dog" / os.fsdecode(b"text-\xff.jpg")).write_text("not an image")
    # Declares 30000×30000 (2.7 GB to decode): refused by its header before TensorFlow sees it.
    (images / "dog" / "bomb.png").write_bytes(png(30000, 30000, rows=30000))
    config = Path(__file__).resolve().parents[2] / "sample_configs" / "images.toml"
    sets = [f"data.images.directory={images}", f"data.images.image_size=[{SIZE},{SIZE}]",
            "data.per_replica_batch_size=2", "strategy.cpu_replicas=1",
            "data.validation_fraction=0.0", "model.name=mlp", f"run.logdir={tmp_path}",
            "train.epochs=1", "train.steps_per_epoch=2"]
    planned = _plan_cli(config, *sets)
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["num_examples"] == 8
    (warning,) = [w for w in plan["warnings"] if "unreadable images skipped" in w]
    assert warning.startswith("3 unreadable images skipped") and "\\xff" in warning
    assert f"{images}/dog/bomb.png (declares 30000×30000 pixels, more than" in warning

    refused = _plan_cli(config, *sets, "data.images.on_error=fail")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith(f"distagent: data.images: {images}/cat/empty.jpg (empty)")

    started = subprocess.run(
        [sys.executable, "-m", "distagent", "start", str(config),
         *[a for s in sets for a in ("--set", s)]],
        capture_output=True, text=True, env=ENV, timeout=240, stdin=subprocess.DEVNULL)
    assert started.returncode == 0, started.stderr[-3000:]
    assert "warning: 3 unreadable images skipped" in started.stdout + started.stderr
    assert "Traceback" not in started.stderr
    record = json.loads((tmp_path / "images" / "run.json").read_text())
    assert record["status"] == "finished"
    assert any("3 unreadable images skipped" in w for w in record["plan"]["warnings"])
