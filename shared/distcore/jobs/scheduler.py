"""The scheduler behind a job: run.json's `scheduler`, and what Slurm says became of the job.

distagent records which Slurm job (or Kubernetes pod) ran it; `SlurmStates` asks Slurm about
every such job in one `squeue` per refresh (`scontrol show job` where squeue is missing, and
`sacct` for jobs the controller has forgotten when an accounting database answers), and for the
running ones a second `squeue --steps`: the steps still alive, so that a job step that ran
distagent and ended without a word (its srun killed, its tasks out of memory) is seen while the
job itself goes on RUNNING (a batch script with more after srun, an salloc shell). It is a
producer: its own thread runs the commands, bounded in time and in the jobs it follows, and the
job index reads only its cached answers, so a slow controller never blocks a refresh or the UI.

The parsers are pure functions over the commands' real output formats (Slurm 22.05).

What Slurm cannot tell without an accounting database or a shell on the node: whether each task
of a step is alive. `scontrol show step` keeps `Tasks=2` and `sstat` (with jobacct_gather/none)
reports nothing per task after one of two tasks died; `scontrol listpids` knows, but only on the
node it runs on. One lost worker of two is told by distagent itself instead: the survivors'
collectives abort and the chief ends run.json `failed` (its output names the lost worker), or
the chief died, its peers abort, the step ends and the rule above fires. sacct's path is
tested on its real format only (this machine has no slurmdbd): where accounting is disabled it
is asked once.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from distcore.producer import Failing, Loop, ProducerError

MAX_JOBS: Final = 1000  # followed at once; the rest are unknown (bounded memory and command line)
COMMAND_TIMEOUT_SECONDS: Final = 10.0
MAX_OUTPUT_CHARS: Final = 4 * 1024 * 1024
_JOB_ID: Final = re.compile(r"[0-9]{1,12}\Z")  # run.json is untrusted: only these reach a command
# Slurm's states in which the job is over (its processes are gone or going).
ENDED_STATES: Final = frozenset({
    "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT",
})
_STATE: Final = re.compile(r"[A-Z_]{2,32}\Z")


@dataclass(frozen=True)
class SchedulerRef:
    """run.json's `scheduler`, checked: every field a short string or None."""

    kind: str  # "slurm" or "kubernetes"
    job_id: str | None = None
    step_id: str | None = None
    node_list: str | None = None
    partition: str | None = None
    pod: str | None = None

    @property
    def slurm_job_id(self) -> str | None:
        """The job id when it is a Slurm job with a well-formed id (safe to pass to squeue)."""
        if self.kind == "slurm" and self.job_id is not None and _JOB_ID.match(self.job_id):
            return self.job_id
        return None


@dataclass(frozen=True)
class SchedulerState:
    job_id: str
    state: str  # Slurm's long name: PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL ...
    reason: str | None = None
    source: str = "squeue"
    # When the job ended (Slurm's EndTime, else when distmon first heard it); None while not.
    ended_at: float | None = None
    # The job's steps as `squeue --steps` listed them alive ("0", "batch" ...), each listing
    # with when it was asked (distmon's clock), oldest first; empty where not asked.
    listings: tuple[tuple[float, frozenset[str]], ...] = ()

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def steps(self) -> frozenset[str] | None:
        return self.listings[-1][1] if self.listings else None

    @property
    def steps_at(self) -> float | None:
        return self.listings[-1][0] if self.listings else None


STEP_START_MARGIN: Final = 10.0  # seconds: the compute node's clock against distmon's (NTP)
# What Slurm says must have held this long before an alert: a shared filesystem shows run.json's
# last write late (NFS's attribute cache: 3 s for a file written often, 30 s for the directory
# a rename changed), and an agent that wrote `finished` must never be called dead meanwhile.
SETTLE_SECONDS: Final = 30.0
MAX_LISTINGS: Final = 64


def ended_long_enough(state: SchedulerState | None, now: float) -> bool:
    """Slurm ended the job at least SETTLE_SECONDS ago (never with no end time: SlurmStates
    always gives one, Slurm's or when it first heard of the end)."""
    if state is None or not state.ended:
        return False
    return state.ended_at is not None and now - state.ended_at >= SETTLE_SECONDS


def step_gone(state: SchedulerState | None, step_id: str | None,
              started_at: float | None) -> bool:
    """True when Slurm's own listings show that the step which ran distagent has ended while the
    job runs: the job RUNNING, the step (a number, or `batch`) absent from every listing of the
    last SETTLE_SECONDS or more, all made after the step had started (run.json's `start_time`,
    plus a margin for the clocks). A listing from before the step began proves nothing, nor
    does a job or step without those facts, nor one listing alone (`--once`)."""
    if state is None or state.state != "RUNNING" or not state.listings:
        return False
    if step_id is None or not _STEP.match(step_id) or started_at is None:
        return False
    since = None
    for at, live in reversed(state.listings):
        if step_id in live or at < started_at + STEP_START_MARGIN:
            break
        since = at
    newest = state.listings[-1][0]
    return since is not None and newest - since >= SETTLE_SECONDS

def _short(value: Any, limit: int = 256) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value)
    return text[:limit] if text else None


def scheduler_ref_from(value: Any) -> SchedulerRef | None:
    """run.json's `scheduler` object, or None when absent or not an object with a kind."""
    if not isinstance(value, dict):
        return None
    kind = _short(value.get("kind"), 32)
    if kind is None:
        return None
    return SchedulerRef(
        kind=kind,
        job_id=_short(value.get("job_id"), 64),
        step_id=_short(value.get("step_id"), 64),
        node_list=_short(value.get("node_list")),
        partition=_short(value.get("partition")),
        pod=_short(value.get("pod")),
    )


def normalize_state(text: str) -> str | None:
    """`CANCELLED by 1000` (sacct), `CANCELLED+` (sacct, truncated), `RUNNING` -> the state."""
    words = text.strip().split()
    if not words:
        return None
    state = words[0].rstrip("+").upper()
    return state if _STATE.match(state) else None


def slurm_time(text: str) -> float | None:
    """Slurm's `2026-12-01T11:24:33` (local time, as its commands print it) as epoch seconds;
    None for `Unknown`, `None`, `N/A` or anything else."""
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def _parse_lines(text: str, source: str, *, reason: int | None,
                 end: int | None) -> dict[str, SchedulerState]:
    """`|`-separated lines whose first two fields are the job id and its state (and the reason
    and end time in the fields given), as squeue's and sacct's parsable formats print them."""
    found: dict[str, SchedulerState] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) < 2 or not _JOB_ID.match(fields[0]):
            continue
        state = normalize_state(fields[1])
        if state is None:
            continue
        why = fields[reason].strip() if reason is not None and len(fields) > reason else ""
        ended = fields[end] if end is not None and len(fields) > end else ""
        made = SchedulerState(fields[0], state, why if why not in ("", "None") else None,
                              source=source)
        found[fields[0]] = _with_end(made, ended)
    return found


def _with_end(state: SchedulerState, text: str) -> SchedulerState:
    at = slurm_time(text) if state.ended else None
    return dataclasses.replace(state, ended_at=at) if at is not None else state


def parse_squeue(text: str) -> dict[str, SchedulerState]:
    """`squeue --noheader --format=%A|%T|%r|%e` lines: job id, state, reason, end time."""
    return _parse_lines(text, "squeue", reason=2, end=3)


_STEP: Final = re.compile(r"(?:[0-9]{1,9}|batch)\Z")


def parse_squeue_steps(text: str) -> dict[str, frozenset[str]]:
    """`squeue --noheader --steps --format=%i` lines (`12.0`, `12.batch`): job id -> its steps
    alive. Heterogeneous (`12+0.0`) and array (`12_3.0`) ids are left out, like run.json's."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        job, sep, step = line.strip().partition(".")
        if sep and _JOB_ID.match(job) and _STEP.match(step):
            found.setdefault(job, set()).add(step)
    return {j: frozenset(s) for j, s in found.items()}


_PAIR: Final = re.compile(r"(?:^|\s)(JobId|JobState|Reason|EndTime)=(\S*)")


def parse_scontrol(text: str) -> dict[str, SchedulerState]:
    """`scontrol show job` output, one line per job (`-o`) or blocks separated by blank lines."""
    found: dict[str, SchedulerState] = {}
    for block in re.split(r"\n\s*\n|\n(?=JobId=)", text):
        pairs = dict(_PAIR.findall(block))
        job_id, state = pairs.get("JobId", ""), normalize_state(pairs.get("JobState", ""))
        if _JOB_ID.match(job_id) and state is not None:
            reason = pairs.get("Reason")
            made = SchedulerState(job_id, state, reason if reason not in (None, "", "None")
                                  else None, source="scontrol")
            found[job_id] = _with_end(made, pairs.get("EndTime", ""))
    return found


def parse_sacct(text: str) -> dict[str, SchedulerState]:
    """`sacct --noheader --allocations --parsable2 --format=JobIDRaw,State,End` lines."""
    return _parse_lines(text, "sacct", reason=None, end=2)


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


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
                 which: Callable[[str], str | None] = shutil.which,
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
        wanted = tuple(sorted({j for j in job_ids if _JOB_ID.match(j)}, key=int)[-MAX_JOBS:])
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
        if self._which("squeue"):
            argv = ["squeue", "--noheader", "--all", "--states=all", "--format=%A|%T|%r|%e",
                    f"--jobs={ids}"]
            parse = parse_squeue
        elif self._which("scontrol"):
            argv, parse = ["scontrol", "show", "job", "--oneliner"], parse_scontrol
        else:
            return {}, None  # no Slurm here: states stay unknown, which is not an error
        try:
            result = self._runner(argv)
        except subprocess.TimeoutExpired:
            return {}, f"{argv[0]} gave no answer in {COMMAND_TIMEOUT_SECONDS:g} s"
        except OSError as err:
            return {}, f"{argv[0]}: {err.strerror or err}"
        if result.returncode != 0:
            # One job id the controller no longer knows makes squeue fail: that is an answer.
            if "Invalid job id" in result.stderr:
                return {}, None
            return {}, f"{argv[0]} exited {result.returncode}: {_first_line(result.stderr)}"
        asked = set(wanted)
        parsed = parse(result.stdout[:MAX_OUTPUT_CHARS])
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
        at = self._clock()
        argv = ["squeue", "--noheader", "--steps", "--format=%i", f"--jobs={','.join(running)}"]
        try:
            result = self._runner(argv)
        except (subprocess.TimeoutExpired, OSError):
            return {}
        if result.returncode != 0:
            return {}
        live = parse_squeue_steps(result.stdout[:MAX_OUTPUT_CHARS])
        return {j: dataclasses.replace(found[j], listings=((at, live.get(j, frozenset())),))
                for j in running}

    def _from_sacct(self, missing: Sequence[str]) -> dict[str, SchedulerState]:
        argv = ["sacct", "--noheader", "--allocations", "--parsable2",
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
        return {j: s for j, s in parse_sacct(result.stdout[:MAX_OUTPUT_CHARS]).items()
                if j in asked}


def describe_scheduler(ref: SchedulerRef, state: SchedulerState | None) -> str:
    """One line for a job's detail, e.g. `Slurm job 12 step 0 on node[1-2] (partition gpu):
    RUNNING`; not escaped (the front end escapes it)."""
    if ref.kind == "slurm":
        step = f" step {ref.step_id}" if ref.step_id else ""
        nodes = f" on {ref.node_list}" if ref.node_list else ""
        part = f" (partition {ref.partition})" if ref.partition else ""
        known = "state unknown" if state is None else state.state
        if state is not None and state.reason:
            known += f", {state.reason}"
        return f"Slurm job {ref.job_id or '?'}{step}{nodes}{part}: {known}"
    where = f" pod {ref.pod}" if ref.pod else ""
    return f"{ref.kind}{where}"


def slurm_job_ids(refs: Iterable[SchedulerRef | None]) -> list[str]:
    return [r.slurm_job_id for r in refs if r is not None and r.slurm_job_id is not None]
