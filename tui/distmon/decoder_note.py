"""The event decoder's notice: where no C compiler built its kernel (or DISTMON_PURE turned it
off), the plain-Python decoder gives the same results with more CPU, and the user can fix it.

One line, made here for every front end that a person reads: `distmon --version` (which names
the C kernel too), the dashboard's help (`?`) and `--serve`'s log when it starts. Never on
`--once`'s output or the dashboard's status line, which scripts, pipes and snapshots read the
same on any machine.
"""

from __future__ import annotations

from distcore.tfrecord import kernel


def decoder_line(*, always: bool = False) -> str | None:
    """`decoder: pure Python (fallback: why; what to do)` where the kernel is not used; where
    it is, `decoder: C kernel` with `always` (`--version`), else None."""
    note = kernel.fallback_note()
    if note is None and always:
        return f"decoder: {kernel.describe()}"
    return note


def decoder_help() -> str:
    """The help's last paragraph: the decoder's line as a sentence, or nothing on the kernel."""
    line = decoder_line()
    return "" if line is None else f"\nThe {line}.\n"
