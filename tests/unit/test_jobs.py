"""The agent names the Slurm job of each process on the GPUs (probe_agent/jobs.py, issue 49), from the
answers a host gives: Slurm's cgroup paths (v1 and v2, as slurmd's cgroup plugins lay them out), else
`scontrol pidinfo` (22.05's and the older wording), the user from squeue, else from /proc and /etc/passwd.
The answers go through a capture, as a recorded host's would; the real Slurm case is in
tests/integration/test_report_drain_slurm.py."""
from __future__ import annotations

import json

import pytest

from probe_agent.jobs import attach_jobs
from probe_agent.source import ReplaySource

STATUS = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1001\t1001\t1001\t1001\nGid:\t1001\t1001\t1001\t1001\n"
PASSWD = "root:x:0:0:root:/root:/bin/bash\nop:x:1001:1001:Op:/home/op:/bin/bash\n"


def _source(tmp_path, paths=None, commands=None) -> ReplaySource:
    capture = {"format": "sweep-capture", "version": 3, "nvml": {},
               "paths": {f"read {k}": {"text": v} for k, v in (paths or {}).items()},
               "commands": {k: {"rc": rc, "stdout": out, "stderr": "", "seconds": 0.01}
                            for k, (rc, out) in (commands or {}).items()}}
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(capture))
    return ReplaySource(str(path))


def _owner(src, pid=4242):
    gpus = [{"index": 0, "processes": [{"pid": pid, "name": "python3"}]}]
    attach_jobs(src, gpus)
    p = gpus[0]["processes"][0]
    return p["job"], p["user"]


@pytest.mark.parametrize("cgroup", [
    "12:memory:/slurm/uid_1001/job_41234/step_0/task_0\n0::/\n",  # cgroup v1 (cgroup/v1 plugin)
    "0::/system.slice/slurmstepd.scope/job_41234/step_batch/user/task_0\n",  # cgroup v2 (cgroup/v2 plugin)
])
def test_a_process_in_a_jobs_cgroup_belongs_to_that_job_and_its_user_is_squeues(tmp_path, cgroup):
    src = _source(tmp_path, {"/proc/4242/cgroup": cgroup, "/proc/4242/status": STATUS, "/etc/passwd": PASSWD},
                  {"squeue -h -j 41234 -o %u": (0, "alice\n")})
    assert _owner(src) == ({"id": "41234", "user": "alice"}, "op")


@pytest.mark.parametrize("said", ["Slurm JobId=77 ends at Sun Dec 05 08:43:14 2027\nJob remaining time is 60 seconds\n",
                                  "Slurm job id 77 ends at Sun Dec 05 08:43:14 2027\n"])
def test_without_a_job_cgroup_scontrol_pidinfo_names_the_job(tmp_path, said):
    src = _source(tmp_path, {"/proc/4242/cgroup": "0::/\n", "/proc/4242/status": STATUS, "/etc/passwd": PASSWD},
                  {"scontrol pidinfo 4242": (0, said)})  # squeue not answering: the process's own user
    assert _owner(src) == ({"id": "77", "user": "op"}, "op")


def test_a_process_of_no_job_keeps_its_user_and_no_job(tmp_path):
    src = _source(tmp_path, {"/proc/4242/cgroup": "0::/user.slice/user-1001.slice\n", "/proc/4242/status": STATUS,
                             "/etc/passwd": PASSWD},
                  {"scontrol pidinfo 4242": (1, "slurm_pid2jobid: Process not managed by Slurm\n")})
    assert _owner(src) == (None, "op")


def test_nothing_readable_is_no_job_and_no_user_and_a_hostile_name_is_not_shown(tmp_path):
    assert _owner(_source(tmp_path)) == (None, None)
    src = _source(tmp_path, {"/proc/9/cgroup": "/job_5\n", "/proc/9/status": "Uid:\t7\n",
                             "/etc/passwd": "$(reboot):x:7:7::/:/bin/sh\n"},
                  {"squeue -h -j 5 -o %u": (0, "a b\n")})
    assert _owner(src, pid=9) == ({"id": "5", "user": "uid 7"}, "uid 7")
