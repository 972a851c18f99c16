"""A run folder read: the files a report reads (`list_records`, with the hosts and groups the
manifest lists), and a whole run read (`load_run`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.errors import HealthFileError, RunFolderError
from sweep.inventory.formats import IMPLICIT_GROUPS
from sweep.text import host_key
from sweep.store.files import is_attempt_file
from sweep.store.folder import RunFolder
from sweep.store.records import read_digests


def manifest_groups(manifest: Any) -> dict[str, list[str]]:
    """host -> its inventory groups, from a manifest's inventory snapshot ({} without one)."""
    inv = manifest.get("inventory") if isinstance(manifest, dict) else None
    snap = inv.get("snapshot", inv) if isinstance(inv, dict) else None
    hosts = snap.get("hosts") if isinstance(snap, dict) else None
    out = {}
    for entry in hosts if isinstance(hosts, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            out[entry["name"]] = [g for g in entry.get("groups") or () if g not in IMPLICIT_GROUPS]
    return out


@dataclass(frozen=True)
class Listing:
    """The JSON files a path stands for and, for a run folder, the hosts its manifest lists and
    their groups."""

    manifest_path: Path
    files: list[Path] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    # file name in hosts/ -> the SHA-256 sweep wrote it with
    digests: dict[str, str] = field(default_factory=dict)
    # the engines the manifest names: the run's options.engine and each session's
    engines: tuple = ()


def list_records(path: Path) -> Listing:
    """What a reader of `path` reads: a file itself, a run folder's hosts/*.json, or a folder's
    *.json."""
    if path.is_file():  # a file the operator names: a link there is theirs, resolved once
        return Listing(Path(os.path.realpath(path)), [Path(os.path.realpath(path))])
    if not path.is_dir():
        raise HealthFileError(
            "no such file or folder",
            where=str(path),
            fix="pass a run folder, a host-record file or a health.json file",
        )
    folder = RunFolder(path)
    listing = Listing(path)
    if folder.manifest_path.is_file() or folder.hosts_dir.is_dir():
        listing = _listed(folder.manifest_path)
        if not folder.hosts_dir.is_dir():
            raise RunFolderError(
                "run folder without a hosts/ folder",
                where=str(path),
                fix="pass the folder a sweep run wrote",
            )
        path = folder.hosts_dir
    files = sorted(
        e.path
        for e in os.scandir(path)
        if e.name.endswith(".json")
        and not e.name.startswith(".")
        and not is_attempt_file(e.name)
        and not e.is_dir(follow_symlinks=False)
    )
    digests = read_digests(folder.path) if path == folder.hosts_dir else {}
    return Listing(
        listing.manifest_path,
        [Path(f) for f in files],
        listing.hosts,
        listing.groups,
        digests,
        listing.engines,
    )


def _listed(path: Path) -> Listing:
    """The hosts a run selected, and each host's groups (from the inventory snapshot); empty if
    absent."""
    if not os.path.lexists(path):
        return Listing(path)
    manifest = RunFolder(path.parent).read_manifest(fix="pass the folder a sweep run wrote")
    hosts = [h for h in manifest.get("hosts") or () if isinstance(h, str)]
    said = [
        manifest.get("options"),
        *(s.get("options_set") for s in manifest.get("sessions") or () if isinstance(s, dict)),
    ]
    engines = tuple(
        sorted(
            {o["engine"] for o in said if isinstance(o, dict) and isinstance(o.get("engine"), str)}
        )
    )
    return Listing(path, [], hosts, manifest_groups(manifest), engines=engines)


@dataclass(frozen=True)
class Run:
    """One run folder, read: host -> record (each with its inventory groups), and the manifest."""

    path: Path
    manifest: dict
    records: dict[str, dict]

    @property
    def listed(self) -> list[str]:
        """The hosts the run set out to sweep (the manifest's list, else the records')."""
        hosts = self.manifest.get("hosts")
        return list(hosts) if isinstance(hosts, list) else list(self.records)


def load_run(path: str | Path) -> Run:
    """Read a run folder without writing to it (records by host, in natural order); each record
    gains "groups" from the manifest if it has none. The reader of a whole run: sweep diff,
    baselines, audits, the export."""
    folder, manifest = RunFolder.existing(path)
    groups = manifest_groups(manifest)
    records = {}
    for name, rec in folder.read_records().items():
        if rec.get("groups") is None and name in groups:
            rec = dict(rec, groups=groups[name])
        records[name] = rec
    return Run(folder.path, manifest, dict(sorted(records.items(), key=lambda kv: host_key(kv[0]))))
