"""The scheduler scripts of a report: drain.sh, resume.sh (Slurm) and kubectl.sh (Kubernetes).

`scheduler_scripts(drain, pool, stamp)` renders them from two inputs only: the hosts to drain, each
with its reason (and taint value), and the hosts of the pool. sweep writes them, never runs them.

They act on what the scheduler says now, not on what the report assumes, and never undo someone
else's work (as LBNL NHC's ``node-mark-online`` onlines a node only when the reason is its own):

    drain.sh    reads each node of the report, one node per query (``scontrol show node -o NODE``:
                its State field, and whether its Reason starts with ``sweep:``), and drains it with
                the ``sweep: ...`` reason, unless it is drained, down or failed for another reason:
                that node keeps its state and reason, and the script says so on stderr (sweep does
                not append to another reason: its resume could not take its part back out cleanly).
                A reason is free text (a newline, ``|``, shell text): asked of one node, it can only
                be that node's, and the nodes acted on are the report's.
    resume.sh   resumes a node of this report's pool only when it is drained with a ``sweep:``
                reason; every other drained node of the report is named on stderr as left alone,
                with its reason.
    kubectl.sh  cordons (marking the node with the ``sweep/cordoned`` annotation when sweep is the
                one that cordons it) and taints ``sweep/broken=<cause>:NoSchedule`` the hosts to
                drain; for a host of the pool that carries sweep's taint it removes the taint, and
                uncordons it when sweep cordoned it. It reads the nodes with ``kubectl get nodes -o
                json`` (read by python3).

``sh SCRIPT -n`` (or ``DRY_RUN=1 sh SCRIPT``) runs only the reads and prints each command it would
run, quoted as a shell reads it. Where the scheduler does not answer (``scontrol ping`` fails,
``kubectl get nodes`` fails) ``-n`` prints what the report asks from the report alone, one line per
drain reason, each marked ``# state not read``, and exits 0; without ``-n`` the script does nothing
and exits 1. Every word that came from a host or an inventory is `word`-quoted, so it reaches
scontrol and kubectl as one argument; a name no node set can hold is left out, named in a comment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from shlex import quote

from sweep.analysis.actions import TAINT_KEY, node_name
from sweep.analysis.names import fold_nodeset
from sweep.text import plural, visible

# the annotation that says sweep, not someone else, cordoned the node
CORDONED_KEY = "sweep/cordoned"
# a Kubernetes node name: an RFC 1123 subdomain (lowercase), at most 253 characters
_K8S_NODE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PRINTABLE = re.compile(r"[ -~]+")  # printable ASCII, no newline
# what sh (and interactive bash: !) reads inside double quotes
_SPECIAL_IN_DOUBLE = frozenset('$`\\"!')
_BARE = re.compile(r"[A-Za-z0-9._/=:,+-]+")


def word(text: str) -> str:
    """One shell word that is `text`: in double quotes where nothing in it is special there (reads
    like the Slurm manual's ``Reason="..."``), else `shlex.quote`'s single quotes."""
    if text and _PRINTABLE.fullmatch(text) and not _SPECIAL_IN_DOUBLE.intersection(text):
        return text if _BARE.fullmatch(text) else f'"{text}"'
    return quote(text)


def comment(text: str) -> str:
    """Text shown inside a shell comment: one line, printable ASCII, quoted."""
    return word(visible(text, keep="").encode("ascii", "backslashreplace").decode("ascii"))


def scheduler_scripts(drain: Sequence[Mapping], pool: Iterable[str], stamp: str) -> dict[str, str]:
    """{"drain", "resume", "kubectl"}: the text of each script.

    `drain`: one mapping per drain reason, {"hosts": [host, ...], "reason": "sweep: ...", "taint":
    "<label value>"}; `pool`: the hosts this report finds healthy (a node also to drain is not);
    `stamp`: who wrote them ("sweep report of <time>"). Hosts are inventory names (``gpu01#2`` is
    node ``gpu01``)."""
    groups = [dict(g, nodes=fold_nodeset(node_name(h) for h in g["hosts"])) for g in drain]
    # gpu01#2 broken, gpu01 healthy: not resumed
    to_drain = {node_name(h) for g in drain for h in g["hosts"]}
    healthy = [n for n in dict.fromkeys(node_name(h) for h in pool) if n not in to_drain]
    return {
        "drain": drain_script(groups, stamp),
        "resume": resume_script(groups, healthy, stamp),
        "kubectl": kubectl_script(groups, healthy, stamp),
    }


# --- the shell both Slurm scripts share
# ---------------------------------------------------------------

_COMMON = r"""set -u
case ${DRY_RUN:-0} in 0) DRY_RUN=0 ;; *) DRY_RUN=1 ;; esac  # DRY_RUN=1, =yes, ...: a dry run
[ "${1-}" = -n ] && DRY_RUN=1
status=0 note=
say() { printf '%s\n' "$*" >&2; }
# text a scheduler answered, as one line of printable ASCII
shown() { printf '%s' "$1" | tr -c ' -~' '?'; }
quoted() {  # one word as a shell reads it back
  case $1 in
    '' | *[!A-Za-z0-9._/=:,+@%-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
  esac
}
# run a command; with -n (DRY_RUN=1) print it instead (marked when the scheduler's state was not
# read)
act() {
  if [ "$DRY_RUN" = 1 ]; then
    cmd=; for w in "$@"; do cmd="$cmd $(quoted "$w")"; done
    printf 'would run:%s%s\n' "$cmd" "${note:+  # $note}"
  else
    "$@" || { status=1; return 1; }
  fi
}
"""

# Slurm is read one node per query (`scontrol show node -o NODE`), so an answer names only the node
# asked for, whatever its reason holds (a reason may hold a newline and `|`: sinfo prints it raw,
# and a line of it would read as another node). Only the node's State field and whether its Reason
# starts with "sweep:" are used; the nodes acted on are always the report's own names.
_SLURM = r"""held() { case $1 in *DRAIN* | *DOWN* | *FAIL*) return 0 ;; esac; return 1; }
# read_node NODE: set state and reason of NODE; 2: Slurm does not know NODE, 1: not read
read_node() {
  if ! line=$(scontrol show node -o "$1" 2>&1); then
    case $line in *" not found"*) return 2 ;; esac
    return 1
  fi
  fields=${line%% Reason=*}  # the fields before the reason (its text is last and may hold anything)
  case $fields in "NodeName=$1 "*" State="*) ;; *) return 1 ;; esac
  state=${fields#* State=}; state=${state%% *}
  reason=; case $line in *" Reason="*) reason=${line#* Reason=}; reason=${reason% \[*@*\]} ;; esac
  return 0
}
reads=1
# no controller answers: a dry run prints what the report asks
if ! scontrol ping >/dev/null 2>&1; then
  if [ "$DRY_RUN" != 1 ]; then
    say "$0: the Slurm controller does not answer (scontrol ping): nothing done"
    exit 1
  fi
  asked="each line is what this report asks, state not read"
  say "$0: the Slurm controller does not answer (scontrol ping): $asked"
  reads=0 note="state not read"
fi
"""

_DRAIN = r"""# drain SET REASON NODE...: drain the nodes of SET (NODE...) that nobody else drained
drain() {
  nodeset=$1 why=$2; shift 2
  [ "$reads" = 1 ] || { act scontrol update NodeName="$nodeset" State=DRAIN Reason="$why"; return; }
  todo= seen=0 kept=0
  for node in "$@"; do
    read_node "$node"; got=$?
    [ "$got" = 2 ] && continue
    if [ "$got" != 0 ]; then
      say "$0: $node not drained: scontrol show node -o $node failed: $(shown "$line")"
      status=1 seen=$((seen + 1)) kept=$((kept + 1))
      continue
    fi
    seen=$((seen + 1))
    case $reason in sweep:*) ours=1 ;; *) ours=0 ;; esac
    if held "$state" && [ "$ours" = 0 ]; then
      say "$0: $node left alone: $state by someone else, Reason=$(shown "$reason")"
      kept=$((kept + 1))
    else
      todo=${todo:+$todo,}$node
    fi
  done
  unknown="Slurm does not know them (scontrol show node)"
  [ "$seen" -ge "$#" ] || say "$0: $(($# - seen)) of the $# nodes of $nodeset not drained: $unknown"
  [ "$kept" -gt 0 ] || [ "$seen" -lt "$#" ] || todo=$nodeset  # every node of SET: keep it folded
  [ -n "$todo" ] && act scontrol update NodeName="$todo" State=DRAIN Reason="$why" &&
    [ "$DRY_RUN" = 0 ] && echo "drained $todo: $why"
}
"""

_RESUME = r"""resume() {  # resume SET NODE...: resume the nodes of SET that sweep drained
  nodeset=$1; shift
  if [ "$reads" = 0 ]; then
    note="state not read: resumes only the nodes drained with a sweep: reason"
    act scontrol update NodeName="$nodeset" State=RESUME
    note="state not read"; return
  fi
  todo=
  for node in "$@"; do
    read_node "$node"; got=$?
    [ "$got" = 2 ] && continue
    if [ "$got" != 0 ]; then
      say "$0: $node not resumed: scontrol show node -o $node failed: $(shown "$line")"
      status=1
      continue
    fi
    held "$state" || continue
    case $reason in
      sweep:*) todo=${todo:+$todo,}$node ;;
      *) say "$0: $node left alone: $state by someone else, Reason=$(shown "$reason")" ;;
    esac
  done
  [ -n "$todo" ] && act scontrol update NodeName="$todo" State=RESUME &&
    [ "$DRY_RUN" = 0 ] && echo "resumed $todo"
}
# keep SET NODE...: name the drained nodes of SET, which this report still holds out or finds broken
keep() {
  [ "$reads" = 1 ] || return 0
  shift
  for node in "$@"; do
    read_node "$node" || continue
    held "$state" || continue
    still="still held out or broken in this report"
    say "$0: $node left alone: $still, $state, Reason=$(shown "$reason")"
  done
}
"""


def _header(title: str, stamp: str, hosts: int, what: str, notes: Sequence[str]) -> list[str]:
    return [
        "#!/bin/sh",
        f"# {title}",
        f"# Written by the {stamp}; sweep never runs it. Read it, run it with -n "
        "(or DRY_RUN=1) to see what it would do, then run it yourself.",
        f"# {plural(hosts, 'host')} {what}. Host names are the inventory's.",
        *(f"# {n}" for n in notes),
        "",
    ]


def _left_out(names, why: str) -> list[str]:
    return [f"# left out ({why}): {comment(name)}" for name in names]


def _names(hosts, odd) -> str:
    """The nodes of a set, one word each (the script asks Slurm of each by its name, never of a
    set)."""
    return " ".join(word(n) for n in dict.fromkeys(node_name(h) for h in hosts) if n not in odd)


def drain_script(groups: list[dict], stamp: str) -> str:
    """drain.sh: one `drain SET COUNT REASON` line per reason, its hosts folded into one node
    set."""
    lines = _header(
        "Drain in Slurm the hosts this report holds out or finds broken (after a repair and a new "
        "sweep: that report's resume.sh).",
        stamp,
        sum(len(g["hosts"]) for g in groups),
        f"to drain (held out of the pool or broken), {plural(len(groups), 'reason')}",
        [
            "A node drained, down or failed for a reason that is not sweep's keeps its state and "
            "reason: named on stderr, not drained."
        ],
    )
    lines += [_COMMON + _SLURM + _DRAIN]
    for g in groups:
        folded, odd = g["nodes"]
        lines += _left_out(odd, "not a Slurm node name")
        if folded:
            lines.append(f"drain {word(folded)} {word(g['reason'])} {_names(g['hosts'], odd)}")
    return "\n".join(lines + ([] if groups else ["# nothing to drain"]) + ['exit "$status"']) + "\n"


def resume_script(groups: list[dict], pool: list[str], stamp: str) -> str:
    """resume.sh: resume the pool's nodes that sweep drained; name the report's other drained
    nodes."""
    folded, odd = fold_nodeset(pool)
    lines = _header(
        "Resume in Slurm the nodes that sweep drained and this report finds healthy.",
        stamp,
        len(pool),
        "in the pool",
        [
            "Resumed: a node of the pool drained with a reason that starts with 'sweep:'. Left "
            "alone, named on stderr with its reason:",
            "a node drained by someone else, and a node this report still holds out or "
            "finds broken.",
        ],
    )
    lines += [_COMMON + _SLURM + _RESUME] + _left_out(odd, "not a Slurm node name")
    if folded:
        lines.append(f"resume {word(folded)} {_names(pool, odd)}")
    for g in groups:
        if g["nodes"][0]:
            lines.append(f"keep {word(g['nodes'][0])} {_names(g['hosts'], g['nodes'][1])}")
    return (
        "\n".join(
            lines
            + ([] if folded else ["# nothing to resume: the pool is empty"])
            + ['exit "$status"']
        )
        + "\n"
    )


_KUBE = r"""PYTHON=${PYTHON:-python3}
FACTS='import json, sys
for n in json.load(sys.stdin)["items"]:
    meta, spec = n["metadata"], n.get("spec") or {}
    taint = [t.get("value", "") for t in spec.get("taints") or [] if t.get("key") == "KEY"]
    print("|".join((meta["name"], "yes" if spec.get("unschedulable") else "no",
                    "yes" if "CORDONED" in (meta.get("annotations") or {}) else "no",
                    taint[0] if taint else "")))'
reads=1 facts=
if ! listed=$(kubectl get nodes -o json); then
  [ "$DRY_RUN" = 1 ] || { say "$0: kubectl get nodes -o json failed: nothing done"; exit 1; }
  say "$0: kubectl get nodes -o json failed: each line is what this report asks, state not read"
  reads=0 note="state not read"
else
  if ! facts=$(printf '%s\n' "$listed" | "$PYTHON" -c "$FACTS"); then
    say "$0: $PYTHON could not read kubectl get nodes -o json: nothing done"
    exit 1
  fi
fi
fact() { printf '%s\n' "$facts" | awk -F'|' -v n="$1" '$1 == n'; }
hold() {  # hold NODE CAUSE: taint NODE with sweep's taint, and cordon it unless it is cordoned
  if [ "$reads" = 0 ]; then line="$1|no|no|"; else line=$(fact "$1"); fi
  if [ -z "$line" ]; then
    say "$0: $1 left out: not a node of this cluster (kubectl get nodes)"
    return
  fi
  IFS='|' read -r name unschedulable ours taint <<EOF
$line
EOF
  if [ "$unschedulable" = no ]; then
    act kubectl annotate node "$1" CORDONED=true --overwrite
    act kubectl cordon "$1"
  elif [ "$ours" = no ]; then
    say "$0: $1 was cordoned by someone else: sweep only taints it, and will not uncordon it"
  fi
  act kubectl taint nodes "$1" "KEY=$2:NoSchedule" --overwrite
}
# release NODE OURS UNSCHEDULABLE: untaint a healthy NODE that carries sweep's taint; uncordon it if
# sweep cordoned it
release() {
  act kubectl taint nodes "$1" KEY:NoSchedule-
  if [ "$2" = yes ]; then
    act kubectl uncordon "$1"
    act kubectl annotate node "$1" CORDONED-
  elif [ "$3" = yes ]; then
    say "$0: $1 left cordoned: cordoned by someone else"
  fi
}
""".replace("KEY", TAINT_KEY).replace("CORDONED", CORDONED_KEY)

_KUBE_POOL = r"""while IFS='|' read -r name unschedulable ours taint; do
  [ -n "$taint" ] || continue
  case $pool in
    *" $name "*) release "$name" "$ours" "$unschedulable" ;;
    *)
      case $drained in
        *" $name "*) ;;
        *) say "$0: $name left alone: tainted KEY=$taint, not in this report's pool" ;;
      esac
      ;;
  esac
done <<EOF
$facts
EOF
""".replace("KEY", TAINT_KEY)


def kubectl_script(groups: list[dict], pool: list[str], stamp: str) -> str:
    """kubectl.sh: taint (and cordon) each host to drain; untaint (and uncordon) the pool's hosts
    sweep tainted."""

    def k8s(names):
        names = list(names)
        kept = [n for n in dict.fromkeys(names) if _K8S_NODE.match(n) and len(n) <= 253]
        taken = set(kept)  # a list's `in` made this quadratic: 4.1 s of the report at 30,000 hosts
        return kept, [n for n in dict.fromkeys(names) if n not in taken]

    healthy, odd_pool = k8s(pool)
    lines = _header(
        "Cordon and taint in Kubernetes the hosts this report holds out or finds broken; "
        "untaint and "
        "uncordon the healthy ones sweep tainted.",
        stamp,
        sum(len(g["hosts"]) for g in groups),
        f"to cordon and taint, {plural(len(healthy), 'host')} in the pool",
        [
            "Tested against a recording kubectl, not a Kubernetes cluster. Needs python3 (or "
            "PYTHON=) to "
            "read kubectl get nodes -o json.",
            f"A node cordoned by someone else stays cordoned; only "
            f"sweep's {TAINT_KEY} taint and {CORDONED_KEY} annotation are sweep's to remove.",
        ],
    )
    lines += [_COMMON + _KUBE] + _left_out(odd_pool, "not a Kubernetes node name")
    drained: list[str] = []
    for g in groups:
        lines.append(f"# {comment(g['reason'])}")
        hosts, odd = k8s(node_name(h) for h in g["hosts"])
        lines += _left_out(odd, "not a Kubernetes node name")
        lines += [f"hold {word(h)} {word(g['taint'])}" for h in hosts]
        drained += hosts
    lines += [f"pool=' {' '.join(healthy)} '", f"drained=' {' '.join(drained)} '", _KUBE_POOL]
    return "\n".join(lines + ['exit "$status"']) + "\n"
