"""What a source argument names: a local directory, `[user@]host:PATH` over SSH, or an fsspec URL.

Pure parsing, shared by the CLI and the tests. scp's rule decides between a local path and a
host: a colon before any slash means a host (`./a:b` stays local). Host and user names are
checked so that nothing from the command line can reach `ssh` as an option (`-oProxyCommand=`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from distcore.errors import DistmonError
from distcore.safefile import TooDeep, parse_json

# A DNS name, an ssh_config Host alias, an IPv4 address, or an IPv6 address in brackets.
_HOST = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*)|\[[0-9A-Fa-f:.%A-Za-z]+\]")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


@dataclass(frozen=True)
class LocalSpec:
    path: Path


@dataclass(frozen=True)
class SshSpec:
    host: str  # as given: an ssh_config alias, a name or an address ("[::1]" keeps its brackets)
    user: str | None
    path: str  # as given; relative paths are relative to the remote home

    @property
    def destination(self) -> str:
        """What `ssh` is given: `user@host`, brackets dropped (ssh takes a bare IPv6 address)."""
        host = self.host[1:-1] if self.host.startswith("[") else self.host
        return f"{self.user}@{host}" if self.user else host

    @property
    def label(self) -> str:
        """How runs and hosts are named on screen: the host as the user wrote it."""
        return self.host


@dataclass(frozen=True)
class UrlSpec:
    url: str
    protocol: str  # "s3", "gs", "gcs", "memory", ...


SourceSpec = LocalSpec | SshSpec | UrlSpec


def parse_source(arg: str) -> SourceSpec:
    """One LOGDIR argument; raises DistmonError (one line) for a malformed remote one."""
    url = _URL.fullmatch(arg)
    if url:
        protocol = url.group(1).lower()
        if protocol == "file":
            return LocalSpec(Path(url.group(2)))
        if not url.group(2):
            raise DistmonError(f"{arg}: a URL needs a bucket or path")
        return UrlSpec(arg, protocol)
    colon = _remote_colon(arg)
    if colon < 0:
        return LocalSpec(Path(arg))
    login, path = arg[:colon], arg[colon + 1 :]
    user, _, host = login.rpartition("@")
    if not _HOST.fullmatch(host) or host.startswith("-"):
        raise DistmonError(f"{arg!r}: not a host name (expected [user@]host:PATH)")
    if (user or "@" in login) and not _USER.fullmatch(user):
        raise DistmonError(f"{arg!r}: not a user name (expected [user@]host:PATH)")
    if "\0" in path or "\n" in path:
        raise DistmonError(f"{arg!r}: the remote path holds a control character")
    return SshSpec(host=host, user=user or None, path=path or ".")


def _remote_colon(arg: str) -> int:
    """Where `host:` ends, or -1 for a local path (no colon before the first slash)."""
    slash = arg.find("/")
    at = arg.find("@")
    start = at + 1 if at >= 0 and (slash < 0 or at < slash) else 0
    if arg.startswith("[", start):  # [::1]:path, user@[::1]:path
        close = arg.find("]", start)
        return close + 1 if close > 0 and arg[close + 1 : close + 2] == ":" else -1
    colon = arg.find(":")
    if colon <= 0 or (0 <= slash < colon):
        return -1
    return colon


def parse_sources(args: Iterable[str]) -> tuple[SourceSpec, ...]:
    return tuple(parse_source(a) for a in args)


MAX_OPTION_DEPTH: Final = 16  # client_kwargs.config_kwargs.retries...: a few levels


def parse_storage_options(pairs: Iterable[str]) -> dict[str, Any]:
    """`--storage-option KEY=VALUE` pairs: JSON values where they parse (true, 3, {"a": 1}),
    strings otherwise; a dotted key nests (`client_kwargs.region_name=eu-west-1`)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not _KEY.fullmatch(key):
            raise DistmonError(f"--storage-option {pair!r}: expected KEY=VALUE")
        try:
            value: Any = parse_json(raw, MAX_OPTION_DEPTH)
        except TooDeep as err:  # JSON, but no storage option nests like that
            raise DistmonError(f"--storage-option {key}: {err}") from None
        except ValueError:
            value = raw
        *parents, leaf = key.split(".")
        node = options
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise DistmonError(f"--storage-option {pair!r}: {part} is already a value")
            node = child
        node[leaf] = value
    return options


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Storage options as they may be shown: anything that looks like a secret is hidden."""
    secret = re.compile(r"secret|token|key|password|credential|session", re.IGNORECASE)
    return {
        k: redact_options(v) if isinstance(v, Mapping) else ("***" if secret.search(k) else v)
        for k, v in options.items()
    }
