"""What an SSH host runs for a logdir, and what its answers are made into: the far side's part.

Two POSIX shell scripts, run on the connection's shell session with the logdir as `$1`:
`REFRESH_SCRIPT` lists every event file and run.json (one `find`), and `READ_SCRIPT` sends
per file the bytes appended since the last read, then each changed run.json whole. The
functions below parse the listing and hand the reads' bytes to the logdir's `LogdirTail`;
they run no command and read no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from distcore.events.reader import CHUNK
from distcore.jobs.agent import MAX_RUN_JSON_BYTES
from distcore.remote.tail import FETCH_LIMIT, Fetch, FileMeta, LogdirTail
from distcore.tfrecord import HEADER

PIECE: Final = 256 << 10  # where a read may stop before a stretch of zeros (at most this crosses)
NO_DIR: Final = 3
DENIED: Final = 4

_CD: Final = r"""
if ! cd -- "$1" 2>/dev/null; then
  if [ -d "$1" ]; then exit 4; fi
  exit 3
fi
shift
"""
# Per file (f identity offset max): "identity size offset count\n", exactly `count` bytes, then
# "identity size\n" again. Stretches of zeros of at least the local reader's chunk (a hole in a
# sparse file, preallocated space) never cross, as the local reader skips them: the bytes sent
# stop where such a stretch begins; read from inside one, they start at its first nonzero byte
# less HEADER - 1 (the header says where), or nothing is sent while zeros run to the end.
_READS: Final = rf"""
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  f=$1; id=$2; off=$3; max=$4; shift 4
  s=$(stat -L -c '%d:%i %s' -- "$f" 2>/dev/null) || s="- 0"
  i=${{s% *}}; z=${{s#* }}
  if [ "$i" != "$id" ] || [ "$z" -lt "$off" ]; then off=0; fi
  n=$((z - off))
  if [ "$n" -ge {CHUNK} ] && command -v cmp >/dev/null 2>&1; then
    d=$(cmp - /dev/zero "$off" 0 < "$f" 2>/dev/null |
      sed -n 's/.* differ: [a-z]* \([0-9]*\),.*/\1/p')
    if [ -z "$d" ]; then n=0
    elif [ "$d" -gt {CHUNK} ]; then off=$((off + d - {HEADER})); n=$((z - off)); fi
  fi
  if [ "$n" -gt "$max" ]; then n=$max; fi
  p={PIECE}
  while [ "$p" -lt "$n" ]; do
    if cmp -s -n {CHUNK} - /dev/zero $((off + p)) 0 < "$f"; then n=$p; break; fi
    p=$((p + {PIECE}))
  done
  printf '%s %s %s %s\n' "$i" "$z" "$off" "$n"
  if [ "$n" -gt 0 ]; then
    {{ tail -c +$((off + 1)) -- "$f" 2>/dev/null | head -c "$n"; cat /dev/zero; }} | head -c "$n"
  fi
  s=$(stat -L -c '%d:%i %s' -- "$f" 2>/dev/null) || s="- 0"
  printf '%s\n' "$s"
done
[ $# -gt 0 ] && shift
"""
# Per run.json asked for (it is new or changed in the listing): "count\n" and its bytes, or
# "-\n" when it is no regular file any more or larger than the local bound.
_RUN_JSON: Final = rf"""
while [ $# -ge 1 ]; do
  f=$1; shift
  z=-
  if [ -f "$f" ]; then z=$(stat -L -c '%s' -- "$f" 2>/dev/null) || z=-; fi
  if [ "$z" != - ] && [ "$z" -gt {MAX_RUN_JSON_BYTES} ]; then z=-; fi
  printf '%s\n' "$z"
  if [ "$z" != - ]; then {{ head -c "$z" < "$f" 2>/dev/null; cat /dev/zero; }} | head -c "$z"; fi
done
"""
# Device, inode, size, mtime and path of every event file and run.json, NUL-separated (GNU
# find; -type f after -L: a FIFO or a link to one is never listed, so never opened).
_FIND: Final = r"""
find -L . -type f \( -name '*tfevents*' -o -name run.json -o -name '*.xplane.pb' \) \
  -printf '%D:%i %s %T@ %P\0' 2>/dev/null
exit 0
"""
# One profile (f max): "size\n" and its bytes, "+ size\n" when it is larger than `max` (not
# sent), or "-\n" when it is no regular file any more.
_PROFILE: Final = r"""
f=$1; max=$2; z=-
if [ -f "$f" ]; then z=$(stat -L -c '%s' -- "$f" 2>/dev/null) || z=-; fi
if [ "$z" != - ] && [ "$z" -gt "$max" ]; then printf '+ %s\n' "$z"; exit 0; fi
printf '%s\n' "$z"
if [ "$z" != - ]; then { head -c "$z" < "$f" 2>/dev/null; cat /dev/zero; } | head -c "$z"; fi
"""
REFRESH_SCRIPT: Final = _CD + _FIND
PROFILE_SCRIPT: Final = _CD + _PROFILE
READ_SCRIPT: Final = _CD + _READS + _RUN_JSON


def remote_path(path: str) -> str:
    """`~/x` and `~` are relative to the home directory, where ssh sessions start."""
    if path == "~":
        return "."
    return path[2:] or "." if path.startswith("~/") else path


def read_answer_bound(fetches: int, run_jsons: int) -> int:
    """The most READ_SCRIPT can print for `fetches` reads (each at most FETCH_LIMIT bytes, the
    script's `max`, with its two header lines) and `run_jsons` run.json files whole; a host
    that prints more is refused."""
    headers = 2 * 96  # "identity size offset count" and "identity size": numbers only
    return fetches * (FETCH_LIMIT + headers) + run_jsons * (MAX_RUN_JSON_BYTES + 24) + 4096


def take_profile(out: bytes, cap: int) -> tuple[bytes | None, str]:
    """PROFILE_SCRIPT's answer: the file's bytes, or None and why there are none."""
    head, _, data = out.partition(b"\n")
    if head.startswith(b"+ "):
        return None, f"over the {cap >> 20} MiB size cap"
    if not head.isdigit():
        return None, "gone before it was copied"
    if len(data) != int(head):
        return None, "cut short while it was copied"
    return data, ""


def parse_listing(data: bytes) -> dict[str, FileMeta]:
    listing: dict[str, FileMeta] = {}
    for entry in data.split(b"\0"):
        parts = entry.split(b" ", 3)
        if len(parts) != 4:
            continue
        ident, size, mtime, rel = parts
        try:
            meta = FileMeta(ident.decode(), int(size), float(mtime))
        except ValueError:
            continue
        listing[rel.decode("utf-8", "surrogateescape")] = meta
    return listing


def changed_run_json(tail: LogdirTail, listing: dict[str, FileMeta]) -> list[tuple[str, str]]:
    """(rel, signature in the listing) of each job's run.json that is new or changed; one that
    is gone is none at once (no command needed)."""
    wanted = []
    for rel, old in tail.run_json_wanted():
        meta = listing.pop(rel, None)
        if meta is None:
            tail.run_json(rel, "-", None)
            continue
        signature = f"{meta.identity}:{meta.size}:{meta.mtime}"
        if signature != old:
            wanted.append((rel, signature))
    return wanted


def take_run_json(
    tail: LogdirTail, wanted: Sequence[tuple[str, str]], out: bytes, pos: int
) -> None:
    """Hand each run.json's bytes (or its absence) to the tail, under its listed signature."""
    for rel, signature in wanted:
        end = out.find(b"\n", pos)
        if end < 0:
            return
        head = out[pos:end]
        if not head.isdigit():
            pos = end + 1
            tail.run_json(rel, signature, None)
            continue
        count = int(head)
        data = out[end + 1 : end + 1 + count]
        pos = end + 1 + count
        tail.run_json(rel, signature, data if len(data) == count else None)


def take_reads(
    tail: LogdirTail, fetches: Sequence[Fetch], out: bytes
) -> tuple[dict[str, FileMeta], int]:
    """Hand each file's bytes to the tail: the sizes seen after the read (for catch-up), and
    where the reads end in `out` (a listing may follow)."""
    sizes: dict[str, FileMeta] = {}
    pos = 0
    for f in fetches:
        end = out.find(b"\n", pos)
        head = out[pos:end].split() if end >= 0 else []
        if len(head) != 4:
            break
        ident, start, count = head[0].decode(), int(head[2]), int(head[3])
        data = out[end + 1 : end + 1 + count]
        trailer_at = end + 1 + count
        end = out.find(b"\n", trailer_at)
        if end < 0:
            break
        after = out[trailer_at:end].split()
        pos = end + 1
        if len(data) != count or len(after) != 2 or after[0].decode() != ident:
            continue  # replaced while read: the next refresh starts it again
        if int(after[1]) < start + count:
            continue  # truncated while read
        if tail.identity(f.rel) != ident:  # replaced since listed: from its start
            tail.restart(f.rel, ident)
        if count == 0 and int(after[1]) > start:
            tail.wait_at_zeros(f.rel)  # zeros to the end: the far side sends nothing
            continue
        tail.deliver(f.rel, start, data)
        sizes[f.rel] = FileMeta(ident, int(after[1]), tail.mtime(f.rel))
    return sizes, pos
