"""Private key files as a sweep reads them: decrypted with the passphrase given
(SWEEP_KEY_PASSPHRASE), or a `KeyFileError` saying why the file cannot be used (after the file's
name)."""

from __future__ import annotations

import os

import paramiko

from sweep.errors import ConfigError


class KeyFileError(ConfigError):
    """A private key file that cannot be used; the text says why (after the file's name)."""


class KeyFileMissing(KeyFileError):
    """The key file does not exist."""


class KeyFileEncrypted(KeyFileError):
    """The key file is encrypted and no passphrase was given (ssh-agent may hold the key)."""


class KeyFileWrongPassphrase(KeyFileError):
    """The key file does not decrypt with the passphrase given."""


def load_private_key(path: str, passphrase: str | None = None) -> paramiko.PKey:
    """A private key file, decrypted with `passphrase` if it is encrypted; KeyFileError says why
    not."""
    if not os.path.exists(path):
        raise KeyFileMissing("does not exist")
    if os.path.isdir(path):
        raise KeyFileError("is a folder, not a key file")
    secret = passphrase.encode() if passphrase else None
    try:
        return paramiko.PKey.from_path(path, None)
    except TypeError as exc:  # "Key is password-protected, but password was not provided."
        if "password" not in str(exc):
            raise KeyFileError(f"cannot be read as a private key ({exc})") from None
    except OSError as exc:
        raise KeyFileError(f"cannot be read ({exc.strerror or exc})") from None
    except Exception as exc:
        raise KeyFileError(f"is not a private key sweep can read ({type(exc).__name__})") from None
    if secret is None:
        raise KeyFileEncrypted(
            "is encrypted and no passphrase was given: set SWEEP_KEY_PASSPHRASE, "
            "or load the key into ssh-agent"
        )
    try:
        return paramiko.PKey.from_path(path, secret)
    except Exception:
        raise KeyFileWrongPassphrase(
            "cannot be decrypted with the passphrase in SWEEP_KEY_PASSPHRASE (wrong passphrase?)"
        ) from None
