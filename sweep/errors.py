"""The one error hierarchy of the controller; sweep.cli.main alone turns it into a message and exit code."""
from __future__ import annotations

from sweep import exitcodes


class SweepError(Exception):
    """Base of every error a user can act on; carries where it happened and the fix."""

    exit_code = exitcodes.BAD_INPUT

    def __init__(self, message: str, *, where: str | None = None, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.fix = fix

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text}; {self.fix}" if self.fix else text


class InventoryError(SweepError):
    """The inventory (or a group_vars / host_vars file) cannot be read or makes no sense."""


class LimitError(SweepError):
    """A --limit pattern selects no host, or cannot be parsed."""


class ConfigError(SweepError):
    """An option, an expectations file or another input of the user's is invalid."""


class RunFolderError(SweepError):
    """A run folder is missing, unwritable, full, or from an incompatible version."""


class HealthFileError(SweepError):
    """A health.json (or capture) file is unreadable, invalid, or of an unknown schema version."""


class InventoryWarning(UserWarning):
    """The inventory reads, but something in it is likely a mistake (a host defined twice, differently)."""


class ExpectationsWarning(InventoryWarning):
    """An expectations file reads, but names a host or group that none of the audited hosts matches."""
