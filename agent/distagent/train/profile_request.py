"""Asking a running job for a profile: a request file in its run directory, and its answer.

`distagent profile RUN_DIR --steps N` writes `profile-request.json` (an id and N); the job's
chief looks for it at each log point (one `stat`, where there is none), takes it away and
profiles its next N steps; when the profile is written it answers in `profile-answer.json` with
the same id and the profile's path, or with why it took none. Both files are written whole
(`write_atomic`) and read bounded: anyone who can write the run directory can write them.
The files live in the run directory, so the request reaches a job on another host of a shared
filesystem (Slurm) as it reaches a local one. No TensorFlow here.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distcore.safefile import load_json, write_atomic

REQUEST = "profile-request.json"
ANSWER = "profile-answer.json"
MAX_STEPS = 100_000
"""Steps one request may profile: a profile holds every event of its window in memory."""
MAX_BYTES = 4096
MAX_ID = 64


@dataclass(frozen=True)
class Request:
    id: str
    steps: int


@dataclass(frozen=True)
class Answer:
    id: str
    path: str | None
    error: str | None


def write_request(run_dir: Path, request: Request) -> None:
    doc = {"id": request.id, "steps": request.steps}
    write_atomic(run_dir / REQUEST, json.dumps(doc).encode(), mode=0o644)


def _valid(doc: Any) -> Request | str:
    if not isinstance(doc, dict):
        return "not a JSON object"
    rid, steps = doc.get("id"), doc.get("steps")
    if not isinstance(rid, str) or not 0 < len(rid) <= MAX_ID:
        return f"id: expected a string of 1 to {MAX_ID} characters"
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        return f"steps: expected an integer from 1 to {MAX_STEPS}"
    return Request(rid, steps)


def take_request(run_dir: Path) -> Request | str | None:
    """The waiting request, removed from the directory; None where there is none; a string
    saying what is wrong with one that cannot be followed (removed too, so it is said once)."""
    path = run_dir / REQUEST
    try:
        os.stat(path)
    except OSError:
        return None
    try:
        found: Request | str = _valid(load_json(path, MAX_BYTES))
    except (OSError, ValueError) as err:
        found = f"unreadable ({err})"
    with contextlib.suppress(OSError):
        os.unlink(path)
    return found


def withdraw(run_dir: Path, request_id: str) -> None:
    """Remove the request if it is still the one with `request_id` (nobody took it)."""
    path = run_dir / REQUEST
    with contextlib.suppress(OSError, ValueError):
        doc = load_json(path, MAX_BYTES)
        if isinstance(doc, dict) and doc.get("id") == request_id:
            os.unlink(path)


def write_answer(run_dir: Path, answer: Answer) -> None:
    doc = {"id": answer.id, "path": answer.path, "error": answer.error}
    write_atomic(run_dir / ANSWER, json.dumps(doc).encode(), mode=0o644)


def read_answer(run_dir: Path, request_id: str) -> Answer | None:
    """The job's answer to `request_id`; None while there is none (or it answers another)."""
    try:
        doc = load_json(run_dir / ANSWER, MAX_BYTES)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("id") != request_id:
        return None
    path, error = doc.get("path"), doc.get("error")
    return Answer(request_id, path if isinstance(path, str) else None,
                  error if isinstance(error, str) else None)
