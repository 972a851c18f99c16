"""Whose is each process on the GPUs: the Slurm job it belongs to, and the user who runs it.

A process of a running job is not a fault of the node: the node is busy. Asked of each process
the GPUs list (through the `Source`, so a capture records and replays the answers):

- its cgroup (``/proc/PID/cgroup``): Slurm's cgroup plugins put a job's tasks under
  ``.../job_N/...`` (cgroup v1 ``/slurm/uid_U/job_N/step_S``, v2
  ``.../slurmstepd.scope/job_N/step_S``);
- else ``scontrol pidinfo PID`` (where scontrol is installed: slurmd knows the job of a pid
  under every proctrack plugin, linuxproc included): ``Slurm JobId=N ends at ...``
  (``Slurm job id N`` before 20.02);
- the job's user from ``squeue -h -j N -o %u``, else the process's own user;
- the process's user from its ``Uid:`` line (``/proc/PID/status``) and
  ``/etc/passwd`` (else ``uid N``).

Each process gets {"job": {"id": "N", "user": name} or None, "user": name or None}.
"""

import re

_CGROUP_JOB = re.compile(r"/job_(\d+)(?:/|$)", re.M)
_PIDINFO_JOB = re.compile(r"Slurm (?:JobId=|job id )(\d+)")
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")  # a user name as it may be shown


def attach_jobs(src, gpus):
    """Fill "job" and "user" of every process of `gpus` (one lookup per pid)."""
    seen = {}
    users = _Users(src)
    for g in gpus or []:
        for p in g.get("processes") or []:
            pid = p.get("pid")
            if not isinstance(pid, int) or pid <= 0:
                p["job"], p["user"] = None, None
                continue
            if pid not in seen:
                user = users.of_pid(pid)
                seen[pid] = (job_of(src, pid, user), user)
            p["job"], p["user"] = seen[pid]


def job_of(src, pid, user=None):
    """{"id": "N", "user": name} of the Slurm job `pid` belongs to, or None."""
    cgroup = src.fs("read", "/proc/%d/cgroup" % pid).get("text") or ""
    found = _CGROUP_JOB.search(cgroup)
    if found is None:
        answer = src.command(["scontrol", "pidinfo", str(pid)], timeout=5.0)
        found = _PIDINFO_JOB.search(answer.get("stdout") or "") if answer.get("rc") == 0 else None
    if found is None:
        return None
    job = found.group(1)
    answer = src.command(["squeue", "-h", "-j", job, "-o", "%u"], timeout=5.0)
    said = (answer.get("stdout") or "").strip() if answer.get("rc") == 0 else ""
    return {"id": job, "user": said if _NAME.match(said) else user}


class _Users(object):
    """uid -> name from /etc/passwd, read once."""

    def __init__(self, src):
        self.src = src
        self.names = None

    def of_pid(self, pid):
        status = self.src.fs("read", "/proc/%d/status" % pid).get("text") or ""
        uid = next(
            (
                line.split()[1]
                for line in status.splitlines()
                if line.startswith("Uid:") and len(line.split()) > 1
            ),
            None,
        )
        if uid is None or not uid.isdigit():
            return None
        if self.names is None:
            passwd = self.src.fs("read", "/etc/passwd").get("text") or ""
            self.names = {}
            for line in passwd.splitlines():
                parts = line.split(":")
                if len(parts) > 2 and parts[2].isdigit() and _NAME.match(parts[0]):
                    self.names.setdefault(parts[2], parts[0])
        return self.names.get(uid) or "uid %s" % uid
