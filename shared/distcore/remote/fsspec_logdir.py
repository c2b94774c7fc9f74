"""Logdirs in object stores and other fsspec filesystems (`s3://`, `gs://`, ...).

s3fs and gcsfs are optional extras: a missing one is one line naming `pip install 'distmon[s3]'`.
Credentials come from wherever the client library finds them (environment, config files,
instance metadata) and are never shown; endpoints from `AWS_ENDPOINT_URL`,
`STORAGE_EMULATOR_HOST` or `--storage-option endpoint_url=...`. The listing is refreshed on an
interval (fsspec's cached one is dropped first); files are read in ranges from the last offset.
Objects are replaced whole when a writer flushes, so each read also fetches the 16 bytes before
the offset: if they changed, the object is a new one and is read again from the start. The
newest TensorFlow profile of each run, new or changed in the listing, is copied whole (up to
the profile reader's size cap) into the `ProfileMirror` (distcore.remote.profiles).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from distcore.events.store import RunStore
from distcore.jobs.agent import MAX_RUN_JSON_BYTES
from distcore.jobs.snapshots import AgentRecord
from distcore.location import RunLocation
from distcore.producer import Failing, Loop, ProducerError
from distcore.remote.profiles import CAP, ProfileCopies, ProfileMirror
from distcore.remote.spec import UrlSpec
from distcore.remote.tail import OVERLAP, FileMeta, LogdirTail
from distcore.textsafe import terminal_text

EXTRAS: Final = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
BACKOFF_MAX: Final = 30.0
MAX_ROUNDS: Final = 64


class SourceError(Exception):
    """One line that says why a URL cannot be read now."""


def describe_error(url: str, err: BaseException) -> str:
    """The one line shown for a failure; never the storage options or credentials."""
    if isinstance(err, FileNotFoundError):
        return "no such bucket or path"
    if isinstance(err, PermissionError):
        return "access denied"
    text = " ".join(str(err).split()) or type(err).__name__
    for marker, line in (
        ("AccessDenied", "access denied"),
        ("NoSuchBucket", "no such bucket"),
        ("InvalidAccessKeyId", "access denied (unknown access key)"),
        ("SignatureDoesNotMatch", "access denied (wrong secret key)"),
    ):
        if marker in text:
            return line
    return terminal_text(f"{type(err).__name__}: {text}", 200)


# The clients log retries and fallbacks with tracebacks; with no handler configured Python would
# print them on stderr, i.e. over the dashboard. Failures reach the user as our one line instead.
_CHATTY_LOGGERS: Final = (
    "fsspec", "s3fs", "gcsfs", "aiobotocore", "botocore", "boto3", "google", "urllib3", "aiohttp",
)  # fmt: skip


def quiet_client_logs() -> None:
    for name in _CHATTY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())
        logger.propagate = False


def open_filesystem(spec: UrlSpec, options: Mapping[str, Any]) -> tuple[Any, str]:
    """(filesystem, root path) for the URL; SourceError with the extra to install if needed."""
    import fsspec.core

    quiet_client_logs()
    if spec.protocol in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
        # gcsfs >= 2025 asks a gRPC control plane for each bucket's layout, which emulators do
        # not serve: 60 s of retries per bucket. Its own switch turns that off (read at import).
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

    try:
        fs, root = fsspec.core.url_to_fs(spec.url, skip_instance_cache=True, **options)
    except ImportError as err:
        extra = EXTRAS.get(spec.protocol)
        if extra is None:
            raise SourceError(f"{spec.protocol}:// needs a package: {err}") from err
        raise SourceError(
            f"reading {spec.protocol}:// needs the {extra} extra: pip install 'distmon[{extra}]'"
        ) from err
    except (ValueError, TypeError) as err:  # unknown protocol, a storage option it refuses
        raise SourceError(terminal_text(" ".join(str(err).split()), 200)) from err
    return fs, str(root).rstrip("/")


def _mtime(info: Mapping[str, Any]) -> float | None:
    for key in ("LastModified", "updated", "mtime", "created"):
        value = info.get(key)
        if isinstance(value, dt.datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


class FsspecLogdirReader:
    def __init__(
        self,
        spec: UrlSpec,
        store: RunStore,
        *,
        storage_options: Mapping[str, Any] | None = None,
        interval: float = 1.0,
        clock: Callable[[], float] = time.time,
        profiles: ProfileMirror | None = None,
    ) -> None:
        self._spec = spec
        self._store = store
        self._options = dict(storage_options or {})
        self._clock = clock
        url = spec.url.rstrip("/")
        self._tail = LogdirTail(store, url + "/", url, RunLocation.at_url(url), overlap=OVERLAP)
        self._profiles: ProfileCopies | None = None
        if profiles is not None:
            self._profiles = profiles.logdir(RunLocation.at_url(url))
        self._fs: Any = None
        self._root = ""
        where = terminal_text(spec.url, 120)
        self._where, self._failing = where, Failing(f"url:{where}")
        self._read_once = False
        # Failures back off (a missing bucket is not asked for every second); `_tick` has put
        # each in errors() already, so on_error has nothing left to do.
        self._loop = Loop("distmon-fsspec-reader", self._tick, interval=interval,
                          on_error=lambda err: None, max_backoff=BACKOFF_MAX)
        self.refreshes = 0
        self._scan_lock = threading.Lock()

    @property
    def bytes_fetched(self) -> int:
        return self._tail.bytes_fetched

    def readable(self) -> bool:
        return self._read_once

    def agent_records(self) -> dict[RunLocation, AgentRecord | None]:
        return self._tail.agent_records()

    def errors(self) -> tuple[ProducerError, ...]:
        return self._failing.errors()

    def start(self) -> None:
        if not self._loop.started:
            self._loop.start()

    def close(self) -> None:
        self._loop.close(timeout=15)

    def scan_once(self) -> frozenset[str]:
        """One refresh; callable from any thread (one refresh at a time). Never raises: a
        failure is `errors()`."""
        try:
            return self._tick()
        except Exception:
            return frozenset()

    def _tick(self) -> frozenset[str]:
        """The loop's step: a failure is kept in `errors()` and raised, so the loop backs off."""
        with self._scan_lock:
            try:
                changed = self._refresh()
                self._store.notify(changed)
            except Exception as err:  # a producer never dies: one line, shown in place
                url = self._spec.url
                line = str(err) if isinstance(err, SourceError) else describe_error(url, err)
                self._failing.fail(f"{self._where}: {line}", self._clock())
                raise
            finally:
                self.refreshes += 1
        self._failing.ok()
        return changed

    def _refresh(self) -> frozenset[str]:
        if self._fs is None:
            self._fs, self._root = open_filesystem(self._spec, self._options)
        fs, root = self._fs, self._root
        fs.invalidate_cache(root)
        found = fs.find(root, detail=True)
        if not found and not fs.exists(root):
            raise FileNotFoundError(root)
        self._read_once = True
        listing = {
            path[len(root) + 1 :]: FileMeta(None, int(info.get("size") or 0), _mtime(info))
            for path, info in found.items()
            if path.startswith(root + "/") and info.get("type", "file") == "file"
        }
        # FETCH_LIMIT per file per round, so catch up in rounds; a replaced object is read
        # again from its start in the next round.
        for _ in range(MAX_ROUNDS):
            fetches = self._tail.plan(listing)
            if not fetches or self._loop.stopping:
                break
            for fetch in fetches:
                end = fetch.start + fetch.length
                data = fs.cat_file(f"{root}/{fetch.rel}", start=fetch.start, end=end)
                self._tail.deliver(fetch.rel, fetch.start, bytes(data))
        self._read_run_json(fs, root, listing)
        if self._profiles is not None:
            for rel, meta in self._profiles.due(listing):
                if self._loop.stopping:
                    break
                self._copy_profile(self._profiles, fs, f"{root}/{rel}", rel, meta)
        return self._tail.finish()

    def _copy_profile(
        self, copies: ProfileCopies, fs: Any, path: str, rel: str, meta: FileMeta
    ) -> None:
        """One profile copied here whole (or why not), for the profile reader."""
        if meta.size > CAP:
            copies.store(rel, meta, None, f"over the {CAP >> 20} MiB size cap")
            return
        try:
            data = bytes(fs.cat_file(path, start=0, end=CAP + 1))
        except FileNotFoundError:
            copies.store(rel, meta, None, "gone before it was copied")
            return
        except Exception as err:  # the store's own failure: that profile's line
            copies.store(rel, meta, None, describe_error(self._spec.url, err))
            return
        copies.store(rel, meta, data)

    def _read_run_json(self, fs: Any, root: str, listing: Mapping[str, FileMeta]) -> None:
        """Each job's run.json, fetched again only when its size or time changed, and never
        more than the local bound (a ranged get)."""
        for rel, _ in self._tail.run_json_wanted():
            meta = listing.get(rel)
            if meta is None:
                self._tail.run_json(rel, "-", None)
                continue
            signature = f"{meta.size}:{meta.mtime}"
            if meta.size > MAX_RUN_JSON_BYTES:
                self._tail.run_json(rel, signature, None)
                continue
            if signature != self._tail.run_json_signature(rel):
                data = fs.cat_file(f"{root}/{rel}", start=0, end=MAX_RUN_JSON_BYTES + 1)
                self._tail.run_json(rel, signature, bytes(data))
