"""Slurm's answers as text: squeue's, scontrol's and sacct's output parsed into states.

Pure functions over the commands' real output formats (Slurm 22.05); what does not parse (a
line of another form, an id that is not a plain job id, a state that is not a word) is left out.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Final

from distcore.jobs.scheduler import JOB_ID_RE, STEP_ID_RE, SchedulerState

_STATE: Final = re.compile(r"[A-Z_]{2,32}\Z")


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
        if len(fields) < 2 or not JOB_ID_RE.match(fields[0]):
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


def parse_squeue_steps(text: str) -> dict[str, frozenset[str]]:
    """`squeue --noheader --steps --format=%i` lines (`12.0`, `12.batch`): job id -> its steps
    alive. Heterogeneous (`12+0.0`) and array (`12_3.0`) ids are left out, like run.json's."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        job, sep, step = line.strip().partition(".")
        if sep and JOB_ID_RE.match(job) and STEP_ID_RE.match(step):
            found.setdefault(job, set()).add(step)
    return {j: frozenset(s) for j, s in found.items()}


_PAIR: Final = re.compile(r"(?:^|\s)(JobId|JobState|Reason|EndTime)=(\S*)")


def parse_scontrol(text: str) -> dict[str, SchedulerState]:
    """`scontrol show job` output, one line per job (`-o`) or blocks separated by blank lines."""
    found: dict[str, SchedulerState] = {}
    for block in re.split(r"\n\s*\n|\n(?=JobId=)", text):
        pairs = dict(_PAIR.findall(block))
        job_id, state = pairs.get("JobId", ""), normalize_state(pairs.get("JobState", ""))
        if JOB_ID_RE.match(job_id) and state is not None:
            reason = pairs.get("Reason")
            made = SchedulerState(job_id, state, reason if reason not in (None, "", "None")
                                  else None, source="scontrol")
            found[job_id] = _with_end(made, pairs.get("EndTime", ""))
    return found


def parse_sacct(text: str) -> dict[str, SchedulerState]:
    """`sacct --noheader --allocations --parsable2 --format=JobIDRaw,State,End` lines."""
    return _parse_lines(text, "sacct", reason=None, end=2)
