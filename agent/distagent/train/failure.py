"""The one line a failed job's run.json keeps as its `error` (and its user sees)."""

from __future__ import annotations

from typing import Any

from distagent.train.checkpoint import op_error_line
from distcore.errors import DistmonError, storage_problem


def error_line(err: BaseException, cluster: Any) -> str:
    """run.json's `error`: for a lost peer, the line the worker prints ("lost worker 1 (...)"),
    not TensorFlow's page of gRPC detail; for a refused write, its cause and place ("disk full
    on <dir>"); else the exception itself, TensorFlow's in its first line."""
    if isinstance(err, DistmonError):  # already the user's one line
        return str(err)
    storage = storage_problem(err)
    if storage is not None:
        return storage
    import tensorflow as tf

    if not isinstance(err, tf.errors.OpError):
        return _cause(err)
    setup = getattr(cluster, "setup", None)
    if setup is not None:
        from distagent.cluster.faults import explain

        lost = explain(err, setup.layout)
        if lost is not None:
            return str(lost)
    return f"{type(err).__name__}: {op_error_line(err)}"


def _cause(err: BaseException) -> str:
    """An exception's cause first: a message ends with it, after pages of detail (the whole
    traceback goes to the log); an error raised in traced code ends with its own
    "ValueError: ..." line, kept as it is."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    kind = type(err).__name__
    if not lines:
        return kind
    return lines[-1] if lines[-1].startswith(f"{kind}: ") else f"{kind}: {lines[-1]}"
