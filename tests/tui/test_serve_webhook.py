"""The webhook's URL from a private file or the environment, its posts counted by outcome in a
real scrape, and a flapping alert posted once: `distmon --serve` as a user runs it, with a real
receiver on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distcore.errors import DistmonError
from distcore.webhook.url import ENV_VAR, choose_url, read_url_file
from distmon.arguments import parse_options
from distmon.cli import main
from tests.kit.wait import wait_until
from tests.kit.webhook import SECRET, Receiver
from tests.kit.writers import write_job
from tests.tui.test_serve import Serve, sample, scrape

URL = f"https://user:hunter2@hooks.example.com/services/{SECRET}"


def url_file(where: Path, text: str, mode: int = 0o600) -> Path:
    where.write_text(text)
    where.chmod(mode)
    return where


@pytest.fixture(autouse=True)
def no_url_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)


# --- where the URL comes from -------------------------------------------------------------------


def make_fifo(where: Path) -> Path:
    os.mkfifo(where / "fifo", 0o600)
    return where / "fifo"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p / "absent", "cannot read (No such file or directory)"),
        (lambda p: url_file(p / "u", URL, 0o644), "readable by other users (mode 0644)"),
        (lambda p: url_file(p / "u", URL, 0o640), "readable by other users (mode 0640)"),
        (lambda p: url_file(p / "u", URL, 0o604), "readable by other users (mode 0604)"),
        (lambda p: url_file(p / "u", ""), "empty first line"),
        (lambda p: url_file(p / "u", "  \n" + URL), "empty first line"),
        (lambda p: url_file(p / "u", f"ftp://u:hunter2@h/{SECRET}\n"), "expected an http://"),
        (lambda p: p, "not a regular file"),  # a directory
        (make_fifo, "not a regular file"),  # opened without waiting for a writer
    ],
)
def test_a_url_file_that_cannot_be_used_is_one_line_and_exit_2(
    tmp_path: Path, make: Callable[[Path], Path], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make(tmp_path)
    assert main(["--serve", "--notify-file", str(path), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--notify-file {path}: {said}" in err and err.count("\n") == 1, err
    assert SECRET not in err and "hunter2" not in err


@pytest.mark.parametrize(
    ("flag", "file", "env", "source"),
    [
        (URL, None, None, "--notify"),
        (None, "u", None, "--notify-file {file}"),
        (None, None, URL, ENV_VAR),
        (URL, None, "http://elsewhere/x", "--notify"),  # a flag beats the environment
        (None, "u", "http://elsewhere/x", "--notify-file {file}"),
        (None, None, " ", None),  # an empty variable is unset
    ],
)
def test_the_url_comes_from_a_flag_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    flag: str | None, file: str | None, env: str | None, source: str | None,
) -> None:  # fmt: skip
    argv = ["--serve", "--metrics", "0", str(tmp_path)]
    if flag is not None:
        argv += ["--notify", flag]
    if file is not None:
        path = url_file(tmp_path / file, f"{URL}\nthe rest is not read\n", 0o400)
        argv += ["--notify-file", str(path)]
    if env is not None:
        monkeypatch.setenv(ENV_VAR, env)
    options = parse_options(argv)
    if source is None:
        assert options.notify is None and options.notify_source == ""
        return
    assert options.notify == URL
    assert options.notify_source == source.format(file=tmp_path / "u")
    assert URL not in repr(options) and SECRET not in repr(options)


def test_a_bad_url_in_the_environment_is_named_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV_VAR, f"hooks.example.com/{SECRET}")
    assert main(["--serve", "--metrics", "0", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{ENV_VAR}: expected an http:// or https:// URL" in err and err.count("\n") == 1
    assert SECRET not in err


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (f"http://h/{SECRET}\x00x", "'\\x00' at character 34"),
        (f"http://h/{SECRET}\tx", "'\\t' at character 34"),
        (f"http://h/{SECRET}\rx", "'\\r' at character 34"),
        (f"http://h/{SECRET}\nx", "'\\n' at character 34"),
        (f"http://h/{SECRET} x", "' ' at character 34"),
        (f"http://h /{SECRET}", "' ' at character 9"),
        (f"http://h/{SECRET}\x7f", "'\\x7f' at character 34"),
        (f"http://h/{SECRET}\u2028", "'\\u2028' at character 34"),
        (f"http://h/{SECRET}\u202e", "'\\u202e' at character 34"),
    ],
)
def test_a_url_with_a_control_character_or_space_is_refused_at_start(
    tmp_path: Path, url: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """urllib drops a tab, CR or LF from a URL: accepted, every post then failed and was
    retried for ever. Refused at start instead, in one line, the URL unprinted."""
    argv = ["--serve", "--metrics", "0", "--notify", url, str(tmp_path)]
    with pytest.raises(SystemExit):  # before anything starts (a serve that ran would not end)
        parse_options(argv)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--notify: the URL holds a control character or white space" in err, err
    assert said in err and err.count("\n") == 1 and SECRET not in err


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # one file, rewritten
@given(content=st.tuples(st.sampled_from([b"", b"http://h/", b"https://u:p@hooks.example.com/"]),
                         st.binary(max_size=200)).map(b"".join))
def test_any_file_content_is_a_url_or_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "u"
    path.write_bytes(content)
    path.chmod(0o600)
    try:
        url = read_url_file(str(path))
    except DistmonError as err:
        assert "\n" not in str(err) and str(err).startswith(f"--notify-file {path}: ")
        return
    assert url == content.split(b"\n", 1)[0].strip().decode("utf-8")
    assert url.startswith(("http://", "https://"))
    assert choose_url(None, str(path), {}) is not None


# --- a real distmon, a real receiver, a real scrape ---------------------------------------------


def posts(text: str) -> dict[str, float | None]:
    return {o: sample(text, "distmon_notify_posts_total", outcome=o)
            for o in ("delivered", "failed", "refused", "queue_full")}  # fmt: skip


def once_delivered(port: int) -> dict[str, float | None] | None:
    """The scrape's post counts once one post was delivered."""
    counts = posts(scrape(port))
    return counts if counts["delivered"] else None


def test_posts_from_a_url_file_are_counted_by_outcome_in_the_scrape(
    tmp_path: Path, receiver: Receiver
) -> None:
    """Two critical alerts; the receiver refuses the first with a 400 (dropped, never retried)
    and takes the second: the scrape counts one refused and one delivered post."""
    logdir = tmp_path / "logs"
    write_job(logdir, "broken", [1.0, 0.5, float("nan")], status="failed")
    secret = url_file(tmp_path / "notify-url", receiver.url + "\n")
    receiver.fail, receiver.fail_code = 1, 400
    serve = Serve(tmp_path, ["--metrics", "0", "--notify-file", str(secret), "--no-gpu",
                             "--refresh", "0.5", str(logdir)])  # fmt: skip
    try:
        port = serve.port()
        assert None not in posts(scrape(port)).values()  # every outcome named from the start
        counted = wait_until(lambda: once_delivered(port))
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.stderr()
    assert counted == {"delivered": 1, "failed": 0, "refused": 1, "queue_full": 0}
    assert receiver.tries == 2 and len(receiver.bodies) == 1
    err = serve.stderr()
    assert f"(URL from --notify-file {secret})" in err and "refused (HTTP 400); dropped" in err
    assert "every user's `ps`" not in err
    assert SECRET not in err and "pw@" not in err


def test_a_flapping_job_from_the_environment_url_is_posted_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A job whose run.json says failed, running, failed, running, failed, each seen by
    distmon (the scrape shows it): three raises within the default hold, one post."""
    logdir = tmp_path / "logs"
    job = write_job(logdir, "flappy", [1.0, 0.5], status="failed")
    serve = Serve(tmp_path, ["--metrics", "0", "--no-gpu", "--refresh", "0.2", str(logdir)],
                  env={**os.environ, ENV_VAR: receiver.url})  # fmt: skip
    try:
        port = serve.port()
        for status in ("failed", "running", "failed", "running", "failed"):
            (job / "run.json").write_text(json.dumps({"status": status}))
            raised = status == "failed"
            wait_until(lambda r=raised: (sample(scrape(port), "distmon_alert",  # type: ignore[misc]
                                              kind="job_failed") == 1) == r)  # fmt: skip
        counted = wait_until(lambda: once_delivered(port))
    finally:
        code = serve.stop(signal.SIGTERM)
    assert code == 0, serve.stderr()
    assert counted is not None and counted["delivered"] == 1 and counted["failed"] == 0
    assert [(b["kind"], b["count"]) for b in receiver.bodies] == [("job_failed", 1)]
    err = serve.stderr()
    assert f"(URL from {ENV_VAR})" in err and SECRET not in err
