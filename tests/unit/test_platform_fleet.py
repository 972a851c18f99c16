"""Issue 15 on the comparison side: the demo fleet's derived captures for each new failure, replayed
by the agent and compared with pandas, land in the right class or finding with their fix; the
expectations and `sweep diff` see them."""
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sweep.analysis.compare import compare
from sweep.analysis.fleet import load_fleet
from sweep.audit.diff import diff_health, rising_link_errors
from sweep.audit.expect import evaluate_expectations, load_expectations
from sweep.demo import hgx, synth
from sweep.demo.fleet import demo_fleet

ROOT = Path(__file__).resolve().parents[2]


def replay(capture: str, out: Path) -> Path:
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", capture], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out.write_text(proc.stdout)
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    hosts = [h for h in demo_fleet(tmp / "captures", unreachable=False)]
    (tmp / "health").mkdir()
    with ThreadPoolExecutor(4) as pool:
        files = list(pool.map(lambda h: replay(h.capture, tmp / "health" / f"{h.name}.json"), hosts))
    fleet = load_fleet(files)
    return fleet, compare(fleet), {f.stem: json.loads(f.read_text()) for f in files}


def class_of(findings, host):
    return next(c for c in findings.classes if host in c.hosts)


def finding(findings, host, kind):
    return next(f for f in findings.health if f.host == host and f.kind == kind)


def test_healthy_hosts_read_the_whole_platform(demo):
    _, _, health = demo
    h = health["gpu01"]
    assert h["verdict"] == "ok", [(c["name"], c["message"]) for c in h["contracts"] if c["status"] != "ok"]
    assert [c["status"] for c in h["contracts"] if c["name"] in ("fabric", "xid", "links", "host")] == ["ok"] * 4
    assert h["host_settings"]["nearest_nic"]["3"] == {"nic": "mlx5_3", "link": "PXB", "source": "sysfs"}


def test_card_missing_from_nvml_is_excluded_with_its_bus_id(demo):
    _, f, _ = demo
    ex = next(e for e in f.excluded if e["host"] == "gpu03")
    assert ex["contract"] == "driver" and "0000:88:00.0" in ex["message"]
    lowest = finding(f, "gpu03", "lowest_broken")
    assert "reseat or replace the card" in lowest.fix


@pytest.mark.parametrize("host,key,value,words", [
    ("gpu09", "pcie", "gen5 x16 x7, gen5 x8 x1 (GPU 3)", "half at x8 of x16"),
    ("gpu15", "nvlinks", "18 of 18 x7, 17 of 18 x1 (GPU 5)", "collectives run slower"),
    ("gpu31", "ib_rate", "7x 400 Gb/s + 1x 200 Gb/s", "slowest port"),
    ("gpu35", "cpu_governor", "powersave", "launch latency"),
])
def test_key_changing_failures_get_their_own_class_with_impact(demo, host, key, value, words):
    _, f, _ = demo
    c = class_of(f, host)
    assert c.id != f.classes[0].id, f"{host} should not be in the reference class"
    d = next(d for d in c.differs if d.key == key)
    assert d.value == value
    assert words in d.impact


def test_link_failures_are_also_findings_with_their_fix(demo):
    _, f, _ = demo
    assert "PCIe link x8, the link supports x16" in finding(f, "gpu09", "lowest_broken").detail
    nv = finding(f, "gpu15", "lowest_broken")
    assert "GPU 5: 17 of 18 NVLinks active (down: 3); NV18 becomes NV17 to each peer" in nv.detail
    assert "nvlink -s" in nv.fix


@pytest.mark.parametrize("host,kind,severity,words,fix", [
    ("gpu19", "lowest_broken", "broken", "Xid 79 on 0000:38:00 x1: GPU has fallen off the bus", "Xid 79: reboot"),
    ("gpu23", "lowest_broken", "broken", "Xid 48 on 0000:28:00 x2: double-bit ECC error", "Xid 48/Xid 95: reset the GPU"),
    ("gpu31", "host_settings", "warning", "mlx5_1 port 1 at 200 Gb/s", "ibstat"),
    ("gpu35", "host_settings", "warning", "CPU frequency governor powersave", "cpupower"),
    ("gpu36", "thermal_headroom", "warning", "GPU 4: HBM at 92 C, 3 C below its slowdown threshold 95 C", "cooling"),
])
def test_health_only_failures_are_findings(demo, host, kind, severity, words, fix):
    _, f, _ = demo
    x = finding(f, host, kind)
    assert x.severity == severity and words in x.detail and fix in x.fix


def test_xid_and_hbm_hosts_stay_in_the_reference_class(demo):
    _, f, _ = demo
    for host in ("gpu19", "gpu23", "gpu36"):
        assert host in f.classes[0].hosts


def test_fabric_not_started_cannot_run_a_benchmark(demo):
    _, f, health = demo
    ex = next(e for e in f.excluded if e["host"] == "gpu27")
    assert ex["contract"] == "fabric" and "error 802" in ex["message"]
    assert "all 8 GPUs not_started" in ex["message"]
    framework = next(c for c in health["gpu27"]["contracts"] if c["name"] == "framework")
    assert framework["consequence_of"] in (None, "fabric")


def test_expectations_pin_the_new_facts(demo, tmp_path):
    _, _, health = demo
    exp = tmp_path / "fleet.yml"
    exp.write_text("version: 1\ndefaults:\n  gpus: 8\n  pcie: gen5x16\n  ib_rate_gbps: 400\n"
                   "  cpu_governor: performance\n")
    records = [{"host": h, "status": "ok", "health": health[h], "groups": []}
               for h in ("gpu01", "gpu03", "gpu09", "gpu31", "gpu35")]
    found = {(v.host, v.rule): v for v in evaluate_expectations(records, load_expectations(exp))}
    assert set(found) == {("gpu03", "gpus"), ("gpu09", "pcie"), ("gpu31", "ib_rate_gbps"),
                          ("gpu35", "cpu_governor")}
    assert "GPUs listed by the driver: 7, on the PCI bus: 8" in found["gpu03", "gpus"].message
    assert "PCIe link gen5x8 on GPU 3" in found["gpu09", "pcie"].message
    assert "mlx5_1/1 ACTIVE at 200 Gb/s" in found["gpu31", "ib_rate_gbps"].message
    assert "CPU frequency governor powersave" in found["gpu35", "cpu_governor"].message


def test_sweep_diff_finds_nvlink_counters_rising(demo, tmp_path, capsys):
    _, _, health = demo
    base = synth.derive(synth.base_capture("h200-idle"), [synth.multi_gpu(2), hgx.hgx_platform()])
    later = synth.derive(base, [])
    for cap, crc in ((base, 0), (later, 7)):
        cap["nvml"]["gpu1.fields"] = {"value": [{"fieldId": 38, "scopeId": 0, "valueType": 3, "nvmlReturn": 0,
                                                 "value": {"ullVal": crc}}]}
    a = json.loads(replay(str(synth.write(base, tmp_path / "a.json")), tmp_path / "a.health.json").read_text())
    b = json.loads(replay(str(synth.write(later, tmp_path / "b.json")), tmp_path / "b.health.json").read_text())
    changes = diff_health(a, b)
    c = next(c for c in changes if c.path == "gpus[1].nvlink.errors.crc_flit_errors")
    assert c.category == "link errors" and (c.before, c.after) == (0, 7)
    assert rising_link_errors(changes) == [
        "gpus[1].nvlink.errors.crc_flit_errors rose by 7 (0 -> 7): a link is taking errors; watch it "
        "(nvidia-smi nvlink -e, -q -d PCIE) and reseat or replace it if it keeps rising"]
    from sweep.cli import main
    main(["diff", str(tmp_path / "a.health.json"), str(tmp_path / "b.health.json")])
    out = " ".join(capsys.readouterr().out.split())
    assert "link errors" in out
    assert "finding: gpus[1].nvlink.errors.crc_flit_errors rose by 7 (0 -> 7)" in out
