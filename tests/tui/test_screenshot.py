"""The command palette's screenshot: an SVG where the user asked (`--screenshot-dir`), else in
the current directory, and a notice saying where; a directory it cannot write is one notice."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distmon.app import DistmonApp
from tests.kit.wait import until
from tests.tui.conftest import MakeApp, ready


def _notices(app: DistmonApp) -> list[str]:
    return [n.message for n in app._notifications]


async def _screenshot(app: DistmonApp, pilot: Any) -> None:
    """ctrl+p, `screenshot`, enter: as a user takes one."""
    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
    await pilot.press(*"screenshot")

    def offered() -> bool:
        listed = app.screen.query_one(CommandList)
        return any(str(listed.get_option_at_index(i).prompt).startswith("Screenshot")
                   for i in range(listed.option_count))

    await until(pilot, offered, "the screenshot command")
    await pilot.press("enter")


@pytest.mark.parametrize("asked", [True, False])
async def test_the_screenshot_lands_where_asked_and_says_where(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asked: bool
) -> None:
    shots = tmp_path / "shots"
    shots.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "no-home"))  # no ~/Downloads to fall back on
    app = make_app()
    if asked:
        app.options = dataclasses.replace(app.options, screenshot_dir=shots)
    where = shots if asked else tmp_path
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        await _screenshot(app, pilot)
        await until(pilot, lambda: list(where.glob("*.svg")), "the SVG")
        (svg,) = where.glob("*.svg")
        assert svg.read_text(encoding="utf-8").startswith("<svg")
        await until(pilot, lambda: f"screenshot written to {svg}" in _notices(app), "the notice")


async def test_a_directory_it_cannot_write_is_one_notice(make_app: MakeApp, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    app = make_app()
    app.options = dataclasses.replace(app.options, screenshot_dir=gone)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        gone.rmdir()
        gone.write_text("a file where the directory was")  # (root may write any directory)
        await _screenshot(app, pilot)
        await until(pilot, lambda: any("screenshot not written" in n for n in _notices(app)),
                    "the failure's notice")
        (notice,) = [n for n in _notices(app) if "screenshot" in n]
        assert str(gone) in notice and len(notice.splitlines()) == 1


def test_a_screenshot_dir_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "distmon", "--screenshot-dir", str(tmp_path / "nope"), "."],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"distmon: --screenshot-dir: no such directory: {tmp_path / 'nope'} (see --help)"]
