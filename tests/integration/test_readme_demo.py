"""The README's first command, run as written in a fresh copy of the repository, exits 0.

One substitution, and only for the package-install prefix (`apt-get update && apt-get install -y
--no-install-recommends PKGS && python3 -m venv .venv && . .venv/bin/activate && python3 -m pip
install -e . && `): tests run without network, and a `pip install -e .` from a temporary copy would
re-point this machine's sweep at it. The prefix is
replaced by a check of what it installs: every Debian package it names is installed (dpkg-query),
and every dependency pyproject.toml names is installed at a version it accepts. The rest of the
command (`sweep demo`) runs exactly as written, with the copy first on PYTHONPATH.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers import CHROMIUM, chromium, require

ROOT = Path(__file__).resolve().parents[2]
INSTALL = re.compile(r"apt-get update && apt-get install -y --no-install-recommends (?P<debs>[a-z0-9.+ -]+?) "
                     r"&& python3 -m venv \.venv && \. \.venv/bin/activate && python3 -m pip install -e \. && ")
DEPS_CHECK = ("import importlib.metadata as m, sys, tomllib; from packaging.requirements import Requirement; "
              "reqs = [Requirement(r) for r in tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']]; "
              "bad = [str(r) for r in reqs if not r.specifier.contains(m.version(r.name), prereleases=True)]; "
              "sys.exit('not installed as pyproject.toml asks: ' + ', '.join(bad) if bad else 0)")


def readme_command(n: int) -> str:
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")][n - 1]


def without_network(command: str) -> str:
    """Command 1 with its install prefix replaced by a check of what the prefix installs."""
    m = INSTALL.match(command)
    assert m, f"the README's command 1 no longer starts with the install prefix this test knows: {command}"
    return (f"dpkg-query -W {m['debs']} >/dev/null && python3 -c \"{DEPS_CHECK}\" && "
            + command[m.end():])


def fresh_copy(dest: Path) -> Path:
    """The repository's files (tracked and new, not ignored) copied into `dest`, as a fresh checkout."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
    return dest


def test_the_substitution_touches_only_the_install_prefix_and_still_checks_it(tmp_path):
    command = readme_command(1)
    assert command.endswith(" && sweep demo")
    assert without_network(command).endswith(" && sweep demo")
    assert without_network(command).count("&&") == command.count("&&") - 3  # the 5 install steps became 2 checks
    assert "python3-venv" in INSTALL.match(command)["debs"].split()  # Debian's python3 has no venv without it
    missing = without_network(command.replace("openssh-server", "openssh-server no-such-package-sweep"))
    proc = subprocess.run(["bash", "-c", missing.replace(" && sweep demo", "")], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "no-such-package-sweep" in proc.stderr
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["paramiko>=999"]\n')
    proc = subprocess.run(["bash", "-c", without_network(command).replace(" && sweep demo", "")], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "paramiko>=999" in proc.stderr


def test_readme_command_1_exits_0_in_a_fresh_copy(tmp_path):
    require(shutil.which("sshd") is not None or Path("/usr/sbin/sshd").exists(),
            "openssh-server is not installed (apt-get install openssh-server)")
    copy = fresh_copy(tmp_path / "sweep")
    require(shutil.which("sweep") is not None, "the sweep command is not installed (pip install -e .)")
    path = [str(Path(sys.executable).parent), str(Path(shutil.which("sweep")).parent), "/usr/sbin", "/usr/bin", "/bin"]
    own_tmp = tmp_path / "tmp"  # the demo's work folder (tempfile) under this test's own, so that the teardown
    own_tmp.mkdir()             # check below counts this demo's sshd servers, not another sweep's on the machine
    env = {"PATH": ":".join(path), "HOME": str(tmp_path), "PYTHONPATH": str(copy), "LANG": "C.UTF-8",
           "TMPDIR": str(own_tmp)}
    proc = subprocess.run(["bash", "-c", without_network(readme_command(1))], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = list((copy / "reports" / "demo").glob("*-demo"))  # apart from reports/ and its history
    assert len(runs) == 1, proc.stderr
    run = runs[0]
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["hosts_total"] == 43 and summary["comparable"] is False
    assert summary["exit_code"] == 1  # what `sweep run` gives this fleet: it has unreachable hosts on purpose
    assert len(list((run / "hosts").glob("*.json"))) == 43
    assert (run / "report" / "report.html").stat().st_size > 10_000
    # the pool: comparable AND runnable AND healthy. gpu21 (a process holding 11 GiB), gpu25 (HW thermal
    # slowdown) and the other hosts of the reference class with a broken contract are held out of it
    reference = set(summary["reference_class"]["hosts"])
    held_out = {h["host"]: h for h in summary["held_out"]}
    from ClusterShell.NodeSet import NodeSet  # summary.json folds the hosts that share a finding (issue 41)

    broken = {h for f in summary["findings"] if f["severity"] == "broken" for h in [*NodeSet(f["folded"]), *f["not_folded"]]}
    assert {"gpu21", "gpu25"} <= reference and {"gpu21", "gpu25"} <= set(held_out)
    assert held_out["gpu21"]["what"] == "processes"
    assert held_out["gpu25"]["what"] == "hw_thermal_slowdown"  # its one cause (issues 41, 48)
    assert set(held_out) - {"gpu21"} == broken & reference
    assert set(summary["pool"]["hosts"]) == reference - set(held_out)
    # gpu29 (CUDA_VISIBLE_DEVICES="" in the SSH session) and gpu33 (the login python3's CPU-only torch): the demo
    # probes over SSH, so that is the probe's environment, not the host's: judged on NVML, in the pool, named
    # with its owner and fix, never drained (issue 49)
    assert {"gpu29", "gpu33"} <= set(summary["pool"]["hosts"])
    assert not {"gpu29", "gpu33"} & {e["host"] for e in summary["excluded"]}
    owners = {o["host"]: o for o in summary["owners"]}
    assert owners["gpu29"]["owner"] == owners["gpu33"]["owner"] == "probe_env"
    assert owners["gpu29"]["fix"].startswith("fix the launcher")
    assert owners["gpu33"]["fix"].startswith("install a CUDA build of torch")
    require(os.access(CHROMIUM, os.X_OK), "/usr/bin/chromium is absent: apt-get install -y chromium")
    dom = chromium("--dump-dom", (run / "report" / "report.html").resolve().as_uri())
    box = dom[dom.index('id="verdict"'):dom.index("</section>")]
    assert re.search(f'id="pool-size" href="#[a-z-]+"><b>{summary["pool"]["size"]}</b>', box)  # the tile links its list
    held = {host: why for hosts, why in re.findall(r'<li class="cause [\w-]+" data-hosts="([^"]*)"[^>]*>.*?'
                                                   r'<span class="why">(.*?)</span>', box, re.S)
            for host in NodeSet(hosts)}  # the top box names each host kept out once, by its cause
    assert set(held_out) <= set(held)
    assert held["gpu21"] == "1 other process on the GPUs: python3 orphan_eval.py (pid 48213, 11264 MiB) on GPU 2"
    assert held["gpu25"] == "HW thermal slowdown active on GPU 6 (SM 1035 of 1980 MHz, 91 C)"  # its cause, once (issue 41)
    lines = proc.stdout.splitlines()  # the results on stdout; the progress and the summary on stderr
    assert f"report: {run.resolve() / 'report' / 'report.html'}" in lines, proc.stdout
    assert any(l.startswith("under `sweep run` this fleet would exit 1: ") for l in lines), proc.stdout
    assert "Traceback" not in proc.stderr
    left = subprocess.run(["pgrep", "-f", f"sshd.*{own_tmp}/sweep-demo-"], capture_output=True, text=True).stdout
    assert left == "", "the demo fleet's sshd servers were not torn down"


@pytest.mark.parametrize("sshd,line", [
    ("/nonexistent/sshd", "sweep: error: /nonexistent/sshd not found; apt-get install -y openssh-server"),
    ("/bin/false", "sweep: error: gpu01: sshd on "),
])
def test_a_demo_that_cannot_run_exits_non_zero(tmp_path, sshd, line):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
           "SWEEP_SSHD": sshd}
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "demo", "--hosts", "2"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(line), proc.stderr
    assert "Traceback" not in proc.stderr
