"""`make demo`: two sample jobs train in the background while distmon watches them.

Both train the same small ResNet on the same images (noisy rings, 256x256 JPEGs written once into
`demo_runs/images`, nothing downloaded), read as from a network filesystem or an object store:
each read waits 5 ms (`data.read_latency_ms`), a wait that costs no CPU.
`sample_configs/images.toml` keeps many reads in flight, decodes them in a parallel map, caches,
augments in a second parallel map and prefetches: the latency is hidden and it stays under 5%
input wait. `sample_configs/images_input_bound.toml` reads, decodes and augments every image
again every pass, one after the other: each step waits for its 256 reads, whatever the cores are
doing, and distmon flags the job as input-bound within its first logged steps. The jobs run as
`distagent start` subprocesses (this module never imports TensorFlow), each in its own session
so that a Ctrl-C meant for the dashboard does not reach them; quitting distmon stops them
(SIGTERM: they save a checkpoint at the next step and exit; SIGKILL after STOP_SECONDS). Where
standard output is not a terminal, the jobs run to their end and `distmon --once` is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from distcore.cli_parser import OneLineParser
from distcore.safefile import open_write
from distcore.textsafe import terminal_text
from distcore.wording import counted

SAMPLES = Path(__file__).resolve().parents[2] / "sample_configs"
CONFIGS = (SAMPLES / "images.toml", SAMPLES / "images_input_bound.toml")
DEMO_ROOT = Path("demo_runs")
IMAGES = DEMO_ROOT / "images"
STOP_SECONDS = 25.0
"""How long the jobs may take to finish their step, save and exit after SIGTERM (a naive step
takes a few seconds on a busy machine); the demo returns within 30 s."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="python -m distmon.demo", description=__doc__)
    parser.add_argument(
        "--logdir", type=Path, default=None, help="default: demo_runs/<date-time>, new each time"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to both jobs, e.g. train.epochs=1",
    )
    parser.add_argument(
        "--images", type=Path, default=IMAGES,
        help=f"class-per-folder images for both jobs; written there if missing (default {IMAGES})",
    )
    return parser.parse_args(argv)


SAMPLE_IMAGES = 128 * 10  # distagent.data.samples' default: 128 per class, 10 classes


def ensure_images(directory: Path, poll: float = 1.0) -> None:
    """Write the sample images once (about 45 MB; later demos reuse them), saying how far it is:
    TensorFlow's start and the encoding take tens of seconds on a small machine."""
    if directory.is_dir() and any(directory.glob("*/*.jpg")):
        return
    print(f"writing {SAMPLE_IMAGES:,} sample images into {directory} (once)...", flush=True)
    with tempfile.TemporaryFile("w+") as errors:
        writer = subprocess.Popen([sys.executable, "-m", "distagent.data.samples", str(directory)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=errors, text=True)
        shown = 0
        while True:
            try:
                code = writer.wait(timeout=poll)
                break
            except subprocess.TimeoutExpired:
                done = _written(directory)
                line = progress_line(done, SAMPLE_IMAGES, shown)
                if line is not None:
                    print(line, flush=True)
                    shown = done
        errors.seek(0)
        last = (errors.read().strip().splitlines() or [f"exit status {code}"])[-1]
    if code != 0:
        raise SystemExit(f"distmon.demo: could not write the sample images: {last}")


def _written(directory: Path) -> int:
    return sum(1 for _ in directory.glob("*/*.jpg")) if directory.is_dir() else 0


def progress_line(done: int, total: int, shown: int) -> str | None:
    """A line each tenth of the way (None: nothing new to say)."""
    step = max(1, total // 10)
    if done >= total or done // step <= shown // step:
        return None
    return f"  {done:,}/{total:,} images written"


def start_job(config: Path, logdir: Path, overrides: Sequence[str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "distagent", "start", str(config)]
    for override in (f"run.logdir={logdir}", *overrides):
        command += ["--set", override]
    # A link or FIFO planted in the logdir is refused, not written through or waited on.
    log = os.fdopen(open_write(logdir / f"{config.stem}.log", how="append"), "ab")
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()


def stop_jobs(jobs: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each job's session (it checkpoints and exits), SIGKILL after STOP_SECONDS."""
    running = [job for job in jobs if job.poll() is None]
    if running:  # said at once: the dashboard is gone and the jobs take a few seconds
        print(f"distmon.demo: stopping {counted(len(running), 'job')} "
              "(saving checkpoints)...", flush=True)
    for job in running:
        _signal(job, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    for job in jobs:
        try:
            job.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(job, signal.SIGKILL)
            job.wait()


def _signal(job: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(job.pid, sig)


def wait_jobs(jobs: Sequence[subprocess.Popen[bytes]], logdir: Path) -> None:
    print(f"training {counted(len(jobs), 'job')} into {logdir} "
          "(no terminal: waiting for them to finish)")
    for job, config in zip(jobs, CONFIGS, strict=True):
        code = job.wait()
        if code != 0:
            print(f"{config.stem} exited with {code}; see {logdir / (config.stem + '.log')}")


def print_once(logdir: Path) -> int:
    """Exactly what `distmon --once` prints (runs, GPUs, host and alerts)."""
    from distmon.once import run_once
    from distmon.options import Options

    return run_once(Options(logdirs=(logdir,)))


def _exit_on_signal(signum: int, frame: object) -> None:
    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # let stop_jobs finish
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logdir = args.logdir or DEMO_ROOT / time.strftime("%Y%m%d-%H%M%S")
    logdir.mkdir(parents=True, exist_ok=True)
    ensure_images(args.images)
    overrides = [f"data.images.directory={args.images.resolve()}", *args.overrides]
    jobs: list[subprocess.Popen[bytes]] = []
    try:
        for config in CONFIGS:
            jobs.append(start_job(config, logdir, overrides))
    except OSError as err:  # a log file planted as a link or FIFO, an unwritable logdir
        stop_jobs(jobs)
        why = terminal_text(str(err), 300)
        raise SystemExit(f"distmon.demo: cannot start the jobs: {why}") from None
    # A closed terminal (SIGHUP) or a kill (SIGTERM) must still stop the jobs: unwind through
    # the `finally` below, as Ctrl-C does.
    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, _exit_on_signal)
    try:
        if not sys.stdout.isatty():
            wait_jobs(jobs, logdir)
            return print_once(logdir)
        from distmon.cli import main as distmon

        return distmon([str(logdir)])
    finally:
        stop_jobs(jobs)


if __name__ == "__main__":
    sys.exit(main())
