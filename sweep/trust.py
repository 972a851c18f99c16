"""What this user's sweep wrote itself: an HMAC-SHA256 with a secret key of the user's.

A run folder can be copied, shared, edited: its manifest's options name programs, commands, ssh
options and files (``sweep run --resume`` would run them), and its records are read back by every
report. So sweep signs what it writes with a key only this user can read, and treats what does not
verify as written by someone else (docs/security.md):

* the manifest carries ``"signature": HMAC(key, canonical JSON of the rest)`` (`sign`, `signed`):
  a resume takes the options of a manifest it cannot verify only when they are given again, or with
  ``--trust-manifest`` (`sweep.collect.resume`);
* each record's line of ``records.sha256`` gets its HMAC in ``records.mac`` (`line_mac`): a record
  whose bytes match a verified line was validated on arrival by this user's sweep and is read back
  without the strict walk and the schema check; any other is checked again before use.

The key is 32 random bytes in ``$XDG_STATE_HOME/sweep/run.key`` (default ``~/.local/state``), made
on first use with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0600, in a folder made 0700. It is used
only when it is a regular file of this user's, mode 0600 or stricter, in a folder of this user's
that no one else can write, and reached through no link; otherwise sweep has no key, signs nothing
and trusts nothing it reads back (every record is checked; a resume needs the options again).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from sweep.folders import PRIVATE, make_dirs

KEY_BYTES = 32
KEY_NAME = "run.key"
SIGNATURE = "signature"
# ($XDG_STATE_HOME, $HOME) -> the key (None: unusable), read once per process
_keys: dict[tuple, bytes | None] = {}


def key_path() -> Path:
    """Where this user's run key is: ``$XDG_STATE_HOME/sweep/run.key`` (default
    ``~/.local/state``)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path(os.path.expanduser("~")) / ".local" / "state"
    return root / "sweep" / KEY_NAME


def run_key() -> bytes | None:
    """This user's key (made on first use), or None when it cannot be made or is not safely this
    user's. Looked up by the variables that place it: a run signs every record with it."""
    place = (os.environ.get("XDG_STATE_HOME"), os.environ.get("HOME"))
    if place not in _keys:
        path = key_path()
        try:
            _keys[place] = _load_key(path)
        except OSError:
            _keys[place] = None
    return _keys[place]


def _private(info: os.stat_result, mask: int) -> bool:
    return info.st_uid == os.getuid() and not stat.S_IMODE(info.st_mode) & mask


def _load_key(path: Path) -> bytes | None:
    # its parents too (~/.local, ~/.local/state), whatever the umask
    make_dirs(path.parent, PRIVATE)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not _private(os.fstat(dir_fd), 0o022):
            return None
        try:
            fd = os.open(
                KEY_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
            )
        except FileNotFoundError:
            _make_key(dir_fd)
            fd = os.open(
                KEY_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
            )
        try:
            info = os.fstat(fd)
            if (
                not stat.S_ISREG(info.st_mode)
                or not _private(info, 0o077)
                or info.st_size != KEY_BYTES
            ):
                return None
            key = os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
    return key if len(key) == KEY_BYTES else None


def _make_key(dir_fd: int) -> None:
    """Write a new key whole (a temporary file linked into place: two sweeps starting at once share
    one)."""
    tmp = f".{KEY_NAME}.{secrets.token_hex(8)}"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=dir_fd,
    )
    try:
        os.write(fd, secrets.token_bytes(KEY_BYTES))
        os.fsync(fd)
        os.close(fd)
        try:
            os.link(tmp, KEY_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except OSError as err:
            if err.errno != errno.EEXIST:
                raise
    finally:
        os.unlink(tmp, dir_fd=dir_fd)


def _mac(data: bytes) -> str | None:
    key = run_key()
    return None if key is None else hmac.new(key, data, hashlib.sha256).hexdigest()


def canonical(doc: dict) -> bytes:
    """The bytes a signature covers: `doc` less its signature, keys sorted, no spaces (as read back
    or as written)."""
    rest = {k: v for k, v in doc.items() if k != SIGNATURE}
    return json.dumps(
        rest, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode()


def sign(doc: dict) -> dict:
    """`doc` with its signature set (left out when this user has no usable key)."""
    doc.pop(SIGNATURE, None)
    mac = _mac(canonical(doc))
    if mac is not None:
        doc[SIGNATURE] = mac
    return doc


def signed(doc: Any) -> bool:
    """Whether `doc` carries a signature this user's key made over what it holds now."""
    if not isinstance(doc, dict) or not isinstance(doc.get(SIGNATURE), str):
        return False
    try:
        mac = _mac(canonical(doc))
    except (TypeError, ValueError):
        return False
    return mac is not None and hmac.compare_digest(mac, doc[SIGNATURE])


def line_mac(line: bytes) -> str | None:
    """The HMAC of one records.sha256 line (without its newline), or None without a key."""
    return _mac(b"records.sha256\0" + line)
