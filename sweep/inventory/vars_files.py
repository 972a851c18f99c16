"""``group_vars/`` and ``host_vars/`` folders: the vars files Ansible's host_group_vars plugin reads
for a group or a host (``NAME``, ``NAME.yml``, ``NAME.yaml``, ``NAME.json``, or the files of a
``NAME/`` folder, sorted, later ones winning), each value carried with its file:line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweep.errors import InventoryError
from sweep.inventory.files import read_text
from sweep.inventory.groups import InventoryLimits
from sweep.inventory.yaml_lines import yaml_load

YAML_SUFFIXES = (".yml", ".yaml", ".json")
_VAR_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")


class VarsFolder:
    """``group_vars/`` or ``host_vars/`` beside the inventory, listed once (not probed per host)."""

    def __init__(self, directory: Path, limits: InventoryLimits):
        self.directory, self.limits = directory, limits
        try:
            self.entries = frozenset(os.listdir(directory)) if directory.is_dir() else frozenset()
        except OSError:
            self.entries = frozenset()

    def vars(self, name: str) -> dict[str, tuple[Any, str]]:
        """Merged vars of ``NAME``, ``NAME.yml``, ``NAME.yaml`` or ``NAME.json`` (ansible's
        find_vars_files)."""
        if not self.entries:
            return {}
        files: list[Path] = []
        for candidate in (name, *(f"{name}{suffix}" for suffix in YAML_SUFFIXES)):
            if candidate in self.entries:
                path = self.directory / candidate
                files = _files_below(path) if path.is_dir() else [path]
                break
        merged: dict[str, tuple[Any, str]] = {}
        for file in files:
            data = yaml_load(read_text(file, self.limits.file_bytes), file, self.limits.yaml_values)
            if data is None:
                continue
            if not isinstance(data, dict):
                # the kind, never the content: the file may be a link to a secret (/etc/shadow)
                kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
                raise InventoryError(
                    f"variables file holds {kind}, not a mapping of names to values",
                    where=f"{file}:1",
                    fix="write one 'name: value' per line",
                )
            _check_names(data, file)
            merged.update(
                {str(key): (value, f"{file}:{data.key_lines[key]}") for key, value in data.items()}
            )
        return merged


def _check_names(data: Mapping, file: Path) -> None:
    """Every key of a vars file is a name (letters, digits, '_', '-', '.'; Ansible templates use
    only the first three): a file that is not a vars file (a link to /etc/shadow parses as a mapping
    of its lines) is refused, and its content is not echoed."""
    for key in data:
        if not _VAR_NAME.match(str(key)):
            raise InventoryError(
                "holds a key that is not a variable name (letters, digits, '_', '-', '.'): "
                "this is not a variables file",
                where=f"{file}:{data.key_lines[key]}",
                fix="check what the file (or the link) holds",
            )


def _files_below(directory: Path, above: frozenset[str] = frozenset()) -> list[Path]:
    """The vars files of a ``NAME/`` folder, sorted, its subfolders' in place; a link
    back up is refused."""
    real = os.path.realpath(directory)
    if real in above:
        raise InventoryError(
            f"is a link back to {real}, a folder it is inside (a loop)",
            where=str(directory),
            fix="remove the link",
        )
    found: list[Path] = []
    for entry in sorted(os.listdir(directory)):
        child, suffix = directory / entry, os.path.splitext(entry)[1]
        if entry.startswith(".") or entry.endswith("~"):
            continue
        if child.is_dir() and not suffix:
            found.extend(_files_below(child, above | {real}))
        # a FIFO or a device too: read_text names and refuses it
        elif not suffix or suffix in YAML_SUFFIXES:
            found.append(child)
    return found
