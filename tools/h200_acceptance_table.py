"""The acceptance table of tools/h200_acceptance.sh: each case's records beside the owner of each fact.

    python3 tools/h200_acceptance_table.py OUTDIR

Reads OUTDIR/cases/CASE/{meta.json, stdout.txt, run/hosts/*.json} and the owners' answers the script
saved in OUTDIR/owner/ (nvidia-smi -q -x, torch's copies and GEMM by tools/torch_speed.py, nvidia-smi
samples during the load, the unwrapped benchmark, dmesg's Xid count), and prints one markdown table:
case, exit code, verdict line, figure, owner's figure, ratio, wall time. A case that could not be read
is a row saying why; nothing here raises.
"""
import json
import statistics
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

SPEED_OWNER = {"hbm": "dtod_Bps", "pcie_h2d": "h2d_Bps", "pcie_d2h": "d2h_Bps", "bf16_gemm": "bf16_FLOPps"}


def load(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def records(case_dir):
    return {p.stem: load(p) or {} for p in sorted((case_dir / "run" / "hosts").glob("*.json")) if "~" not in p.name}


def verdict(case_dir):
    try:
        lines = [l.strip() for l in (case_dir / "stdout.txt").read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return "(no output)"
    lines = [l for l in lines if not l.startswith(("run folder:", "report:"))]
    return (lines[0] if lines else "(no verdict line)").replace("|", "/")[:110]


def rate(v, unit):
    if not isinstance(v, (int, float)):
        return "-" if v is None else str(v)
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(v) >= scale:
            return "%.4g %s%s" % (v / scale, prefix, unit)
    return "%.4g %s" % (v, unit)


def ratio(a, b):
    """recorded / owner's for numbers, = or DIFFERS for words, - where there is no owner's figure."""
    if isinstance(a, bool) or isinstance(b, bool):
        return "=" if a == b else "DIFFERS"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
        return "%.3f" % (a / b)
    if a is None or b is None or b == "-":
        return "-"
    return "=" if a == b else "DIFFERS"


def smi(outdir):
    try:
        gpu = ET.parse(outdir / "owner" / "smi.xml").getroot()
    except (OSError, ET.ParseError):
        return {}
    first = gpu.find("gpu")
    text = lambda root, path: (root.findtext(path) or "").strip() if root is not None else None
    return {"driver": text(gpu, "driver_version"), "count": int(text(gpu, "attached_gpus") or 0),
            "uuid": text(first, "uuid"), "vbios": text(first, "vbios_version"),
            "limit": text(first, "gpu_power_readings/current_power_limit") or text(first, "power_readings/power_limit")}


def rows_plain(outdir, recs):
    owner, out = smi(outdir), []
    ok = sum(1 for r in recs.values() if r.get("status") == "ok")
    out.append(("hosts ok", ok, len(recs)))
    h = next((r["health"] for r in recs.values() if r.get("health")), None) or {}
    out.append(("driver version", (h.get("driver") or {}).get("version"), owner.get("driver")))
    g = (h.get("gpus") or [{}])[0]
    out.append(("GPU 0 uuid", g.get("uuid"), owner.get("uuid")))
    out.append(("GPUs", len(h.get("gpus") or []), owner.get("count")))
    limit = (g.get("power") or {}).get("enforced_limit_w")
    try:
        owner_limit = float(str(owner.get("limit")).split()[0])
    except (ValueError, IndexError):
        owner_limit = None
    out.append(("GPU 0 enforced power limit W", limit, owner_limit))
    xid = (h.get("kernel_log") or {}).get("xid_lines")
    dmesg = (outdir / "owner" / "dmesg-xid.txt")
    out.append(("Xid events since boot", xid, int(dmesg.read_text().strip() or 0) if dmesg.exists() else None))
    return out


def rows_load(outdir, recs):
    h = next(iter(recs.values()), {}).get("health") or {}
    summary = ((h.get("load") or {}).get("summary") or [{}])[0]
    sm = []
    try:
        for line in (outdir / "owner" / "load-smi.csv").read_text().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 3 and float(parts[2]) > 1.3 * float(parts[1] or 1):  # util-free: power well above idle
                sm.append(float(parts[0]))
    except (OSError, ValueError):
        pass
    load = h.get("load") or {}
    return [("load engine / exit", "%s / %s" % (load.get("engine"), load.get("exit_code")), "torch / 0"),
            ("SM MHz median under load", summary.get("sm_mhz_median"), statistics.median(sm) if sm else None),
            ("power W max under load", summary.get("power_w_max"), None)]


def rows_speed(outdir, recs, torch_file):
    torch = load(outdir / "owner" / torch_file) or {}
    out = []
    for name, r in sorted(recs.items()):
        speed = (r.get("health") or {}).get("speed") or {}
        figures = ((speed.get("gpus") or [{}])[0]).get("figures") or {}
        for key in ("hbm", "pcie_h2d", "pcie_d2h", "fp32", "bf16_gemm"):
            f = figures.get(key) or {}
            unit = f.get("unit") or ("FLOP/s" if key in ("fp32", "bf16_gemm") else "B/s")
            out.append(("%s %s" % (name, key), rate(f.get("value", f.get("skipped")), unit),
                        rate(torch.get(SPEED_OWNER.get(key, "")), unit), f.get("value"), torch.get(SPEED_OWNER.get(key, ""))))
        c = speed.get("contention") or {}
        out.append(("%s contended (status %s)" % (name, speed.get("status")), "%s %s" % (c.get("contended"), ", ".join(
            "pid %s (%s)" % (p.get("pid"), p.get("name")) for p in c.get("processes") or [])), None))
        out.append(("%s tier wall s / bound s" % name, speed.get("wall_s"), speed.get("bound_s")))
    return out


def rows_wrap(outdir, recs):
    owner = None
    try:
        owner = float((outdir / "owner" / "wrap-unwrapped.txt").read_text().split("TFLOP/s")[0].split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    out = []
    for name, r in sorted(recs.items()):
        fig = ((r.get("wrap") or {}).get("figures") or {}).get("tflops") or {}
        out.append(("%s wrapped bf16 TFLOP/s" % name, fig.get("value"), owner))
    return out


def rows_user(outdir, recs, expect_user):
    out = []
    for name, r in sorted(recs.items()):
        h = r.get("health") or {}
        who = ((h.get("probe") or {}).get("user") or {}).get("name")
        xid = next((c for c in h.get("contracts") or [] if c.get("name") == "xid"), {})
        failure = r.get("failure") or {}
        out.append(("%s runs as" % name, who or "failed: %s" % failure.get("class"), expect_user))
        out.append(("%s xid contract" % name, xid.get("status") or (failure.get("message") or "")[:150], None))
    return out


def rows_nosudo(outdir, recs):
    out = []
    for name, r in sorted(recs.items()):
        failure = r.get("failure") or {}
        out.append(("%s failure: %s" % (name, (failure.get("message") or "")[:200]), failure.get("class"),
                    "become_failed"))
    return out


def case_rows(outdir, case_dir, meta):
    recs = records(case_dir)
    kind = meta.get("kind")
    if kind in ("plain", "openssh"):
        return rows_plain(outdir, recs)
    if kind == "load":
        return rows_load(outdir, recs)
    if kind == "speed":
        return rows_speed(outdir, recs, meta.get("torch", "torch.json"))
    if kind == "wrap":
        return rows_wrap(outdir, recs)
    if kind == "user":
        return rows_user(outdir, recs, meta.get("expect_user"))
    if kind == "nosudo":
        return rows_nosudo(outdir, recs)
    return [("?", "unknown case kind %r" % kind, None)]


def main(argv):
    outdir = Path(argv[1])
    print("| case | exit | verdict line | figure | recorded | owner's | ratio | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for case_dir in sorted((outdir / "cases").iterdir(), key=lambda p: (load(p / "meta.json") or {}).get("order", 99)):
        meta = load(case_dir / "meta.json") or {}
        head = [case_dir.name, str(meta.get("rc")), verdict(case_dir)]
        try:
            rows = case_rows(outdir, case_dir, meta)
        except Exception as exc:  # one unreadable case is a row, never the end of the table
            rows = [("(unreadable)", "%s: %s" % (type(exc).__name__, exc), None)]
        for i, row in enumerate(rows):
            figure, shown, owner = row[0], row[1], row[2]
            raw = row[3:5] if len(row) == 5 else (shown, owner)
            cells = (head if i == 0 else ["", "", ""]) + [figure, str(shown), str(owner), ratio(*raw),
                                                          str(meta.get("wall_s")) if i == 0 else ""]
            print("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
