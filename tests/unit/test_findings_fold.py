"""Findings folded across hosts (clubak -b style), mixed key values with counts, and where both are read:
summary.md, the terminal under the verdict, the brief headline."""
from pathlib import Path
import sys

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet_variants as fv  # noqa: E402

from sweep.cli import main  # noqa: E402
from sweep.report.build import build_report  # noqa: E402
from sweep.report.findings import fold, shape_of  # noqa: E402


def finding(host, detail, severity="warning", kind="thermal_headroom", title="Thermal headroom", contract="thermal"):
    return {"host": host, "kind": kind, "severity": severity, "title": title, "detail": detail,
            "fix": "check cooling", "contract": contract, "message": f"{host}: {detail}"}


@pytest.mark.parametrize("text, masked, values", [
    ("GPU 4: HBM at 92 C, 3 C below its slowdown threshold 95 C",
     "\0: HBM at \0, \0 below its slowdown threshold \0", ("GPU 4", "92 C", "3 C", "95 C")),
    # names, PCI addresses, versions, ports and lane widths are not values: they stay in the key
    ("Xid 79 on 0000:38:00 x1 on gpu07, driver 580.95.05, mlx5_1 at gen5 x16",
     "Xid \0 on 0000:38:00 x1 on gpu07, driver 580.95.05, mlx5_1 at gen5 x16", ("79",)),
    ("1 other process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 0-3.",
     "\0 other process on the GPUs: python3 (\0, \0) on \0.", ("1", "pid 4242", "8192 MiB", "GPU 0-3")),
])
def test_a_sentence_is_masked_at_its_values_only(text, masked, values):
    assert shape_of(text) == (masked, values)


def test_identical_findings_fold_into_one_entry_with_the_folded_hosts():
    found = [finding(f"gpu{n:02d}", "persistence mode off on GPU 0-7", kind="persistence_off",
                     title="Persistence mode off", contract=None) for n in range(2, 10)]
    [entry] = fold(found)
    assert entry["folded"] == "gpu[02-09]" and entry["count"] == 8 and entry["spread"] == ""
    assert entry["detail"] == "persistence mode off on GPU 0-7"


def test_findings_that_differ_in_a_value_fold_and_list_the_values_with_their_counts():
    found = [finding(h, f"GPU 4: HBM at {c} C, {95 - c} C below its slowdown threshold 95 C")
             for h, c in (("gpu01", 91), ("gpu02", 91), ("gpu03", 91), ("gpu07", 92))]
    [entry] = fold(found)
    assert entry["count"] == 4 and entry["folded"] == "gpu[01-03,07]"
    assert entry["spread"] == "(91 C, 4 C) x3, (92 C, 3 C) x1 (gpu07)"
    assert [v["hosts"] for v in entry["variants"]] == [["gpu01", "gpu02", "gpu03"], ["gpu07"]]


def test_broken_entries_come_first_and_other_sentences_stay_apart():
    found = [finding(f"gpu{n}", "CPU governor powersave", contract="host", title="Host settings")
             for n in range(1, 6)]
    found += [finding("gpu9", "GPU 0-7: enforced power limit 250 W is below the default 700 W",
                      "broken", "lowest_broken", "Lowest broken contract: power", "power"),
              finding("gpu8", "mlx5_1 port 1 at 200 Gb/s", contract="host", title="Host settings")]
    entries = fold(found)
    assert [(e["severity"], e["count"]) for e in entries] == [("broken", 1), ("warning", 5), ("warning", 1)]


def test_a_host_whose_gpus_disagree_gets_each_value_with_its_count(tmp_path):
    health = fv.power_cap(fv.h200(8, "gpu01"), 250.0, gpus=[3])
    fv.write_run(tmp_path / "run", [fv.record("gpu01", health), fv.record("gpu02", fv.h200(8, "gpu02"))])
    result = build_report([tmp_path / "run"], tmp_path / "report")
    keys = result.findings.host_keys
    assert keys.at["gpu01", "power_limit"] == "700 W x7, 250 W x1 (GPU 3)"  # was "700/250 W (default 700 W)"
    mixed = [f for f in result.findings.health if f.kind == "mixed_gpus"]
    assert mixed[0].detail == "the selected GPUs differ: Power limit 700 W x7, 250 W x1 (GPU 3)"


@pytest.fixture
def shared(tmp_path):
    """Nine hosts sharing a warning, two with the same power cap, one with another."""
    records = [fv.record(f"gpu{n:02d}", fv.persistence_off(fv.h200(8, f"gpu{n:02d}"))) for n in range(1, 10)]
    records += [fv.record(n, fv.power_cap(fv.h200(8, n), w)) for n, w in (("gpu10", 250.0), ("gpu11", 250.0),
                                                                          ("gpu12", 300.0))]
    return fv.write_run(tmp_path / "run", records)


def test_summary_md_has_one_row_per_folded_finding(shared, tmp_path):
    result = build_report([shared], tmp_path / "report")
    md = result.files["markdown"].read_text()
    health = md[md.index("## Health findings"):]
    rows = [line for line in health.splitlines() if line.startswith("| broken") or line.startswith("| warning")]
    assert len(rows) == 2, rows
    assert rows[0].startswith("| broken | `gpu[10-12]` (3) | Lowest broken contract: power |")
    assert "| 250 W x2, 300 W x1 (gpu12) |" in rows[0]
    assert rows[1].startswith("| warning | `gpu[01-09]` (9) | Persistence mode off |")


def test_the_terminal_prints_the_folded_findings_under_the_verdict(shared, tmp_path, capsys):
    main(["report", str(shared), "-o", str(tmp_path / "rep"), "--details"])
    out = capsys.readouterr().out.splitlines()
    notes = [line for line in out if " not read on " in line or line.startswith("hosts: ")]  # the verdict's unknowns and sets, under the headline
    assert out[1:1 + len(notes)] == notes
    out = out[:1] + out[1 + len(notes):]
    assert out[1:3] == [
        "- broken: Lowest broken contract: power: 3 hosts gpu[10-12]: GPU 0-7: enforced power limit 250 W is "
        "below the default 700 W (values: 250 W x2, 300 W x1 (gpu12))",
        "- warning: Persistence mode off: 9 hosts gpu[01-09]: persistence mode off on GPU 0-7"]
    # gpu[10-12]: a power cap, folded on one line; benchmark the pool, resume, sweep the broken again
    assert [line.split(":")[0] for line in out[3:-1]] == ["not drained, the node's configuration"] + ["next"] * 3
    assert out[-1].startswith("report: ")


def test_the_brief_headline_leaves_the_hosts_kept_out_to_the_list(tmp_path):
    fv.write_run(tmp_path / "run", fv.must_show_fleet())
    summary = build_report([tmp_path / "run"], tmp_path / "report").summary
    assert summary["verdict_brief"].startswith(f"The pool is {summary['pool']['folded']}")
    kept = summary["hosts_total"] - summary["pool"]["size"]
    assert summary["verdict_brief"].endswith(f"; {kept} hosts are kept out for the reasons listed below.")
    assert "held out for health (" in summary["verdict_detail"] and "held out" not in summary["verdict_brief"]
