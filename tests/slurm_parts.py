"""A real one-node Slurm cluster on loopback for the tests: slurmctld + slurmd as root, no munge
(/work/shared/NOTES.md "Slurm on this machine"). Used by the Slurm engine's tests and the drain test."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import require


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SLURM_CONF = """\
ClusterName=sweeptest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ReturnToService=2
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
{others}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@contextmanager
def one_node_slurm(work: Path, others=()):
    """Start the cluster with its state under `work`; yield {"conf": its slurm.conf, "node": its one node}.
    `others`: names of more nodes Slurm knows, with no slurmd behind them (a port nothing listens on): nodes
    of the cluster outside a report, that a script must never touch."""
    if shutil.which("slurmctld") is None or shutil.which("slurmd") is None or shutil.which("srun") is None:
        require(False, "Slurm is not installed (apt-get install -y slurm-wlm)")
    if os.geteuid() != 0:
        pytest.skip("the test cluster's slurmd runs as root")
    for sub in ("state", "spool"):
        (work / sub).mkdir()
    node = socket.gethostname()
    conf = work / "slurm.conf"
    conf.write_text(SLURM_CONF.format(node=node, ctld_port=_free_port(), d_port=_free_port(), dir=work,
                                      cpus=os.cpu_count() or 1,
                                      others="".join(f"NodeName={o} NodeAddr=127.0.0.1 Port={_free_port()} CPUs=1 "
                                                     "State=UNKNOWN\n" for o in others)))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs = [subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                              stderr=open(work / f"{daemon}.out", "wb"))
             for daemon in ("slurmctld", "slurmd")]
    try:
        end = time.monotonic() + 120  # a bound on coming up, generous for a loaded machine
        while True:
            state = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], env=env, capture_output=True, text=True)
            if state.returncode == 0 and state.stdout.strip() in ("idle", "mixed"):
                break
            if time.monotonic() > end or any(p.poll() is not None for p in procs):
                logs = "".join((work / f).read_text(errors="replace")[-600:] for f in ("slurmctld.log", "slurmd.log")
                               if (work / f).exists())
                pytest.fail(f"the test Slurm cluster did not come up: {state.stdout.strip()} {logs}")
            time.sleep(0.3)
        yield {"conf": str(conf), "node": node}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
