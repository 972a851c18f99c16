"""Options declared once: those several commands share, and every option of `sweep run` with the run
options it sets.

`RUN` is the one declaration of `sweep run`'s options: each entry is the typer declaration the
command's signature takes as its default, and `sets`, the options of `sweep.collect.resume.OPTIONS`
it sets (what a run's manifest keeps and ``--resume`` reuses unless given again; () for those that
shape no kept option: where the run goes, what it lists, how it resumes). A default the run also has
is read from `resume.OPTIONS` (``--forks`` is 32 there, and only there).
tests/unit/test_cli_options.py fails when the signature of `sweep run` and `RUN` differ, or when an
option sets what resume does not keep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from sweep.collect.resume import OPTIONS
from sweep.errors import ConfigError

REFERENCE = typer.Option(
    None, "--reference", metavar="HOST|GROUP", help="host or group the others are compared with"
)
EXPECT = typer.Option(
    None,
    "--expect",
    metavar="FILE",
    help="expectations file: hosts off it set exit 5 (docs/expectations.md)",
)
BASELINE = typer.Option(
    None,
    "--baseline",
    metavar="DIR",
    help="baseline folder (sweep baseline set): drift from it sets exit 5",
)
DRAIN_CONFIG = typer.Option(
    False,
    "--drain-config",
    help="drain.sh drains the hosts held out for their configuration "
    "too (a power cap, ECC mode, MIG layout, clocks: a policy, not a fault; default: named with "
    "their fix, not drained)",
)
HOSTS = typer.Option([], "--host", metavar="HOST", help="only this host (repeatable)")
BASELINE_DIR = typer.Option(Path("baseline"), "--baseline", metavar="DIR", help="baseline folder")


@dataclass(frozen=True)
class Bounds:
    """What a numeric option means: from `low` (`above`: more than `low`, else `low` itself
    included) to `high`, finite; `unit` names what it counts."""

    low: float
    high: float
    above: bool = False
    unit: str = ""

    def problem(self, value: float) -> str | None:
        """Why `value` is outside these bounds, or None."""
        if (
            not math.isfinite(value)
            or not self.low <= value <= self.high
            or (self.above and value == self.low)
        ):
            least = "more than" if self.above else "at least"
            return (
                f"it must be {least} {self.low:g} and at most "
                f"{self.high:g}{' ' + self.unit if self.unit else ''}"
            )
        return None


SECONDS = Bounds(0, 86_400, above=True, unit="seconds")  # a deadline or a timeout: up to a day
LOAD_SECONDS = Bounds(0, 3_600, unit="seconds (0: no load)")
SAMPLE_SECONDS = Bounds(0, 60, above=True, unit="seconds")
MHZ = Bounds(0, 100_000, above=True, unit="MHz")
STALE_HOURS = Bounds(0, 24 * 365, above=True, unit="hours")


def number(default: Any, *decls: str, bounds: Bounds, **kwargs: Any):
    """A numeric option bounded to its meaning: a value outside `bounds` (0 where it means nothing,
    a negative one, one past any use, NaN, infinity) is refused naming the option (exit 2), before
    any work. tests/unit/test_cli_numbers.py walks every numeric option of every command with 0, -1
    and a huge value."""
    name = decls[0]

    def check(value):
        why = None if value is None else bounds.problem(value)
        if why is not None:
            raise ConfigError(
                f"{name} is {value}; {why}", fix=f"give {name} a number in that range"
            )
        return value

    return typer.Option(default, *decls, callback=check, **kwargs)


def json_flag(what: str):
    """`--json`: print `what` (the rows, the changes, ...) as JSON instead of lines for a person."""
    return typer.Option(False, "--json", help=f"print {what} as JSON")


def old_spelling(spelling: str):
    """A hidden option under an older name (`--output`, `--dir`): it still works, help shows the new
    one."""
    return typer.Option(None, spelling, hidden=True)


@dataclass(frozen=True)
class RunOption:
    """One option of `sweep run`: its typer declaration and the `resume.OPTIONS` it sets."""

    param: Any
    sets: tuple[str, ...]


def run_default(name: str) -> Any:
    """The run's own default of a kept option (`resume.OPTIONS`), for the flag that sets it."""
    return OPTIONS[name].default


def _kept_option(name: str, *decls: str, bounds: Bounds | None = None, **kwargs: Any) -> RunOption:
    """A flag that sets the kept option `name` alone, with the run's default (a number: within
    `bounds`)."""
    return _run_option((name,), run_default(name), *decls, bounds=bounds, **kwargs)


def _run_option(
    sets: tuple[str, ...], default: Any, *decls: str, bounds: Bounds | None = None, **kwargs: Any
) -> RunOption:
    """A flag of `sweep run` that sets the kept options `sets` (none: it sets nothing the run
    keeps)."""
    if bounds is not None:
        return RunOption(number(default, *decls, bounds=bounds, **kwargs), sets)
    return RunOption(typer.Option(default, *decls, **kwargs), sets)


AGENT, WRAP, ENGINE, VARS = ("agent_args",), ("wrap",), ("engine",), ("inventory_vars",)
RUN: dict[str, RunOption] = {
    "inventory": RunOption(
        typer.Argument(
            None, metavar="INVENTORY", help="Ansible inventory: a YAML or INI file, or a folder"
        ),
        (),
    ),
    "command": RunOption(
        typer.Argument(
            None,
            metavar="[-- COMMAND [ARGS...]]",
            help="with --wrap: the benchmark to run on every host, after --",
        ),
        WRAP,
    ),
    "limit": _kept_option(
        "limit",
        "--limit",
        "-l",
        metavar="PATTERN",
        help="Ansible host pattern: group, glob, !exclude, &intersect",
    ),
    "inventory_option": _run_option(
        (),
        [],
        "--inventory",
        "-i",
        metavar="INVENTORY",
        help="the inventory as ansible takes it: a file, a folder or 'host1,host2,'; repeatable, "
        "the sources "
        "merged in order as ansible merges them",
    ),
    "out": _run_option(
        (),
        None,
        "--out",
        "-o",
        metavar="DIR",
        help="run folder (default: reports/<UTC time>-<inventory name> under the "
        "current directory; its absolute path is printed at the end)",
    ),
    "resume": _run_option(
        (),
        None,
        "--resume",
        metavar="RUN_DIR",
        help="finish an earlier run folder: sweep hosts without a record, with the run's own "
        "options (an option "
        "given again wins, and the manifest records it)",
    ),
    "retry_failed": _run_option(
        (),
        None,
        "--retry-failed",
        metavar="[CLASS...]",
        help="with --resume: sweep again the hosts whose record failed with these classes (none "
        "named: the "
        "transient ones, dns refused timeout host_key_unknown), and with busy the hosts "
        "found running a Slurm job; "
        "the old record is kept as hosts/HOST~attempt-N.json",
    ),
    "trust_manifest": _run_option(
        (),
        False,
        "--trust-manifest",
        help="with --resume of a folder this user's sweep "
        "did not write: take the options of its manifest that name programs, commands, files "
        "or ssh options, and its "
        "inventory, as they are (each one is named first; docs/security.md)",
    ),
    "forks": _kept_option(
        "forks",
        "--forks",
        "-f",
        metavar="N",
        bounds=Bounds(1, 4_096, unit="hosts at once"),
        help="hosts probed at once",
    ),
    "workers": _kept_option(
        "workers",
        "--workers",
        metavar="N",
        bounds=Bounds(0, 1_024, unit="processes"),
        help="processes that share the hosts out, each with its part of --forks (0: as many as the "
        "CPUs this process may use allow, less one; one process on 2 CPUs or fewer); ssh engine",
    ),
    "accept_new_host_keys": _kept_option(
        "accept_new_host_keys",
        "--accept-new-host-keys",
        help="trust unknown host keys and remember them (changed keys are always refused)",
    ),
    "known_hosts": _run_option(
        ("known_hosts",),
        None,
        "--known-hosts",
        metavar="FILE",
        help="extra known_hosts file, read first",
    ),
    "connect_timeout": _kept_option(
        "connect_timeout",
        "--connect-timeout",
        metavar="SECONDS",
        bounds=SECONDS,
        help="seconds (default 10)",
    ),
    "host_deadline": _kept_option(
        "host_deadline",
        "--host-deadline",
        metavar="SECONDS",
        bounds=SECONDS,
        help="seconds a host may take in all (default 120)",
    ),
    "deep": _run_option(AGENT, False, "--deep", help="the agent imports torch and asks CUDA"),
    "load": _run_option(
        AGENT,
        0.0,
        "--load",
        metavar="SECONDS",
        bounds=LOAD_SECONDS,
        help="each host runs a GPU load for SECONDS and "
        "samples clocks and power (refused on GPUs in use); what sweep history measures drift on",
    ),
    # sets nothing kept of its own: agent_args are made with --load, so given alone on --resume it
    # changes nothing
    "load_engine": _run_option(
        (),
        "auto",
        "--load-engine",
        metavar="auto|torch|ptx",
        help="what --load runs on each "
        "host: torch (a bf16 matmul), ptx (an FMA loop through the CUDA driver API, nothing "
        "installed), auto (torch "
        "where the host's python has a CUDA torch, else ptx)",
    ),
    "speed": _run_option(
        AGENT,
        False,
        "--speed",
        help="each host measures what its selected GPUs deliver (HBM, PCIe, "
        "peer copies, FP32, bf16 GEMM, all-reduce; at most 15 s on one GPU, 20 s on eight; "
        "refused on GPUs in use)",
    ),
    "reference": RunOption(REFERENCE, ("reference",)),
    "expect": RunOption(EXPECT, ("expect",)),
    "baseline": RunOption(BASELINE, ("baseline",)),
    "no_report": _kept_option("no_report", "--no-report", help="only collect the records"),
    "engine": _kept_option(
        "engine",
        "--engine",
        metavar="ENGINE",
        help="who runs the agent: ssh (sweep's own), "
        "ansible (ansible -m script), slurm (srun, one task per node); docs/engines.md",
    ),
    "partition": _run_option(
        ENGINE,
        None,
        "--partition",
        metavar="PARTITION",
        help="slurm engine, no inventory: this partition's nodes",
    ),
    "nodelist": _run_option(
        ENGINE,
        None,
        "--nodelist",
        metavar="NODES",
        help="slurm engine, no inventory: these nodes (gpu[01-64])",
    ),
    "transport": _kept_option(
        "transport",
        "--transport",
        metavar="auto|paramiko|openssh",
        help="ssh engine: auto (default: sweep's own, and the system ssh for each "
        "host whose ssh_config asks what only ssh does, named on stderr), paramiko "
        "(sweep's own only: such hosts refused) or openssh (the system ssh in "
        "BatchMode for every host); docs/ssh.md",
    ),
    "shard": _run_option(
        ("shard",),
        None,
        "--shard",
        metavar="I/N",
        help="sweep only the I-th of N shares of the "
        "hosts (by a stable hash of the name; report the N run folders together)",
    ),
    "shard_by": _run_option(
        ("shard",),
        "hash",
        "--shard-by",
        metavar="hash|index",
        help="hash (stable per host) or index (every N-th host)",
    ),
    "max_yaml_values": _run_option(
        ("inventory_limits",),
        run_default("inventory_limits").yaml_values,
        "--max-yaml-values",
        metavar="N",
        bounds=Bounds(1, 10**9, unit="values"),
        help="most values YAML aliases may add to an inventory file once expanded (alias bombs)",
    ),
    "max_range_hosts": _run_option(
        ("inventory_limits",),
        run_default("inventory_limits").range_hosts,
        "--max-range-hosts",
        metavar="N",
        bounds=Bounds(1, 10**7, unit="hosts"),
        help="most hosts one host range (gpu[0001:9999]) may name",
    ),
    "wrap": _run_option(
        WRAP,
        False,
        "--wrap",
        help="run the COMMAND after -- on every host inside the agent's "
        "envelope (probe before, samples during, probe after); the report compares its "
        "figures within each comparability class (docs/fleet-benchmark.md)",
    ),
    "metric": _run_option(
        WRAP,
        [],
        "--metric",
        metavar="NAME=REGEX",
        help="--wrap: the figure in the command's output (first group the number, a "
        'second its unit; repeatable); a JSON line {"metric": NAME, "value": X} '
        "counts too",
    ),
    "force": _run_option(
        WRAP + AGENT,
        False,
        "--force",
        help="--wrap: run on hosts with a broken contract or another "
        "process on the GPUs too; --speed: measure beside other processes (recorded in each "
        "record)",
    ),
    "interval": _run_option(
        WRAP,
        0.2,
        "--interval",
        metavar="S",
        bounds=SAMPLE_SECONDS,
        help="--wrap: seconds between GPU samples",
    ),
    "user": _run_option(
        VARS,
        None,
        "--user",
        "-u",
        metavar="USER",
        help="log in as USER where the inventory "
        "sets no ansible_user (as ansible -u: the inventory wins over it)",
    ),
    "private_key": _run_option(
        VARS,
        None,
        "--private-key",
        "--key-file",
        metavar="FILE",
        help="the key file where "
        "the inventory sets no ansible_ssh_private_key_file (as ansible --private-key: the "
        "inventory wins)",
    ),
    "extra_vars": _run_option(
        VARS,
        [],
        "--extra-vars",
        "-e",
        metavar="VARS",
        help="variables over every "
        "inventory variable, as ansible -e: key=value ..., a JSON or YAML mapping, @FILE "
        "(repeatable; the last wins)",
    ),
    "become": _run_option(
        VARS,
        False,
        "--become",
        "-b",
        help="run the agent through sudo -n (never a password "
        "prompt) where the inventory sets no ansible_become, as ansible --become; "
        "ansible_become_user, else root",
    ),
    "become_user": _run_option(
        VARS,
        None,
        "--become-user",
        metavar="USER",
        help="with --become or ansible_become: "
        "the user to become where the inventory sets no ansible_become_user (default root)",
    ),
    "nodes": _run_option(
        (),
        [],
        "--nodes",
        "-w",
        metavar="NODESET",
        help="sweep these hosts, no inventory file: "
        "a folded node set as clush -w takes it (gpu[01-08,10]; repeatable)",
    ),
    "list_hosts": _run_option(
        (),
        False,
        "--list-hosts",
        help="print the hosts this run would contact (after "
        "--limit, --shard, --resume), as ansible --list-hosts does, in its order; contact none",
    ),
    "as_json": _run_option(
        (),
        False,
        "--json",
        help="with --list-hosts: print per host, as JSON, the connection "
        "sweep resolved (address, port, user, key file, proxy, python, become) and where "
        "each value was set",
    ),
}


def given_sets(is_given) -> set[str]:
    """The kept options a command line sets: those of every `RUN` option for which
    `is_given(name)`."""
    return {option for name, declared in RUN.items() if is_given(name) for option in declared.sets}
