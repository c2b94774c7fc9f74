"""Soak: writers append, truncate, rewrite in place, replace, delete and recreate event files
while a LogdirWatcher + RunStore watch them (inotify, as the dashboard does). At the end: no
exception anywhere, the watcher's errors() empty, peak memory bounded, and the watched state
equal to a fresh one-shot read of the same files.

Each writer owns one run directory and keeps its files smaller than --max-records records, so
the logdir's size is bounded and memory must stay flat. Equality: exact for every series the
bound did not decimate (every kept point, wall times included), and the exact statistics (count,
min, max, last point) for every series; plus hparams and the run list. Exits 1 on any failure.

With `--live SECONDS`, instead: what watching a live distagent job costs. A real job (2 CPU
replicas, a small MLP, logging every 5 steps: ~90 steps a second here; bench/agent_soak.py's
config) is started, and once past its warm-up the dashboard (tmux, bench/dashboard.py's
harness) and then `distmon --serve --metrics 0` each watch it for SECONDS: their CPU as a share
of one core (target 3% each).

Run: .venv/bin/python bench/soak.py [--seconds 600] [--writers 4] [--seed 1] [--json]
     .venv/bin/python bench/soak.py --live 180
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from distcore.events import LogdirWatcher, RunStore, load_once
from distcore.events.snapshots import RunSnapshot
from distcore.tfrecord.framing import record as frame

TAGS = ("loss", "accuracy", "lr", "train/grad_norm")
ACTIONS = ("append",) * 12 + ("partial", "truncate", "rewrite", "replace", "delete", "new_file")


def event(step: int, tag: str, value: float) -> bytes:
    """A tensorboardX-shaped scalar event (built by hand: fast, and what most writers emit)."""
    tag_bytes = tag.encode()
    inner = b"\x0a" + bytes([len(tag_bytes)]) + tag_bytes + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + bytes([len(inner)]) + inner
    step_field = b"\x10" + _varint(step) if step else b""
    return b"\x09" + struct.pack("<d", time.time()) + step_field + b"\x2a" + bytes(
        [len(summary)]
    ) + summary


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


class Writer(threading.Thread):
    """One run's writer: random actions on its files, forever until told to stop."""

    def __init__(self, root: Path, index: int, seed: int, max_records: int) -> None:
        super().__init__(name=f"soak-writer-{index}", daemon=True)
        self.directory = root / f"run{index}"
        self.directory.mkdir(parents=True)
        self.rng = random.Random(seed * 1000 + index)
        self.max_records = max_records
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.actions: dict[str, int] = {}
        self.files = 0
        self.step = 0
        self.path = self._new_path()

    def _new_path(self) -> Path:
        self.files += 1
        return self.directory / f"events.out.tfevents.{1_700_000_000 + self.files:010d}.soak"

    def _records(self, count: int) -> bytes:
        out = []
        for _ in range(count):
            self.step += self.rng.choice((1, 1, 1, 5, 200))
            for tag in self.rng.sample(TAGS, self.rng.randint(1, len(TAGS))):
                out.append(frame(event(self.step, tag, self.rng.uniform(-1, 1))))
        return b"".join(out)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                action = self.rng.choice(ACTIONS)
                self.actions[action] = self.actions.get(action, 0) + 1
                getattr(self, f"_{action}")()
                self.stop.wait(self.rng.uniform(0.0, 0.02))
        except BaseException as err:  # reported by main
            self.error = err

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _append(self) -> None:
        if self._size() > self.max_records * 40:
            self._rewrite()
            return
        with self.path.open("ab") as f:
            f.write(self._records(self.rng.randint(1, 50)))

    def _partial(self) -> None:
        """A record written in two pieces, as a buffered writer may flush it."""
        data = self._records(1)
        cut = self.rng.randint(1, len(data) - 1)
        with self.path.open("ab") as f:
            f.write(data[:cut])
            f.flush()
            time.sleep(self.rng.uniform(0, 0.05))
            f.write(data[cut:])

    def _truncate(self) -> None:
        size = self._size()
        if size:
            with self.path.open("r+b") as f:
                f.truncate(self.rng.randint(0, size))  # often mid-record: then appended to
            self.step = 0

    def _rewrite(self) -> None:
        """Same inode, new content from the start (a job restarted into the same file)."""
        self.step = self.rng.randint(0, 3)
        data = self._records(self.rng.randint(1, self.max_records // 4))
        with self.path.open("r+b" if self.path.exists() else "wb") as f:
            f.write(data)
            f.truncate(len(data))

    def _replace(self) -> None:
        self.step = 0
        tmp = self.directory / "replacement.tmp"
        tmp.write_bytes(self._records(self.rng.randint(1, 100)))
        os.replace(tmp, self.path)

    def _delete(self) -> None:
        for path in self.directory.glob("*tfevents*"):
            if self.rng.random() < 0.5:
                path.unlink(missing_ok=True)
        if not self.path.exists():
            self.step = 0
            self.path.write_bytes(self._records(1))  # recreated under the same name

    def _new_file(self) -> None:
        self.path = self._new_path()
        self.path.write_bytes(self._records(self.rng.randint(1, 20)))


def compare(
    watched: tuple[RunSnapshot, ...], fresh: tuple[RunSnapshot, ...], bound: int
) -> list[str]:
    """What differs between the watched state and a fresh read (empty when equal)."""
    diffs: list[str] = []
    if [r.name for r in watched] != [r.name for r in fresh]:
        return [f"runs: {[r.name for r in watched]} != {[r.name for r in fresh]}"]
    for ours, theirs in zip(watched, fresh, strict=True):
        if dict(ours.hparams) != dict(theirs.hparams):
            diffs.append(f"{ours.name}: hparams differ")
        if set(ours.scalars) != set(theirs.scalars):
            diffs.append(f"{ours.name}: tags {sorted(ours.scalars)} != {sorted(theirs.scalars)}")
            continue
        for tag, a in ours.scalars.items():
            b = theirs.scalars[tag]
            stats = [(a.count, b.count), (a.last_step, b.last_step), (a.min, b.min),
                     (a.max, b.max), (a.last_value, b.last_value)]
            exact = a.count <= bound and (a.steps, a.values, a.wall_times) != (
                b.steps, b.values, b.wall_times)
            if exact or any(x != y and not (math.isnan(x) and math.isnan(y)) for x, y in stats):
                diffs.append(f"{ours.name}/{tag}: count {a.count} vs {b.count}, last step "
                             f"{a.last_step} vs {b.last_step}")
    return diffs


def settle(store: RunStore, root: Path, deadline: float) -> tuple[list[str], float]:
    """The differences once the watcher has caught up with the last writes, and how long that
    took. A loaded machine may need several rescans, so the state is polled until it equals a
    fresh read (or the deadline passes and the differences are what remains)."""
    start = time.monotonic()
    while True:
        diffs = compare(store.snapshot(), load_once([root]), store.max_points)
        if not diffs or time.monotonic() >= deadline:
            return diffs, time.monotonic() - start
        time.sleep(0.25)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def soak(
    seconds: float, writers: int, seed: int, max_records: int, settle_seconds: float = 60.0
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="distmon-soak-") as tmp:
        root = Path(tmp)
        store = RunStore()
        watcher = LogdirWatcher([root], store, rescan_interval=2.0)
        team = [Writer(root, i, seed, max_records) for i in range(writers)]
        watcher.start()
        for writer in team:
            writer.start()
        rss: list[float] = []
        errors_seen: set[str] = set()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            rss.append(peak_rss_mib())
            errors_seen |= {e.message for e in watcher.errors()}
            store.snapshot()  # a reader, as the dashboard is
        for writer in team:
            writer.stop.set()
            writer.join()
        diffs, settled = settle(store, root, deadline=time.monotonic() + settle_seconds)
        errors_seen |= {e.message for e in watcher.errors()}
        watcher.close()
        actions: dict[str, int] = {}
        for writer in team:
            for name, count in writer.actions.items():
                actions[name] = actions.get(name, 0) + count
        failures = [f"{w.name}: {w.error!r}" for w in team if w.error is not None]
        quarter = max(1, len(rss) // 4)
        return {
            "seconds": seconds, "writers": writers, "actions": actions,
            "writer_failures": failures, "watcher_errors": sorted(errors_seen),
            "differences": diffs[:20], "difference_count": len(diffs),
            "settle_seconds": round(settled, 2),
            "peak_rss_mib_first_quarter": max(rss[:quarter], default=0.0),
            "peak_rss_mib_end": max(rss, default=0.0),
        }


def live_job_share(seconds: float) -> dict[str, float]:
    """The dashboard's and --serve's CPU (% of one core) watching a live distagent job."""
    import subprocess

    import agent_soak  # bench/ is not a package
    import dashboard as dash

    with tempfile.TemporaryDirectory(prefix="distmon-live-") as tmp:
        logdir, config = Path(tmp) / "logs", Path(tmp) / "job.toml"
        config.write_text(agent_soak.BASE.format(logdir=logdir, steps=10_000_000, log_every=5,
                                                 kind="mirrored"))
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        with open(Path(tmp) / "job.log", "wb") as out:
            job = subprocess.Popen([sys.executable, "-m", "distagent", "start", str(config)],
                                   stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            began = time.monotonic()
            while (agent_soak.read_record(logdir / "soak").get("last_step") or 0) < 500:
                if job.poll() is not None or time.monotonic() - began > 600:
                    raise SystemExit(f"the job did not start: {Path(tmp) / 'job.log'}")
                time.sleep(1)
            return {"dashboard": _watched_share(dash.distmon_command(logdir), seconds),
                    "serve": _watched_share(f"{dash.distmon_command(logdir)} --serve "
                                            "--metrics 0", seconds),
                    "steps_per_second": _step_rate(logdir / "soak")}
        finally:
            job.kill()
            job.wait()


def _watched_share(command: str, seconds: float) -> float:
    """`command` in a terminal (its output unread), sampled for `seconds` once started."""
    import dashboard as dash

    term = dash.Terminal(command)
    try:
        time.sleep(10)  # started, the job read once
        return float(dash.sample_process(term.pid(), seconds)["cpu_percent"])
    finally:
        term.close()


def _step_rate(run_dir: Path) -> float:
    import agent_soak

    first = agent_soak.read_record(run_dir).get("last_step") or 0
    time.sleep(5)
    return float(((agent_soak.read_record(run_dir).get("last_step") or 0) - first) / 5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-records", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--live", type=float, metavar="SECONDS",
                        help="instead: the CPU of watching a live distagent job, each front end")
    args = parser.parse_args()
    if args.live:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        share = live_job_share(args.live)
        print(f"live job ({share['steps_per_second']:.0f} steps/s, a log point every 5) watched "
              f"{args.live:.0f} s: dashboard {share['dashboard']:.1f}% of a core, --serve "
              f"{share['serve']:.1f}% (target 3% each)")
        return 0
    result = soak(args.seconds, args.writers, args.seed, args.max_records)
    # Memory is bounded when the peak stops growing: the second half may not add much.
    grown = result["peak_rss_mib_end"] - result["peak_rss_mib_first_quarter"]
    result["ok"] = bool(
        not result["writer_failures"] and not result["watcher_errors"]
        and not result["difference_count"] and grown < 64
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
