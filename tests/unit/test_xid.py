"""Issue 26 section 2: Xid and SXid events judged by the repair NVIDIA prescribes, counted (not
listed), told apart from the host's previous sweep, and grouped by action in the report."""
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import fleet_variants as fv
from probe_agent import kernlog, xid_catalogue as cat
from probe_agent.source import LiveSource
from probe_agent.xid import ACTION, BUCKET_ACTION, LINE, classify, parse_events, read_kernel_log
from sweep.analysis.fleet import load_fleet
from sweep.analysis.xid import xid_action, xid_section
from sweep.collect.bundle import bundle_bytes

BOOT = {"id": "boot-a", "booted_at": 1796018400}  # 2026-11-30T06:00:00Z


class Answer:
    """A source whose kernel log is the given answer (what LiveSource or a capture gives)."""

    def __init__(self, events, boot=BOOT):
        self.answer = {"source": "/dev/kmsg", "events": events, "tried": {}, "complete": True, "boot": boot}

    def kernel_log(self):
        return dict(self.answer)


def xid_line(code, bus="0000:18:00", at=100.0, text="pid=1, name=python3, x"):
    return "[%12.6f] NVRM: Xid (PCI:%s): %d, %s" % (at, bus, code, text)


# --- the catalogue -------------------------------------------------------------------------------

def test_the_catalogue_lists_every_xid_nvidia_publishes_with_a_bucket_that_is_an_action():
    assert sorted(cat.XIDS) == list(range(1, 174))  # NVIDIA's page lists 1-172; 173 from current drivers' docs
    assert cat.XID_CATALOGUE["version"] == "Xid 1-173" and cat.XID_CATALOGUE["date"]
    assert set(cat.LATER) == set(cat.LATER_SOURCE) == {173} and cat.XIDS[173][0] is None
    buckets = {b for b, _ in list(cat.XIDS.values()) + list(cat.SXIDS.values()) if b is not None}
    assert buckets <= set(BUCKET_ACTION), buckets - set(BUCKET_ACTION)
    assert all(isinstance(m, str) and m for _, m in list(cat.XIDS.values()) + list(cat.SXIDS.values()))
    # NVIDIA's buckets as sweep's actions, for the codes operators meet most
    assert [classify("xid", c, "")[1] for c in (13, 31, 48, 63, 79, 94, 95, 119)] == [
        "restart_app", "restart_app", "reset_gpu", "ignore", "reboot", "restart_app", "reset_gpu", "reset_gpu"]


@pytest.mark.parametrize("kind,code", [("xid", 0), ("xid", 174), ("xid", 999), ("sxid", 12999), ("sxid", 99999)])
def test_every_code_the_agent_can_read_has_an_action_and_unknown_ones_say_so(kind, code):
    line = ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): %d, Fatal, x" % code if kind == "sxid"
            else "NVRM: Xid (PCI:0000:18:00): %d, x" % code)
    assert LINE.search(line).group(3) == str(code)  # the parser reads the code...
    bucket, action, meaning = classify(kind, code, line)
    assert bucket is None and action == "unknown" and "not in the catalogue" in meaning  # ...and says so
    assert ("(the line says Fatal)" in meaning) == (kind == "sxid")
    assert ACTION[action][1] == "not in the catalogue" and ACTION[action][2] == "broken"


def test_xid_154_takes_the_recovery_action_its_line_names():
    events = [[xid_line(154, text="GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")] * 2 + [1]]
    assert parse_events(events)[0]["action"] == "reboot"


def test_the_catalogue_travels_in_the_bundle_and_the_bundled_agent_uses_it(tmp_path):
    blob = bundle_bytes()
    names = zipfile.ZipFile(io.BytesIO(blob[blob.index(b"PK"):])).namelist()
    assert {"probe_agent/xid_catalogue.py", "probe_agent/kernlog.py"} <= set(names)
    cap = json.loads(Path(fv.__file__).parent.joinpath("..", "..", "sweep", "demo", "captures",
                                                       "h200-idle.json").read_text())
    cap["kernel_log"] = {"source": "/dev/kmsg", "events": [[xid_line(79), xid_line(79, at=200.0), 2]],
                         "tried": {}, "boot": BOOT}
    (tmp_path / "cap.json").write_text(json.dumps(cap))
    (tmp_path / "agent.pyz").write_bytes(blob)
    out = subprocess.run([sys.executable, "-I", "-S", str(tmp_path / "agent.pyz"), "--replay", str(tmp_path / "cap.json")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    log = json.loads(out.stdout)["kernel_log"]
    assert log["catalogue"]["xid"]["version"] == "Xid 1-173"
    assert log["catalogue"]["xid154_recovery"]["version"] == "NVML recovery-action values 0-7"
    assert [(g["code"], g["count"], g["action"], g["last_at"]) for g in log["xid"]] == [
        (79, 2, "reboot", "2026-11-30T06:03:20Z")]


# --- reading: counted, bounded, timed -----------------------------------------------------------

def test_800k_xid_95_lines_with_29_distinct_are_counted_exactly(tmp_path, monkeypatch):
    monkeypatch.setattr(kernlog, "SECONDS", 600.0)  # this test is about the counts; the bench measures the time
    buses = ["0000:%02x:00" % (i + 1) for i in range(29)]
    root = tmp_path / "root"
    (root / "var" / "log").mkdir(parents=True)
    with open(root / "var" / "log" / "kern.log", "w") as fh:
        for n in range(800000):
            fh.write("Nov 30 07:00:00 gpu07 kernel: [%12.6f] NVRM: Xid (PCI:%s): 95, pid=%d, name=python3, "
                     "Uncontained: FBHUB. RST: Yes, D-RST: No\n" % (10.0 + n / 100, buses[n % 29], 1000 + n % 7))
            if n % 100000 == 0:
                fh.write("Nov 30 07:00:00 gpu07 kernel: usb 1-1: new high-speed USB device\n")
    answer = LiveSource(root=str(root), journalctl=None).kernel_log()
    assert answer["source"] == "/var/log/kern.log" and answer["complete"] and answer["dropped"] == 0
    groups = parse_events(answer["events"], BOOT["booted_at"])
    assert len(groups) == 29 and sum(g["count"] for g in groups) == 800000
    first = next(g for g in groups if g["bus_id"] == "0000:01:00")
    assert first["count"] == 27587 and first["action"] == "reset_gpu"  # 800000 lines over 29 buses, bus 1 first
    assert first["first_s"] == 10.0 and first["first_at"] == "2026-11-30T06:00:10Z"
    assert first["last_s"] == pytest.approx(10.0 + 799994 / 100)


def test_kmsg_records_keep_their_time_since_boot_and_sxid_detail_lines_are_one_event(tmp_path):
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "random" / "boot_id").write_text("boot-a\n")
    (root / "proc" / "stat").write_text("cpu  1 2 3\nbtime 1796018400\n")
    sxid = "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 12028, "
    records = [xid_line(31).split("] ", 1)[1], sxid + "Fatal, Link 46 egress non-posted PRIV error",
               sxid + "Severity 1 Engine instance 46 Sub-engine instance 00", sxid + "Data {0x0, 0x1}",
               "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20001, Non-fatal, Link 1 TX replay"]
    (root / "dev" / "kmsg").write_text("".join("4,%d,%d,-;%s\n" % (n, 5000000 * (n + 1), r) for n, r in enumerate(records)))
    log = read_kernel_log(LiveSource(root=str(root), journalctl=None))
    assert log["boot"] == {"id": "boot-a", "booted_at": "2026-11-30T06:00:00Z"}
    assert [(g["code"], g["first_s"], g["first_at"]) for g in log["xid"]] == [(31, 5.0, "2026-11-30T06:00:05Z")]
    assert [(g["code"], g["count"], g["action"]) for g in log["sxid"]] == [(12028, 1, "reboot"), (20001, 1, "ignore")]


def test_a_gpu_fallen_off_the_bus_without_an_xid_line_and_an_sxid_read_only_from_its_data_are_events(tmp_path):
    """/dev/kmsg keeps a message of several lines as one record, its newlines escaped: the driver's words for a
    GPU lost from the bus with no Xid 79 line (NVIDIA/NVSentinel#155) are that GPU's Xid 79; an SXid whose first
    line was overwritten in the ring buffer is still its event, from its Data line."""
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    fallen = ("NVRM: The NVIDIA GPU 0000:b3:00.0\\x0a               NVRM: (PCI ID: 10de:26b5) installed in this system has"
              "\\x0a               NVRM: fallen off the bus and is not responding to commands.")
    data = "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a, 0x00000500}"
    beside = ["NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.", "NVRM: GPU 0000:06:00.0: GPU has fallen off the bus."]
    records = [fallen, data] + beside
    (root / "dev" / "kmsg").write_text("".join("3,%d,%d,-;%s\n" % (n, 1843308145 + n, r) for n, r in enumerate(records)))
    log = read_kernel_log(LiveSource(root=str(root), journalctl=None))
    assert [(g["bus_id"], g["code"], g["count"], g["action"]) for g in log["xid"]] == [
        ("0000:06:00", 79, 1, "reboot"), ("0000:b3:00", 79, 1, "reboot")]  # the one beside its Xid line is no second event
    assert log["xid"][1]["first_s"] == 1843.308145 and "fallen off the bus" in log["xid"][1]["first"]
    assert [(g["bus_id"], g["code"], g["count"], g["action"]) for g in log["sxid"]] == [("0000:84:00.0", 12028, 1, "reboot")]


def test_a_read_cut_by_its_time_bound_does_not_pass_for_no_xid(tmp_path, monkeypatch):
    monkeypatch.setattr(kernlog, "SECONDS", 0.0)
    root = tmp_path / "root"
    (root / "var" / "log").mkdir(parents=True)
    (root / "var" / "log" / "kern.log").write_text("kernel: [ 1.0] booting\n" * 10)
    assert LiveSource(root=str(root), journalctl=None).kernel_log()["complete"] is False


# --- the controller: the action, the previous sweep ---------------------------------------------

def host(name, events, boot=BOOT):
    health = fv.h200(8, name)
    health["kernel_log"] = read_kernel_log(Answer(events, boot))
    return health


def test_xid_action_names_the_most_severe_repair_and_reads_old_records():
    health = host("gpu07", [[xid_line(13), xid_line(13), 1], [xid_line(79, "0000:3b:00"), xid_line(79, "0000:3b:00"), 3]])
    assert xid_action(fv.record("gpu07", health)) == (
        "reboot", "reboot", "Xid 79 GPU has fallen off the bus (0000:3b:00 x3) and 1 more event")
    old = fv.h200(8, "gpu08")  # schema 1.3: groups without action, type or times
    old["kernel_log"] = {"source": "/dev/kmsg", "xid": [{"bus_id": "0000:18:00", "code": 48, "count": 2,
                                                         "kind": "hardware", "meaning": "DBE"}]}
    assert xid_action(old).action == "reset_gpu"
    assert xid_action(host("gpu09", [[xid_line(63), xid_line(63), 4]])) is None  # informational only


def test_events_since_the_previous_sweep_and_across_a_reboot(tmp_path):
    root = tmp_path / "reports"
    line = [xid_line(95), xid_line(95, at=300.0)]
    before = [fv.record("gpu01", host("gpu01", [line + [5]])), fv.record("gpu02", host("gpu02", [line + [5]])),
              fv.record("gpu03", host("gpu03", [line + [5]]))]
    fv.write_run(root / "r1", before, {"format": "sweep-run", "record_version": 1, "state": "complete",
                                        "started_at": "2026-11-30T08:00:00Z"})
    rebooted = {"id": "boot-b", "booted_at": 1796040000}
    after = [fv.record("gpu01", host("gpu01", [line + [8]])), fv.record("gpu02", host("gpu02", [line + [5]])),
             fv.record("gpu03", host("gpu03", [line + [2]], boot=rebooted))]
    fv.write_run(root / "r2", after, {"format": "sweep-run", "record_version": 1, "state": "complete",
                                       "started_at": "2026-11-30T12:00:00Z"})
    section = xid_section(load_fleet([root / "r2"]))
    seen = {h["host"]: (h["previous_run"], h["events"][0]["since_previous"], h["events"][0]["recurs"])
            for h in section["hosts"]}
    assert seen == {"gpu01": ("r1", 3, False), "gpu02": ("r1", 0, False), "gpu03": ("r1", 2, True)}
    assert section["actions"] == [{"action": "reset_gpu", "label": "reset the GPU", "fix": ACTION["reset_gpu"][4],
                                   "hosts": ["gpu01", "gpu02", "gpu03"], "folded": "gpu[01-03]", "count": 3}]
    first = xid_section(load_fleet([root / "r1"]))["hosts"][0]
    assert first["previous_run"] is None and first["events"][0]["since_previous"] is None


def test_a_hostile_record_s_groups_are_left_out_not_a_crash():
    health = host("gpu07", [[xid_line(79), xid_line(79), 1]])
    health["kernel_log"]["xid"] += [{"bus_id": "0000:18:00", "code": "95", "count": 3, "action": "reset_gpu"},
                                    {"bus_id": "0000:18:00", "code": 95, "count": True, "action": "reset_gpu"},
                                    {"bus_id": "0000:18:00", "code": 95, "count": 2, "action": "rm -rf"}, "junk"]
    assert xid_action(health).reason == "Xid 79 GPU has fallen off the bus (0000:18:00 x1)"


def test_sweep_diff_shows_a_reboot_and_new_events_not_the_agent_s_catalogue():
    from sweep.audit.diff import diff_health

    line = [xid_line(95), xid_line(95, at=300.0)]
    a = host("gpu01", [line + [5]])
    b = host("gpu01", [line + [9]], boot={"id": "boot-b", "booted_at": 1796040000})
    b["kernel_log"]["catalogue"]["xid"] = dict(b["kernel_log"]["catalogue"]["xid"], version="Xid 1-180")
    changed = {c.path: c.category for c in diff_health(a, b)}
    assert changed["kernel_log.boot.id"] == "link errors" and changed["kernel_log.xid[0].count"] == "link errors"
    assert not [p for p in changed if p.startswith("kernel_log.catalogue")]


def test_a_journalctl_that_stops_answering_is_ended_and_the_read_is_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(kernlog, "SECONDS", 0.2)
    script = tmp_path / "journalctl"
    script.write_text("#!/bin/sh\necho '[ 5.0] kernel: NVRM: Xid (PCI:0000:18:00): 13, pid=1, x'\nexec sleep 600\n")
    script.chmod(0o755)
    empty = tmp_path / "root"
    empty.mkdir()
    log = LiveSource(root=str(empty), journalctl=(str(script),)).kernel_log()
    assert log["source"] == "journalctl -k" and log["complete"] is False
    assert [e[2] for e in log["events"]] == [1]


def test_a_hostile_boot_is_no_boot_not_a_crash(tmp_path):
    from sweep.analysis.xid import compare_with_previous, events_of

    now = host("gpu01", [[xid_line(95), xid_line(95), 4]])
    then = host("gpu01", [[xid_line(95), xid_line(95), 2]])
    then["kernel_log"]["boot"] = "rebooted"
    assert [(e["since_previous"], e["recurs"]) for e in compare_with_previous(
        events_of(now), [1, 2], then)] == [(None, False)]
