"""`SlurmStates`: the producer that asks Slurm what became of the jobs run.json names.

It asks about every followed job in one `squeue` per refresh (`scontrol show job` where squeue
is missing, and `sacct` for jobs the controller has forgotten when an accounting database
answers), and for the running ones a second `squeue --steps`: the steps still alive, so that a
job step that ran distagent and ended without a word (its srun killed, its tasks out of memory)
is seen while the job itself goes on RUNNING. Its own thread runs the commands, bounded in time
and in the jobs it follows, and the job index reads only its cached answers, so a slow
controller never blocks a refresh or the UI.

What Slurm cannot tell without an accounting database or a shell on the node: whether each task
of a step is alive. `scontrol show step` keeps `Tasks=2` and `sstat` (with jobacct_gather/none)
reports nothing per task after one of two tasks died; `scontrol listpids` knows, but only on the
node it runs on. One lost worker of two is told by distagent itself instead: the survivors'
collectives abort and the chief ends run.json `failed` (its output names the lost worker), or
the chief died, its peers abort, the step ends and distcore.jobs.scheduler.step_gone says so.
sacct's path is tested on its real format only (this machine has no slurmdbd): where accounting
is disabled it is asked once.
"""

from __future__ import annotations

import dataclasses
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from distcore.jobs.scheduler import JOB_ID_RE, SETTLE_SECONDS, SchedulerState
from distcore.jobs.slurm_text import parse_sacct, parse_scontrol, parse_squeue, parse_squeue_steps
from distcore.process import find_command
from distcore.process import trusted_path as trusted_path  # its tests' import
from distcore.producer import Failing, Loop, ProducerError

MAX_JOBS: Final = 1000  # followed at once; the rest are unknown (bounded memory and command line)
COMMAND_TIMEOUT_SECONDS: Final = 10.0
MAX_OUTPUT_LINES: Final = 100_000  # per answer: one line a job or step, far above MAX_JOBS's
MAX_LISTINGS: Final = 64  # step listings a job keeps (those of the last 2 x SETTLE_SECONDS)


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def whole_lines(text: str, max_lines: int = MAX_OUTPUT_LINES) -> str:
    """The first `max_lines` lines of an answer, each whole: a cut by size in the middle of a
    line would read a state such as `RUNNI` as the job's answer. The command has exited when its
    output is read (one cut short raised instead), so its last line is whole even without `\n`."""
    lines = text.splitlines(keepends=True)
    return "".join(lines[:max_lines])


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """A Slurm command, bounded in time; its output as text (undecodable bytes replaced)."""
    return subprocess.run(list(argv), capture_output=True, text=True, errors="replace",
                          timeout=COMMAND_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:200] if lines else "no output"


class SlurmStates:
    """The Slurm state of each followed job, refreshed on its own thread.

    `track(ids)` says which job ids the index wants (cheap; wakes the thread when one is new);
    `states()` returns the cached answers; `query_once()` runs the commands now (--once).
    Without Slurm's commands on PATH it does nothing, and every state stays unknown.
    """

    def __init__(self, *, interval: float = 5.0, runner: Runner = run_command,
                 which: Callable[[str], str | None] = find_command,
                 clock: Callable[[], float] = time.time) -> None:
        self.interval, self._runner, self._which, self._clock = interval, runner, which, clock
        self._lock = threading.Lock()
        self._wanted: tuple[str, ...] = ()
        self._states: dict[str, SchedulerState] = {}
        self._failing = Failing("slurm", restart_on_change=True)
        self._sacct_ok: bool | None = None  # unknown until tried; False: no accounting database
        # Never a silent death: a step's exception is shown as the error, the loop goes on.
        self._loop = Loop("slurm-states", self.query_once, interval=interval,
                          on_error=lambda err: self._set_error(f"{type(err).__name__}: {err}"))
        self.queries = 0

    def start(self) -> None:
        self._loop.start()

    def close(self) -> None:
        self._loop.close(timeout=COMMAND_TIMEOUT_SECONDS + 5.0)

    def track(self, job_ids: Iterable[str]) -> None:
        wanted = tuple(sorted({j for j in job_ids if JOB_ID_RE.match(j)}, key=int)[-MAX_JOBS:])
        with self._lock:
            new = set(wanted) - set(self._wanted)
            self._wanted = wanted
        if new:
            self._loop.wake()

    def states(self) -> Mapping[str, SchedulerState]:
        with self._lock:
            return dict(self._states)

    def errors(self) -> tuple[ProducerError, ...]:
        return self._failing.errors()

    def problems(self) -> tuple[str, ...]:
        return ()

    def _set_error(self, message: str | None) -> None:
        if message is None:
            self._failing.ok()
        else:
            self._failing.fail(message, self._clock())

    def query_once(self) -> bool:
        """One squeue (or scontrol) for every followed job, then sacct for the ones it lacks;
        False when no job is followed (nothing asked)."""
        with self._lock:
            wanted = self._wanted
        if not wanted:
            return False
        self.queries += 1
        found, error = self._from_controller(wanted)
        missing = [j for j in wanted if j not in found]
        if missing and self._sacct_ok is not False and self._which("sacct"):
            found.update(self._from_sacct(missing))
        running = [j for j, s in found.items() if s.state == "RUNNING" and s.source == "squeue"]
        if running:
            found.update(self._with_steps(found, running))
        with self._lock:
            # A job the controller forgot keeps its last known state (sacct may be absent).
            kept = {j: s for j, s in self._states.items() if j in wanted}
            found = {j: self._remembered(s, kept.get(j)) for j, s in found.items()}
            self._states = {**kept, **found}
        self._set_error(error)
        return True

    def _from_controller(self, wanted: Sequence[str]) -> tuple[dict[str, SchedulerState],
                                                                 str | None]:
        ids = ",".join(wanted)
        # The absolute path found, never the bare name: run by name, the OS would search PATH
        # again, empty and relative elements included.
        if squeue := self._which("squeue"):
            name, argv = "squeue", [squeue, "--noheader", "--all", "--states=all",
                                    "--format=%A|%T|%r|%e", f"--jobs={ids}"]
            parse = parse_squeue
        elif scontrol := self._which("scontrol"):
            name, argv = "scontrol", [scontrol, "show", "job", "--oneliner"]
            parse = parse_scontrol
        else:
            return {}, None  # no Slurm here: states stay unknown, which is not an error
        try:
            result = self._runner(argv)
        except subprocess.TimeoutExpired:
            return {}, f"{name} gave no answer in {COMMAND_TIMEOUT_SECONDS:g} s"
        except OSError as err:
            return {}, f"{name}: {err.strerror or err}"
        if result.returncode != 0:
            # One job id the controller no longer knows makes squeue fail: that is an answer.
            if "Invalid job id" in result.stderr:
                return {}, None
            return {}, f"{name} exited {result.returncode}: {_first_line(result.stderr)}"
        asked = set(wanted)
        parsed = parse(whole_lines(result.stdout))
        return {j: s for j, s in parsed.items() if j in asked}, None

    def _remembered(self, state: SchedulerState, before: SchedulerState | None) -> SchedulerState:
        """The new answer with what the earlier ones taught: when the job ended (where Slurm
        did not say, when distmon first heard it) and the step listings of recent minutes."""
        if state.ended and state.ended_at is None:
            first = before.ended_at if before is not None and before.ended else None
            state = dataclasses.replace(state, ended_at=first or self._clock())
        if state.listings and before is not None and before.state == state.state:
            oldest = state.listings[-1][0] - 2 * SETTLE_SECONDS
            kept = tuple(x for x in before.listings if x[0] >= oldest)
            state = dataclasses.replace(
                state, listings=(*kept, *state.listings)[-MAX_LISTINGS:])
        return state

    def _with_steps(self, found: Mapping[str, SchedulerState],
                    running: Sequence[str]) -> dict[str, SchedulerState]:
        """The running jobs' states with their live steps (unchanged where squeue fails: no
        listing is no evidence)."""
        squeue = self._which("squeue")
        if not squeue:
            return {}
        at = self._clock()
        argv = [squeue, "--noheader", "--steps", "--format=%i", f"--jobs={','.join(running)}"]
        try:
            result = self._runner(argv)
        except (subprocess.TimeoutExpired, OSError):
            return {}
        if result.returncode != 0:
            return {}
        live = parse_squeue_steps(whole_lines(result.stdout))
        return {j: dataclasses.replace(found[j], listings=((at, live.get(j, frozenset())),))
                for j in running}

    def _from_sacct(self, missing: Sequence[str]) -> dict[str, SchedulerState]:
        sacct = self._which("sacct")
        if not sacct:
            return {}
        argv = [sacct, "--noheader", "--allocations", "--parsable2",
                "--format=JobIDRaw,State,End", f"--jobs={','.join(missing)}"]
        try:
            result = self._runner(argv)
        except (subprocess.TimeoutExpired, OSError):
            return {}
        if result.returncode != 0:
            if "accounting storage is disabled" in result.stderr:
                self._sacct_ok = False  # no database here: do not ask again
            return {}
        self._sacct_ok = True
        asked = set(missing)
        return {j: s for j, s in parse_sacct(whole_lines(result.stdout)).items()
                if j in asked}
