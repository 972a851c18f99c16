"""`sweep demo --serve`: the demo fleet stays up, the commands it prints work as printed against it,
Ctrl-C takes every sshd down; and nothing the demo fleet renders says "(s)" or "1 hosts"."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from sweep.demo.loopback import SSHD

from helpers import require

ROOT = Path(__file__).resolve().parents[2]
CLUMSY = re.compile(r"\(s\)|(?<![\d.,])1 (hosts|runs|GPUs|classes|changes|findings)\b")


def _printed_commands(proc) -> tuple[list[str], list[str]]:
    """stdout lines up to the last printed command (`sweep diff ...`), and the commands indented under 'try:'."""
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("  sweep diff "):
            break
    tried = lines[lines.index("try:") + 1:] if "try:" in lines else []  # the verdict's lines are indented too
    return lines, [line[2:] for line in tried if line.startswith("  ")]


def _rendered(folder: Path) -> str:
    """Every text file of a report or history folder, HTML with its scripts and styles left out."""
    texts = []
    for path in sorted(folder.rglob("*")):
        if path.suffix in (".md", ".csv", ".html", ".txt"):
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".html":
                text = re.sub(r"<(script|style)\b.*?</\1>", "", text, flags=re.S)
            texts.append(text)
    return "\n".join(texts)


def test_demo_serve_prints_commands_that_sweep_the_live_fleet_and_ctrl_c_stops_it(tmp_path):
    require(os.geteuid() == 0 and os.path.exists(SSHD), "needs root and OpenSSH's sshd (apt-get install -y openssh-server)")
    sweep = shutil.which("sweep")
    require(sweep is not None, "the sweep command is not installed (pip install -e .)")
    env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(ROOT), LANG="C.UTF-8")
    env.pop("SSH_AUTH_SOCK", None)
    demo = subprocess.Popen([sys.executable, "-m", "sweep.cli", "demo", "--serve", "--hosts", "4"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(480, demo.kill)  # a hung demo fails the test instead of hanging the suite
    watchdog.start()
    try:
        out, commands = _printed_commands(demo)
        assert len(commands) == 3, "\n".join(out)
        inventory = Path(next(line.split(": ", 1)[1] for line in out if line.startswith("inventory: ")))
        known_hosts = Path(next(line.split(": ", 1)[1] for line in out if line.startswith("known_hosts: ")))
        assert inventory.is_file() and known_hosts.is_file()
        workdir = inventory.parent
        demo_run = next((tmp_path / "reports" / "demo").glob("*-demo"))
        runs = []
        for command, hosts in zip(commands[:2], (7, 1)):  # the whole fleet (3 down on purpose); rack_a less gpu01
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == (1 if hosts == 7 else 0), command + done.stdout + done.stderr
            run = Path(done.stdout.splitlines()[-1].removeprefix("run folder: "))
            assert sorted(p.stem for p in (run / "hosts").glob("*.json")) == (
                [f"gpu0{n}" for n in range(1, 8)] if hosts == 7 else ["gpu02"]), done.stdout
            runs.append((done, run))
        assert commands[2] == f"sweep diff {demo_run.resolve()} {runs[0][1]}"
        diff = subprocess.run(["bash", "-c", commands[2]], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert diff.returncode == 0, diff.stdout + diff.stderr  # the same fleet swept twice: nothing changed
        assert demo.poll() is None  # still serving
        demo.send_signal(signal.SIGINT)
        rest, err = demo.communicate(timeout=120)
    finally:
        watchdog.cancel()
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 0, err
    assert "demo done: every host behaved as designed" in rest.splitlines()
    left = subprocess.run(["pgrep", "-f", f"sshd.*{workdir}"], capture_output=True, text=True).stdout
    assert left == "", "the demo fleet's sshd servers outlived Ctrl-C"
    assert not workdir.exists()  # no --keep: its keys and configs are gone with it

    # the grammar of everything the demo fleet rendered: terminal, reports, diff, history
    history = subprocess.run([sys.executable, "-m", "sweep.cli", "history", "--root",
                              str(tmp_path / "reports" / "demo")],  # the demo's runs: apart from reports/
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert history.returncode in (0, 5), history.stderr
    texts = {"demo": "\n".join(out) + rest + err, "diff": diff.stdout + diff.stderr,
             "history": history.stdout + history.stderr + _rendered(tmp_path / "reports" / "demo" / "history")}
    for done, run in runs:
        texts[run.name] = done.stdout + done.stderr + _rendered(run / "report")
    texts["demo report"] = _rendered(demo_run / "report")
    json.loads((demo_run / "report" / "summary.json").read_text())
    clumsy = {name: sorted(set(m.group() for m in CLUMSY.finditer(text))) for name, text in texts.items()}
    assert not any(clumsy.values()), clumsy
