"""Whether a secret file can be read by anyone but its owner and this process's user: its mode,
unless a POSIX ACL or systemd says more than the mode can.

With an ACL, the mode's group bits are the ACL's mask, not the owning group's access: systemd's
`LoadCredential=` gives a `DynamicUser=` service its credential as a root-owned 0400 file with
`user:<the service>:r`, which `stat` reads as 0440 though no group can read it. So the ACL
itself is evaluated (POSIX.1e: a named user's or group's and the owning group's access are
their entry's AND the mask's). A file directly in `$CREDENTIALS_DIRECTORY` is private by
systemd's word (a directory only the service can read, on a filesystem of its own), whatever
its mode reads.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Mapping
from typing import Final

ACL_XATTR: Final = "system.posix_acl_access"
_VERSION: Final = 2  # the kernel's POSIX_ACL_XATTR_VERSION
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_READ: Final = 4


def acl_entries(blob: bytes) -> list[tuple[int, int, int]] | None:
    """(tag, permissions, id) of each entry of an ACL as the kernel stores it (a little-endian
    version, then 8-byte entries); None where it is not one."""
    if len(blob) < 4 or (len(blob) - 4) % 8 or struct.unpack_from("<I", blob)[0] != _VERSION:
        return None
    return [struct.unpack_from("<HHI", blob, offset) for offset in range(4, len(blob), 8)]


def acl_private(blob: bytes, uid: int) -> bool:
    """Whether no one but the file's owner and `uid` may read it by this ACL (a malformed one:
    False, refused as the mode would be)."""
    entries = acl_entries(blob)
    if entries is None:
        return False
    masks = [perm for tag, perm, _ in entries if tag == _MASK]
    mask = masks[0] if masks else 0o7
    for tag, perm, who in entries:
        effective = perm & mask if tag in (_USER, _GROUP_OBJ, _GROUP) else perm
        others = tag in (_GROUP_OBJ, _GROUP, _OTHER) or (tag == _USER and who != uid)
        if others and effective & _READ:
            return False
    return True


def in_credentials_directory(path: str, environ: Mapping[str, str]) -> bool:
    """Whether `path` is a file directly in the service's systemd credentials directory."""
    where = environ.get("CREDENTIALS_DIRECTORY", "")
    if not os.path.isabs(where):
        return False
    return os.path.dirname(os.path.realpath(path)) == os.path.realpath(where)


def readable_by_others(fd: int, mode: int, path: str, environ: Mapping[str, str]) -> bool:
    """Whether the open file `fd` (of `mode`, at `path`) may be read by another user."""
    if not mode & (stat.S_IRGRP | stat.S_IROTH):
        return False
    if in_credentials_directory(path, environ):
        return False
    if mode & stat.S_IROTH:  # the ACL's `other` entry is these bits: true as they read
        return True
    try:
        blob = os.getxattr(fd, ACL_XATTR)
    except OSError:  # no ACL (ENODATA), or none on this filesystem: the mode is the truth
        return True
    return not acl_private(blob, os.geteuid())
