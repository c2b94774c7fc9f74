"""The Textual dashboard: runs, charts, GPUs and alerts on one screen.

Producers (the logdir watcher, the telemetry sampler) are plain threads created here or injected
(tests inject fixed data); they post small messages; widgets render state that pure functions in
distmon.widgets.model and distcore.alerts compute. The first screen appears before the first scan
ends: the scan runs in a worker thread and runs fill in as it reads them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from distcore.alerts import Alert, evaluate, keep_since
from distcore.smoothing import DEFAULT_WEIGHT, WEIGHT_STEP, adjust_weight
from distcore.textsafe import terminal_text
from distmon.messages import (
    Producers,
    RunsChanged,
    RunSource,
    ScanFinished,
    Telemetry,
    Watcher,
    make_producers,
)
from distmon.options import Options
from distmon.widgets.charts import LineChart
from distmon.widgets.model import (
    X_MODES,
    Job,
    Plan,
    XMode,
    all_tags,
    curves,
    filter_jobs,
    group_jobs,
    job_row,
    read_plan,
)
from distmon.widgets.panels import Panel, render_alerts, render_details, render_gpus
from distmon.widgets.runs import RunsTable
from distmon.widgets.screens import DEFAULT_TAGS, HelpScreen, TagPicker

if TYPE_CHECKING:  # both packages are heavy (numpy, NVML): loaded after the first screen
    from distcore.events.model import RunSnapshot
    from distcore.telemetry.model import TelemetrySnapshot

WIDE = 120  # columns from which runs and charts sit side by side
FULL_EVERY = 10.0  # seconds between full re-reads of the store (statuses age without events)
PLAN_MAX_AGE = 5.0  # seconds a job's run.json is trusted before it is read again


class DistmonApp(App[int]):
    CSS_PATH = "distmon.tcss"
    TITLE = "distmon"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("slash", "filter", "filter"),
        Binding("t", "pick_tag", "tag"),
        Binding("x", "x_mode", "x axis"),
        Binding("l", "log_scale", "log"),
        Binding("plus,equals_sign", "smoothing(1)", "smooth+", show=False),
        Binding("minus", "smoothing(-1)", "smooth-", show=False),
        Binding("r", "reload", "reload"),
        Binding("escape", "escape", "unfocus", show=False),
    ]

    def __init__(
        self,
        options: Options,
        *,
        store: RunSource | None = None,
        watcher: Watcher | None = None,
        telemetry: Telemetry | None = None,
        producers: Callable[[], Producers] | None = None,
        clock: Callable[[], float] = time.time,
        plans: Callable[[Path], Plan | None] = read_plan,
    ) -> None:
        super().__init__()
        self.options = options
        self._store, self._watcher, self._telemetry = store, watcher, telemetry
        self._factory = producers
        self._clock, self._read_plan = clock, plans
        self._unsubscribe: Callable[[], None] | None = None
        self._closing = False
        self._closing_lock = threading.Lock()
        self._jobs: tuple[Job, ...] = ()
        self._visible: tuple[Job, ...] = ()
        self._alerts: tuple[Alert, ...] = ()
        self._shown_alerts: tuple[Alert, ...] | None = None
        self._status_text = ""
        self._shown_gpus: TelemetrySnapshot | None = None
        self._plans: dict[str, tuple[float, Plan | None]] = {}
        self._telemetry_snap: TelemetrySnapshot | None = None
        self._last_refresh = 0.0
        self._runs: dict[str, RunSnapshot] = {}
        self._changed: set[str] = set()
        self._last_full = 0.0
        self._scanning = watcher is not None or producers is not None
        self._scan_note = "reading…" if self._scanning else ""
        self.selected: frozenset[str] = frozenset()
        self.focused_job: str | None = None
        self.cursor_job: str | None = None
        self.pattern = ""
        self.second_tag = "accuracy"
        self.smoothing = DEFAULT_WEIGHT
        self.x_mode: XMode = "step"
        self.log_y = False

    # --- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        with Horizontal(id="top"):
            with Vertical(id="left"):
                yield RunsTable(id="runs")
                yield Input(placeholder="regular expression", id="filter")
                yield Panel(id="details")
            with Horizontal(id="charts"):
                yield LineChart(id="chart-loss")
                yield LineChart(id="chart-second")
        with Horizontal(id="bottom"):
            yield Panel(id="gpus")
            yield Panel(id="alerts")
        yield Footer()

    def on_mount(self) -> None:
        self._main.query_one("#runs").border_title = "runs"
        self._main.query_one("#gpus").border_title = "GPUs"
        self._main.query_one("#alerts").border_title = "alerts"
        self._main.query_one("#details").border_title = "focused"
        self._apply_size(self.size.width)
        self._main.query_one(RunsTable).focus()
        self.set_interval(self.options.refresh, self._tick)
        if self._factory is not None:
            self.refresh_view(full=True)  # the empty frame, drawn while the producers load
            self._make_producers()
        else:
            self._attach_producers()
            if self._watcher is not None:
                self._scan(start_watching=True)

    def _attach_producers(self) -> None:
        """On the UI thread: listen to the store, start sampling, draw what there is."""
        if self._store is not None:
            self._unsubscribe = self._store.subscribe(self._on_store_change)
        if self._telemetry is not None:
            self._telemetry.start()
            self._telemetry_snap = self._telemetry.latest()
        self.refresh_view(full=True)

    @work(thread=True, exclusive=True, exit_on_error=False, group="scan")
    def _make_producers(self) -> None:
        """Build the producers off the UI thread (their imports take a while), then scan."""
        assert self._factory is not None
        try:
            made = self._factory()
        except Exception as err:  # shown in the status line: the dashboard stays up
            self.post_message(ScanFinished(0.0, str(err)))
            return
        with self._closing_lock:
            if self._closing:
                return
            self._store, self._watcher, self._telemetry = made.store, made.watcher, made.telemetry
        self.call_from_thread(self._attach_producers)
        if made.watcher is not None:
            self._scan_body(start_watching=True)
        else:
            self.post_message(ScanFinished(0.0))

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        with self._closing_lock:
            self._closing = True
        if self._watcher is not None:
            self._watcher.close()
        if self._telemetry is not None:
            self._telemetry.close()

    def on_resize(self) -> None:
        self._apply_size(self.size.width)

    @property
    def _main(self) -> Screen[Any]:
        """The dashboard's screen, also while help or the tag picker is on top of it."""
        return self.screen_stack[0]

    def _apply_size(self, width: int) -> None:
        self._main.set_class(width >= WIDE, "-wide")

    # --- producers -> messages ------------------------------------------------------------------

    def _on_store_change(self, changed: frozenset[str]) -> None:
        """Called on the watcher's thread: hand over to the UI thread, coalesced."""
        self.post_message(RunsChanged(changed))

    @work(thread=True, exclusive=True, exit_on_error=False, group="scan")
    def _scan(self, start_watching: bool = False) -> None:
        self._scan_body(start_watching)

    def _scan_body(self, start_watching: bool) -> None:
        assert self._watcher is not None
        began = time.monotonic()
        try:
            self._watcher.scan_once()
            with self._closing_lock:  # never start a watcher that on_unmount already closed
                if start_watching and not self._closing:
                    self._watcher.start()
        except Exception as err:  # shown in the status line: the dashboard stays up
            self.post_message(ScanFinished(time.monotonic() - began, str(err)))
            return
        self.post_message(ScanFinished(time.monotonic() - began))

    def on_runs_changed(self, message: RunsChanged) -> None:
        self._changed |= message.names
        # Draw at once when idle; under a stream of changes, at most once per refresh interval.
        if time.monotonic() - self._last_refresh >= self.options.refresh:
            self.refresh_view()

    def on_scan_finished(self, message: ScanFinished) -> None:
        self._scanning = False
        self._scan_note = f"scan failed: {message.error}" if message.error else ""
        self.refresh_view(full=True)

    def _tick(self) -> None:
        # NoMatches: the app is shutting down and its widgets are already gone.
        with contextlib.suppress(NoMatches):
            self._tick_once()

    def _tick_once(self) -> None:
        if self._telemetry is not None:
            self._telemetry_snap = self._telemetry.latest()
            self._show_gpus()
        # While the first scan runs, the store fills without notifying: show what it holds.
        if self._changed or self._scanning:
            self.refresh_view(full=self._scanning)
        elif time.monotonic() - self._last_full >= FULL_EVERY:
            self.refresh_view(full=True)  # live/idle marks change as time passes
        else:
            self._show_alerts()  # a silent run becomes stalled as time passes

    # --- state -> widgets -----------------------------------------------------------------------

    def _read_runs(self, full: bool) -> None:
        """Re-read every run (full) or only those the watcher said changed: a snapshot copies
        each run's kept points, so 200 runs while 8 write would cost far more than 8."""
        changed, self._changed = self._changed, set()
        if self._store is None:
            return
        if full:
            self._runs = {r.name: r for r in self._store.snapshot()}
            self._last_full = time.monotonic()
            return
        for name in changed:
            run = self._store.get(name)
            if run is None:
                self._runs.pop(name, None)
            else:
                self._runs[name] = run

    def refresh_view(self, full: bool = False) -> None:
        self._last_refresh = time.monotonic()
        self._read_runs(full)
        self._jobs = group_jobs(self._runs[n] for n in sorted(self._runs))
        self._visible = filter_jobs(self._jobs, self.pattern)
        self._main.query_one(RunsTable).show([job_row(j) for j in self._visible], self.selected)
        self._show_charts()
        self._show_details()
        self._show_alerts()
        self._show_gpus()

    def _shown_jobs(self) -> tuple[Job, ...]:
        """Focused job alone; else the selected ones; else the one under the cursor."""
        by_name = {j.name: j for j in self._jobs}
        if self.focused_job in by_name:
            return (by_name[self.focused_job],)
        chosen = [by_name[n] for n in sorted(self.selected) if n in by_name]
        if chosen:
            return tuple(chosen)
        if self.cursor_job in by_name:
            return (by_name[self.cursor_job],)
        return self._visible[:1]

    def _show_charts(self) -> None:
        shown = self._shown_jobs()
        how = f"ema {self.smoothing:g} · {self.x_mode}" + (" · log" if self.log_y else "")
        for widget_id, wanted in (("#chart-loss", "loss"), ("#chart-second", self.second_tag)):
            chart = self._main.query_one(widget_id, LineChart)
            chart.plot(
                curves(shown, wanted, self.x_mode, self.smoothing),
                title=f"{wanted} ({how})",
                log_y=self.log_y,
                mode=self.x_mode,
            )

    def _show_details(self) -> None:
        panel = self._main.query_one("#details", Panel)
        job = next((j for j in self._jobs if j.name == self.focused_job), None)
        panel.display = job is not None
        if job is None:
            return
        panel.update(render_details(job, self._plan(job), self._alerts))

    def _plan(self, job: Job) -> Plan | None:
        """run.json of a job, re-read at most every PLAN_MAX_AGE seconds (its status changes)."""
        now = time.monotonic()
        cached = self._plans.get(job.name)
        if cached is None or now - cached[0] > PLAN_MAX_AGE:
            cached = (now, self._read_plan(job.job_dir))
            self._plans[job.name] = cached
        return cached[1]

    def _agent_status(self) -> dict[str, str]:
        """run name -> run.json status, for the jobs distagent wrote."""
        out = {}
        for job in self._jobs:
            plan = self._plan(job)
            if plan is not None and plan.status:
                out.update({run.name: plan.status for run in job.runs.values()})
        return out

    def _show_alerts(self) -> None:
        runs = [r for j in self._jobs for r in j.runs.values()]
        gpus = self._telemetry_snap.devices if self._telemetry_snap is not None else ()
        current = evaluate(runs, gpus, now=self._clock(), agent_status=self._agent_status())
        self._alerts = keep_since(self._alerts, current)
        panel = self._main.query_one("#alerts", Panel)
        if self._alerts != self._shown_alerts:
            self._shown_alerts = self._alerts
            panel.update(render_alerts(self._alerts))
            count = len(self._alerts)
            panel.border_title = f"alerts ({count})" if count else "alerts"
        self._show_status()

    def _show_gpus(self) -> None:
        snap = self._telemetry_snap
        if snap is self._shown_gpus and snap is not None:
            return  # no new sample since the last draw
        self._shown_gpus = snap
        panel = self._main.query_one("#gpus", Panel)
        history = self._telemetry.history if self._telemetry is not None else _no_history
        panel.show(lambda width: render_gpus(snap, history, width))
        simulated = self._telemetry_snap is not None and self._telemetry_snap.status.simulated
        panel.border_title = "GPUs (simulated)" if simulated else "GPUs"

    def _show_status(self) -> None:
        logdirs = ", ".join(str(p) for p in self.options.logdirs)
        shown = f"{len(self._visible)}/{len(self._jobs)}" if self.pattern else str(len(self._jobs))
        parts = [f"distmon  {logdirs}", f"{shown} jobs"]
        if self.pattern:
            parts.append(f"filter /{self.pattern}/")
        if self.selected:
            parts.append(f"{len(self.selected)} selected")
        if self._scan_note:
            parts.append(self._scan_note)
        text = "  ·  ".join(parts)
        if text != self._status_text:  # an update re-lays the screen out: only when it changed
            self._status_text = text
            # Content(str) is plain text: a typed filter or a path is never read as markup.
            self._main.query_one("#status", Static).update(Content(terminal_text(text)))

    # --- events from widgets ----------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        if key != self.cursor_job:
            self.cursor_job = key
            self._show_charts()

    def on_runs_table_toggle_select(self, message: RunsTable.ToggleSelect) -> None:
        self.selected = self.selected ^ {message.key}
        self.refresh_view()

    def on_runs_table_focus_job(self, message: RunsTable.FocusJob) -> None:
        self.focused_job = None if self.focused_job == message.key else message.key
        self._main.set_class(self.focused_job is not None, "-focused")
        self.refresh_view()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.pattern = event.value
        self.refresh_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_filter()

    # --- actions --------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_filter(self) -> None:
        box = self._main.query_one("#filter", Input)
        box.display = True
        box.focus()

    def _close_filter(self) -> None:
        box = self._main.query_one("#filter", Input)
        box.display = bool(self.pattern)
        self._main.query_one(RunsTable).focus()

    def action_escape(self) -> None:
        box = self._main.query_one("#filter", Input)
        if box.has_focus or (self.pattern and self.focused_job is None):
            box.value = ""
            self.pattern = ""
            self._close_filter()
        self.focused_job = None
        self._main.remove_class("-focused")
        self.refresh_view()

    def action_pick_tag(self) -> None:
        def chosen(tag: str | None) -> None:
            if tag is not None:
                self.second_tag = "accuracy" if tag == DEFAULT_TAGS else tag
                self._show_charts()

        self.push_screen(TagPicker(all_tags(self._shown_jobs())), chosen)

    def action_x_mode(self) -> None:
        self.x_mode = X_MODES[(X_MODES.index(self.x_mode) + 1) % len(X_MODES)]
        self._show_charts()

    def action_log_scale(self) -> None:
        self.log_y = not self.log_y
        self._show_charts()

    def action_smoothing(self, direction: int) -> None:
        self.smoothing = adjust_weight(self.smoothing, direction * WEIGHT_STEP)
        self._show_charts()

    def action_reload(self) -> None:
        self._plans.clear()
        if self._watcher is not None:
            self._scan_note = "reloading…"
            self._scanning = True
            self._scan()
        self.refresh_view(full=True)


def _no_history(key: str) -> Sequence[float | None]:
    return ()


def run_app(options: Options) -> int:
    from distmon.crash import run_guarded  # a crash: non-zero exit, traceback in a log file

    return run_guarded(DistmonApp(options, producers=lambda: make_producers(options)))


__all__ = ["DistmonApp", "Producers", "run_app"]
