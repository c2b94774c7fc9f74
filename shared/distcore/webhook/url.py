"""The webhook URL: where it comes from, how it is checked, and the only form ever printed.

The URL is a secret (Slack's webhook is its path, others carry tokens in the query or
`user:password@`), so it has three sources, the private ones first:

- `--notify-file PATH`: the first line of a file that only its owner (and this service's user)
  may read (a systemd credential, whose mode may read 0440 through its ACL; a file of mode
  0600);
- the environment variable `DISTMON_NOTIFY_URL` (an `EnvironmentFile=` of mode 0600);
- `--notify URL`, on the command line, where every user of the machine reads it in `ps`.

A flag beats the environment; `--notify` and `--notify-file` together are a usage error. A file
that group or others can read, that is missing, not a regular file or empty is refused in one
line, before anything starts.
"""

from __future__ import annotations

import base64
import os
import stat
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from distcore.errors import DistmonError
from distcore.webhook.private import readable_by_others

ENV_VAR: Final = "DISTMON_NOTIFY_URL"
MAX_FILE_BYTES: Final = 64 * 1024  # a URL is short; a huge file is a mistake, not read whole


def redact_url(url: str) -> str:
    """The URL as it may be printed: scheme, host and port only (user, password, path, query
    and fragment may all be credentials)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "?", parts.port
    except ValueError:
        return "<invalid URL>"
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port is not None else ""
    rest = "/…" if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{netloc}{rest}"


def check_url(url: str, source: str = "--notify") -> str:
    """A webhook URL, or a DistmonError (one line naming its source, the URL redacted).

    A control character or white space anywhere is refused: urllib's parser drops a tab, CR or
    LF where it finds one, and the request line then fails at every post, retried for ever."""
    odd = next((i for i, c in enumerate(url) if c.isspace() or not c.isprintable()), None)
    if odd is not None:
        raise DistmonError(f"{source}: the URL holds a control character or white space "
                           f"({url[odd]!a} at character {odd + 1}); percent-encode it")
    try:
        parts = urllib.parse.urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise DistmonError(
            f"{source}: expected an http:// or https:// URL with a host, got {redact_url(url)}"
        )
    return url


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """urllib does not send `user:password@` itself: the URL without it, and the Basic
    Authorization header that carries it."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    netloc = parts.netloc.rpartition("@")[2]
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return parts._replace(netloc=netloc).geturl(), {"Authorization": f"Basic {token}"}


@dataclass(frozen=True)
class WebhookUrl:
    """A checked URL and where it came from (`--notify-file /etc/distmon/notify-url`), which
    may be printed; the URL itself never is (not even in a repr)."""

    url: str = field(repr=False)
    source: str

    @property
    def shown(self) -> str:
        return redact_url(self.url)


def read_url_file(path: str, environ: Mapping[str, str] = os.environ) -> str:
    """The first line of `path`, stripped, or a DistmonError saying why it cannot be used.

    Opened without blocking (a FIFO would wait for a writer for ever) and checked on the open
    file, so what is checked is what is read. Its mode may say group-readable where its ACL or
    systemd's credentials directory (`environ`'s) says private: distcore.webhook.private."""
    where = f"--notify-file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as err:
        raise DistmonError(f"{where}: cannot read ({err.strerror or type(err).__name__})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DistmonError(f"{where}: not a regular file")
        if readable_by_others(fd, info.st_mode, path, environ):
            mode = stat.S_IMODE(info.st_mode)
            raise DistmonError(f"{where}: readable by other users (mode {mode:04o}): the URL "
                               f"is a secret; chmod 600 it")  # fmt: skip
        data = os.read(fd, MAX_FILE_BYTES)
    except OSError as err:
        raise DistmonError(f"{where}: cannot read ({err.strerror or type(err).__name__})") from None
    finally:
        os.close(fd)
    first = data.split(b"\n", 1)[0].strip()
    if not first:
        raise DistmonError(f"{where}: empty first line (the webhook URL goes there)")
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError:
        raise DistmonError(f"{where}: the first line is not UTF-8 text") from None
    return check_url(text, where)


def choose_url(
    flag: str | None, file: str | None, environ: Mapping[str, str] = os.environ
) -> WebhookUrl | None:
    """The webhook URL by precedence: `--notify` or `--notify-file` (not both), else
    DISTMON_NOTIFY_URL (an empty value is unset); None when there is none."""
    if flag is not None and file is not None:
        raise DistmonError("--notify and --notify-file: choose one")
    if flag is not None:
        return WebhookUrl(check_url(flag), "--notify")
    if file is not None:
        return WebhookUrl(read_url_file(file, environ), f"--notify-file {file}")
    env = environ.get(ENV_VAR, "").strip()
    if env:
        return WebhookUrl(check_url(env, ENV_VAR), ENV_VAR)
    return None
