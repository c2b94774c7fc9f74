"""The dashboard's text panels: alerts, the focused job's details, GPUs, the status line.

Each renders a pure function of the job index's snapshot (and the view's state); every outside
string (run names, tags, run.json fields, error text) goes through distcore.textsafe and into
`Text`, never markup. Each panel's `show(snapshot, ...)` keeps what it drew last and skips a draw
when that did not change: the app hands every snapshot to every panel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import BindingType
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from distcore.alerts import Alert
from distcore.jobs.cost import job_cost, snapshot_prices
from distcore.jobs.ledger import Ledger, job_ledger
from distcore.jobs.snapshots import Job, JobsSnapshot, Prices
from distcore.producer import ProducerError
from distcore.profile import ProfileError, ProfileSummary
from distcore.textsafe import terminal_text
from distcore.wording import counted
from distmon import keymaps
from distmon.render.cost import cost_line
from distmon.render.hosts import gpus_title, render_hosts
from distmon.render.ledger import BUCKET_MARKS, BUCKET_STYLES, bar_segments, ledger_line
from distmon.render.profile import PART_MARKS, PART_STYLES, headline, panel_lines, profile_lines
from distmon.render.profile import bar_segments as profile_bar
from distmon.render.view_model import main_run

_NOTHING = object()  # what a panel showed before its first draw: equal to no key

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_MARK = {"critical": "✖", "warning": "▲", "info": "●"}
MESSAGE_LIMIT = 400
LEDGER_BAR = 40  # cells of the ledger's bar in the details panel
NO_PRICES = Prices()  # the details of a job shown without distmon's prices: its own, if any


def render_alerts(
    alerts: Sequence[Alert], errors: Sequence[ProducerError] = (), problems: Sequence[str] = ()
) -> Text:
    """One alert a line; the stylesheet cuts them in a narrow panel and wraps them in a wide one.
    Producer errors (a failing sampler, remote reader, ...) and the logdirs' own problems (a
    directory that cannot be listed) come first: data may be missing."""
    lines = [
        Text(f"✖ {terminal_text(e.producer, 30)}: {terminal_text(e.message, MESSAGE_LIMIT)}",
             style="red")
        for e in errors
    ]  # fmt: skip
    lines += [
        Text(f"▲ logdir: {terminal_text(p, MESSAGE_LIMIT)}", style="yellow") for p in problems
    ]
    lines += [alert_line(a) for a in alerts]
    return Text("\n").join(lines) if lines else Text("no alerts", style="green")


def alert_line(alert: Alert) -> Text:
    where = f"{terminal_text(alert.run, 60)}: " if alert.run else ""
    return Text.assemble(
        (f"{SEVERITY_MARK[alert.severity]} ", SEVERITY_STYLE[alert.severity]),
        (where, "bold"),
        terminal_text(alert.message, MESSAGE_LIMIT),
    )


def render_details(job: Job, alerts: Sequence[Alert] = (), prices: Prices = NO_PRICES) -> Text:
    """The focused job: where it is, its status and plan from run.json, its alerts in full,
    where its time went and what it cost (at `prices`, else its own)."""
    main = main_run(job)
    parts = ", ".join(terminal_text(p or "(run)", 30) for p in job.parts)
    tags = len(main.scalars) if main is not None else 0
    files = main.files if main is not None else 0
    lines = [
        Text.assemble(("job ", "bold"), terminal_text(job.name, 120), f"  [{job.status}]"),
        Text(f"path {terminal_text(job.directory, 160)}"),
        Text(f"runs {parts}; {counted(tags, 'tag')}; {counted(files, 'file')}"),
    ]
    if main is not None and main.problems:
        problems = "; ".join(main.problems)
        lines.append(Text(f"problems: {terminal_text(problems, MESSAGE_LIMIT)}", style="red"))
    runs = {job.name, *(r.name for r in job.parts.values())}
    lines += [alert_line(a) for a in alerts if a.run in runs]
    ledger = job_ledger(job)
    if ledger is not None:
        lines += ledger_lines(ledger)
        cost = job_cost(job, prices)
        if cost is not None:
            lines.append(Text.assemble(("cost ", "bold"), cost_line(cost)))
    if job.profile is not None:
        lines += profile_texts(job.profile)
    agent = job.agent
    if agent is None:
        lines.append(Text("no run.json (not written by distagent)", style="dim"))
        return Text("\n").join(lines)
    batch = "–" if agent.global_batch_size is None else str(agent.global_batch_size)
    replicas = "– replicas" if agent.replicas is None else counted(agent.replicas, "replica")
    status = terminal_text(agent.status or "?", 20)
    step = "" if agent.last_step is None else f"; step {agent.last_step}"
    lines.append(Text(f"distagent: {status}{step}; {replicas}; global batch {batch}"))
    lines.append(Text(f"learning rate {terminal_text(agent.learning_rate or '–', 120)}"))
    if agent.error:
        lines.append(Text(f"error: {terminal_text(agent.error, MESSAGE_LIMIT)}", style="red"))
    if agent.scheduler is not None:
        from distcore.jobs.scheduler import describe_scheduler

        where = describe_scheduler(agent.scheduler, job.scheduler_state)
        lines.append(Text(f"scheduler: {terminal_text(where, MESSAGE_LIMIT)}"))
    return Text("\n").join(lines)


def ledger_lines(ledger: Ledger, width: int = LEDGER_BAR) -> list[Text]:
    """Where the job's wall time went: one bar (a colour per bucket, as wide as its share)
    where the buckets are known, then the buckets in words."""
    bar = Text()
    for bucket, cells in bar_segments(ledger, width):
        bar.append(BUCKET_MARKS[bucket] * cells, style=BUCKET_STYLES[bucket])
    words = Text.assemble(("time ", "bold"), ledger_line(ledger))
    return [Text.assemble(("time ", "bold"), bar), words] if bar else [words]


def profile_texts(profile: ProfileSummary | ProfileError, width: int = LEDGER_BAR) -> list[Text]:
    """The job's latest profile: its mean step as one bar (a colour per part) and its figures,
    then the bottleneck and the rest (profile.panel_lines); an unreadable profile is its one
    line, in red."""
    if isinstance(profile, ProfileError):
        return [Text(line, style="red") for line in profile_lines(profile)]
    bar = Text()
    for part, cells in profile_bar(profile, width):
        bar.append(PART_MARKS[part] * cells, style=PART_STYLES[part])
    first = Text.assemble(("profile ", "bold"), bar, " " if bar else "", headline(profile))
    return [first, *(Text(line) for line in panel_lines(profile))]


class Panel(Widget):
    """A focusable, scrollable text panel (tab reaches it; j/k scroll it).

    It keeps a drawing function, not text, and draws at render time with its current width, so
    a panel laid out after its first update still fits its lines to its real size.
    """

    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = keymaps.PANEL

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._draw: Callable[[int], Text] = lambda width: Text()
        self._drawn: object = _NOTHING
        self._height = -1  # the lines of the last update's text

    def changed(self, key: object) -> bool:
        """Whether `key` (what the panel is asked to show) differs from the last one; keeps it."""
        if key == self._drawn:
            return False
        self._drawn = key
        return True

    def show(self, draw: Callable[[int], Text], *, layout: bool = False) -> None:
        """New content; `layout` when its height may change (the details panel is `auto`)."""
        self._draw = draw
        self.refresh(layout=layout)

    def update(self, text: Text) -> None:
        # A layout draws the whole screen again: only where the text's height changed (a live
        # job's alerts change their words every refresh, seldom their lines).
        height = self._height_of(text)
        self.show(lambda width: text, layout=height != self._height)
        self._height = height

    def _height_of(self, text: Text) -> int:
        """The lines `text` takes at the panel's width (wrapped where the panel wraps)."""
        width = self.content_size.width or self.size.width
        if self.styles.text_wrap != "wrap" or width <= 0:
            return text.plain.count("\n") + 1
        return len(text.wrap(self.app.console, width))

    def render(self) -> Text:
        return self._draw(self.content_size.width or self.size.width)


class AlertsPanel(Panel):
    """Every alert, producer error and logdir problem; the count in the border."""

    def show_snapshot(self, snap: JobsSnapshot | None) -> None:
        alerts, errors, problems = (
            (snap.alerts, snap.errors, snap.problems) if snap is not None else ((), (), ())
        )
        if not self.changed((alerts, errors, problems)):
            return
        self.update(render_alerts(alerts, errors, problems))
        count = len(alerts) + len(errors) + len(problems)
        self.border_title = f"alerts ({count})" if count else "alerts"


class DetailsPanel(Panel):
    """The focused job (shown only while one is)."""

    def show_snapshot(self, snap: JobsSnapshot | None, focused: str | None) -> None:
        jobs = snap.jobs if snap is not None and focused is not None else ()
        job = next((j for j in jobs if j.name == focused), None)  # (no look-up per cursor move)
        self.display = job is not None
        alerts = snap.alerts if snap is not None else ()
        prices = snapshot_prices(snap) if snap is not None else Prices()
        if job is not None and self.changed((job, alerts, prices)):
            self.update(render_details(job, alerts, prices))


class GpusPanel(Panel):
    """This machine's GPUs with their history, then every other host. The history comes in
    the snapshot (`local_history`), never from the live sampler."""

    def show_snapshot(self, snap: JobsSnapshot | None) -> None:
        if snap is None or not self.changed(snap.hosts):
            return
        hosts, now, kept = snap.hosts, snap.generated_at, snap.local_history
        self.show(lambda width: render_hosts(hosts, lambda key: kept.get(key, ()), now, width))
        self.border_title = gpus_title(hosts)


class StatusLine(Static):
    """The top line, updated only when its text changes (an update re-lays the screen out)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._text: str | None = None

    def show_text(self, text: str) -> None:
        if text != self._text:
            self._text = text
            # Content(str) is plain text: a typed filter or a path is never read as markup.
            self.update(Content(text))
