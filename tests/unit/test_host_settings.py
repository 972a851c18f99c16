"""Sweep's own per-host settings (inventory variables named sweep_*) reach the agent."""
from pathlib import Path

from sweep.inventory.model import load_inventory
from sweep.collect.bundle import host_agent_args


def test_sweep_interpreters_and_deep_become_agent_arguments(tmp_path: Path):
    inv = tmp_path / "inv.yml"
    inv.write_text(
        "all:\n"
        "  children:\n"
        "    train:\n"
        "      vars:\n"
        "        sweep_interpreters: [/opt/venv/bin/python, /opt/conda/bin/python]\n"
        "      hosts:\n"
        "        gpu01:\n"
        "        gpu02:\n"
        "          sweep_deep: true\n"
        "          sweep_interpreters: /srv/env/bin/python\n"
        "    plain:\n"
        "      hosts:\n"
        "        gpu03:\n")
    hosts = {h.name: h for h in load_inventory(inv).hosts}
    assert host_agent_args(hosts["gpu01"], ["--deadline", "30"]) == [
        "--deadline", "30", "--interpreter", "/opt/venv/bin/python", "--interpreter", "/opt/conda/bin/python"]
    assert host_agent_args(hosts["gpu02"], []) == ["--interpreter", "/srv/env/bin/python", "--deep"]
    assert host_agent_args(hosts["gpu03"], ["--deep"]) == ["--deep"]
