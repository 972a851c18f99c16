"""Recording stand-ins for scontrol and kubectl, for running drain.sh, resume.sh and kubectl.sh
where no scheduler runs. Each appends its argv, as JSON, to $ARGV_LOG. scontrol answers ``ping``
(refused with $SLURM_DOWN) and ``show node -o NODE`` as Slurm 22.05 prints it, from $SLURM_NODES
({"node": [State, reason]}, State as scontrol says it: IDLE, IDLE+DRAIN...; without it every node
asked for is idle; a node not in it is not found); kubectl answers
``get nodes -o json`` from $KUBE_NODES (a NodeList; without it, no nodes; with $KUBE_DOWN, refused) and applies cordon,
uncordon, taint and annotate to it as the API server would, so that a later script meets what an
earlier one did. The real Slurm runs in tests/integration/test_report_drain_slurm.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_LOG = ("import json, os, sys\nwith open(os.environ['ARGV_LOG'], 'a') as fh:\n"
        "    fh.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + '\\n')\n")

_SCONTROL = _LOG + '''args = sys.argv[1:]
if os.environ.get("SLURM_DOWN") and args[:1] in (["ping"], ["show"]):
    print("Slurmctld(primary) at ctl is DOWN")
    sys.exit(1)
if args[:3] == ["show", "node", "-o"]:
    path = os.environ.get("SLURM_NODES")
    known = json.load(open(path)) if path else {args[3]: ["IDLE", None]}
    if args[3] not in known:
        print(f"Node {args[3]} not found")
        sys.exit(1)
    state, reason = known[args[3]]
    print(f"NodeName={args[3]} Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUTot=2 State={state} Partitions=gpu"
          + (f" Reason={reason} [root@2026-12-05T08:42:01]" if reason else ""))
'''

_KUBECTL = _LOG + '''args = sys.argv[1:]
if os.environ.get("KUBE_DOWN"):
    sys.exit("The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?")
path = os.environ.get("KUBE_NODES")
items = json.load(open(path))["items"] if path else []
if args[:2] == ["get", "nodes"]:
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
    sys.exit(0)
verb, rest = args[0], [a for a in args[1:] if not a.startswith("--") and a not in ("node", "nodes")]
node = next((n for n in items if n["metadata"]["name"] == rest[0]), None)
if node is None:
    sys.exit(f'Error from server (NotFound): nodes "{rest[0]}" not found')
spec, meta = node.setdefault("spec", {}), node["metadata"]
if verb in ("cordon", "uncordon"):
    spec["unschedulable"] = verb == "cordon"
elif verb == "taint":
    key = rest[1].split("=")[0].split(":")[0]
    kept = [t for t in spec.get("taints", []) if t["key"] != key]
    if not rest[1].endswith("-"):
        value, effect = rest[1].split("=", 1)[1].rsplit(":", 1)
        kept.append({"key": key, "value": value, "effect": effect})
    spec["taints"] = kept
elif verb == "annotate":
    notes = meta.setdefault("annotations", {})
    if rest[1].endswith("-"):
        notes.pop(rest[1][:-1], None)
    else:
        notes.update([rest[1].split("=", 1)])
json.dump({"items": items}, open(path, "w"))
'''


def install(bin_dir: Path) -> Path:
    """Write the fakes of scontrol and kubectl into `bin_dir`; return it."""
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("scontrol", _SCONTROL), ("kubectl", _KUBECTL)):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)
    return bin_dir


def run(script: Path, bin_dir: Path, log: Path, *args: str, shell: str = "sh", cwd: Path | None = None,
        **env: str) -> subprocess.CompletedProcess:
    """Run `script` with the fakes first on PATH, their argv logged to `log`."""
    return subprocess.run([shell, str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", ARGV_LOG=str(log), **env))


def ran(log: Path, *commands: str) -> list[list[str]]:
    """The arguments of every call of `commands` (scontrol, kubectl), in order; [] when none ran."""
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [argv for prog, *argv in calls if prog in commands]


def updates(log: Path) -> list[list[str]]:
    """The scontrol calls that change Slurm (update), in order: what a script did, its reads left out."""
    return [argv for argv in ran(log, "scontrol") if argv[0] == "update"]


def node(name: str, unschedulable: bool = False, taints=(), annotations=None) -> dict:
    """A Node as ``kubectl get nodes -o json`` lists it (the fields kubectl.sh reads)."""
    spec = {"taints": [dict(t) for t in taints]}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "spec": spec,
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}, "annotations": annotations or {}}}
