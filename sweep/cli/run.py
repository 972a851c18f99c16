"""`sweep run`: sweep every host of an inventory, keep each record, report. Its options are declared
once, in `sweep.cli.options.RUN`, with the run options each one sets (what ``--resume`` reuses)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, List, Optional

import typer
from rich.console import Console

from sweep import exitcodes
from sweep.cli import paths
from sweep.cli.history import keep_history
from sweep.cli.options import RUN, given_sets
from sweep.cli.output import console, results, safe
from sweep.cli.report import print_report
from sweep.errors import SweepError
from sweep.text import noun


def run(
    ctx: typer.Context,
    inventory: Optional[Path] = RUN["inventory"].param,
    command: Optional[List[str]] = RUN["command"].param,
    limit: Optional[str] = RUN["limit"].param,
    out: Optional[Path] = RUN["out"].param,
    resume: Optional[Path] = RUN["resume"].param,
    forks: int = RUN["forks"].param,
    workers: int = RUN["workers"].param,
    accept_new_host_keys: bool = RUN["accept_new_host_keys"].param,
    known_hosts: Optional[Path] = RUN["known_hosts"].param,
    connect_timeout: Optional[float] = RUN["connect_timeout"].param,
    host_deadline: Optional[float] = RUN["host_deadline"].param,
    deep: bool = RUN["deep"].param,
    load: float = RUN["load"].param,
    load_engine: str = RUN["load_engine"].param,
    speed: bool = RUN["speed"].param,
    reference: Optional[str] = RUN["reference"].param,
    expect: Optional[Path] = RUN["expect"].param,
    baseline: Optional[Path] = RUN["baseline"].param,
    no_report: bool = RUN["no_report"].param,
    engine: str = RUN["engine"].param,
    partition: Optional[str] = RUN["partition"].param,
    nodelist: Optional[str] = RUN["nodelist"].param,
    transport: Optional[str] = RUN["transport"].param,
    shard: Optional[str] = RUN["shard"].param,
    shard_by: str = RUN["shard_by"].param,
    max_yaml_values: int = RUN["max_yaml_values"].param,
    max_range_hosts: int = RUN["max_range_hosts"].param,
    wrap: bool = RUN["wrap"].param,
    metric: List[str] = RUN["metric"].param,
    force: bool = RUN["force"].param,
    interval: float = RUN["interval"].param,
    list_hosts: bool = RUN["list_hosts"].param,
    as_json: bool = RUN["as_json"].param,
    inventory_option: List[Path] = RUN["inventory_option"].param,
    retry_failed: Optional[List[str]] = RUN["retry_failed"].param,
    trust_manifest: bool = RUN["trust_manifest"].param,
    user: Optional[str] = RUN["user"].param,
    private_key: Optional[Path] = RUN["private_key"].param,
    extra_vars: List[str] = RUN["extra_vars"].param,
    become: bool = RUN["become"].param,
    become_user: Optional[str] = RUN["become_user"].param,
    nodes: List[str] = RUN["nodes"].param,
):
    """Sweep every host of an inventory over SSH (or ansible, Slurm: --engine), keep each record,
    then compare and report; the last lines name the run folder (reports/<UTC time>-<inventory name>
    unless --out) and its report by absolute path. --wrap -- COMMAND: a benchmark on every host,
    compared class by class."""
    options = dict(locals())
    del options["ctx"]
    raise typer.Exit(_sweep(ctx, SimpleNamespace(**options)))


def _sweep(ctx: typer.Context, o: SimpleNamespace) -> int:
    """`sweep run` once its options are parsed (`o`, by their parameter names): the hosts it would
    sweep (--list-hosts, --json), else the sweep, its report and its exit code."""
    inventory, agent, plan = _plan(o)
    # after the same checks as a run: --forks 0 is as wrong here as there
    if o.list_hosts or o.as_json:
        return _list_hosts(inventory, (o.list_hosts, o.as_json), trust=o.trust_manifest, **plan)
    report = dict(
        reference=o.reference, expect=o.expect, baseline=o.baseline, no_report=o.no_report
    )
    options = dict(
        inventory_path=inventory,
        agent=agent,
        out=o.out,
        report=report,
        given=given_options(ctx),
        trust_manifest=o.trust_manifest,
        **plan,
    )
    return _finish_run(run_with_progress(options, console), report)


def _plan(o: SimpleNamespace) -> tuple:
    """Every input checked before any host is contacted, in the order a user would fix them: the
    inventory (or nodes), its variables, the files and folders named, the engine; then what the
    sweep needs: (the inventory path, the agent's settings, the hosts / ssh / forks / engine /
    resume plan)."""
    inventory, command = _nodes_given(
        *_inventory_given(o.inventory, o.inventory_option, o.command), o.nodes, o.max_range_hosts
    )
    variables = _variables(o.user, o.private_key, o.become, o.become_user, o.extra_vars)
    _check_run_inputs(
        inventory,
        o.resume,
        o.known_hosts,
        o.expect,
        o.baseline,
        o.shard_by,
        o.reference,
        o.limit,
        variables,
    )
    spec = _wrap_spec(o.wrap, command, o.metric, o.force, o.interval, o.speed)
    runner = _engine(o.engine, o.partition, o.nodelist)
    _check_engine_inputs(o.engine, o.transport, inventory, o.resume)
    hosts = _host_selection(
        o.limit, o.shard, o.shard_by, o.max_yaml_values, o.max_range_hosts, variables
    )
    ssh, agent = _ssh_and_agent(
        o.connect_timeout,
        o.host_deadline,
        o.transport,
        o.known_hosts,
        o.accept_new_host_keys,
        o.deep,
        (o.load, _load_engine(o.load_engine)),
        spec,
        o.speed,
        o.force,
    )
    plan = dict(
        hosts=hosts,
        ssh=ssh,
        forks=o.forks,
        workers=o.workers,
        engine=runner,
        resume=o.resume,
        retry_failed=_retry_classes(o.retry_failed),
    )
    return inventory, agent, plan


def _engine(engine: str, partition: Optional[str], nodelist: Optional[str]):
    from sweep.collect.engines import engine_from_options

    return engine_from_options(engine, partition=partition, nodelist=nodelist)


def _load_engine(engine: str) -> str:
    from sweep.errors import ConfigError

    if engine not in ("auto", "torch", "ptx"):
        raise ConfigError(
            f"--load-engine {engine!r} is not an engine", fix="give auto, torch or ptx"
        )
    return engine


def _ssh_and_agent(
    connect_timeout,
    host_deadline,
    transport,
    known_hosts,
    accept_new_host_keys,
    deep: bool,
    load: tuple,
    spec,
    speed: bool = False,
    force: bool = False,
):
    """`sweep run`'s SSHSettings and AgentOptions; `load` is (seconds, engine)."""
    from sweep.collect.options import AgentOptions, SSHSettings

    ssh = SSHSettings(
        connect_timeout=connect_timeout,
        host_deadline=host_deadline,
        transport=transport,
        known_hosts=[known_hosts] if known_hosts else (),
        accept_new_host_keys=accept_new_host_keys,
    )
    return ssh, AgentOptions(args=_agent_args(deep, load, speed, force), wrap=spec)


def _finish_run(result, report: dict) -> int:
    """After the sweep: the history index, the report, the run folder's path; the exit code. A run
    with --no-report only collects: reading its records into the history index (as long as the
    report, at 10,000 hosts) is left to the next `sweep history`, which reads the runs new since
    its last update. A run that reports reads its records once, for the index and the report."""
    report = {key: result.options.get(key, value) for key, value in report.items()}
    fleet = _read_once(result, report)
    if not report["no_report"]:
        keep_history(result.run_dir, fleet)
    code = _report_run(result, report, fleet)
    results.print(f"run folder: {result.run_dir.resolve()}", soft_wrap=True)
    return code


def _reports(result, report: dict) -> bool:
    """Whether the run gets its report: not with --no-report, not when it was interrupted."""
    return not report["no_report"] and result.state != "interrupted"


def _read_once(result, report: dict):
    """The run's records as its report reads them, or None: no report, or records only the
    readers' own fallbacks take (the index leaves a torn record out, the report names it)."""
    if not _reports(result, report):
        return None
    from sweep.analysis.fleet import load_fleet
    from sweep.errors import SweepError
    from sweep.report.build import audited

    expect, baseline = (report[key] for key in ("expect", "baseline"))
    try:
        return load_fleet([result.run_dir], keep_health=audited(expect, baseline))
    except SweepError:
        return None


def _agent_args(deep: bool, load: tuple, speed: bool, force: bool) -> List[str]:
    """The agent's arguments of `sweep run`: --deep, --load S (--load-engine E), --speed (--force
    when given)."""
    seconds, engine = load
    loads = (
        (["--load", f"{seconds:g}"] + (["--load-engine", engine] if engine != "auto" else []))
        if seconds > 0
        else []
    )
    return (
        (["--deep"] if deep else [])
        + loads
        + (["--speed"] + (["--force"] if force else []) if speed else [])
    )


def _host_selection(
    limit: Optional[str],
    shard: Optional[str],
    shard_by: str,
    max_yaml_values: int,
    max_range_hosts: int,
    variables=None,
):
    """`sweep run`'s host options as the HostSelection run_sweep takes."""
    from sweep.collect.options import HostSelection
    from sweep.collect.shard import parse_shard
    from sweep.inventory.formats import InventoryLimits

    return HostSelection(
        limit=limit,
        shard=parse_shard(shard) if shard else None,
        shard_by=shard_by,
        inventory_limits=InventoryLimits(max_yaml_values, max_range_hosts),
        **({"variables": variables} if variables is not None else {}),
    )


def _report_run(result, report: dict, fleet=None) -> int:
    """The report of a run that was not interrupted, with the run's report options (--resume: its
    own, but those given again: `_finish_run` merged them); the exit code of the run and its
    report."""
    if not _reports(result, report):
        return result.exit_code
    expect, baseline = (
        Path(report[key]) if report[key] is not None else None for key in ("expect", "baseline")
    )
    # the report's code is the verdict over every host the run lists (its failed ones included): the
    # table's order
    code = print_report(
        [result.run_dir],
        result.run_dir / "report",
        report["reference"],
        expect,
        baseline,
        fleet=fleet,
    )
    return exitcodes.first((code, result.exit_code))  # the one table's precedence


def given_options(ctx: typer.Context) -> set:
    """The run_sweep options this command line sets (typed, not left at their defaults): a resumed
    run reuses its own options but these."""
    return given_sets(
        lambda param: (
            getattr(ctx.get_parameter_source(param), "name", "DEFAULT")
            not in ("DEFAULT", "DEFAULT_MAP")
        )
    )


def _retry_classes(words: Optional[List[str]]) -> Optional[List[str]]:
    """--retry-failed's classes (`retry_failed_argv` turned a bare --retry-failed into "transient"):
    None when not given, [] for the transient ones."""
    if words is None:
        return None
    return [cls for word in words for cls in word.split(",") if cls and cls != RETRY_TRANSIENT]


RETRY_TRANSIENT = "transient"  # what a bare --retry-failed stands for


def retry_failed_argv(argv: List[str]) -> List[str]:
    """`sweep run ... --retry-failed [CLASS...]` as click reads it: one --retry-failed per class,
    and a bare one as --retry-failed transient. The words taken as classes look like a class name
    (lower case and _) and are no file, so an inventory after them stays the inventory; nothing
    after ``--`` is touched."""
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
    """`sweep run INVENTORY` or `sweep run -i INVENTORY [-i INVENTORY...]` (as ansible is typed;
    several sources: a list): with -i, what took the INVENTORY place is the first word of the
    command after --."""
    if not options:
        return positional, command
    return (
        options[0] if len(options) == 1 else list(options),
        ([str(positional)] if positional is not None else []) + list(command or []),
    )


def _variables(
    user: Optional[str],
    private_key: Optional[Path],
    become: bool,
    become_user: Optional[str],
    extra_vars: List[str],
):
    """-u, --private-key, --become, --become-user (under the inventory's variables, as in ansible)
    and -e (over them)."""
    from sweep.inventory.command_line import command_line_vars

    paths.input_file(private_key, "--private-key", "a private key file")
    return command_line_vars(
        user, str(private_key) if private_key else None, become, become_user, extra_vars
    )


def _nodes_given(inventory: Optional[Path], command, nodes: List[str], max_hosts: int):
    """`-w NODESET` (as clush takes it) as an inline inventory; what took the INVENTORY place is
    then the first word of the command after --."""
    if not nodes:
        return inventory, command
    from sweep.inventory.command_line import nodeset_inventory

    words = ([str(inventory)] if isinstance(inventory, Path) else []) + list(command or [])
    return Path(nodeset_inventory(",".join(nodes), max_hosts)), words


def _wrap_spec(wrap: bool, command, metric, force: bool, interval: float, speed: bool = False):
    """The benchmark of `sweep run --wrap -- COMMAND`, or None for a plain sweep (whose --force is
    --speed's)."""
    from sweep.errors import ConfigError

    if not wrap:
        if command:
            raise ConfigError(
                f"unexpected {noun(len(command), 'argument')} after the inventory: "
                f"{' '.join(command)}",
                fix="to run a benchmark on every host: sweep run INVENTORY --wrap -- COMMAND",
            )
        if metric or (force and not speed):
            raise ConfigError(
                "--metric and --force belong to --wrap (--force also to --speed)",
                fix="add --wrap -- COMMAND, or --speed",
            )
        return None
    if not command:
        raise ConfigError(
            "--wrap needs a command after --", fix="sweep run INVENTORY --wrap -- python3 bench.py"
        )
    from sweep.collect.wrap import Metric, WrapSpec

    return WrapSpec(tuple(command), tuple(Metric.parse(m) for m in metric), force, interval)


def _check_reference(reference: str, inventory: Path, limit: Optional[str], variables=None) -> None:
    """--reference names a host or group of the inventory: said before the sweep, not after it."""
    from sweep.inventory.model import load_inventory

    inv = load_inventory(inventory, **({"layers": variables} if variables is not None else {}))
    if reference not in {h.name for h in inv.hosts} and reference not in inv.groups:
        raise SweepError(
            f"{reference!r} is neither a host nor a group of {inventory}",
            where="--reference",
            fix="name one of its hosts, or one of its groups",
        )


def _check_run_inputs(
    inventory, resume, known_hosts, expect, baseline, shard_by, reference, limit, variables=None
) -> None:
    """`sweep run`'s paths and choices, checked before anything is read from a host: exit 2 with the
    fix."""
    from sweep.inventory.command_line import is_inline

    for source in inventory if isinstance(inventory, list) else [inventory]:
        if source is not None and not is_inline(source):
            paths.input_path(
                source,
                "INVENTORY",
                "an Ansible inventory (a YAML or INI file, or a folder), or hosts: 'gpu01,gpu02,'",
            )
    # --out: the run folder's own checks say it
    paths.input_dir(resume, "--resume", "an earlier run folder")
    paths.input_file(known_hosts, "--known-hosts", "a known_hosts file")
    paths.input_file(expect, "--expect", "an expectations file (docs/expectations.md)")
    paths.input_dir(baseline, "--baseline", "a baseline folder (sweep baseline set)")
    from sweep.collect.shard import SHARD_BY

    if shard_by not in SHARD_BY:
        raise SweepError(
            f"--shard-by {shard_by!r} is unknown", fix="use --shard-by hash or --shard-by index"
        )
    if reference is not None and inventory is not None and resume is None:
        _check_reference(reference, inventory, limit, variables)
    if expect is not None:  # a bad expectations file is bad input before the sweep, not after it
        from sweep.audit.expect import load_expectations

        load_expectations(expect)


def _check_engine_inputs(engine: str, transport: Optional[str], inventory, resume) -> None:
    """--transport only with an engine that connects with the run's transport; an inventory unless
    the engine lists its own nodes (as slurm does): what the engine declares
    (`sweep.collect.engines.base.Engine`)."""
    from sweep.collect.engines import engine_class

    declared = engine_class(engine)
    if transport is not None and declared.transport != "run":
        raise SweepError(
            f"--transport belongs to the ssh engine, not {engine}",
            fix="drop --transport, or use --engine ssh",
        )
    if inventory is None and resume is None and not declared.lists_nodes:
        raise SweepError(
            "no inventory given", fix="sweep run INVENTORY.yml, or sweep run --resume RUN_DIR"
        )


def _list_hosts(inventory, flags: tuple[bool, bool], **options: Any) -> int:
    """`sweep run --list-hosts`: the hosts the run would contact, in ansible --list-hosts' format
    and order; with --json, what sweep resolved for each (`sweep.inventory.host.describe`). `flags`:
    (--list-hosts, --json)."""
    from sweep.collect.run import planned_hosts
    from sweep.inventory.host import describe

    listing, as_json = flags
    if not listing:
        raise SweepError(
            "--json is the format of --list-hosts", fix="add --list-hosts, or drop --json"
        )
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
