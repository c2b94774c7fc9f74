"""distcore.webhook.private: a secret file's readers from its mode, its POSIX ACL (the bytes the
kernel stores, and real ACLs set on real files) and systemd's credentials directory."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest

from distcore.errors import DistmonError
from distcore.webhook.private import ACL_XATTR, acl_entries, acl_private
from distcore.webhook.url import read_url_file

ME, SERVICE, STRANGER, TEAM = os.geteuid(), 61234, 4242, 777
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
UNDEFINED = 0xFFFFFFFF  # the id of the entries that name no one


def acl(*entries: tuple[int, int, int]) -> bytes:
    """An ACL as the kernel stores it: version 2, then (tag, permissions, id) entries in the
    order it keeps them (by tag, then id)."""
    ordered = sorted(entries, key=lambda e: (e[0], e[2]))
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in ordered)


def owner_only(*named: tuple[int, int, int], group: int = 0, mask: int = 4,
               other: int = 0) -> bytes:  # fmt: skip
    return acl((USER_OBJ, 4, UNDEFINED), *named, (GROUP_OBJ, group, UNDEFINED),
               (MASK, mask, UNDEFINED), (OTHER, other, UNDEFINED))  # fmt: skip


def minimal(group: int) -> bytes:
    return acl((USER_OBJ, 6, UNDEFINED), (GROUP_OBJ, group, UNDEFINED), (OTHER, 0, UNDEFINED))


@pytest.mark.parametrize(
    ("blob", "uid", "private"),
    [
        # systemd's LoadCredential= for a DynamicUser= service: user:<service>:r, mask r.
        (owner_only((USER, 4, SERVICE)), SERVICE, True),
        (owner_only((USER, 4, SERVICE)), STRANGER, False),  # read as another user: its entry
        (owner_only((USER, 4, SERVICE), (USER, 4, STRANGER)), SERVICE, False),
        (owner_only((USER, 4, STRANGER), mask=0), SERVICE, True),  # the mask takes it away
        (owner_only((GROUP, 4, TEAM)), SERVICE, False),  # a named group reads it
        (owner_only((GROUP, 4, TEAM), mask=0), SERVICE, True),
        (owner_only(group=4), SERVICE, False),  # the owning group, through the mask
        (owner_only(group=4, mask=0), SERVICE, True),
        (owner_only(other=4), SERVICE, False),
        (minimal(group=0), ME, True),  # a minimal ACL: no mask, the owning group's entry
        (minimal(group=4), ME, False),
        (b"", ME, False),  # not an ACL: refused, as the mode would be
        (struct.pack("<I", 1) + struct.pack("<HHI", USER_OBJ, 4, UNDEFINED), ME, False),
        (acl((USER_OBJ, 4, UNDEFINED))[:-1], ME, False),
    ],
)
def test_acl_private(blob: bytes, uid: int, private: bool) -> None:
    assert acl_private(blob, uid) is private


def test_acl_entries_reads_the_kernels_layout() -> None:
    assert acl_entries(owner_only((USER, 4, SERVICE))) == [
        (USER_OBJ, 4, UNDEFINED), (USER, 4, SERVICE), (GROUP_OBJ, 0, UNDEFINED),
        (MASK, 4, UNDEFINED), (OTHER, 0, UNDEFINED)]  # fmt: skip


URL = "https://hooks.example.com/services/T0/B0/XXX"


def secret_file(path: Path, blob: bytes | None = None, mode: int = 0o400) -> Path:
    """A URL file of `mode`, with the ACL `blob` set on it (the kernel then shows its mask
    as the group bits), or skip where this filesystem or user cannot set one."""
    path.write_text(URL + "\n")
    path.chmod(mode)
    if blob is not None:
        try:
            os.setxattr(path, ACL_XATTR, blob)
        except OSError as err:
            if err.errno in (errno.EOPNOTSUPP, errno.EPERM, errno.EACCES):
                pytest.skip(f"no POSIX ACL here: {err.strerror}")
            raise
    return path


@pytest.mark.parametrize(
    ("blob", "mode", "credential", "accepted"),
    [
        (owner_only((USER, 4, ME)), 0o400, False, True),  # reads 0440, only we can read
        (owner_only((USER, 4, STRANGER)), 0o400, False, False),
        (owner_only((GROUP, 4, TEAM)), 0o400, False, False),
        (None, 0o440, False, False),  # no ACL: the mode is the truth
        (None, 0o600, False, True),
        (None, 0o440, True, True),  # systemd's credentials directory: private by its word
        (None, 0o444, True, True),
        (None, 0o444, False, False),
    ],
)
def test_a_url_files_readers_from_its_acl_or_credentials_directory(
    tmp_path: Path, blob: bytes | None, mode: int, credential: bool, accepted: bool
) -> None:
    credentials = tmp_path / "credentials"
    credentials.mkdir(mode=0o700)
    path = secret_file((credentials if credential else tmp_path) / "notify-url", blob, mode)
    if blob is not None:
        assert path.stat().st_mode & 0o040, "the kernel shows the ACL's mask as the group bits"
    environ = {"CREDENTIALS_DIRECTORY": str(credentials)}
    if accepted:
        assert read_url_file(str(path), environ) == URL
    else:
        with pytest.raises(DistmonError, match="readable by other users"):
            read_url_file(str(path), environ)


def test_a_file_beside_the_credentials_directory_is_not_in_it(tmp_path: Path) -> None:
    (tmp_path / "credentials").mkdir()
    path = secret_file(tmp_path / "credentials-other", mode=0o440)
    environ = {"CREDENTIALS_DIRECTORY": str(tmp_path / "credentials")}
    with pytest.raises(DistmonError, match="readable by other users"):
        read_url_file(str(path), environ)
