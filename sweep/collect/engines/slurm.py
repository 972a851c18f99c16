"""The slurm engine: one ``srun`` job step, one task per node, each running the agent.

Nodes are the inventory's host names (Slurm node names), or, without an inventory, the nodes of
``--nodelist`` (a Slurm hostlist, expanded by ``scontrol show hostnames``) or ``--partition``, or
every node of the cluster. Nodes that Slurm knows as down, drained or not responding are recorded
as failed from ``sinfo`` and left out of the step, so that one bad node does not hold the others; a
drained node's record says what to use instead (`drained_message`: the ssh engine, which closes the
drain loop: drain.sh, repair, a sweep over ssh, resume.sh).

The agent travels as with SSH: srun broadcasts the bundle on every task's stdin (``--input=all``) to
the same bootstrap (`sweep.collect.bundle.remote_command`); nothing is written on the nodes. Each
task prints a line with its node name before the agent and one with the agent's exit status after
it; ``--label`` prefixes every line with the task number, which keeps the tasks' output apart.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sweep.collect.bundle import remote_command
from sweep.collect.engines.base import (
    ProcessEngine,
    EngineError,
    failed,
    kill_group,
    outcome_of_output,
    tail,
)
from sweep.inventory.model import Host, Inventory

SOURCE = "slurm-nodes"
_BEGIN, _END = b"@@sweep-begin", b"@@sweep-end"
_LABELLED = re.compile(rb"^\s*(\d+): ?(.*)$", re.DOTALL)
_LABELLED_TEXT = re.compile(r"^\s*(\d+): ?(.*)$")
_PIECE = 64 * 1024  # the most of one line read at once (srun --label itself cuts lines at 1 KiB)
_BAD_STATES = (
    "down",
    "drain",
    "fail",
    "maint",
    "unknown",
    "future",
    "power",
    "reboot",
    "not_responding",
)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise EngineError(
            f"{name} is not installed here",
            fix="run sweep on a Slurm login node, or use --engine ssh",
        )
    return found


def _query(argv: list[str], what: str) -> str:
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    except subprocess.TimeoutExpired:
        raise EngineError(
            f"{what}: {argv[0]} gave no answer within 60 s",
            fix="check that slurmctld is up (scontrol ping)",
        ) from None
    if proc.returncode != 0:
        raise EngineError(
            f"{what}: {' '.join(argv[:3])} failed: {tail(proc.stderr, 300).strip()}",
            fix="check the node list / partition and that slurmctld is up (scontrol ping)",
        )
    return proc.stdout.decode("utf-8", "replace")


def drained_message(node: str, state: str) -> str:
    """What to use for a drained node: no job step runs there, so the Slurm engine cannot probe it;
    the ssh engine does not read Slurm's state (a node sweep drained is probed again that way, and
    resume.sh resumes it when the report finds it healthy)."""
    return (
        f"{node}: Slurm has the node {state}, so no job step runs there: probe it with the ssh "
        "engine, which does not read Slurm's state (sweep run INVENTORY --engine ssh --limit "
        f"{node}), then sweep report; that report's resume.sh resumes the node when sweep drained "
        f"it and finds it healthy (scontrol show node {node}: Reason=)"
    )


class TaskOutput:
    """Each task's stdout as srun --label hands it over, between the task's begin and end lines; a
    task that writes more than `limit` bytes keeps none of it (counted, dropped as it comes), so
    that one node cannot take the controller's memory or the other nodes' results."""

    def __init__(self, limit: int):
        self.limit = limit
        self.node_of: dict[str, str] = {}  # task -> its node
        # task -> its lines so far (None: over the limit)
        self.lines: dict[str, list[bytes] | None] = {}
        self.size: dict[str, int] = {}
        self.open: str | None = None  # the task whose last line has not ended yet

    def take(self, raw: bytes) -> tuple[str, str, int | None] | None:
        """Take one piece of srun's stdout; (task, node, exit status) when it is a task's end
        line."""
        carried, self.open = self.open, None
        if carried is not None:  # the rest of a line longer than one piece
            task, text = carried, raw.rstrip(b"\n")
        else:
            match = _LABELLED.match(raw.rstrip(b"\n"))
            if not match:
                return None
            task, text = match.group(1).decode(), match.group(2)
        if not raw.endswith(b"\n"):
            self.open = task
        if carried is None and text.startswith(_BEGIN + b" ") and task not in self.node_of:
            self.node_of[task] = text.split(b" ", 1)[1].strip().decode("utf-8", "replace")
            self.lines[task], self.size[task] = [], 0
        elif carried is None and text.startswith(_END + b" ") and task in self.lines:
            parts = text.split()
            rc = int(parts[2]) if len(parts) > 2 and parts[2].lstrip(b"-").isdigit() else None
            return task, self.node_of[task], rc
        elif task in self.lines:
            self._add(task, text, joined=carried is not None)
        return None

    def _add(self, task: str, text: bytes, joined: bool) -> None:
        self.size[task] += len(text) + 1
        kept = self.lines[task]
        if kept is None:
            return
        if self.size[task] > self.limit:
            self.lines[task] = None  # over the bound: what was kept goes too
        elif joined and kept:
            kept[-1] += text
        else:
            kept.append(text)

    def pop(self, task: str) -> bytes | None:
        """The task's stdout (None: more than the limit), forgotten here."""
        kept = self.lines.pop(task, None)
        return None if kept is None else b"\n".join(kept)


def node_host(name: str, groups: tuple[str, ...] = ("slurm",)) -> Host:
    """A Host for a Slurm node (no SSH settings: Slurm reaches it)."""
    return Host(
        name=name,
        address=name,
        port=None,
        user=None,
        key_file=None,
        python="python3",
        ssh_common_args=None,
        proxy_jump=None,
        groups=groups,
        vars=MappingProxyType({}),
        settings=MappingProxyType({}),
    )


class SlurmEngine(ProcessEngine):
    """``srun -N K --ntasks-per-node=1`` over the sweep's nodes; per-task output back through
    --label."""

    name = "slurm"
    SOURCE = SOURCE
    lists_nodes = True  # srun reaches the nodes: no SSH, no become (the job's user)

    def __init__(
        self,
        partition: str | None = None,
        nodelist: str | None = None,
        extra_args: tuple[str, ...] = (),
        immediate: float | None = 30.0,
    ):
        super().__init__()
        self.partition = partition
        self.nodelist = nodelist
        self.extra_args = tuple(extra_args)
        self.immediate = immediate

    # --- which nodes ---------------------------------------------------------------------------

    def node_names(self) -> list[str]:
        """The nodes of --nodelist, else of --partition, else of the whole cluster."""
        if self.nodelist:
            names = _query(
                [_tool("scontrol"), "show", "hostnames", self.nodelist], "--nodelist"
            ).split()
        else:
            argv = [_tool("sinfo"), "-h", "-N", "-o", "%N"] + (
                ["-p", self.partition] if self.partition else []
            )
            names = list(
                dict.fromkeys(_query(argv, "--partition" if self.partition else "sinfo").split())
            )
        if not names:
            where = f"partition {self.partition}" if self.partition else "the cluster"
            raise EngineError(
                f"no Slurm node in {where}", fix="check with sinfo -N, or pass --nodelist"
            )
        return names

    def inventory(self) -> Inventory:
        """The nodes as an Inventory (for the run's manifest), all in group "slurm"."""
        hosts = tuple(node_host(name) for name in self.node_names())
        label = self.partition or (self.nodelist and "nodelist") or "all"
        return Inventory(
            path=Path(f"{SOURCE}-{re.sub(r'[^A-Za-z0-9._-]', '_', label)}"),
            hosts=hosts,
            groups=MappingProxyType(
                {"all": tuple(h.name for h in hosts), "slurm": tuple(h.name for h in hosts)}
            ),
        )

    def states(self, names: list[str]) -> dict[str, str]:
        """node -> Slurm state (long form, "*" appended when not responding); unknown nodes
        absent."""
        known = {}
        out = _query([_tool("sinfo"), "-h", "-N", "-a", "-o", "%N|%T"], "sinfo")
        wanted = set(names)
        for line in out.splitlines():
            node, _, state = line.strip().partition("|")
            if node in wanted:
                known.setdefault(node, state.strip().lower())
        return known

    # --- the step ------------------------------------------------------------------------------

    def command(self, nodes: list[Host]) -> list[str]:
        """srun's argv: one task per node, every task running the bootstrap with the bundle on
        stdin."""
        job = self.job
        opts = job.options
        pythons = {h.name: h.python for h in nodes if h.python != "python3"}
        pick = (
            'py=python3\ncase "$SLURMD_NODENAME" in\n'
            + "".join(
                f"  {shlex.quote(name)}) py={shlex.quote(py)} ;;\n" for name, py in pythons.items()
            )
            + "esac\n"
        )
        agent = remote_command("$py", len(job.payload), list(job.agent_args)).replace(
            "'$py'", '"$py"', 1
        )
        script = (
            f'echo "{_BEGIN.decode()} $SLURMD_NODENAME"\n{pick}{agent}\nrc=$?\n'
            f'echo\necho "{_END.decode()} $SLURMD_NODENAME $rc"\n'
        )
        minutes = max(1, int(-(-opts.host_deadline // 60)))
        argv = [
            _tool("srun"),
            f"--nodes={len(nodes)}",
            f"--ntasks={len(nodes)}",
            "--ntasks-per-node=1",
            f"--nodelist={','.join(h.name for h in nodes)}",
            "--kill-on-bad-exit=0",
            "--label",
            "--input=all",
            "--job-name=sweep",
            f"--time={minutes}",
        ]
        if self.partition:
            argv.append(f"--partition={self.partition}")
        if self.immediate:
            argv.append(f"--immediate={max(1, round(self.immediate))}")
        return argv + [*self.extra_args, "/bin/sh", "-c", script]

    def _read(self, hosts: list[Any]) -> None:
        started = time.time()
        states = self.states([h.name for h in hosts])
        usable = []
        for host in hosts:
            state = states.get(host.name)
            if state is None:
                self._emit(
                    host,
                    failed(
                        host,
                        started,
                        "dns",
                        (
                            f"{host.name}: Slurm knows no node of that name; check the name with "
                            "sinfo -N, or use the Slurm node names in the inventory"
                        ),
                    ),
                )
            elif "drain" in state:
                # sweep's drain loop: probe it another way (also when its slurmd is not answering,
                # "drained*": the ssh engine does not need it)
                self._emit(
                    host, failed(host, started, "refused", drained_message(host.name, state))
                )
            elif any(bad in state for bad in _BAD_STATES) or state.endswith("*"):
                cls = "timeout" if state.endswith("*") or "down" in state else "refused"
                self._emit(
                    host,
                    failed(
                        host,
                        started,
                        cls,
                        (
                            f"{host.name}: Slurm has the node {state}, so no task can run there; "
                            f"see scontrol show node {host.name} (Reason=), and resume it when "
                            f"fixed: scontrol update nodename={host.name} state=resume"
                        ),
                    ),
                )
            else:
                usable.append(host)
        if not usable:
            return
        self._step(usable, started)

    def _step(self, nodes: list[Host], started: float) -> None:
        by_name = {h.name: h for h in nodes}
        proc = self._start(self.command(nodes), dict(os.environ), stdin=self.job.payload)
        deadline = time.monotonic() + self.job.options.host_deadline + (self.immediate or 0) + 30
        tasks = TaskOutput(self.job.options.output_limit)
        timer = threading.Timer(
            max(1.0, deadline - time.monotonic()), self._interrupt, args=(proc,)
        )
        timer.daemon = True
        timer.start()
        try:
            while True:
                # bounded: a line without an end is read piece by piece
                raw = proc.stdout.readline(_PIECE)
                if not raw:
                    break
                ended = tasks.take(raw)
                if ended is not None:
                    task, node, rc = ended
                    host = by_name.pop(node, None)
                    if host is not None:
                        self._emit(host, self._outcome(host, started, tasks.pop(task), rc, task))
            code = proc.wait()
        finally:
            timer.cancel()
        if not by_name or self._stopping.is_set():
            return
        said = tail(self._stderr_text(), 600).strip()
        late = time.monotonic() >= deadline
        for host in by_name.values():
            if late:
                cls, why = (
                    "timeout",
                    (
                        "no answer within the host deadline of "
                        f"{self.job.options.host_deadline:g} s (srun was stopped); check the "
                        "node, or raise --host-deadline"
                    ),
                )
            elif host.name not in tasks.node_of.values():
                cls, why = (
                    "refused",
                    (
                        f"srun ran no task there (exit {code}: {said or 'no message'}); check "
                        "that the node is free and the partition right (squeue, sinfo)"
                    ),
                )
            else:
                cls, why = (
                    "agent_error",
                    f"the task ended before the agent did (srun: {said or 'no message'})",
                )
            self._emit(host, failed(host, started, cls, f"{host.name}: {why}", stderr=said))

    def _outcome(self, host: Host, started: float, out: bytes | None, rc: int | None, task: str):
        """One node's Outcome from its task's stdout (None: the task wrote more than the output
        limit)."""
        stderr = self._task_stderr(task)
        if out is None:
            limit = self.job.options.output_limit
            return failed(
                host,
                started,
                "output_too_large",
                (
                    f"{host.name}: the agent wrote more than {limit // (1024 * 1024)} MiB on "
                    "stdout; the output was dropped as it came; check what the node's python3 "
                    "runs at start (sitecustomize, PYTHONSTARTUP)"
                ),
                exit_status=rc,
                stderr=stderr,
            )
        return outcome_of_output(host, started, out, rc, stderr, self.job.options.host_deadline)

    def _task_stderr(self, task: str) -> str:
        """The lines of one task's stderr (srun labels them too) and srun's words on that task."""
        mine = []
        for line in self._stderr_text().splitlines():
            match = _LABELLED_TEXT.match(line)
            if match and match.group(1) == task:
                mine.append(match.group(2))
            elif f"task {task}:" in line:
                mine.append(line)
        return "\n".join(mine)[-4096:]

    def _interrupt(self, proc: subprocess.Popen) -> None:
        # srun's first SIGINT only reports status; a second one within a second cancels the step
        kill_group(proc, signal.SIGINT)
        time.sleep(0.2)
        kill_group(proc, signal.SIGINT)
