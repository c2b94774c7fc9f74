"""The profile reader on profiles TensorFlow wrote here, on the CPU: Keras `model.fit` with the
TensorBoard callback, and a custom loop under MirroredStrategy with the TF profiler API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distcore.profile import ProfileError, ProfileSummary, find_profiles, summarize
from distcore.profile.analyze import summarize_bytes
from distcore.profile.summary import from_json

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ("keras_slow", "mirrored_slow", "mirrored_fast")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One profile per scenario of tests/core/profile_runs.py, written by one TF process."""
    out = tmp_path_factory.mktemp("profiles")
    subprocess.run(
        [sys.executable, "-m", "tests.core.profile_runs", str(out), *SCENARIOS],
        cwd=REPO, check=True, capture_output=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    found = {}
    for name in SCENARIOS:
        paths = find_profiles(out / name)
        assert len(paths) == 1, (name, paths)
        found[name] = paths[0]
    return found


def _summary(path: Path) -> ProfileSummary:
    summary = summarize(path)
    assert isinstance(summary, ProfileSummary), summary
    return summary


def test_keras_fit_profile_is_input_bound_on_the_sequential_map(profiles: dict[str, Path]) -> None:
    summary = _summary(profiles["keras_slow"])
    # Keras 3 marks steps `Profiled batch` with a step_num stat and no `_r`.
    assert summary.step_source == "step markers"
    assert summary.step_count >= 3
    assert summary.input_verdict == "highly input-bound"
    assert summary.input_percent > 50
    assert summary.bottleneck is not None
    stage = summary.bottleneck.stage
    assert stage.path.endswith("::MapAndBatch")
    assert stage.stats["parallelism"] == 1 and stage.stats["autotune"] == "false"
    assert stage.stats["batch_size"] == 4
    assert "runs at parallelism 1" in summary.bottleneck.remedy
    assert "`num_parallel_calls=tf.data.AUTOTUNE`" in summary.bottleneck.remedy


def test_mirrored_profile_names_the_users_map_and_its_collectives(
    profiles: dict[str, Path],
) -> None:
    summary = _summary(profiles["mirrored_slow"])
    assert summary.step_source == "step markers"
    assert summary.step_count == 8
    assert summary.input_verdict == "highly input-bound"
    assert summary.bottleneck is not None
    stage = summary.bottleneck.stage
    # Not the multi-device iterator's per-device Prefetch::Generator, nor Rebatch.
    assert stage.path == "Iterator::Root::Prefetch::Rebatch::MapAndBatch"
    assert stage.stats["parallelism"] == 1 and stage.stats["autotune"] == "false"
    assert "`num_parallel_calls=tf.data.AUTOTUNE`" in summary.bottleneck.remedy
    collectives = [op for op in summary.top_ops if op.name == "CollectiveReduceV2"]
    assert collectives and collectives[0].kind == "communication"
    assert summary.total.communication_ms > 0


def test_parallel_prefetched_input_is_not_input_bound(profiles: dict[str, Path]) -> None:
    summary = _summary(profiles["mirrored_fast"])
    assert summary.step_count == 8
    assert summary.input_verdict == "not input-bound", summary.total
    assert summary.total.host_compute_ms > summary.total.input_ms
    assert summary.bottleneck is not None
    # The stage that took most time varies under load: a map says autotune, a source says none.
    assert summary.bottleneck.stage.stats.get("autotune", "true") == "true"
    assert "`num_parallel_calls" not in summary.bottleneck.remedy


def test_summary_round_trips_through_json(profiles: dict[str, Path]) -> None:
    summary = _summary(profiles["mirrored_slow"])
    text = json.dumps(summary.to_json(), allow_nan=False)
    assert from_json(json.loads(text)) == summary


def test_the_bulk_decoder_reads_them_as_the_message_decoder_does(
    profiles: dict[str, Path]
) -> None:
    for path in profiles.values():
        data = path.read_bytes()
        bulk = summarize_bytes(data, str(path))
        assert bulk == summarize_bytes(data, str(path), reference=True)
        assert bulk.events > 100


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.97])
def test_truncated_profile_is_unreadable(
    profiles: dict[str, Path], tmp_path: Path, keep: float
) -> None:
    data = profiles["mirrored_slow"].read_bytes()
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: int(len(data) * keep)])
    answer = summarize(cut)
    assert isinstance(answer, ProfileError), answer
    assert answer.message.startswith("profile unreadable: ")


def test_find_profiles_reads_both_layouts(profiles: dict[str, Path]) -> None:
    keras_run = profiles["keras_slow"].parents[4]  # <log_dir>/train/plugins/profile/<ts>/
    assert find_profiles(keras_run) == [profiles["keras_slow"]]
    loop_run = profiles["mirrored_slow"].parents[3]  # <logdir>/plugins/profile/<ts>/
    assert find_profiles(loop_run) == [profiles["mirrored_slow"]]
    assert find_profiles(loop_run / "missing") == []
