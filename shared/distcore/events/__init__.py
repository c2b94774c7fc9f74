"""distcore.events: a live, incremental reader for any TensorBoard logdir.

`load_once()` reads everything once; `LogdirWatcher` + `RunStore` keep reading as files grow.
The bytes are decoded by the leaf package distcore.tfrecord. The names below load lazily, so
that `import distcore.events.snapshots` (the snapshots every front end types against) costs no
more than that module: the watcher's watchdog and the decoder's numpy, protobuf and TensorBoard
come only with what uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distcore.lazy import lazy_names

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from distcore.events.once import load_once
    from distcore.events.snapshots import RunSnapshot, Series
    from distcore.events.store import RunStore
    from distcore.events.watch import LogdirWatcher

_LAZY = {
    "LogdirWatcher": "watch",
    "RunSnapshot": "snapshots",
    "RunStore": "store",
    "Series": "snapshots",
    "load_once": "once",
}

__all__ = ["LogdirWatcher", "RunSnapshot", "RunStore", "Series", "load_once"]


__getattr__ = lazy_names(__name__, _LAZY)
