"""The one report path: every source read once into the job index's snapshot, through the same
producers as the dashboard and `--serve`. `--once` (text and JSON) and `--table`/`--csv`/
`--points` render what `collect` returns."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from distcore.errors import DistmonError
from distcore.jobs.snapshots import JobsSnapshot
from distmon.options import Options

if TYPE_CHECKING:
    from distcore.remote.spec import SshSpec, UrlSpec


def collect(options: Options) -> JobsSnapshot:
    """The job index's snapshot after one pass over every source (local and remote) and one
    GPU sample, through the same producers as the dashboard and `--serve`; a logdir that does
    not exist is one more error. Exit 2 (DistmonError) when no source at all could be read."""
    from distcore.producer import ProducerError
    from distmon.producers import ProducerSet, make_producers

    local = tuple(p for p in options.logdirs if p.is_dir())
    logdirs = [str(p.resolve()) for p in options.logdirs]
    logdirs += [_spec_text(s) for s in options.remotes]
    made = make_producers(dataclasses.replace(options, logdirs=local))
    snap = ProducerSet(made, options, logdirs=logdirs).read_once()
    missing = tuple(
        ProducerError("logdir", f"{p}: no such log directory", snap.generated_at)
        for p in options.logdirs
        if p not in local
    )
    snap = dataclasses.replace(snap, errors=missing + snap.errors)
    # Also when every source is remote and none was read.
    if not local and not (made.remote is not None and made.remote.readable()):
        raise DistmonError("\n".join(e.message for e in snap.errors) or "nothing readable")
    return snap


def _spec_text(spec: SshSpec | UrlSpec) -> str:
    from distcore.remote.spec import UrlSpec

    return spec.url if isinstance(spec, UrlSpec) else f"{spec.host}:{spec.path}"
