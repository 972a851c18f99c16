"""A record read back: bounded, parsed strictly unless this user's sweep listed its bytes
(records.sha256 and its HMACs, `read_digests`), checked against the schema, and any health.json of
schema 1.x named as the newest minor version names it (`normalize_health`)."""

from __future__ import annotations

import hashlib
import hmac
import warnings
from pathlib import Path
from typing import Any

from probe_agent import xid
from sweep.errors import ReadBackWarning, SweepError
from sweep.schema import record_problem
from sweep.schema_depth import record_fits
from sweep.strictjson import loads, loads_known
from sweep.trust import line_mac
from sweep.store.files import (
    DIGESTS,
    DIGESTS_MAX_BYTES,
    HOSTS,
    MACS,
    RECORD_MAX_BYTES,
    read_bounded,
    why_unreadable,
)


def read_json(path: Path, error: type[SweepError], fix: str, digest: str | None = None) -> Any:
    """The JSON document in the file `path`, read back as `read_record` reads it; a missing,
    unreadable (a link, a FIFO, a device, too large) or invalid file raises `error` with `fix`,
    naming the file."""
    try:
        return read_record(path, digest)
    except FileNotFoundError:
        raise error("no such file", where=str(path), fix=fix) from None
    except OSError as err:
        raise error(f"cannot be read ({why_unreadable(err)})", where=str(path), fix=fix) from None
    except ValueError as err:  # UnicodeDecodeError included
        raise error(f"is not valid JSON ({err})", where=str(path), fix=fix) from None


def read_record(path: Path, digest: str | None = None) -> Any:
    """A file of a run folder (or a health.json) as the readers get it: `read_bounded`, then parsed.

    `digest`: the SHA-256 this user's sweep listed for the file (`read_digests`: verified lines
    only); when the bytes have it, they are the record sweep validated on arrival, read with orjson
    alone. Any other file is parsed strictly (nesting bounded) and, when it is a host record,
    checked against `sweep.schema.RECORD` and the published health.json schema: a record that does
    not fit becomes its host's failed record (``bad_output``, the message naming the file and the
    fault), which every reader already handles; what is no record is returned as it is, for the
    caller to refuse."""
    blob = read_bounded(path, RECORD_MAX_BYTES)
    if digest is not None and hashlib.sha256(blob).hexdigest() == digest:
        return loads_known(blob).document
    loaded = loads(blob, fits=record_fits())  # valid and not too deep: one check (schema_depth)
    document = loaded.document
    if loaded.fitted:
        return document
    if isinstance(document, dict) and "record_version" in document:
        problem = record_problem(document, "record")
        if problem is not None and isinstance(document.get("host"), str):
            return _bad_record(path, document, problem, changed=digest is not None)
    return document


def bad_record_message(path: Path, problem: str, changed: bool) -> str:
    """Why a record is read as its host's bad_output: what it is, from what is known. `changed`:
    this user's sweep listed the file's digest (records.sha256) and the bytes differ, so it was
    changed after the sweep; else it says which schema it does not match and how (``contracts has 15
    items, at most 14``)."""
    if changed:
        return (
            f"{path}: not a host record sweep can read ({problem[:300]}); its bytes are not the "
            "ones this sweep wrote (records.sha256): the file was changed after the sweep: sweep "
            "the host again"
        )
    what = "the health schema" if problem.startswith("record.health") else "the host-record format"
    return (
        f"{path}: not a host record sweep can read: it does not match {what} this sweep reads "
        f"({problem[:300]}); it was written by another version of sweep or its agent, or by "
        "another program: sweep the host again with this sweep"
    )


def _bad_record(path: Path, record: dict, problem: str, changed: bool = False) -> dict:
    """The failed record read in place of a host record that does not fit the schema."""
    return {
        "record_version": record.get("record_version"),
        "host": record["host"],
        "status": "failed",
        "failure": {"class": "bad_output", "message": bad_record_message(path, problem, changed)},
        "attempts": None,
        "started_at": None,
        "ended_at": None,
        "duration_s": None,
        "health": None,
        **({"groups": record["groups"]} if isinstance(record.get("groups"), list) else {}),
    }


def left_out(path: Path, why: str, then: str) -> None:
    warnings.warn(ReadBackWarning(f"{path}: left out ({why}); {then}"), stacklevel=3)


def read_digests(run: Path) -> dict[str, str]:
    """file name in hosts/ -> the SHA-256 its record was written with, for the lines of the run's
    records.sha256 that this user's sweep wrote (each one's HMAC in records.mac verifies with this
    user's key, `sweep.trust`; the last line for a file wins); {} without a key, or when either file
    is absent, a link, not a regular file or too large. A line that does not verify is no digest:
    that record is read strictly and checked, as a file of a folder sweep did not write."""
    lines, macs = _lines(Path(run) / DIGESTS), _lines(Path(run) / MACS)
    out = {}
    for name, line in lines.items():
        mac = macs.get(name)
        if mac is not None and hmac.compare_digest(mac[:64], (line_mac(line) or "").encode()):
            out[name] = line[:64].decode("ascii", "replace")
    return out


def _lines(path: Path) -> dict[str, bytes]:
    """file name -> its last "<hex>  hosts/<name>" line in a list, {} when it cannot be read."""
    try:
        blob = read_bounded(path, DIGESTS_MAX_BYTES)
    except OSError:
        return {}
    out = {}
    prefix = f"  {HOSTS}/".encode()
    for line in blob.split(b"\n"):
        digest, sep, name = line.partition(prefix)
        if sep and len(digest) == 64 and b"/" not in name:
            out[name.decode("utf-8", "replace")] = line
    return out


def normalize_health(health: Any) -> Any:
    """A health.json of any schema 1.x as the newest minor version names it, in place (and
    returned): the one place that knows the older names. Schema 1.0 called each GPU's ECC mode after
    reset `ecc.pending`; 1.1 named it `ecc.pending_mode` (the agent writes both until schema 2).
    Before 1.5 an Xid group had no `type`, NVIDIA bucket or action: they are judged here from its
    code, by the catalogue this sweep carries, and its times are "not recorded" (null)."""
    for gpu in (health.get("gpus") if isinstance(health, dict) else None) or ():
        ecc = gpu.get("ecc") if isinstance(gpu, dict) else None
        if isinstance(ecc, dict) and "pending" in ecc and "pending_mode" not in ecc:
            ecc["pending_mode"] = ecc["pending"]
    log = health.get("kernel_log") if isinstance(health, dict) else None
    for group in (log.get("xid") if isinstance(log, dict) else None) or ():
        if isinstance(group, dict) and "action" not in group and isinstance(group.get("code"), int):
            # the agent's own judgment
            fields = xid.group_fields("xid", group["code"], str(group.get("last") or ""))
            group.update(
                type="xid",
                bucket=fields["bucket"],
                action=fields["action"],
                kind=fields["kind"],
                meaning=group.get("meaning") or fields["meaning"],
            )
            for key in ("first_s", "last_s", "first_at", "last_at"):
                group.setdefault(key, None)
    return health
