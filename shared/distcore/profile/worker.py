"""The parsing subprocess: `python -m distcore.profile.worker PATH MAX_BYTES MAX_MEMORY
MAX_CPU_S`. It limits itself before it reads a byte, then prints one JSON document, the
summary or the reason the file is unreadable, on stdout. Run by runner.summarize only."""

from __future__ import annotations

import json
import resource
import sys

from distcore.profile.analyze import summarize_bytes
from distcore.profile.decode import ProfileUnreadable
from distcore.profile.summary import ProfileError
from distcore.textsafe import json_safe, terminal_text


def limit(max_memory: int, max_cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
    resource.setrlimit(resource.RLIMIT_CPU, (max_cpu_s, max_cpu_s + 1))


def read(path: str, max_bytes: int) -> bytes:
    with open(path, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew since the caller looked
        raise ProfileUnreadable(f"over the {max_bytes}-byte size cap")
    return data


def main(argv: list[str]) -> int:
    path, max_bytes, max_memory, max_cpu_s = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    limit(max_memory, max_cpu_s)
    try:
        doc = summarize_bytes(read(path, max_bytes), path).to_json()
    except ProfileUnreadable as exc:
        doc = ProfileError(terminal_text(path), str(exc)).to_json()
    except OSError as exc:
        doc = ProfileError(terminal_text(path), f"cannot be read ({exc.strerror})").to_json()
    sys.stdout.write(json.dumps(json_safe(doc), allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
