"""The Prometheus text exposition format (0.0.4), as node_exporter's textfile collector reads it,
written whole or not at all.

`Metrics` collects gauges (name, help, labels -> value); `text()` renders them with HELP and TYPE
lines, label values escaped (backslash, double quote, newline), families and series sorted.
`write_output(text, path)` writes a temporary file in the target folder and renames it over the
target, so node_exporter never reads half a file (its docs ask for exactly this).
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from sweep.errors import ConfigError, RunFolderError

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


class Metrics:
    """Gauge families: `add(name, value, **labels)` after `family(name, help)`; None
    values are skipped."""

    def __init__(self):
        self._help: dict[str, str] = {}
        self._series: dict[str, dict[tuple, str]] = {}

    def family(self, name: str, help_text: str) -> None:
        if not _NAME.match(name):
            raise ValueError(f"bad metric name {name!r}")
        self._help[name] = help_text
        self._series.setdefault(name, {})

    def add(self, name: str, value, **labels) -> None:
        if value is None:
            return
        for label in labels:
            if not _LABEL.match(label) or label.startswith("__"):
                raise ValueError(f"bad label name {label!r}")
        key = tuple(sorted((k, str(v)) for k, v in labels.items()))
        self._series[name][key] = _number(value)

    def text(self) -> str:
        out = []
        for name in sorted(self._series):
            series = self._series[name]
            if not series:
                continue
            out.append(
                f"# HELP {name} "
                f"{self._help[name].replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}"
            )
            out.append(f"# TYPE {name} gauge")
            for key in sorted(series):
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in key)
                out.append(
                    f"{name}{{{labels}}} {series[key]}" if labels else f"{name} {series[key]}"
                )
        return "\n".join(out) + "\n"


def write_output(text: str, path: str | Path | None) -> None:
    """`text` to stdout (path None or "-"), or into `path` whole (sweep.store's one writer: a
    temporary file beside it, fsync, rename; never through a link)."""
    if path is None or str(path) == "-":
        sys.stdout.write(text)
        return
    from sweep.folders import SHARED, make_dirs
    from sweep.store import write_bytes_atomic

    try:
        make_dirs(Path(path).parent, SHARED)
        write_bytes_atomic(Path(path), text.encode("utf-8"))
    except OSError as err:
        raise ConfigError(
            f"cannot write {Path(path).name} ({err.strerror or err})",
            where=str(Path(path).parent),
            fix="make the folder writable (node_exporter's textfile directory), or choose "
            "another with -o",
        ) from None
    except RunFolderError as err:
        raise ConfigError(
            err.message,
            where=err.where,
            fix="make the folder writable (node_exporter's textfile directory), or choose "
            "another with -o",
        ) from None
