"""How a run was started, kept in its manifest so that ``sweep run --resume`` finishes it the same
way.

Every option that shapes a run is one row of `OPTIONS`: its default, how the manifest keeps it
(JSON, paths absolute) and how a resumed session reads it back. A new run keeps all of them in the
manifest's ``options``; ``--resume`` reuses them, and an option given again on the command line
wins: ``options`` always says what the run uses now, and each session's ``options_set`` says which
options that session set (the first: those given on its command line; a resumed one: those given
again). The SSH key's passphrase is never kept.

Options read back from a manifest are data, not instructions. Those that name a program, a command,
a file sweep reads or writes, an ssh option, the host-key policy or the agent's arguments are marked
`gated` in `OPTIONS` (and so is the inventory the manifest names): from a manifest this user's sweep
did not sign (`sweep.trust`: a colleague's folder, a shared scratch folder, one edited by hand) they
are taken only when given again on the command line, or with ``--trust-manifest``, which names each
one it takes; otherwise the resume is refused before anything is read or run, listing them
(`foreign`). `-e` values are kept only for the variables sweep reads (`KEPT_VARS`); other names keep
no value.

``--retry-failed [CLASS...]`` sets aside the failed records of the classes named (none named: the
transient classes, `sweep.failures.TRANSIENT_CLASSES`) as ``hosts/<name>~attempt-N.json`` before the
hosts are swept again: no record is ever lost, and the readers of a run folder skip these files
(`sweep.store.is_attempt_file`). ``--retry-failed busy`` probes again the hosts whose record found
them busy (every process on their GPUs a running Slurm job's): not a failure, but a host not yet
judged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping

import json
import re
import warnings

from sweep.failures import FAILURE_CLASSES, TRANSIENT_CLASSES
from sweep.errors import ConfigError, ReadBackWarning
from sweep.text import visible
from sweep.inventory.command_line import VarLayers, is_secret, without_secrets
from sweep.inventory.formats import InventoryLimits


def _path(value: Any) -> str | None:
    """A path as the manifest keeps it: absolute (a ``~`` path stays home-relative, as it was
    meant)."""
    if value is None:
        return None
    text = os.fspath(value)
    return text if text.startswith("~") else os.path.abspath(text)


def _paths(value: Any) -> list[str]:
    if value is None:
        return []
    return [_path(value)] if isinstance(value, (str, os.PathLike)) else [_path(p) for p in value]


def _engine(value: Any) -> str:
    return value if isinstance(value, str) else value.name


def _engine_settings(value: Any) -> dict:
    """What an engine object was made with beyond its name (slurm: --partition, --nodelist)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return {}
    return {
        key: getattr(value, key) for key in ("partition", "nodelist") if getattr(value, key, None)
    }


def _shard(value: Any) -> dict | None:
    if value is None or isinstance(value, Mapping):
        return value
    index, count, by = value
    return {"index": index, "count": count, "by": by}


def _limits(value: Any) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    return {"yaml_values": value.yaml_values, "range_hosts": value.range_hosts}


# the -e variables whose values the manifest keeps: those sweep itself reads (connection variables
# and sweep_* settings), never a password; every other -e name is kept without its value
KEPT_VARS = re.compile(
    r"\A(?:ansible_(?:ssh_)?(?:host|port|user|private_key_file|common_args|extra_args)|"
    r"ansible_python_interpreter|ansible_become(?:_user|_method)?|sweep_\w+)\Z"
)
DROPPED = "dropped"  # the manifest's inventory_vars key for the -e names whose values were not kept


def _layers(value: Any) -> dict:
    """The command line's variables as the manifest keeps them: the values of those sweep reads
    (`KEPT_VARS`), secrets left out at any depth (`without_secrets`), and the names of the others
    (`DROPPED`)."""
    raw = dict(value) if isinstance(value, Mapping) else {"over": value.over}
    names = [*(raw.get("over") or {}), *raw.get(DROPPED, ())]
    kept = without_secrets(dict(value)) if isinstance(value, Mapping) else value.to_dict()
    over = kept.get("over") or {}
    dropped = sorted({k for k in names if not KEPT_VARS.match(k) or is_secret(k)})
    kept["over"] = {k: v for k, v in over.items() if KEPT_VARS.match(k)}
    return {**kept, DROPPED: dropped} if dropped else kept


def _wrap(value: Any) -> dict | None:
    return value if value is None or isinstance(value, Mapping) else value.to_dict()


def _same(value: Any) -> Any:
    return value


def _listed(value: Any) -> list:
    return list(value or ())


@dataclass(frozen=True)
class Option:
    """One option that shapes a run: its default, how the manifest keeps it (`kept`) and reads it
    back (`live`)."""

    default: Any
    kept: Callable[[Any], Any] = _same
    live: Callable[[Any], Any] = _same
    # names a program, command, file, ssh option, host-key policy or agent arguments
    gated: bool = False


def _live_shard(kept: dict | None) -> tuple[int, int, str] | None:
    return (
        None if kept is None else (int(kept["index"]), int(kept["count"]), kept.get("by", "hash"))
    )


def _live_wrap(kept: dict | None):
    from sweep.collect.wrap import WrapSpec

    return None if kept is None else WrapSpec.from_dict(kept)


# run_sweep's argument -> the option; `engine_settings` rides with `engine`
OPTIONS: dict[str, Option] = {
    "limit": Option(None),
    "forks": Option(32),
    "workers": Option(0),  # 0: as many as the CPUs allow (sweep.collect.workers.auto_workers)
    "accept_new_host_keys": Option(False, gated=True),
    "known_hosts": Option([], _paths, _listed, gated=True),
    "ssh_config": Option("~/.ssh/config", _path, gated=True),
    "allow_agent": Option(True),
    "look_for_keys": Option(True),
    "connect_timeout": Option(None),
    "host_deadline": Option(None),
    "retries": Option(None),
    "agent_args": Option([], _listed, _listed, gated=True),
    "loader": Option("auto", gated=True),
    "engine": Option("ssh", _engine, gated=True),
    "engine_settings": Option({}, _engine_settings, dict, gated=True),
    "transport": Option(None, gated=True),
    "shard": Option(None, _shard, _live_shard),
    "inventory_limits": Option(InventoryLimits(), _limits, lambda kept: InventoryLimits(**kept)),
    # -u, --private-key, --become, --become-user, -e (secrets left out: give -e again for them)
    "inventory_vars": Option(VarLayers(), _layers, VarLayers.from_dict, gated=True),
    "wrap": Option(None, _wrap, _live_wrap, gated=True),
    # the report's options (the CLI builds the report after the sweep)
    "reference": Option(None),
    "expect": Option(None, _path, gated=True),
    "baseline": Option(None, _path, gated=True),
    "no_report": Option(False),
}
_TOGETHER = {"engine": ("engine_settings",)}


@dataclass(frozen=True)
class Resolved:
    """A session's options: `live` (what run_sweep uses), `kept` (the manifest's ``options``),
    `set_now`."""

    live: dict[str, Any]
    kept: dict[str, Any]
    set_now: dict[str, Any]


def resolve(
    asked: Mapping[str, Any], given: Collection[str] | None, stored: Mapping[str, Any] | None
) -> Resolved:
    """This session's options from those `asked` (every OPTIONS name), the names `given` on the
    command line (None: those that differ from the defaults) and the manifest's `stored` options
    (None: a new run)."""
    now = {name: option.kept(asked[name]) for name, option in OPTIONS.items()}
    defaults = {name: option.kept(option.default) for name, option in OPTIONS.items()}
    names = {name for name in now if now[name] != defaults[name]} if given is None else set(given)
    names |= {other for name in list(names) for other in _TOGETHER.get(name, ())}
    set_now = {name: now[name] for name in OPTIONS if name in names}
    if stored is None:
        return Resolved(dict(asked), now, set_now)
    kept = {**defaults, **{k: v for k, v in stored.items() if k in OPTIONS}, **set_now}
    live = {
        name: asked[name] if name in set_now else option.live(kept[name])
        for name, option in OPTIONS.items()
    }
    return Resolved(live, kept, set_now)


# values as harmless as the default (the run's own transport, resolved)
_PLAIN = {"transport": ("auto", "paramiko")}


def foreign(
    stored: Mapping[str, Any], inventory: str | None, given: Collection[str]
) -> dict[str, Any]:
    """What a resume would take from a manifest this user's sweep did not sign: each gated option
    (and the `inventory` path) it sets to other than its default, and the command line does not give
    again."""
    out = {}
    for name, option in OPTIONS.items():
        if option.gated and name in stored and name not in given:
            value = stored[name]
            if value != option.kept(option.default) and value not in _PLAIN.get(name, ()):
                out[name] = value
    if inventory is not None and "inventory" not in given:
        out["inventory"] = inventory
    return out


class ManifestNotTrusted(ConfigError):
    """A resume would take commands, programs or files from a manifest this user's sweep did not
    sign."""


# characters of a value --trust-manifest may take: one a person can read whole, every character
SHOWN_MAX = 2000


def check_foreign(taken: Mapping[str, Any], manifest: str, trust: bool) -> None:
    """Refuse (ManifestNotTrusted) a resume that would take `taken` from a foreign manifest, or
    (`trust`, ``--trust-manifest``) say each one it takes, whole, on a line of its own, before
    anything is read or run.

    A value is never shortened: what is taken is what was shown (a 250-character ssh option list
    ending in a ProxyCommand is shown to its last character). A value longer than `SHOWN_MAX`
    characters cannot be read whole on a terminal, so it is refused even with ``--trust-manifest``:
    give it again."""
    if not taken:
        return
    shown = {name: _shown(value) for name, value in taken.items()}
    too_long = [name for name, text in shown.items() if len(text) > SHOWN_MAX]
    if trust and not too_long:
        for name, text in shown.items():
            warnings.warn(
                ReadBackWarning(
                    f"{manifest}: --trust-manifest takes from a manifest this user's sweep "
                    f"did not sign: {name} = {text}"
                ),
                stacklevel=2,
            )
        return
    listed = "; ".join(
        f"{name} = {text}"
        if name not in too_long
        else f"{name} = a value of {len(text)} characters, too long to show whole"
        for name, text in shown.items()
    )
    if too_long:
        raise ManifestNotTrusted(
            "was not written by this user's sweep, and a resume would take from it "
            f"{', '.join(too_long)}: longer than the {SHOWN_MAX} characters --trust-manifest "
            f"shows whole, so not taken even with --trust-manifest; all it would take: {listed}",
            where=manifest,
            fix="give them again on the command line (INVENTORY, --engine, --known-hosts, -e, "
            "--wrap ...); sweep never takes a value it did not show (docs/security.md)",
        )
    raise ManifestNotTrusted(
        "was not written by this user's sweep (no signature of this user's key, sweep.trust), "
        "and a resume would take from it what names programs, commands, files or ssh options: "
        f"{listed}",
        where=manifest,
        fix="give them again on the command line (INVENTORY, --engine, --known-hosts, -e, --wrap "
        "...), or pass --trust-manifest to take them as listed (docs/security.md)",
    )


def _shown(value: Any) -> str:
    """`value` whole as JSON, every control, bidi or invisible character written as its escape."""
    return visible(json.dumps(value, ensure_ascii=False, default=str), keep="")


def dropped_vars(stored: Mapping[str, Any], given: Collection[str]) -> None:
    """Say which -e names of the run kept no value in the manifest (a resume without -e goes on
    without them)."""
    names = (
        (stored.get("inventory_vars") or {}).get(DROPPED)
        if isinstance(stored.get("inventory_vars"), dict)
        else None
    )
    if names and "inventory_vars" not in given:
        warnings.warn(
            ReadBackWarning(
                f"-e {', '.join(map(str, names))}: the manifest keeps no value for these (only the "
                "variables sweep reads keep theirs); give -e again if the run needs them"
            ),
            stacklevel=2,
        )


BUSY = "busy"  # --retry-failed busy: the hosts found running a job (a record, not a failure)


def retry_classes(named: Collection[str] | None) -> tuple[str, ...] | None:
    """The failure classes ``--retry-failed`` retries: those named, or (none named) the transient
    ones; ``busy`` names the hosts found running a job."""
    if named is None:
        return None
    unknown = [name for name in named if name not in FAILURE_CLASSES and name != BUSY]
    if unknown:
        raise ConfigError(
            f"--retry-failed {unknown[0]!r} is not a failure class",
            where="--retry-failed",
            fix=f"name one of {', '.join(FAILURE_CLASSES)} or {BUSY}, or none for the transient "
            f"ones ({', '.join(TRANSIENT_CLASSES)})",
        )
    return tuple(named) or TRANSIENT_CLASSES


def to_retry(
    records: Mapping[str, dict], classes: Collection[str], listed: Collection[str]
) -> list[str]:
    """The hosts of the run whose record failed with one of `classes` (or, with ``busy``, found them
    running a job), in the run's order."""
    return [
        name
        for name in listed
        if (
            (records.get(name) or {}).get("status") == "failed"
            and ((records[name].get("failure") or {}).get("class")) in classes
        )
        or (BUSY in classes and is_busy(records.get(name)))
    ]


def is_busy(record: Any) -> bool:
    """Whether a host record found every process on the GPUs a running Slurm job's (health.json
    1.7)."""
    health = (
        record.get("health") if isinstance(record, dict) and record.get("status") == "ok" else None
    )
    contracts = health.get("contracts") if isinstance(health, dict) else None
    judged = next(
        (c for c in contracts or () if isinstance(c, dict) and c.get("name") == "processes"), None
    )
    listed = (
        ((judged or {}).get("evidence") or {}).get("processes")
        if (judged or {}).get("status") == "warning"
        else None
    )
    return (
        bool(listed)
        and isinstance(listed, list)
        and all(isinstance(p, dict) and p.get("job") for p in listed)
    )


def engine_of(name: str, settings: Mapping[str, Any]):
    """The engine a manifest names: its name, or (with settings, as slurm's --partition) an Engine
    made with them."""
    from sweep.collect.engines import create_engine

    # a name alone: run_sweep makes the engine
    return create_engine(name, **settings) if settings else name
