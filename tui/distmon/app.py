"""The Textual dashboard: jobs, charts, GPUs and alerts on one screen.

The app runs the producers: `ProducerSet` builds, starts and closes them and their job index
off the UI thread, and the index posts each new `JobsSnapshot`, which the app hands to its
`DashboardScreen` (distmon.dashboard), the owner of the board, the view and the keys. The first
screen appears before the first scan ends: runs fill in as the scan reads them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App
from textual.worker import Worker, WorkerState

from distcore.jobs.snapshots import JobsSnapshot
from distcore.safefile import write_atomic
from distcore.textsafe import terminal_text
from distmon.dashboard import DashboardScreen
from distmon.messages import JobsUpdated, ScanFinished
from distmon.options import Options
from distmon.producers import Producers, ProducerSet, make_producers

if TYPE_CHECKING:  # numpy, NVML: loaded off the UI thread, after the first screen
    from distcore.jobs.index import JobIndex


class DistmonApp(App[int]):
    CSS_PATH = "distmon.tcss"
    TITLE = "distmon"

    def __init__(
        self,
        options: Options,
        *,
        producers: Callable[[], Producers] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`producers` builds the producers, off the UI thread (default: the real ones for
        `options`; tests build their own). `clock`: the index's wall clock."""
        super().__init__()
        self.options = options
        # Set once the first rows are drawn: the watcher's first read waits for it (a bound)
        # before its other threads take the GIL the draw needs.
        self._first_drawn = threading.Event()
        factory = producers or (lambda: make_producers(options, first_drawn=self._first_drawn))
        # Starts and closes them with their index; owns the race of a quit during the start.
        self.producers = ProducerSet(factory, options, clock=clock)
        self.dashboard = DashboardScreen(
            options, progress=self.producers.read_progress, reload=self.reload,
            first_rows=self._first_drawn.set,
        )  # fmt: skip

    @property
    def index(self) -> JobIndex | None:
        """The job index whose snapshots the dashboard renders, once built."""
        return self.producers.built_index()

    def get_default_screen(self) -> DashboardScreen:
        return self.dashboard

    # --- the producers' life ------------------------------------------------------------------

    def on_mount(self) -> None:
        self._start_producers()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A producer that failed to build or start: said on the status line, not lost."""
        if event.state is WorkerState.ERROR and event.worker.group == "producers":
            error = event.worker.error
            text = terminal_text(f"{type(error).__name__}: {error}", 200)
            self.dashboard.show_note(f"producers failed: {text}")

    @work(thread=True, exclusive=True, exit_on_error=False, group="producers")
    def _start_producers(self) -> None:
        """Off the UI thread: build, start, scan; each snapshot posted to the UI (coalesced)."""
        self.producers.launch(self._snapshot_made, self._scanned)

    @work(thread=True, exclusive=True, exit_on_error=False, group="producers")
    def _rescan(self) -> None:
        self.producers.timed_scan(self._scanned)

    def reload(self) -> bool:
        """Read every logdir again (the watcher's scan: True), else ask the index for a fresh
        snapshot."""
        made = self.producers.made
        if made is not None and made.watcher is not None:
            self._rescan()
            return True
        if self.index is not None:
            self.index.wake()
        return False

    def _snapshot_made(self, jobs: JobsSnapshot) -> None:  # on the index's thread
        self.post_message(JobsUpdated(jobs))

    def _scanned(self, seconds: float, error: str | None) -> None:
        self.post_message(ScanFinished(seconds, error))  # the status line shows a failure

    def on_unmount(self) -> None:
        self._first_drawn.set()  # a first read waiting for the draw: not any more
        self.producers.close()

    # --- their messages, to the screen --------------------------------------------------------

    def on_jobs_updated(self, message: JobsUpdated) -> None:
        self.dashboard.show_jobs(message.jobs)

    def on_scan_finished(self, message: ScanFinished) -> None:
        self.dashboard.scan_finished(message.error)

    def on_resize(self) -> None:
        # The terminal's size (not a layout's Resize, which the screen also gets). Legends are
        # fitted to the charts' widths: plot again once the new layout is known (the screen's
        # breakpoints set `-wide`).
        self.call_after_refresh(self.dashboard.render_jobs)

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None,
        time_format: str | None = None,
    ) -> str | None:
        """The palette's screenshot: an SVG written where `--screenshot-dir` says, else in the
        current directory (Textual's default, ~/Downloads, seldom exists on a GPU server), and
        a notice saying where, or why not, in one line."""
        directory = Path(path) if path else self.options.screenshot_dir or Path.cwd()
        stamp = time.strftime(time_format or "%Y-%m-%dT%H_%M_%S")
        target = directory / (filename or f"distmon_{stamp}.svg")
        try:
            write_atomic(target, self.export_screenshot().encode("utf-8"), mode=0o644)
        except OSError as err:
            why = terminal_text(err.strerror or err, 200)
            self.notify(f"screenshot not written to {terminal_text(target, 300)}: {why}",
                        severity="error", markup=False)
            return None
        self.notify(f"screenshot written to {terminal_text(target, 300)}", markup=False)
        return str(target)


def run_app(options: Options) -> int:
    from distmon.crash import run_guarded  # a crash: non-zero exit, traceback in a log file

    return run_guarded(DistmonApp(options))


__all__ = ["DistmonApp", "Producers", "run_app"]
