"""Logdirs on another machine, read over the host's shared SSH connection.

Nothing is installed there. A refresh is ONE command on the connection's shell session: one
`find` (GNU findutils: device, inode, size, mtime and path of every event file and run.json,
NUL-separated), and nothing else while nothing changed (two processes there per refresh, so a
machine watched by distmon barely notices). Files that grew, new files and changed run.json are
then read by a second command: per file a header and the bytes appended since the last read
(`tail -c +N | head -c M`, which seeks), checked by a second `stat` after them. Only appended
bytes travel. The newest TensorFlow profile of each run, new or changed in the listing, is
copied whole (a third command a file, up to the profile reader's size cap) into the
`ProfileMirror` (distcore.remote.profiles). The scripts, and what their answers are made
into, are distcore.remote.ssh_reads; this module is the reader that runs them and paces
itself.

An idle host is asked less often: each refresh that finds every listing as it was doubles the
wait before the next one, from the refresh interval up to `QUIET_CAP` (10 s); any change (a
listing that differs, an error that starts or ends, a lost connection) and `wake()` (the
dashboard's `r`) bring it back to the interval at once. A change on a quiet host is seen within
`QUIET_CAP` seconds plus one refresh; on a host that writes, within one interval, as before.
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from distcore.events.store import RunStore
from distcore.jobs.snapshots import AgentRecord
from distcore.location import RunLocation
from distcore.producer import Failing, Loop, ProducerError
from distcore.remote.profiles import CAP, ProfileCopies, ProfileMirror
from distcore.remote.spec import SshSpec
from distcore.remote.ssh import SshConnection, SshUnreachable, posix_script
from distcore.remote.ssh_reads import (
    DENIED,
    NO_DIR,
    PROFILE_SCRIPT,
    READ_SCRIPT,
    REFRESH_SCRIPT,
    changed_run_json,
    parse_listing,
    read_answer_bound,
    remote_path,
    take_profile,
    take_reads,
    take_run_json,
)
from distcore.remote.tail import FETCH_LIMIT, Fetch, FileMeta, LogdirTail
from distcore.textsafe import terminal_text

MAX_ROUNDS: Final = 64  # catch-up reads per refresh (x FETCH_LIMIT per file)
# The longest wait between refreshes of a host whose listings stay the same: 100 idle hosts cost
# about a tenth of the round trips a second, and a change there still shows within ~10 s.
QUIET_CAP: Final = 10.0


@dataclass
class _Logdir:
    spec: SshSpec
    tail: LogdirTail
    error: str | None = None
    error_since: float = 0.0
    read_once: bool = False
    last_listing: bytes | None = None  # the last listing, when everything in it was read
    profiles: ProfileCopies | None = None


def quiet_wait(previous: float, changed: bool, *, interval: float, cap: float) -> float:
    """Seconds before a host's next refresh: `interval` after a refresh that saw a change (or
    when the last wait was shorter than it: a first refresh, a wake); otherwise the last wait
    doubled, at most `cap` (never below `interval`: a refresh slower than the cap keeps its
    own pace)."""
    if changed or previous < interval:
        return interval
    return max(interval, min(cap, previous * 2.0))


def unique_bases(paths: Sequence[str]) -> list[str]:
    """Each logdir's folder name, made unique (`runs`, `runs-2`): several logdirs on one host
    are told apart in run names as local ones are."""
    bases: list[str] = []
    for path in paths:
        base = posixpath.basename(posixpath.normpath(path)) or path
        name, n = base, 2
        while name in bases:
            name, n = f"{base}-{n}", n + 1
        bases.append(name)
    return bases


class SshLogdirReader:
    """Every logdir of one host; one thread, one connection (shared with its GPU source)."""

    def __init__(
        self,
        connection: SshConnection,
        label: str,
        specs: Sequence[SshSpec],
        store: RunStore,
        *,
        interval: float = 1.0,
        quiet_cap: float = QUIET_CAP,
        clock: Callable[[], float] = time.time,
        profiles: ProfileMirror | None = None,
    ) -> None:
        self._conn = connection
        self._mirror = profiles
        self._interval, self._quiet_cap = interval, quiet_cap
        self.wait = 0.0  # seconds until the next refresh, as the last one chose (quiet_wait)
        self.due = 0.0  # when (time.monotonic) that next refresh comes, unless woken first
        self._active = False  # what the current scan saw: a change, an error's change, a loss
        self._label = label
        self._store = store
        self._clock = clock
        bases = unique_bases([spec.path for spec in specs])
        self._logdirs = [
            self._logdir(spec, base, len(specs) > 1)
            for spec, base in zip(specs, bases, strict=True)
        ]
        # No backoff here: the connection paces its own reconnects; a failing logdir is one line,
        # and anything else a refresh raises is the reader's own (never a silent thread).
        self._failing = Failing(f"ssh:{label}")
        self._loop = Loop(f"distmon-ssh-{label}", self._tick, interval=interval,
                          on_error=self._failed)
        self._lock = threading.Lock()
        self.refreshes = 0
        self._scan_lock = threading.Lock()

    @property
    def connection(self) -> SshConnection:
        return self._conn

    def _logdir(self, spec: SshSpec, base: str, several: bool) -> _Logdir:
        prefix = f"{self._label}:{base}/" if several else f"{self._label}:"
        place = RunLocation.on_host(self._label, spec.path)  # as the user named it (~/runs)
        tail = LogdirTail(self._store, prefix, f"{self._label}:{base}", place)
        copies = self._mirror.logdir(place) if self._mirror is not None else None
        return _Logdir(spec, tail, profiles=copies)

    @property
    def bytes_fetched(self) -> int:
        return sum(d.tail.bytes_fetched for d in self._logdirs)

    def readable(self) -> bool:
        return any(d.read_once for d in self._logdirs)

    def agent_records(self) -> dict[RunLocation, AgentRecord | None]:
        """Each job directory's run.json as last read over the connection (for the index)."""
        return {k: v for d in self._logdirs for k, v in d.tail.agent_records().items()}

    def start(self) -> None:
        if not self._loop.started:
            self._loop.start()

    def wake(self) -> None:
        """Refresh now and at the interval again (a reload: `r` in the dashboard)."""
        self.wait = 0.0
        self._loop.wake()

    def close(self) -> None:
        self._loop.stop()
        self._conn.interrupt()  # a handshake with a host that does not answer ends now
        self._loop.join(15)

    def errors(self) -> tuple[ProducerError, ...]:
        found = []
        down = self._conn.error_line()
        if down is not None:
            since = self._conn.down_since or self._clock()
            found.append(ProducerError(f"ssh:{self._label}", f"{self._label}: host {down}", since))
        with self._lock:
            for d in self._logdirs:
                if d.error is not None and down is None:
                    where = terminal_text(f"{self._label}:{d.spec.path}", 120)
                    error = ProducerError(f"ssh:{where}", f"{where}: {d.error}", d.error_since)
                    found.append(error)
        return (*found, *self._failing.errors())

    def _tick(self) -> None:
        with self._scan_lock:
            self._scan()
            changed = self._active
        self._failing.ok()
        self.wait = quiet_wait(
            self.wait, changed, interval=self._interval, cap=self._quiet_cap
        )
        self.due = time.monotonic() + self.wait
        self._loop.next_in(self.wait)

    def _failed(self, err: Exception) -> None:
        line = terminal_text(f"{type(err).__name__}: {err}", 200)
        self._failing.fail(f"{self._label}: {line}", self._clock())

    def scan_once(self) -> frozenset[str]:
        """One refresh of every logdir; the run names that changed (already notified).
        Callable from any thread (a reload while the loop runs): one refresh at a time."""
        with self._scan_lock:
            return self._scan()

    def _scan(self) -> frozenset[str]:
        changed: set[str] = set()
        self._active = False
        for logdir in self._logdirs:
            if self._loop.stopping:
                break
            try:
                changed |= self._refresh(logdir)
            except SshUnreachable:
                # errors() says so; what was read stays. The connection paces its reconnects
                # (asking before its next try costs nothing), so a host back is read at once.
                self._active = True
                break
            except Exception as err:  # never die silently: one line, and try again next time
                self._active = True
                with self._lock:
                    if logdir.error is None:
                        logdir.error_since = self._clock()
                    logdir.error = terminal_text(f"{type(err).__name__}: {err}", 200)
        self.refreshes += 1
        if changed:  # an idle refresh wakes nobody (100 hosts: 100 refreshes a second)
            self._store.notify(frozenset(changed))
        return frozenset(changed)

    def _refresh(self, logdir: _Logdir) -> frozenset[str]:
        tail = logdir.tail
        listed = self._conn.run(posix_script(REFRESH_SCRIPT, [remote_path(logdir.spec.path)]))
        error = {NO_DIR: "no such directory", DENIED: "permission denied"}.get(listed.returncode)
        if error is None and listed.returncode != 0:
            error = f"listing failed (exit {listed.returncode})"
        with self._lock:
            if error != logdir.error:
                self._active = True  # a failure that starts or ends is a change
                if error is not None:
                    logdir.error_since = self._clock()
            logdir.error = error
        if error is not None:
            return frozenset()
        logdir.read_once = True
        if listed.stdout == logdir.last_listing:
            return frozenset()  # nothing changed there: the usual refresh costs no parsing
        self._active = True
        logdir.last_listing = None
        listing = parse_listing(listed.stdout)
        profiles = logdir.profiles.due(listing) if logdir.profiles is not None else []
        fetches = tail.plan(listing)
        wanted = changed_run_json(tail, listing)
        for _ in range(MAX_ROUNDS):
            if (not fetches and not wanted) or self._loop.stopping:
                break
            sizes = self._read(logdir, fetches, wanted)
            wanted = []
            listing.update(sizes)
            fetches = [f for f in tail.plan(listing) if f.rel in sizes]
        for rel, meta in profiles:
            if self._loop.stopping:
                return tail.finish()
            self._copy_profile(logdir, rel, meta)
        if not fetches and not self._loop.stopping:
            logdir.last_listing = listed.stdout  # all read: the same listing means no change
        return tail.finish()

    def _copy_profile(self, logdir: _Logdir, rel: str, meta: FileMeta) -> None:
        """One profile copied here whole (or why not), for the profile reader."""
        assert logdir.profiles is not None
        if meta.size > CAP:
            logdir.profiles.store(rel, meta, None, f"over the {CAP >> 20} MiB size cap")
            return
        args = [remote_path(logdir.spec.path), rel, str(CAP)]
        answer = self._conn.run(posix_script(PROFILE_SCRIPT, args), timeout=120,
                                limit=CAP + 64)
        data, why = take_profile(answer.stdout, CAP)
        logdir.profiles.store(rel, meta, data, why)

    def _read(
        self, logdir: _Logdir, fetches: Sequence[Fetch], wanted: Sequence[tuple[str, str]]
    ) -> dict[str, FileMeta]:
        args = [remote_path(logdir.spec.path)]
        for f in fetches:
            args += [f.rel, str(logdir.tail.identity(f.rel)), str(f.start), str(FETCH_LIMIT)]
        args += ["--", *(rel for rel, _ in wanted)]
        result = self._conn.run(posix_script(READ_SCRIPT, args), timeout=120,
                                limit=read_answer_bound(len(fetches), len(wanted)))
        sizes, end = take_reads(logdir.tail, fetches, result.stdout)
        take_run_json(logdir.tail, wanted, result.stdout, end)
        return sizes
