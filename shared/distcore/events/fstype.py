"""Which filesystem a path lives on, from /proc/self/mountinfo: inotify never fires on network
and FUSE filesystems (a change made on another host is not seen), so those must be polled; and
so how a watcher watches its roots (`choose_mode`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Literal

MOUNTINFO: Final = Path("/proc/self/mountinfo")
NETWORK_FS: Final = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "smb2", "lustre", "gpfs", "ceph", "9p", "afs",
     "beegfs", "fuse", "fuseblk"}
)
Mode = Literal["inotify", "poll"]
_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """(mount point, filesystem type) per line of a mountinfo file."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        parts = left.split()
        if not sep or len(parts) < 5 or not right.split():
            continue
        mounts.append((_unescape(parts[4]), right.split()[0]))
    return mounts


def fs_type_in(mounts: list[tuple[str, str]], path: str) -> str | None:
    """The type of the longest mount point that contains `path` (an absolute, resolved path)."""
    best: tuple[int, str] | None = None
    for point, fstype in mounts:
        inside = path == point or path.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), fstype)
    return best[1] if best else None


def mount_fs_type(path: Path) -> str | None:
    """The filesystem type of `path`, or None where that cannot be known (not Linux)."""
    try:
        text = MOUNTINFO.read_text()
    except OSError:
        return None
    return fs_type_in(parse_mountinfo(text), os.path.realpath(path))


def needs_polling(fstype: str | None) -> bool:
    return fstype is not None and (fstype in NETWORK_FS or fstype.startswith(("fuse.", "smb")))


def choose_mode(
    roots: Sequence[Path], poll: bool, fs_type: Callable[[Path], str | None]
) -> tuple[Mode, str]:
    """Poll or use inotify, and why: polling as asked, or where a root's filesystem never sends
    inotify events for changes made elsewhere."""
    if poll:
        return "poll", "polling as asked (--poll)"
    for root in roots:
        kind = fs_type(root)
        if needs_polling(kind):
            return "poll", f"{root} is on {kind}, where inotify sees no remote changes"
    return "inotify", "inotify through watchdog"
