"""Webhook posts over HTTPS, as a chat's webhook URL is: a real TLS receiver on 127.0.0.1 with a
certificate made by openssl for the test. The client trusts only what the system's store holds
(here SSL_CERT_FILE, as OpenSSL reads it), and the one deadline per post holds over TLS."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcore.notify import Notifier
from tests.core.test_notify import (
    alert,
    assert_one_deadline_per_dribbled_post,
    snap,
)
from tests.kit.wait import wait_until
from tests.kit.webhook import SECRET, Receiver


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl missing (apt-get install openssl)")
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(folder / "key.pem"),
         "-out", str(folder / "cert.pem")],
        check=True, capture_output=True,
    )
    return folder


@pytest.fixture
def tls_receiver(certificate: Path) -> Iterator[Receiver]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate / "cert.pem", certificate / "key.pem")
    receiver = Receiver(tls=context)
    yield receiver
    receiver.close()


def test_a_post_over_https_to_a_trusted_receiver_is_delivered(
    tls_receiver: Receiver, certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate / "cert.pem"))
    notifier = Notifier(tls_receiver.url, "critical", hostname="node-1", hold=0.0)
    notifier.start()
    try:
        notifier.observe(snap(alert()))
        wait_until(lambda: notifier.pending() == 0)
    finally:
        notifier.close()
    assert [b["kind"] for b in tls_receiver.bodies] == ["job_diverged"]
    assert tls_receiver.auth == "Basic dXNlcjpwdw=="
    assert notifier.counts()["delivered"] == 1


def test_an_untrusted_certificate_fails_the_post_without_the_url(
    tls_receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver whose certificate the store does not hold is never posted to: the TLS
    handshake fails before the request, and the line says why without the URL's secret."""
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    monkeypatch.setenv("SSL_CERT_FILE", str(empty))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    lines: list[str] = []
    notifier = Notifier(tls_receiver.url, first_backoff=60.0, report=lines.append)
    notifier.start()
    try:
        notifier.observe(snap(alert()))
        wait_until(lambda: bool(lines))
    finally:
        notifier.close()
    assert tls_receiver.tries == 0 and not tls_receiver.bodies
    assert any("CERTIFICATE_VERIFY_FAILED" in line for line in lines), lines
    assert not any(SECRET in line or "pw@" in line for line in lines), lines


def test_a_dribbling_https_receiver_costs_one_deadline_per_post(
    tls_receiver: Receiver, certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline shuts the TLS socket as it shuts a plain one."""
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate / "cert.pem"))
    assert_one_deadline_per_dribbled_post(tls_receiver)
