"""The run folder: one record per host, written the moment the host is done, and a manifest.

Layout (record version 1)::

    reports/20261129T181223Z-inventory/
        manifest.json      format, versions, inventory path + snapshot, options, state, hosts
        hosts/gpu01.json   {"record_version": 1, "host": "gpu01", "status": "ok",
                            "health": {...}, ...}
                           (`sweep run --wrap`: also "wrap": {status, why, figures, provenance})

Every file is written whole or not at all (a temporary file in the same folder, fsync, rename):
a controller killed with ``kill -9`` leaves at most a ``.tmp-*`` file, which `RunFolder.open`
removes. File names are made safe (`safe_name`); the real host name stays inside the record, and a
record is never written onto a file that holds another host's record.

One sweep at a time: `RunFolder.create` and `RunFolder.open` (``--resume``) hold an exclusive
``flock`` on ``.lock`` inside the folder until the sweep ends (the kernel drops it when the process
dies); a second sweep is refused with the holder's pid. Writes never follow a symbolic link: the
folder's parts (``hosts/``, ``report/``, every file written) are opened with ``O_NOFOLLOW``, and a
link planted there is refused (`refuse_links`) instead of written through.

``sweep run --resume RUN --retry-failed`` sets a failed record aside as
``hosts/<name>~attempt-N.json`` (`RunFolder.set_aside`) before the host is swept again; every reader
here skips those files (`is_attempt_file`): they are earlier attempts, not hosts.

Each record sweep writes is also listed, as it is written, in ``records.sha256`` (the format of
``sha256sum``, so ``sha256sum -c records.sha256`` checks a folder; the last line for a file wins),
and that line's HMAC with this user's key in ``records.mac`` (`sweep.trust`): a record was validated
strictly when it arrived, so a reader that finds the file's bytes unchanged under a line that
verifies reads it back with orjson's parse alone (`sweep.strictjson.loads_known`); any other file
(no line, another digest, a line that does not verify, a folder this user's sweep did not write) is
read strictly again and checked against the schema (`read_record`). Every file is read back through
`read_bounded`: no link, no FIFO or device, bounded in size (docs/security.md). The manifest is
signed as it is written.

This package is the one reader of run folders too: `load_run` (a whole run: run diffs, baselines,
audits, the export), `RunFolder.read_records` (resume), `list_records` (the files a report reads,
and the hosts a manifest lists), `manifest_groups` and `read_json`.

One module per part: files (names, safe file names, atomic writes, bounded reads), records (a record
read back, strictly or by its listed digest; old schema names), folder (RunFolder), reading
(list_records, load_run), earlier (the runs beside a run, for the previous-sweep comparison). Their
public names are all here: `from sweep.store import RunFolder`.
"""

from __future__ import annotations

from sweep.store.files import (
    DIGESTS,
    DIGESTS_MAX_BYTES,
    HOSTS,
    LOCK,
    MACS,
    MANIFEST,
    MANIFEST_MAX_BYTES,
    RECORD_KEYS,
    RECORD_MAX_BYTES,
    RECORD_VERSION,
    RUN_FORMAT,
    STATES,
    default_run_dir,
    is_attempt_file,
    iso,
    read_bounded,
    refuse_links,
    safe_name,
    utc_now,
    write_bytes_atomic,
    write_json_atomic,
)
from sweep.store.records import normalize_health, read_digests, read_json, read_record
from sweep.store.folder import RunFolder, new_manifest
from sweep.store.reading import Listing, Run, list_records, load_run, manifest_groups
from sweep.store.earlier import earlier_runs, previous_health

__all__ = [
    "DIGESTS",
    "DIGESTS_MAX_BYTES",
    "HOSTS",
    "LOCK",
    "Listing",
    "MACS",
    "MANIFEST",
    "MANIFEST_MAX_BYTES",
    "RECORD_KEYS",
    "RECORD_MAX_BYTES",
    "RECORD_VERSION",
    "RUN_FORMAT",
    "Run",
    "RunFolder",
    "STATES",
    "default_run_dir",
    "earlier_runs",
    "is_attempt_file",
    "iso",
    "list_records",
    "load_run",
    "manifest_groups",
    "new_manifest",
    "normalize_health",
    "previous_health",
    "read_bounded",
    "read_digests",
    "read_json",
    "read_record",
    "refuse_links",
    "safe_name",
    "utc_now",
    "write_bytes_atomic",
    "write_json_atomic",
]
