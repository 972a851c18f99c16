"""The one error hierarchy of the controller; sweep.cli.main alone turns it into a message and exit
code.

Every exception class defined in `sweep/` descends from `SweepError` (tests/unit/test_errors.py
walks them all and checks this tree lists each one); a class is defined where it is raised, unless
several modules raise it:

* SweepError
  + InventoryError ................. an inventory or group_vars / host_vars file
  |   + _Template .................. (inventory.host) a connection value left unrendered (caught
  |                                  there)
  + LimitError ..................... a --limit pattern
  + ConfigError .................... an option or input file of the user's
  |   + SSHConfigError ............. ssh_config line, ssh argument or setting a connection cannot
  |   |                              honour
  |   |   + SSHSettingRefused ...... (collect.ssh.config) the same, said for one host (its name
  |   |   |                          first)
  |   |   |   + NeedsOpenSSH ....... (collect.ssh.config) what only OpenSSH's ssh does (auto: sent
  |   |   |                          there)
  |   |   + SSHArgsError ........... (collect.ssh.openssh_config) an ssh(1) argument list
  |   |   + SSHConfigRejected ...... (collect.ssh.openssh_config) a line ssh refuses the whole file
  |   |                              for
  |   + KeyFileError ............... (collect.ssh.keyfiles) a private key file that cannot be used
  |   |   + KeyFileMissing
  |   |   + KeyFileEncrypted
  |   |   + KeyFileWrongPassphrase
  |   + TypeProblem ................ (audit.expect_values) an expectations value of the wrong type
  |   + ManifestNotTrusted ......... (collect.resume) a foreign manifest's commands, programs or
  |                                  files
  + RunFolderError ................. a run folder
  |   + EmptyInterruptedRun ........ (history.runs) a run stopped before any host record was written
  + HealthFileError ................ a health.json or capture file
  + DepthError ..................... (strictjson) a document nested deeper than the limit (also a
  |                                  ValueError)
  + EngineError .................... (collect.engines.base) ansible / srun failed as a whole
  + HostFailure .................... (failures) one host's attempt failed, classified; never
  |                                  escapes a sweep: it becomes the host's record
  + UnknownHostKey ................. (collect.ssh.hostkeys) a key no known_hosts file records
  + CertificateError ............... (collect.ssh.certs) bytes that are not an OpenSSH certificate
  |                                  (a ValueError)
  + IndexDamaged ................... (history.index) a history index file that is not one (it is
  |                                  rebuilt)
  + InventoryWarning ............... also a UserWarning: the inventory reads, but likely holds a
  |                                  mistake
  |   + ExpectationsWarning ........ an expectations file names a host or group no audited host
  |                                  matches
  + Interrupted .................... (collect.run) Ctrl-C before the run folder was made or reopened
  |                                  (exit 130)
  + ReadBackWarning ................ also a UserWarning: a file of a run folder is left out (named,
  |                                  with why)
  + SSHConfigNote .................. also a UserWarning: an ssh_config keyword left unused, hosts
  |                                  sent through ssh
  + WorkerLost ..................... (collect.workers) also a UserWarning: a worker process ended
                                     before its hosts did (they have no record)
"""

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


class SSHConfigError(ConfigError):
    """An ssh_config line, ssh argument or ssh setting sweep cannot read as OpenSSH would, or that a
    host's connection cannot honour; `where` is file:line or the inventory variable."""

    def __init__(self, message: str, where: str | None = None, *, fix: str | None = None):
        super().__init__(message, where=where, fix=fix)


class InventoryWarning(SweepError, UserWarning):
    """The inventory reads, but something in it is likely a mistake (a host defined twice,
    differently)."""


class ExpectationsWarning(InventoryWarning):
    """An expectations file reads, but names a host or group that none of the audited hosts
    matches."""


class SSHConfigNote(SweepError, UserWarning):
    """An ssh_config keyword a run leaves unused, or hosts that go through OpenSSH's ssh: said once
    per run."""


class ReadBackWarning(SweepError, UserWarning):
    """A file of a run folder (a record, a sibling run's manifest) is left out: named, with why."""
