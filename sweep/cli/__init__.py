"""sweep's command line: parses, hands over, prints. The one place where errors become exit codes.

Exit codes (all commands): 0 success; 1 hosts unreachable or failed (run), not judged (audit); 2 bad input (a message
names the file, host or option and the fix); 3 hosts not comparable (report); 4 a broken contract
(probe, report); 5 off expectations or a baseline; 6 a wrapped benchmark failed on a host, 7 it was
refused on a host (run --wrap; docs/fleet-benchmark.md); 130 interrupted. `sweep report --help` lists the report's precedence.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from sweep import __version__, exitcodes
from sweep.cli import paths
from sweep.cli.history import keep_history, register as register_history
from sweep.errors import SweepError
from sweep.text import json_text, noun, plural, visible

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Is this GPU fleet the fleet you think it is? Probe hosts, sweep a fleet, compare it.")
PIPE_WIDTH = 1_000_000  # a pipe or a file has no width: a line is as long as its text


class Stream(Console):
    """A console that wraps and cuts only on a terminal: piped or redirected output keeps every
    line and value whole (`sweep baseline show | grep 580.` sees the whole driver version)."""

    @property
    def size(self) -> ConsoleDimensions:
        return super().size if self.is_terminal else ConsoleDimensions(PIPE_WIDTH, 25)

    @size.setter
    def size(self, new: tuple) -> None:
        Console.size.fset(self, new)


# Results on stdout (`results`), progress and diagnostics on stderr (`console`): README "Output streams"
results = Stream(highlight=False, emoji=False)  # ":end:" in host text stays text
console = Stream(stderr=True, highlight=False, emoji=False)


def safe(text) -> str:
    """Host-supplied text for the terminal: control characters shown as escapes, rich markup escaped."""
    return escape(visible(text))


def _version(value: bool) -> None:
    if value:
        results.print(f"sweep {__version__}", soft_wrap=True)
        raise typer.Exit(exitcodes.OK)


@app.callback()
def _top(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                      help="print sweep's version and exit")):
    """Is this GPU fleet the fleet you think it is? Probe hosts, sweep a fleet, compare it."""


def _say(kind: str, text) -> None:
    """One line on stderr, whatever its length: `sweep: error: ...` / `sweep: warning: ...`."""
    console.print(f"sweep: {kind}: {safe(' '.join(str(text).splitlines()))}", soft_wrap=True)


@app.command()
def probe(
    out: Path = typer.Option(Path("results"), "--out", "-o", metavar="DIR",
                             help="folder for health.json and health-report.md"),
    deep: bool = typer.Option(False, "--deep", help="import torch and ask CUDA (seconds)"),
    interpreter: List[str] = typer.Option([], "--interpreter", metavar="PYTHON",
                                          help="python whose torch build to check (repeatable)"),
    load: float = typer.Option(0.0, "--load", metavar="SECONDS",
                               help="run a GPU load for SECONDS and sample clocks and power"),
    force: bool = typer.Option(False, "--force", help="--load even when other processes use the GPUs"),
    record: Optional[Path] = typer.Option(None, "--record", metavar="FILE",
                                          help="save every raw answer into this capture file"),
    replay: Optional[Path] = typer.Option(None, "--replay", metavar="FILE",
                                          help="answer from a capture file instead of the driver"),
    deadline: float = typer.Option(30.0, "--deadline", metavar="SECONDS",
                                   help="emit what was read after SECONDS, marked incomplete"),
):
    """Probe this host with the agent: write DIR/health.json and DIR/health-report.md."""
    import shutil

    paths.output_dir(out, "--out", "health.json and health-report.md")
    paths.output_file(record, "--record", "the capture")
    paths.input_file(replay, "--replay", "a capture (sweep probe --record FILE)")
    for interp in interpreter:
        if shutil.which(interp) is None:
            raise SweepError("--interpreter: no such python", where=interp,
                             fix="give the path of the python whose torch to check (or a name on PATH)")
    args = [sys.executable, "-m", "probe_agent", "--out", str(out), "--deadline", str(deadline)]
    args += ["--deep"] if deep else []
    for interp in interpreter:
        args += ["--interpreter", interp]
    if load:
        args += ["--load", str(load)] + (["--force"] if force else [])
    if record:
        args += ["--record", str(record)]
    if replay:
        args += ["--replay", str(replay)]
    proc = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    if proc.returncode == exitcodes.BAD_INPUT:  # the agent's own line (on stderr) names the path and the fix
        raise typer.Exit(exitcodes.BAD_INPUT)
    if proc.returncode != 0:
        raise SweepError(f"the agent failed (exit {proc.returncode})",
                         fix="run python3 -m probe_agent --no-json to see its error")
    health = json.loads(proc.stdout)
    print((out / "health-report.md").read_text())
    console.print(f"wrote {(out / 'health.json').resolve()} and {(out / 'health-report.md').resolve()}",
                  soft_wrap=True)
    raise typer.Exit(exitcodes.BROKEN if health["lowest_broken"] else exitcodes.OK)


def old_spelling(spelling: str):
    """A hidden option under an older name (`--output`, `--dir`): it still works, help shows the new one."""
    return typer.Option(None, spelling, hidden=True)


@app.command()
def bundle(out: Path = typer.Option(Path("agent.pyz"), "--out", "-o", metavar="FILE",
                                    help="where to write the zipapp"),
           output: Optional[Path] = old_spelling("--output")):
    """Write the self-contained agent (runs with a bare python3 3.8+: python3 agent.pyz --help)."""
    from sweep.collect.bundle import build_bundle

    name, target = ("--out", out) if output is None else ("--output", output)
    path = build_bundle(paths.output_file(target, name, "the agent bundle"))
    results.print(f"wrote {path} ({path.stat().st_size // 1024} KiB); run it with: python3 {path} --out DIR",
                  soft_wrap=True)  # one line, whatever the terminal's width: it is copied and pasted


@app.command()
def diff(
    before: Path = typer.Argument(..., metavar="BEFORE",
                                  help="a health.json, host record or provenance.json, or a run folder"),
    after: Path = typer.Argument(..., metavar="AFTER",
                                 help="a health.json, host record or provenance.json, or a run folder"),
    as_json: bool = typer.Option(False, "--json", help="print the changes as JSON"),
    html: Optional[Path] = typer.Option(None, "--html", metavar="FILE",
                                        help="two run folders: also write the diff as HTML to FILE"),
):
    """What changed between two probes: the conclusion in a line or two, then the throttle evidence
    that proves it, then the rest; between two wrapped runs
    (provenance.json), the probes before them first, then what their samples saw. Between two run
    folders: hosts added, removed, newly unreachable, recovered, and each host's changes by kind.
    Exit 5 when the machine changed (probes) or anything changed (runs), 0 when not; docs/audits.md."""
    paths.input_path(before, "BEFORE", "a health.json, host record, provenance.json or run folder")
    paths.input_path(after, "AFTER", "a health.json, host record, provenance.json or run folder")
    paths.output_file(html, "--html", "the HTML diff")
    if before.is_dir() or after.is_dir():
        raise typer.Exit(_run_diff(before, after, as_json, html))
    from sweep.audit.diff import explain_files, probes_of
    from sweep.audit.rundiff import fold_probe_changes, probe_exit_code

    conclusion, changes = explain_files(before, after)
    code = probe_exit_code(*probes_of(before, after))
    folded = fold_probe_changes(changes)
    if as_json:
        print(json.dumps({"conclusion": conclusion, "changes": [c.__dict__ for c in changes],
                          "folded": [c.as_dict() for c in folded], "exit_code": code}, indent=1))
        raise typer.Exit(code)
    _probe_table(before, after, conclusion, changes, folded)
    raise typer.Exit(code)


def _probe_table(before: Path, after: Path, conclusion: list, changes: list, folded: list) -> None:
    """`sweep diff A B` of two probes on stdout: the conclusion, one row per change (kinds and GPUs as
    the run diff names and folds them), then the findings of rising link errors."""
    from rich.table import Table

    from sweep.audit.diff import rising_link_errors
    from sweep.audit.rundiff import show_field, show_gpus

    for line in conclusion:
        results.print(safe(line), soft_wrap=True)
    # the title on a line of its own, as the run diff's: a table's title wraps at the table's width
    results.print(f"{safe(before)} -> {safe(after)}: {plural(len(changes), 'change')}", soft_wrap=True)
    if not folded:
        return
    table = Table()
    for col in ("kind", "field", "GPUs", "before", "after"):
        table.add_column(col, overflow="fold")
    for c in folded:
        table.add_row(c.kind, safe(c.field), safe(show_gpus(c.gpus)), safe(show_field(c.field, c.before)),
                      safe(show_field(c.field, c.after)))
    results.print(table)
    for finding in rising_link_errors(changes):
        results.print("finding: " + safe(finding), soft_wrap=True)


@app.command()
def wrap(
    command: List[str] = typer.Argument(..., metavar="COMMAND", help="the command and its arguments, after --"),
    interval: float = typer.Option(0.2, "--interval", metavar="SECONDS",
                                   help="seconds between GPU samples while the command runs"),
    out: Path = typer.Option(Path("results"), "--out", "-o", metavar="DIR", help="folder for provenance.json"),
    replay: Optional[Path] = typer.Option(None, "--replay", metavar="FILE",
                                          help="GPU answers from a capture (env SWEEP_REPLAY); the command runs"),
    deep: bool = typer.Option(False, "--deep", help="the probes import torch and ask CUDA (seconds)"),
    deadline: float = typer.Option(30.0, "--deadline", metavar="SECONDS", help="seconds each probe may take"),
):
    """Run COMMAND with the evidence of the machine it ran on: probe before, sample during, probe
    after, into OUT/provenance.json. The command's stdin, stdout, stderr and exit code pass through
    untouched (sweep wrap -- python3 bench.py --size 8192)."""
    args = [sys.executable, "-m", "probe_agent", "--wrap", "--out", str(out), "--interval", str(interval),
            "--deadline", str(deadline)] + (["--deep"] if deep else [])
    paths.output_dir(out, "--out", "provenance.json")
    if replay:
        args += ["--replay", str(paths.input_file(replay, "--replay", "a capture (sweep probe --record FILE)"))]
    import signal

    proc = subprocess.Popen(args + ["--"] + list(command))
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the command; the agent still writes
    try:
        code = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old)
    raise typer.Exit(code if code >= 0 else 128 - code)


def _run_diff(before: Path, after: Path, as_json: bool, html: Optional[Path]) -> int:
    from sweep.errors import ConfigError
    from sweep.audit.rundiff import diff_runs, render_html, render_terminal
    from sweep.store import load_run

    if not (before.is_dir() and after.is_dir()):
        raise ConfigError("cannot compare a run folder with a file", where=f"{before} {after}",
                          fix="give two run folders, or two health.json files")
    result = diff_runs(load_run(before), load_run(after))
    if html is not None:
        try:
            html.write_text(render_html(result), encoding="utf-8")
        except OSError as err:
            raise ConfigError(f"cannot write the HTML ({err.strerror or err})", where=str(html),
                              fix="choose a writable path with --html") from None
        console.print(f"wrote {safe(html)}")
    if as_json:
        print(json_text(result.as_dict()))
    else:
        render_terminal(result, results)
    return result.exit_code


baseline_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                           help="Per-host baselines: record each host's GPU stack from a run, then report drift "
                                "from it (exit 5 on drift; docs/audits.md).")
app.add_typer(baseline_app, name="baseline")


@baseline_app.command("set")
def baseline_set(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="the run folder whose reachable hosts become the baseline"),
    out: Path = typer.Option(Path("baseline"), "--out", "-o", metavar="DIR", help="baseline folder (one file per host)"),
    update: bool = typer.Option(False, "--update", help="replace hosts the baseline already holds"),
    host: List[str] = typer.Option([], "--host", metavar="HOST", help="only this host (repeatable)"),
    directory: Optional[Path] = old_spelling("--dir"),
):
    """Record each host's state from RUN_DIR: new hosts are added, existing ones kept unless --update."""
    from sweep.audit.baseline import set_baseline

    paths.input_dir(run_dir, "RUN_DIR", "a run folder (sweep run)")
    paths.output_dir(directory, "--dir", "the baseline")
    directory = directory if directory is not None else paths.output_dir(out, "--out", "the baseline")

    for line in set_baseline(run_dir, directory, update=update, hosts=host).lines():
        results.print(safe(line), soft_wrap=True)


@baseline_app.command("show")
def baseline_show(
    baseline: Path = typer.Option(Path("baseline"), "--baseline", metavar="DIR", help="baseline folder"),
    host: List[str] = typer.Option([], "--host", metavar="HOST", help="only this host (repeatable)"),
    as_json: bool = typer.Option(False, "--json", help="print the rows as JSON"),
    directory: Optional[Path] = old_spelling("--dir"),
):
    """One line per host of the baseline: driver, GPUs, ECC, power limit, MIG, worst link, when set."""
    from sweep.audit.baseline import show_rows

    directory = directory if directory is not None else baseline
    rows = show_rows(directory, host)
    if as_json:
        print(json_text(rows))
        return
    from rich.table import Table

    table = Table(title=f"baseline {safe(directory)}: {plural(len(rows), 'host')}")
    cols = ("host", "driver", "gpus", "models", "ecc", "power_limit_w", "mig_layout", "persistence", "worst_link",
            "set_at")
    for col in cols:
        table.add_column(col)
    for row in rows:
        table.add_row(*(safe(row[c]) for c in cols))
    results.print(table)


@baseline_app.command("check")
def baseline_check(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="the run folder to compare with the baseline"),
    baseline: Path = typer.Option(Path("baseline"), "--baseline", metavar="DIR", help="baseline folder"),
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON"),
    directory: Optional[Path] = old_spelling("--dir"),
):
    """Drift of each host of RUN_DIR from its baseline (driver, ECC, power, MIG, topology, swapped or
    missing GPUs). Exit 5 when a host drifted."""
    from sweep.audit.baseline import compare_to_baseline

    paths.input_dir(run_dir, "RUN_DIR", "a run folder (sweep run)")
    result = compare_to_baseline(run_dir, directory if directory is not None else baseline)
    if as_json:
        print(json_text(result.as_dict()))
    else:
        from sweep.analysis.names import fold_messages

        for line in fold_messages((d.host, d.message) for d in result.drift):
            results.print(safe(line), soft_wrap=True)
        for label, names in (("no baseline", result.no_baseline), ("in the baseline, not in the run", result.absent),
                             ("not compared (failed in the run)", [u["host"] for u in result.unjudged])):
            if names:
                results.print(safe(f"{label}: {', '.join(names)}"), soft_wrap=True)
        results.print(safe(f"{plural(len(result.compared), 'host')} compared, {len(result.drifted_hosts)} drifted"),
                  soft_wrap=True)
    raise typer.Exit(result.exit_code)


# `sweep run`'s options: one line each in its signature
_RUN_INVENTORY = typer.Argument(None, metavar="INVENTORY", help="Ansible inventory: a YAML or INI file, or a folder")
_RUN_COMMAND = typer.Argument(None, metavar="[-- COMMAND [ARGS...]]",
    help="with --wrap: the benchmark to run on every host, after --")
_RUN_LIMIT = typer.Option(None, "--limit", "-l", metavar="PATTERN",
    help="Ansible host pattern: group, glob, !exclude, &intersect")
_RUN_INVENTORY_OPTION = typer.Option([], "--inventory", "-i", metavar="INVENTORY",
    help="the inventory as ansible takes it: a file, a folder or 'host1,host2,'; repeatable, the sources "
    "merged in order as ansible merges them")
_RUN_OUT = typer.Option(None, "--out", "-o", metavar="DIR",
    help="run folder (default: reports/<UTC time>-<inventory name> under the "
    "current directory; its absolute path is printed at the end)")
_RUN_RESUME = typer.Option(None, "--resume", metavar="RUN_DIR",
    help="finish an earlier run folder: sweep hosts without a record, with the run's own options (an option "
    "given again wins, and the manifest records it)")
_RUN_RETRY_FAILED = typer.Option(None, "--retry-failed", metavar="[CLASS...]",
    help="with --resume: sweep again the hosts whose record failed with these classes (none named: the "
    "transient ones, dns refused timeout host_key_unknown); the old record is kept as "
    "hosts/HOST~attempt-N.json")
_RUN_TRUST_MANIFEST = typer.Option(False, "--trust-manifest", help="with --resume of a folder this user's sweep "
    "did not write: take the options of its manifest that name programs, commands, files or ssh options, and its "
    "inventory, as they are (each one is named first; docs/security.md)")
_RUN_FORKS = typer.Option(32, "--forks", "-f", metavar="N", help="hosts probed at once")
_RUN_ACCEPT_NEW_HOST_KEYS = typer.Option(False, "--accept-new-host-keys",
    help="trust unknown host keys and remember them (changed keys are always refused)")
_RUN_KNOWN_HOSTS = typer.Option(None, "--known-hosts", metavar="FILE",
    help="extra known_hosts file, read first")
_RUN_CONNECT_TIMEOUT = typer.Option(None, "--connect-timeout", metavar="SECONDS",
    help="seconds (default 10)")
_RUN_HOST_DEADLINE = typer.Option(None, "--host-deadline", metavar="SECONDS",
    help="seconds a host may take in all (default 120)")
_RUN_DEEP = typer.Option(False, "--deep", help="the agent imports torch and asks CUDA")
_RUN_LOAD = typer.Option(0.0, "--load", metavar="SECONDS", help="each host runs a GPU load for SECONDS and "
    "samples clocks and power (refused on GPUs in use); what sweep history measures drift on")
_RUN_LOAD_ENGINE = typer.Option("auto", "--load-engine", metavar="auto|torch|ptx", help="what --load runs on each "
    "host: torch (a bf16 matmul), ptx (an FMA loop through the CUDA driver API, nothing installed), auto (torch "
    "where the host's python has a CUDA torch, else ptx)")
_RUN_SPEED = typer.Option(False, "--speed", help="each host measures what its selected GPUs deliver (HBM, PCIe, "
    "peer copies, FP32, bf16 GEMM, all-reduce; at most 15 s on one GPU, 20 s on eight; refused on GPUs in use)")
_RUN_REFERENCE = typer.Option(None, "--reference", metavar="HOST|GROUP",
    help="host or group the others are compared with")
_RUN_EXPECT = typer.Option(None, "--expect", metavar="FILE",
    help="expectations file: hosts off it set exit 5 (docs/expectations.md)")
_RUN_BASELINE = typer.Option(None, "--baseline", metavar="DIR", help="baseline folder (sweep "
    "baseline set): drift from it sets exit 5")
_RUN_NO_REPORT = typer.Option(False, "--no-report", help="only collect the records")
_RUN_ENGINE = typer.Option("ssh", "--engine", metavar="ENGINE", help="who runs the agent: ssh (sweep's own), "
    "ansible (ansible -m script), slurm (srun, one task per node); docs/engines.md")
_RUN_PARTITION = typer.Option(None, "--partition", metavar="PARTITION",
    help="slurm engine, no inventory: this partition's nodes")
_RUN_NODELIST = typer.Option(None, "--nodelist", metavar="NODES",
    help="slurm engine, no inventory: these nodes (gpu[01-64])")
_RUN_TRANSPORT = typer.Option(None, "--transport", metavar="paramiko|openssh",
    help="ssh engine: paramiko (sweep's own, default) or openssh (the system "
    "ssh in BatchMode: every ssh_config option, certificates, GSSAPI, "
    "smart cards); docs/ssh.md")
_RUN_SHARD = typer.Option(None, "--shard", metavar="I/N", help="sweep only the I-th of N shares of the "
    "hosts (by a stable hash of the name; report the N run folders together)")
_RUN_SHARD_BY = typer.Option("hash", "--shard-by", metavar="hash|index",
    help="hash (stable per host) or index (every N-th host)")
_RUN_MAX_YAML_VALUES = typer.Option(1_000_000, "--max-yaml-values", metavar="N", help="most values YAML aliases "
    "may add to an inventory file once expanded (alias bombs)")
_RUN_MAX_RANGE_HOSTS = typer.Option(100_000, "--max-range-hosts", metavar="N", help="most hosts one host range "
    "(gpu[0001:9999]) may name")
_RUN_WRAP = typer.Option(False, "--wrap", help="run the COMMAND after -- on every host inside the agent's "
    "envelope (probe before, samples during, probe after); the report compares its "
    "figures within each comparability class (docs/fleet-benchmark.md)")
_RUN_METRIC = typer.Option([], "--metric", metavar="NAME=REGEX",
    help="--wrap: the figure in the command's output (first group the number, a "
    "second its unit; repeatable); a JSON line {\"metric\": NAME, \"value\": X} "
    "counts too")
_RUN_FORCE = typer.Option(False, "--force", help="--wrap: run on hosts with a broken contract or another "
    "process on the GPUs too; --speed: measure beside other processes (recorded in each record)")
_RUN_INTERVAL = typer.Option(0.2, "--interval", metavar="S", help="--wrap: seconds between GPU samples")
_RUN_USER = typer.Option(None, "--user", "-u", metavar="USER", help="log in as USER where the inventory "
    "sets no ansible_user (as ansible -u: the inventory wins over it)")
_RUN_PRIVATE_KEY = typer.Option(None, "--private-key", "--key-file", metavar="FILE", help="the key file where "
    "the inventory sets no ansible_ssh_private_key_file (as ansible --private-key: the inventory wins)")
_RUN_EXTRA_VARS = typer.Option([], "--extra-vars", "-e", metavar="VARS", help="variables over every "
    "inventory variable, as ansible -e: key=value ..., a JSON or YAML mapping, @FILE (repeatable; the last wins)")
_RUN_BECOME = typer.Option(False, "--become", "-b", help="run the agent through sudo -n (never a password "
    "prompt) where the inventory sets no ansible_become, as ansible --become; ansible_become_user, else root")
_RUN_BECOME_USER = typer.Option(None, "--become-user", metavar="USER", help="with --become or ansible_become: "
    "the user to become where the inventory sets no ansible_become_user (default root)")
_RUN_NODES = typer.Option([], "--nodes", "-w", metavar="NODESET", help="sweep these hosts, no inventory file: "
    "a folded node set as clush -w takes it (gpu[01-08,10]; repeatable)")
_RUN_LIST_HOSTS = typer.Option(False, "--list-hosts", help="print the hosts this run would contact (after "
    "--limit, --shard, --resume), as ansible --list-hosts does, in its order; contact none")
_RUN_JSON = typer.Option(False, "--json", help="with --list-hosts: print per host, as JSON, the connection "
    "sweep resolved (address, port, user, key file, proxy, python, become) and where each value was set")


@app.command()
def run(
    ctx: typer.Context,
    inventory: Optional[Path] = _RUN_INVENTORY,
    command: Optional[List[str]] = _RUN_COMMAND,
    limit: Optional[str] = _RUN_LIMIT,
    out: Optional[Path] = _RUN_OUT,
    resume: Optional[Path] = _RUN_RESUME,
    forks: int = _RUN_FORKS,
    accept_new_host_keys: bool = _RUN_ACCEPT_NEW_HOST_KEYS,
    known_hosts: Optional[Path] = _RUN_KNOWN_HOSTS,
    connect_timeout: Optional[float] = _RUN_CONNECT_TIMEOUT,
    host_deadline: Optional[float] = _RUN_HOST_DEADLINE,
    deep: bool = _RUN_DEEP,
    load: float = _RUN_LOAD, load_engine: str = _RUN_LOAD_ENGINE,
    speed: bool = _RUN_SPEED,
    reference: Optional[str] = _RUN_REFERENCE,
    expect: Optional[Path] = _RUN_EXPECT,
    baseline: Optional[Path] = _RUN_BASELINE,
    no_report: bool = _RUN_NO_REPORT,
    engine: str = _RUN_ENGINE,
    partition: Optional[str] = _RUN_PARTITION,
    nodelist: Optional[str] = _RUN_NODELIST,
    transport: Optional[str] = _RUN_TRANSPORT,
    shard: Optional[str] = _RUN_SHARD,
    shard_by: str = _RUN_SHARD_BY,
    max_yaml_values: int = _RUN_MAX_YAML_VALUES,
    max_range_hosts: int = _RUN_MAX_RANGE_HOSTS,
    wrap: bool = _RUN_WRAP,
    metric: List[str] = _RUN_METRIC,
    force: bool = _RUN_FORCE,
    interval: float = _RUN_INTERVAL,
    list_hosts: bool = _RUN_LIST_HOSTS, as_json: bool = _RUN_JSON,
    inventory_option: List[Path] = _RUN_INVENTORY_OPTION,
    retry_failed: Optional[List[str]] = _RUN_RETRY_FAILED,
    trust_manifest: bool = _RUN_TRUST_MANIFEST,
    user: Optional[str] = _RUN_USER,
    private_key: Optional[Path] = _RUN_PRIVATE_KEY,
    extra_vars: List[str] = _RUN_EXTRA_VARS,
    become: bool = _RUN_BECOME,
    become_user: Optional[str] = _RUN_BECOME_USER,
    nodes: List[str] = _RUN_NODES,
):
    """Sweep every host of an inventory over SSH (or ansible, Slurm: --engine), keep each record, then compare
    and report; the last lines name the run folder (reports/<UTC time>-<inventory name> unless --out) and its
    report by absolute path. --wrap -- COMMAND: a benchmark on every host, compared class by class."""
    inventory, command = _nodes_given(*_inventory_given(inventory, inventory_option, command), nodes, max_range_hosts)
    variables = _variables(user, private_key, become, become_user, extra_vars)
    _check_run_inputs(inventory, resume, known_hosts, expect, baseline, shard_by, reference, limit, variables)
    spec, runner = _wrap_spec(wrap, command, metric, force, interval, speed), _engine(engine, partition, nodelist)
    _check_engine_inputs(engine, transport, inventory, resume)
    hosts = _host_selection(limit, shard, shard_by, max_yaml_values, max_range_hosts, variables)
    ssh, agent = _ssh_and_agent(connect_timeout, host_deadline, transport, known_hosts, accept_new_host_keys,
                                deep, (load, _load_engine(load_engine)), spec, speed, force)
    plan = dict(hosts=hosts, ssh=ssh, forks=forks, engine=runner, resume=resume, retry_failed=_retry_classes(retry_failed))
    if list_hosts or as_json:  # after the same checks as a run: --forks 0 is as wrong here as there
        raise typer.Exit(_list_hosts(inventory, (list_hosts, as_json), **plan))
    report = dict(reference=reference, expect=expect, baseline=baseline, no_report=no_report)
    raise typer.Exit(_finish_run(run_with_progress(dict(inventory_path=inventory, agent=agent, out=out, report=report,
                                                         given=_given_options(ctx), trust_manifest=trust_manifest,
                                                         **plan), console), report))


def _engine(engine: str, partition: Optional[str], nodelist: Optional[str]):
    from sweep.collect.engines import engine_from_options

    return engine_from_options(engine, partition=partition, nodelist=nodelist)


def _load_engine(engine: str) -> str:
    from sweep.errors import ConfigError

    if engine not in ("auto", "torch", "ptx"):
        raise ConfigError(f"--load-engine {engine!r} is not an engine", fix="give auto, torch or ptx")
    return engine


def _ssh_and_agent(connect_timeout, host_deadline, transport, known_hosts, accept_new_host_keys, deep: bool,
                   load: tuple, spec, speed: bool = False, force: bool = False):
    """`sweep run`'s SSHSettings and AgentOptions; `load` is (seconds, engine)."""
    from sweep.collect.options import AgentOptions, SSHSettings

    ssh = SSHSettings(connect_timeout=connect_timeout, host_deadline=host_deadline, transport=transport,
                      known_hosts=[known_hosts] if known_hosts else (), accept_new_host_keys=accept_new_host_keys)
    return ssh, AgentOptions(args=_agent_args(deep, load, speed, force), wrap=spec)


def _finish_run(result, report: dict) -> int:
    """After the sweep: the history index, the report, the run folder's path; the exit code."""
    keep_history(result.run_dir)
    code = _report_run(result, report)
    results.print(f"run folder: {result.run_dir.resolve()}", soft_wrap=True)
    return code


def _agent_args(deep: bool, load: tuple, speed: bool, force: bool) -> List[str]:
    """The agent's arguments of `sweep run`: --deep, --load S (--load-engine E), --speed (--force when given)."""
    seconds, engine = load
    loads = (["--load", f"{seconds:g}"] + (["--load-engine", engine] if engine != "auto" else [])) if seconds > 0 else []
    return (["--deep"] if deep else []) + loads + (["--speed"] + (["--force"] if force else []) if speed else [])


def _host_selection(limit: Optional[str], shard: Optional[str], shard_by: str, max_yaml_values: int,
                    max_range_hosts: int, variables=None):
    """`sweep run`'s host options as the HostSelection run_sweep takes."""
    from sweep.collect.options import HostSelection
    from sweep.collect.shard import parse_shard
    from sweep.inventory.formats import InventoryLimits

    return HostSelection(limit=limit, shard=parse_shard(shard) if shard else None, shard_by=shard_by,
                         inventory_limits=InventoryLimits(max_yaml_values, max_range_hosts),
                         **({"variables": variables} if variables is not None else {}))


def _report_run(result, report: dict) -> int:
    """The report of a run that was not interrupted, with the run's report options (--resume: its own, but
    those given again); the exit code of the run and its report."""
    report = {key: result.options.get(key, value) for key, value in report.items()}
    if report["no_report"] or result.state == "interrupted":
        return result.exit_code
    expect, baseline = (Path(report[key]) if report[key] is not None else None for key in ("expect", "baseline"))
    # the report's code is the verdict over every host the run lists (its failed ones included): the table's order
    code = _report([result.run_dir], result.run_dir / "report", report["reference"], expect, baseline)
    return code or result.exit_code


# `sweep run`'s options -> the run_sweep options they set (sweep.collect.resume.OPTIONS): a resumed run
# reuses its own options but those given again on the command line
_RUN_GIVES = {
    "limit": "limit", "forks": "forks", "accept_new_host_keys": "accept_new_host_keys",
    "known_hosts": "known_hosts", "connect_timeout": "connect_timeout", "host_deadline": "host_deadline",
    "deep": "agent_args", "load": "agent_args", "speed": "agent_args", "reference": "reference", "expect": "expect",
    "baseline": "baseline", "no_report": "no_report", "engine": "engine", "partition": "engine",
    "nodelist": "engine", "transport": "transport", "shard": "shard", "shard_by": "shard",
    "max_yaml_values": "inventory_limits", "max_range_hosts": "inventory_limits", "wrap": "wrap",
    "command": "wrap", "metric": "wrap", "force": ("wrap", "agent_args"), "interval": "wrap",
    "user": "inventory_vars", "private_key": "inventory_vars", "extra_vars": "inventory_vars",
    "become": "inventory_vars", "become_user": "inventory_vars",
}


def _given_options(ctx: typer.Context) -> set:
    """The run_sweep options this command line sets (typed, not left at their defaults)."""
    return {option for param, options in _RUN_GIVES.items()
            if getattr(ctx.get_parameter_source(param), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")
            for option in ((options,) if isinstance(options, str) else options)}


def _retry_classes(words: Optional[List[str]]) -> Optional[List[str]]:
    """--retry-failed's classes (`retry_failed_argv` turned a bare --retry-failed into "transient"): None when
    not given, [] for the transient ones."""
    if words is None:
        return None
    return [cls for word in words for cls in word.split(",") if cls and cls != RETRY_TRANSIENT]


RETRY_TRANSIENT = "transient"  # what a bare --retry-failed stands for


def retry_failed_argv(argv: List[str]) -> List[str]:
    """`sweep run ... --retry-failed [CLASS...]` as click reads it: one --retry-failed per class, and a bare
    one as --retry-failed transient. The words taken as classes look like a class name (lower case and _)
    and are no file, so an inventory after them stays the inventory; nothing after ``--`` is touched."""
    out, i = [], 0
    while i < len(argv) and argv[i] != "--":
        word, i = argv[i], i + 1
        if word != "--retry-failed":
            out.append(word)
            continue
        classes = []
        while i < len(argv) and _CLASS_WORD.fullmatch(argv[i]) and not Path(argv[i]).exists():
            classes.append(argv[i])
            i += 1
        out += [part for cls in classes or [RETRY_TRANSIENT] for part in ("--retry-failed", cls)]
    return out + argv[i:]


_CLASS_WORD = re.compile(r"[a-z][a-z_]*")


def _inventory_given(positional: Optional[Path], options: List[Path], command):
    """`sweep run INVENTORY` or `sweep run -i INVENTORY [-i INVENTORY...]` (as ansible is typed; several
    sources: a list): with -i, what took the INVENTORY place is the first word of the command after --."""
    if not options:
        return positional, command
    return (options[0] if len(options) == 1 else list(options),
            ([str(positional)] if positional is not None else []) + list(command or []))


def _variables(user: Optional[str], private_key: Optional[Path], become: bool, become_user: Optional[str],
               extra_vars: List[str]):
    """-u, --private-key, --become, --become-user (under the inventory's variables, as in ansible) and -e (over them)."""
    from sweep.inventory.command_line import command_line_vars

    paths.input_file(private_key, "--private-key", "a private key file")
    return command_line_vars(user, str(private_key) if private_key else None, become, become_user, extra_vars)


def _nodes_given(inventory: Optional[Path], command, nodes: List[str], max_hosts: int):
    """`-w NODESET` (as clush takes it) as an inline inventory; what took the INVENTORY place is then the first
    word of the command after --."""
    if not nodes:
        return inventory, command
    from sweep.inventory.command_line import nodeset_inventory

    words = ([str(inventory)] if isinstance(inventory, Path) else []) + list(command or [])
    return Path(nodeset_inventory(",".join(nodes), max_hosts)), words


def _wrap_spec(wrap: bool, command, metric, force: bool, interval: float, speed: bool = False):
    """The benchmark of `sweep run --wrap -- COMMAND`, or None for a plain sweep (whose --force is --speed's)."""
    from sweep.errors import ConfigError

    if not wrap:
        if command:
            raise ConfigError(f"unexpected {noun(len(command), 'argument')} after the inventory: {' '.join(command)}",
                              fix="to run a benchmark on every host: sweep run INVENTORY --wrap -- COMMAND")
        if metric or (force and not speed):
            raise ConfigError("--metric and --force belong to --wrap (--force also to --speed)",
                              fix="add --wrap -- COMMAND, or --speed")
        return None
    if not command:
        raise ConfigError("--wrap needs a command after --", fix="sweep run INVENTORY --wrap -- python3 bench.py")
    from sweep.collect.wrap import Metric, WrapSpec

    return WrapSpec(tuple(command), tuple(Metric.parse(m) for m in metric), force, interval)


def _check_reference(reference: str, inventory: Path, limit: Optional[str], variables=None) -> None:
    """--reference names a host or group of the inventory: said before the sweep, not after it."""
    from sweep.inventory.model import load_inventory

    inv = load_inventory(inventory, **({"layers": variables} if variables is not None else {}))
    if reference not in {h.name for h in inv.hosts} and reference not in inv.groups:
        raise SweepError(f"{reference!r} is neither a host nor a group of {inventory}", where="--reference",
                         fix="name one of its hosts, or one of its groups")


def _check_run_inputs(inventory, resume, known_hosts, expect, baseline, shard_by, reference, limit,
                      variables=None) -> None:
    """`sweep run`'s paths and choices, checked before anything is read from a host: exit 2 with the fix."""
    from sweep.inventory.command_line import is_inline

    for source in inventory if isinstance(inventory, list) else [inventory]:
        if source is not None and not is_inline(source):
            paths.input_path(source, "INVENTORY", "an Ansible inventory (a YAML or INI file, or a folder), or hosts: "
                                                  "'gpu01,gpu02,'")
    paths.input_dir(resume, "--resume", "an earlier run folder")  # --out: the run folder's own checks say it
    paths.input_file(known_hosts, "--known-hosts", "a known_hosts file")
    paths.input_file(expect, "--expect", "an expectations file (docs/expectations.md)")
    paths.input_dir(baseline, "--baseline", "a baseline folder (sweep baseline set)")
    from sweep.collect.shard import SHARD_BY

    if shard_by not in SHARD_BY:
        raise SweepError(f"--shard-by {shard_by!r} is unknown", fix="use --shard-by hash or --shard-by index")
    if reference is not None and inventory is not None and resume is None:
        _check_reference(reference, inventory, limit, variables)
    if expect is not None:  # a bad expectations file is bad input before the sweep, not after it
        from sweep.audit.expect import load_expectations

        load_expectations(expect)


def _check_engine_inputs(engine: str, transport: Optional[str], inventory, resume) -> None:
    """--transport only with the ssh engine; an inventory unless the slurm engine lists its own nodes."""
    if transport is not None and engine != "ssh":
        raise SweepError("--transport belongs to the ssh engine", fix="drop --transport, or use --engine ssh")
    if inventory is None and resume is None and engine != "slurm":
        raise SweepError("no inventory given", fix="sweep run INVENTORY.yml, or sweep run --resume RUN_DIR")


def _list_hosts(inventory, flags: tuple[bool, bool], **options: Any) -> int:
    """`sweep run --list-hosts`: the hosts the run would contact, in ansible --list-hosts' format and order;
    with --json, what sweep resolved for each (`sweep.inventory.host.describe`). `flags`: (--list-hosts, --json)."""
    from sweep.collect.run import planned_hosts
    from sweep.inventory.host import describe

    listing, as_json = flags
    if not listing:
        raise SweepError("--json is the format of --list-hosts", fix="add --list-hosts, or drop --json")
    hosts = planned_hosts(inventory, **options)
    if as_json:
        print(json.dumps({"hosts": [describe(host) for host in hosts]}, indent=1))
        return 0
    print(f"  hosts ({len(hosts)}):")
    for host in hosts:
        print(f"    {safe(host.name)}")
    return 0


def run_with_progress(options: dict, con: Console):
    """run_sweep under a live progress bar, then the summary table."""
    from sweep.cli.progress import SweepProgress, render_summary
    from sweep.collect.run import run_sweep

    with SweepProgress(con) as bar:
        result = run_sweep(**options, progress=bar)
    render_summary(result, con)
    return result


def _report(inputs, out_dir: Path, reference: Optional[str], expect: Optional[Path] = None,
            baseline: Optional[Path] = None) -> int:
    from sweep.report.build import build_report

    result = build_report([Path(p) for p in inputs], out_dir, reference=reference, expect=expect, baseline=baseline)
    results.print(safe(result.headline), soft_wrap=True)
    for line in result.notes:  # the verdict's: a tier asked for and not measured, a contract not read, with its fix
        results.print(safe(line), soft_wrap=True)
    for line in result.findings_lines:  # the health findings, folded across hosts (clubak -b)
        results.print(f"- {safe(line)}", soft_wrap=True)
    results.print(f"report: {(out_dir / 'report.html').resolve()}", soft_wrap=True)
    return result.exit_code


@app.command()
def report(
    inputs: List[Path] = typer.Argument(..., metavar="PATH...",
                                        help="run folders, host records, health.json or provenance.json files"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR",
                                       help="output folder (default: PATH/report for one run folder, else "
                                            "reports/report under the current directory)"),
    reference: Optional[str] = typer.Option(None, "--reference", metavar="HOST|GROUP",
                                            help="host or group the others are compared with"),
    expect: Optional[Path] = typer.Option(None, "--expect", metavar="FILE",
                                          help="expectations file: hosts off it set exit 5 (docs/expectations.md)"),
    baseline: Optional[Path] = typer.Option(None, "--baseline", metavar="DIR", help="baseline folder (sweep "
                                            "baseline set): drift from it sets exit 5"),
):
    """Compare hosts: which cannot be benchmarked together, and why (HTML, CSV, JSON, Markdown).

    Exit codes: 0 one comparable pool, every host reachable and healthy; 1 hosts unreachable;
    3 hosts in more than one comparability class; 4 a broken contract on a host; 5 a host off
    --expect or drifted from --baseline (see README).
    """
    for path in inputs:
        paths.input_path(path, "PATH", "a run folder, host record, health.json or provenance.json")
    paths.output_dir(out, "--out", "the report")
    paths.input_file(expect, "--expect", "an expectations file (docs/expectations.md)")
    paths.input_dir(baseline, "--baseline", "a baseline folder (sweep baseline set)")
    if out is None:
        out = inputs[0] / "report" if len(inputs) == 1 and inputs[0].is_dir() else Path("reports/report")
    _warn_doubled([p for p in inputs if (p / "manifest.json").is_file()])
    raise typer.Exit(_report(inputs, out, reference, expect, baseline))


def _warn_doubled(run_dirs: List[Path]) -> None:
    """Run folders of the same hosts reported together: each such host is counted once per run (gpu01,
    gpu01#2); comparing two runs of one fleet is `sweep diff`'s work. Said once, on stderr."""
    from sweep.analysis.names import fold_hosts
    from sweep.store import load_run

    seen: dict = {}
    try:
        for run_dir in run_dirs if len(run_dirs) > 1 else ():
            for host in load_run(run_dir).records:
                seen.setdefault(host, []).append(run_dir)
    except SweepError:
        return  # a folder it cannot read: the report says why, with its own message
    doubled = [host for host, where in seen.items() if len(where) > 1]
    if doubled:
        first = seen[doubled[0]]
        _say("warning", f"{plural(len(doubled), 'host')} ({fold_hosts(doubled)}) {'is' if len(doubled) == 1 else 'are'} "
                        f"in more than one of these run folders: the report counts each once per run "
                        f"({doubled[0]}, {doubled[0]}#2); to see what changed between two runs of the same hosts, "
                        f"use sweep diff {first[0]} {first[1]}")


@app.command()
def audit(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="the run folder to judge"),
    expect: Optional[Path] = typer.Option(None, "--expect", metavar="FILE",
                                          help="expectations file (docs/expectations.md)"),
    baseline: Optional[Path] = typer.Option(None, "--baseline", metavar="DIR",
                                            help="baseline folder (sweep baseline set)"),
    as_json: bool = typer.Option(False, "--json", help="print the audit section as JSON"),
):
    """Judge RUN_DIR against an expectations file and/or a baseline: one line per finding, one per
    reason a host of the run was not judged; exit 5 when a host is off, 1 when a host of the run
    was not judged (docs/audits.md)."""
    from sweep.audit.baseline import audit_section
    from sweep.errors import ConfigError
    from sweep.store import load_run

    paths.input_dir(run_dir, "RUN_DIR", "a run folder (sweep run)")
    paths.input_file(expect, "--expect", "an expectations file (docs/expectations.md)")
    paths.input_dir(baseline, "--baseline", "a baseline folder (sweep baseline set)")
    if expect is None and baseline is None:
        raise ConfigError("nothing to audit against", fix="give --expect FILE, --baseline DIR, or both")
    section = audit_section(load_run(run_dir), expect, baseline)
    if as_json:
        print(json_text(section))
    else:
        for line in _audit_lines(section):
            results.print(safe(line), soft_wrap=True)
    raise typer.Exit(section["exit_code"])


def _audit_lines(section: dict) -> list[str]:
    """`sweep audit`'s text: findings and drift, then the hosts not judged, folded (clubak -b), then the headline."""
    from sweep.analysis.names import fold_messages
    from sweep.audit.baseline import audit_off

    lines = []
    for items in ((section["expectations"] or {}).get("findings", []), (section["baseline"] or {}).get("drift", [])):
        lines += fold_messages((item["host"], item["message"]) for item in items)
    lines += fold_messages((item["host"], f"not judged: {item['reason']}") for item in section["unjudged"])
    if not audit_off(section):
        judged = section["hosts_listed"] - len(section["unjudged"])
        lines.append("no host is off its expectations or baseline" if not section["unjudged"] else
                     "no host was judged" if judged == 0 else
                     "the one judged host is not off its expectations or baseline" if judged == 1 else
                     f"none of the {judged} judged hosts is off its expectations or baseline")
    return lines + section["headline"]


@app.command()
def demo(
    hosts: int = typer.Option(40, "--hosts", metavar="N", help="hosts replaying captures (3 unreachable hosts are added)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR",
                                       help="run folder (default: reports/demo/<UTC time>-demo under the current "
                                       "directory, apart from the runs of reports/ and their history)"),
    keep: bool = typer.Option(False, "--keep", help="leave the fleet's temp folder (keys, configs) in place "
                              "and print where"),
    serve: bool = typer.Option(False, "--serve", help="after the report, leave the fleet running until Ctrl-C and "
                               "print its inventory, known_hosts and the sweep run / --limit / sweep diff "
                               "commands to try on it"),
    speed: bool = typer.Option(False, "--speed", help="the speed tier's demo instead: 12 H200 hosts (replayed "
                               "captures, with speed figures derived from the lent H200's) whose report shows a "
                               "GPU with slow HBM, a host with half-rate PCIe and a slow 500 W class; no sshd"),
):
    """Start a local fleet of real sshd servers replaying GPU captures, sweep it, report, tear down
    (with --serve: after Ctrl-C). Exit 0 when every host behaved as the demo fleet was built to (its
    unreachable and broken hosts are there on purpose); it also prints the exit code `sweep run`
    would give the same fleet, and why."""
    import shutil
    import tempfile

    from sweep.demo import run_demo
    from sweep.demo.fleet import off_design

    if hosts < 1:
        raise SweepError(f"--hosts is {hosts}; it must be 1 or more", fix="pass --hosts 40, say")
    paths.output_dir(out, "--out", "the run folder")
    if speed:
        raise typer.Exit(_speed_demo(out))
    work = Path(tempfile.mkdtemp(prefix="sweep-demo-"))
    codes = []
    try:
        result, fleet_hosts = run_demo(hosts, out, lambda options: run_with_progress(options, console), work,
                                       say=console.print, then=lambda res, fleet: codes.append(
                                           _demo_report(res, fleet, serve)))
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            console.print(f"kept the demo fleet's keys, configs and inventory in {work}", soft_wrap=True)
    code = codes[0]
    odd = off_design(fleet_hosts, result)
    if odd or result.state != "complete":
        for line in odd:
            _say("error", line)
        _say("error", "the demo fleet did not behave as designed" + (f" ({plural(len(odd), 'host')})" if odd else
                      f" (the sweep was {result.state})"))
        raise typer.Exit(code or exitcodes.INCOMPLETE)
    results.print(f"under `sweep run` this fleet would exit {code}: {exitcodes.MEANING[code]} "
              f"(its unreachable and broken hosts are there on purpose)", soft_wrap=True)
    results.print("demo done: every host behaved as designed", soft_wrap=True)
    raise typer.Exit(exitcodes.OK)


def _speed_demo(out: Optional[Path]) -> int:
    """`sweep demo --speed`: the speed demo fleet's run folder and report; 0 when it judged as designed."""
    import shutil
    import tempfile

    from sweep.demo import DEMO_REPORTS
    from sweep.demo.speed import off_design, speed_fleet, write_speed_run
    from sweep.store import default_run_dir

    work = Path(tempfile.mkdtemp(prefix="sweep-demo-speed-"))
    try:
        run_dir = write_speed_run(out or default_run_dir("demo-speed", DEMO_REPORTS), speed_fleet(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    code = _report([run_dir], run_dir / "report", None)
    odd = off_design(json.loads((run_dir / "report" / "summary.json").read_text()))
    for line in odd:
        _say("error", line)
    if odd:
        return exitcodes.INCOMPLETE
    results.print(f"under `sweep report` this fleet exits {code}: {exitcodes.MEANING[code]} (its slow hosts and "
                  "class are there on purpose)", soft_wrap=True)
    results.print("speed demo done: every host was judged as designed", soft_wrap=True)
    return exitcodes.OK


def _demo_report(result, fleet, serve: bool) -> int:
    """The demo run's report while its fleet still runs; with --serve, the fleet then serves until Ctrl-C."""
    code = _report([result.run_dir], result.run_dir / "report", None)
    if serve:
        from sweep.demo.serve import by_hand, serve_until_interrupted

        for line in by_hand(fleet, result.run_dir.resolve()):
            results.print(line, markup=False, soft_wrap=True)
        results.file.flush()
        serve_until_interrupted()
        console.print("stopping the demo fleet", soft_wrap=True)
    return code


def command():
    """The click command tree, with usage lines and metavars as users write them (PATH..., not {paths})."""
    cli = typer.main.get_command(app)
    stack = [cli]
    while stack:
        cmd = stack.pop()
        stack += list(getattr(cmd, "commands", {}).values())
        for param in cmd.params:
            if param.param_type_name == "argument":  # typer may carry its own copy of click
                name = param.metavar or param.name.upper()
                shown = name if param.required else f"[{name}]"
                shown += "..." if param.nargs != 1 and not name.endswith("...") else ""
                param._usage_display_name = lambda shown=shown: shown  # typer writes {name} and [name]
                param.display_type_rich = lambda *_, **__: None  # typer writes <path>, <list[Path]>
    return cli


register_history(app)


def main(argv: Optional[list] = None) -> int:
    """Entry point: the one place where a SweepError becomes a message and an exit code."""
    import warnings

    from sweep.errors import InventoryWarning, ReadBackWarning

    def show(message, category, *args, **kwargs):
        if issubclass(category, (InventoryWarning, ReadBackWarning)):
            _say("warning", message)
        else:
            previous(message, category, *args, **kwargs)

    previous = warnings.showwarning
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", InventoryWarning)
            warnings.simplefilter("always", ReadBackWarning)
            warnings.showwarning = show
            args = retry_failed_argv(list(sys.argv[1:] if argv is None else argv))
            rv = command().main(args=args, prog_name="sweep", standalone_mode=False)
    except SweepError as exc:
        _say("error", exc)
        return exc.exit_code
    except OSError as exc:  # a local file or folder: the path, what failed and the fix, never a traceback
        err = paths.os_error(exc)
        _say("error", err)
        return err.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        console.print("sweep: interrupted")
        return exitcodes.INTERRUPTED
    except Exception as exc:  # click's usage errors (typer may carry its own copy of click)
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "ClickException" in names:
            exc.show()
            return exitcodes.BAD_INPUT
        if "Abort" in names:
            return exitcodes.INTERRUPTED
        raise
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
