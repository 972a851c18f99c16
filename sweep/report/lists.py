"""The report's lists and commands: node-set files, and the scripts that would drain the hosts to drain.

Written with every report, never run by sweep (`write_lists`)::

    pool.nodeset, held_out.nodeset, broken.nodeset
                                     each set as one folded node set (``gpu[01-04,07]``) on one line:
                                     srun --nodelist, sbatch --exclude, clush -w, nodeset -e
    drain.sh     one ``scontrol update NodeName=... State=DRAIN Reason=...`` line per drain reason
    resume.sh    the ``State=RESUME`` lines that undo drain.sh
    kubectl.sh   ``kubectl cordon`` and ``kubectl taint nodes NAME sweep/broken=<cause>:NoSchedule``
                 per host, the undo lines commented; untested against a cluster

Every word that came from a host (reasons) or an inventory (names) is made one line of printable
ASCII first and quoted (`word`: double quotes where nothing in it is special there, else
`shlex.quote`), so a script runs exactly the commands it shows, with those words as arguments; a name
that is no node name (`sweep.analysis.names.NODE_NAME`) is left out of the commands, named in a
comment (escaped) and warned about.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path
from shlex import quote

from sweep.analysis.actions import TAINT_KEY, node_name
from sweep.errors import InventoryWarning
from sweep.report.render import write_text
from sweep.text import plural, visible

FILES = {"pool_nodeset": "pool.nodeset", "held_out_nodeset": "held_out.nodeset", "broken_nodeset": "broken.nodeset",
         "drain": "drain.sh",
         "resume": "resume.sh", "kubectl": "kubectl.sh"}
# a Kubernetes node name: an RFC 1123 subdomain (lowercase), at most 253 characters
_K8S_NODE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def write_lists(out: Path, summary: dict) -> dict:
    """Write the node-set files and the scripts of `summary` (its "host_sets" and "drain") into `out`."""
    sets, groups = summary["host_sets"], summary["drain"]
    files = {key: out / name for key, name in FILES.items()}
    for key, name in (("pool_nodeset", "pool"), ("held_out_nodeset", "held_out"), ("broken_nodeset", "broken")):
        _warn_left_out(files[key], sets[name]["not_folded"])
        write_text(files[key], sets[name]["folded"] + "\n" if sets[name]["folded"] else "")
    stamp = f"sweep report of {summary['generated_at']}"
    write_text(files["drain"], drain_script(groups, stamp))
    write_text(files["resume"], resume_script(groups, stamp))
    write_text(files["kubectl"], kubectl_script(groups, stamp))
    return files


def _warn_left_out(path: Path, names) -> None:
    for name in names:
        warnings.warn(f"{path}: host {_comment(name)} left out: no node set can hold that name; "
                      "name it by hand", InventoryWarning, stacklevel=3)


def word(text: str) -> str:
    """One shell word that is `text`: in double quotes where nothing in it is special there (reads like
    the Slurm manual's ``Reason="..."``), else `shlex.quote`'s single quotes."""
    if text and _PRINTABLE.fullmatch(text) and not _SPECIAL_IN_DOUBLE.intersection(text):
        return text if _BARE.fullmatch(text) else f'"{text}"'
    return quote(text)


_PRINTABLE = re.compile(r"[ -~]+")  # printable ASCII, no newline
_SPECIAL_IN_DOUBLE = frozenset('$`\\"!')  # what sh (and interactive bash: !) reads inside double quotes
_BARE = re.compile(r"[A-Za-z0-9._/=:,+-]+")


def _comment(text: str) -> str:
    """Text shown inside a shell comment: one line, printable ASCII, quoted."""
    return word(visible(text, keep="").encode("ascii", "backslashreplace").decode("ascii"))


def _header(title: str, stamp: str, groups: list[dict], verb: str = "drain") -> list[str]:
    hosts = sum(len(g["hosts"]) for g in groups)
    return ["#!/bin/sh", f"# {title}", f"# Written by the {stamp}; sweep never runs it. Read it, then run it yourself.",
            f"# {plural(hosts, 'host')} to {verb} (held out of the pool or broken), "
            f"{plural(len(groups), 'reason')}. Host names are the inventory's.", ""]


def _left_out(group: dict, why: str) -> list[str]:
    return [f"# left out ({why}): {_comment(name)}" for name in group["not_folded"]]


def drain_script(groups: list[dict], stamp: str) -> str:
    """drain.sh: one scontrol line per reason, its hosts folded into one NodeName."""
    lines = _header("Drain in Slurm the hosts this report holds out or finds broken (undo: resume.sh).",
                    stamp, groups)
    for g in groups:
        lines += _left_out(g, "not a Slurm node name")
        if g["folded"]:
            lines.append(f"scontrol update NodeName={word(g['folded'])} State=DRAIN Reason={word(g['reason'])}")
    return "\n".join(lines + ([] if groups else ["# nothing to drain"])) + "\n"


def resume_script(groups: list[dict], stamp: str) -> str:
    """resume.sh: the RESUME line of each drain.sh line (it resumes the node whoever drained it: see sinfo -R)."""
    lines = _header("Resume in Slurm the hosts drain.sh drains; check sinfo -R first: it resumes them "
                    "whoever drained them.", stamp, groups, "resume")
    lines += [f"scontrol update NodeName={word(g['folded'])} State=RESUME" for g in groups if g["folded"]]
    return "\n".join(lines + ([] if groups else ["# nothing to resume"])) + "\n"


def kubectl_script(groups: list[dict], stamp: str) -> str:
    """kubectl.sh: cordon and taint each host to drain, the undo lines commented. Untested against a cluster."""
    lines = _header("Cordon and taint in Kubernetes the hosts this report holds out or finds broken.", stamp, groups)
    lines.insert(2, "# UNTESTED against a Kubernetes cluster: none runs where sweep is tested. Node names must be "
                    "the inventory's.")
    undo = []
    for g in groups:
        lines.append(f"# {g['reason']}")
        for host in dict.fromkeys(map(node_name, g["hosts"])):
            if not _K8S_NODE.match(host) or len(host) > 253:
                lines.append(f"# left out (not a Kubernetes node name): {_comment(host)}")
                continue
            taint = f"{TAINT_KEY}={g['taint']}:NoSchedule"
            lines += [f"kubectl cordon {word(host)}", f"kubectl taint nodes {word(host)} {word(taint)} --overwrite"]
            undo += [f"# kubectl uncordon {word(host)}", f"# kubectl taint nodes {word(host)} {TAINT_KEY}:NoSchedule-"]
    lines += (["", "# To undo:"] + undo) if undo else []
    return "\n".join(lines + ([] if groups else ["# nothing to drain"])) + "\n"
