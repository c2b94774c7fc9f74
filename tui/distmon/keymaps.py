"""Every key of the dashboard, in one place: its screen's, the runs table's, the text panels'
and the column chooser's. Each class takes its list from here as its `BINDINGS`.

A key's tooltip is its line in the key panel (`?`), its short description the footer's; the
footer shows the focused widget's keys first, then the screen's, each list in its order here.
A new screen's key (one that pushes it) is one more line in `DASHBOARD`.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

# The dashboard's screen: the view's keys, then the comparison table's.
DASHBOARD: list[BindingType] = [
    Binding("q", "app.quit", "quit"),  # listed with Textual's ctrl+q and its words
    Binding("question_mark", "help", "help", tooltip="show or hide this panel"),
    Binding("slash", "filter", "filter",
            tooltip="filter jobs by regular expression (enter keeps it, escape clears it)"),
    Binding("t", "pick_tag", "tag", tooltip="the second chart's tag (any scalar or histogram)"),
    Binding("x", "x_mode", "x axis", tooltip="x axis: step, relative time, wall time"),
    Binding("l", "log_scale", "log", tooltip="log scale on the y axis"),
    Binding("plus,equals_sign", "smoothing(1)", "smooth+", show=False,
            tooltip="more smoothing (TensorBoard's debiased EMA)"),
    Binding("minus", "smoothing(-1)", "smooth-", show=False, tooltip="less smoothing"),
    Binding("r", "reload", "reload", tooltip="read every logdir again"),
    Binding("v", "grid", "grid", show=False, tooltip="a chart per scalar tag, paged"),
    Binding("escape", "escape", "unfocus", show=False,
            tooltip="unfocus the job, clear the filter, close this panel"),
    Binding("s", "sort_column", "sort",
            tooltip="sort the jobs by a column (numbers as numbers, missing last)"),
    Binding("S", "reverse_sort", "reverse", show=False, tooltip="reverse the sort"),
    Binding("f", "expression", "where",
            tooltip="filter by expression: NAME OP VALUE,... e.g. lr<0.01,optimizer=adam"),
    Binding("g", "group", "group", show=False, tooltip="group the jobs by one hparam"),
    Binding("o", "overlay", "top N", show=False,
            tooltip="overlay the top 3, 5, 10 jobs by the sort column on the charts, then off"),
    Binding("c", "columns", "columns", show=False,
            tooltip="choose the comparison columns (hparams, TAG, TAG.min, TAG.max)"),
]

# The runs table (focused at start: its keys lead the footer).
RUNS_TABLE: list[BindingType] = [
    Binding("enter", "focus_job", "focus"),
    Binding("j", "cursor_down", "down", show=False),
    Binding("k", "cursor_up", "up", show=False),
    Binding("space", "toggle_select", "select"),
    Binding("down", "cursor_down", "down", show=False),
    Binding("up", "cursor_up", "up", show=False),
    Binding("pagedown", "page_down", "page down", show=False),
    Binding("pageup", "page_up", "page up", show=False),
    Binding("ctrl+home", "cursor_top", "top", show=False),
    Binding("ctrl+end", "cursor_bottom", "bottom", show=False),
]

# The text panels (GPUs, alerts, the focused job): tab reaches them, j/k scroll them.
PANEL: list[BindingType] = [
    Binding("j", "scroll_down", "down", show=False),
    Binding("k", "scroll_up", "up", show=False),
]

# The comparison columns' chooser (`c`): ticks apply when it closes.
COLUMNS_CHOOSER: list[BindingType] = [
    Binding("escape,enter", "apply", "apply"),
    Binding("a", "all(True)", "all"),
    Binding("n", "all(False)", "none"),
]

# The chart grid (`v`): a chart per scalar tag, one of them focused.
CHART_GRID: list[BindingType] = [
    Binding("escape,v", "back", "back", tooltip="back to the dashboard"),
    Binding("left", "cursor(-1)", "◀", tooltip="cursor: the point before, in this chart"),
    Binding("right", "cursor(1)", "▶", tooltip="cursor: the point after, in this chart"),
    Binding("left_square_bracket", "zoom_in", "zoom", tooltip="zoom in: half the steps"),
    Binding("right_square_bracket", "zoom_out", "unzoom", tooltip="zoom back out"),
    Binding("tab,down", "focus_chart(1)", "next", tooltip="the next chart", priority=True),
    Binding("shift+tab,up", "focus_chart(-1)", "prev", show=False,
            tooltip="the chart before", priority=True),
    Binding("pagedown", "page(1)", "page", tooltip="the next page of charts"),
    Binding("pageup", "page(-1)", "page back", show=False, tooltip="the page before"),
    Binding("enter", "maximise", "max", tooltip="this chart alone, and back"),
    Binding("o", "outliers", "outliers", tooltip="ignore outliers in the y scale"),
    Binding("slash", "filter", "filter", tooltip="filter tags by regular expression"),
    Binding("plus,equals_sign", "smoothing(1)", "smooth+", show=False,
            tooltip="more smoothing"),
    Binding("minus", "smoothing(-1)", "smooth-", show=False, tooltip="less smoothing"),
]
