#!/usr/bin/env python3
"""The device-mask corpus, and CUDA's own answer to each mask on this host (the oracle).

The corpus is a template: masks written with placeholders for the host's real GPU UUIDs, expanded
on the host, so the same corpus runs on one GPU and on several. For every mask and every
CUDA_DEVICE_ORDER, a fresh process with that environment asks the CUDA driver API (ctypes:
cuInit, cuDeviceGetCount, cuDeviceGetUuid_v2) which devices it enumerates; the real agent, run
live with the same environment, gives its own answer beside it.

    python3 tools/mask_corpus.py --record masks.json [--agent "python3 -I -S agent.pyz"]

Placeholders: {U0} {U1} the first two GPUs' UUIDs (GPU-...); {u0} {u1} the same without "GPU-";
{U0:N} the first N characters; {UC} the longest prefix U0 and U1 share (ambiguous); {U0X} U0 with
its last digit changed (no such GPU); {U0UP} U0 in capitals; {u0n} {u1n} the hex digits without
dashes; {u0d4} the hex digits with a dash after every 4 (dashes where NVML puts none). On a one-GPU host U1 is made up
(no such GPU), so the cases that name it still mean something.
Standard library only: runs on a bare python3 3.8+.
"""
import argparse
import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import time

ORDERS = (None, "PCI_BUS_ID", "FASTEST_FIRST")
# The corpus grows; a recording says which corpus it answered ("corpus", 1 when absent), so an older
# recording is checked against the templates it was made from. Groups added after corpus 1:
CORPUS = 2
ADDED = {"uuid-dashes": 2}
FAKE_UUID = "GPU-00000000-1111-2222-3333-444444444444"

# (group, mask template); None is "unset". Grammar CUDA accepts plus the mistakes people make.
TEMPLATES = [
    ("unset", None), ("empty", ""),
    # indices
    ("index", "0"), ("index", "1"), ("index", "2"), ("index", "7"), ("index", "0,1"), ("index", "1,0"),
    ("index", "0,2"), ("index", "2,0"), ("index", "1,7,0"), ("index", "0,7,1"), ("index", "0,1,2"),
    ("index", "2,1,0"), ("index", "10"), ("index", "16"), ("index", "63"), ("index", "64"),
    ("repeat", "0,0"), ("repeat", "1,1"), ("repeat", "0,1,0"), ("repeat", "1,0,1"), ("repeat", "0,0,1"),
    ("repeat", "1,1,0"), ("repeat", "0,00"), ("repeat", "1,01"),
    ("zeros", "00"), ("zeros", "01"), ("zeros", "001"), ("zeros", "000"), ("zeros", "0,01"),
    ("zeros", "01,00"),
    ("sign", "-1"), ("sign", "-0"), ("sign", "+0"), ("sign", "+1"), ("sign", "0,-1"), ("sign", "-1,0"),
    ("sign", "1,-1,0"), ("sign", "0,+1"), ("sign", "-"), ("sign", "+"), ("sign", "--0"), ("sign", "+-0"),
    ("number", "0x0"), ("number", "0x1"), ("number", "1e0"), ("number", "0.0"), ("number", "0.5"),
    ("number", "1.0"), ("number", "4294967296"), ("number", "4294967297"), ("number", "2147483648"),
    ("number", "99999999999999999999"), ("number", "-4294967295"), ("number", "\uff10"),
    ("trailing", "0abc"), ("trailing", "1abc"), ("trailing", "0 x"), ("trailing", "0x"), ("trailing", "0,1x"),
    ("trailing", "1x,0"), ("trailing", "0-1"), ("trailing", "0:1"), ("trailing", "0/0"),
    ("word", "a"), ("word", "abc"), ("word", "GPU"), ("word", "all"), ("word", "none"), ("word", "void"),
    ("word", "NoDevFiles"), ("word", "0,abc"), ("word", "0,abc,1"), ("word", "1,abc,0"), ("word", "abc,0"),
    # separators and whitespace
    ("space", " "), ("space", "\t"), ("space", " 0"), ("space", "0 "), ("space", " 0 "), ("space", "\t0"),
    ("space", "0\t"), ("space", "0\n"), ("space", "\n0"), ("space", "0, 1"), ("space", "0 ,1"),
    ("space", " 1,0"), ("space", "1, 0"), ("space", "1 ,0"), ("space", "1,0 "), ("space", "0 1"),
    ("space", "1 0"), ("space", "  ,  "), ("space", "0,\t1"), ("space", "1,\n0"),
    ("separator", "0,"), ("separator", "1,"), ("separator", "0,1,"), ("separator", "1,0,"),
    ("separator", "0,,1"), ("separator", "1,,0"), ("separator", ",0"), ("separator", ",1"),
    ("separator", ","), ("separator", ",,"), ("separator", "0;1"), ("separator", "1;0"),
    ("separator", "0:1"), ("separator", "0|1"), ("separator", "0.1"),
    # UUIDs
    ("uuid", "{U0}"), ("uuid", "{U1}"), ("uuid", "{U0},{U1}"), ("uuid", "{U1},{U0}"),
    ("uuid", FAKE_UUID), ("uuid", "{U0X}"), ("uuid", "{U0},{U0X}"), ("uuid", "{U0X},{U0}"),
    ("uuid-repeat", "{U0},{U0}"), ("uuid-repeat", "{U1},{U0},{U1}"),
    ("uuid-bare", "{u0}"), ("uuid-bare", "{u1}"), ("uuid-bare", "{u0},{u1}"), ("uuid-bare", "{u1},{u0}"),
    ("uuid-bare", "{u0:8}"), ("uuid-bare", "0,{u1}"),
    ("uuid-case", "{U0UP}"), ("uuid-case", "gpu-{u0}"), ("uuid-case", "Gpu-{u0}"),
    ("uuid-form", "GPU-GPU-{u0}"), ("uuid-form", "GPU-{U0}"), ("uuid-form", "{U0}0"), ("uuid-form", "{U0}x"),
    ("uuid-form", "{U0} "), ("uuid-form", " {U0}"), ("uuid-form", "{U0}/0"), ("uuid-form", "GPU {u0}"),
    ("uuid-prefix", "GPU-"), ("uuid-prefix", "GPU-{u0:1}"), ("uuid-prefix", "{U0:6}"), ("uuid-prefix", "{U0:8}"),
    ("uuid-prefix", "{U0:12}"), ("uuid-prefix", "{U0:13}"), ("uuid-prefix", "{U0:20}"), ("uuid-prefix", "{U1:8}"),
    ("uuid-prefix", "{UC}"), ("uuid-prefix", "{U0:8},{U1:8}"), ("uuid-prefix", "{U1:8},{U0:8}"),
    ("uuid-prefix", "{U0:8},{U0}"), ("uuid-prefix", "{U0:35}"),
    ("uuid-sep", "{U0};{U1}"), ("uuid-sep", "{U0} {U1}"), ("uuid-sep", "{U0}, {U1}"), ("uuid-sep", "{U0},,{U1}"),
    ("uuid-sep", "{U1},"), ("uuid-sep", ",{U1}"), ("uuid-sep", "{U0},bogus,{U1}"),
    # dashes: none, moved, doubled (issue 22: "GPU-" + the hex digits without dashes selects the GPU)
    ("uuid-dashes", "GPU-{u0n}"), ("uuid-dashes", "GPU-{u1n}"), ("uuid-dashes", "GPU-{u0n},GPU-{u1n}"),
    ("uuid-dashes", "GPU-{u1n},{U0}"), ("uuid-dashes", "{U0},GPU-{u0n}"), ("uuid-dashes", "GPU-{u0n:10}"),
    ("uuid-dashes", "GPU-{u0n:8}"), ("uuid-dashes", "GPU-{u0n:20}"), ("uuid-dashes", "gpu-{u0n}"),
    ("uuid-dashes", "GPU-{u0d4}"), ("uuid-dashes", "GPU--{u0}"), ("uuid-dashes", "GPU-{u0n}-"),
    ("uuid-dashes", "GPU-{u0n}0"), ("uuid-dashes", "{u0n}"), ("uuid-dashes", "MIG-{u0n}"),
    ("uuid-dashes", "GPU-----"), ("uuid-dashes", "GPU--"), ("uuid-dashes", "GPU-{u0:9}-{u0n:4}"),
    # mixtures
    ("mixed", "0,{U1}"), ("mixed", "{U1},0"), ("mixed", "1,{U0}"), ("mixed", "{U0},1"), ("mixed", "{U0},0"),
    ("mixed", "0,{U0}"), ("mixed", "{U0:8},1"), ("mixed", "1,{U1:8}"), ("mixed", "{U1},7,{U0}"),
    ("mixed", "{U0},-1"),
    # MIG forms (these hosts have MIG off: every one names no MIG device)
    ("mig", "MIG-{u0}"), ("mig", "MIG-{U0}"), ("mig", "MIG-{U0}/0/0"), ("mig", "MIG-{U0}/1/0"),
    ("mig", "MIG-{u0}/0/0"), ("mig", "MIG-00000000-1111-2222-3333-444444444444"), ("mig", "MIG-"),
    ("mig", "MIG"), ("mig", "MIG-0"), ("mig", "MIG-{U0},0"), ("mig", "0,MIG-{U0}/0/0"), ("mig", "MIG-{U0}/0"),
    ("mig", "MIG-{U0}/0/0/0"), ("mig", "mig-{U0}/0/0"), ("mig", "{U0},MIG-{U0}/0/0"),
]
# A few more orders than the three, on a handful of masks: how CUDA reads CUDA_DEVICE_ORDER itself.
EXTRA_ORDERS = ("pci_bus_id", "BOGUS", "", " PCI_BUS_ID")
EXTRA_ORDER_MASKS = (None, "0", "1,0", "{U1},{U0}")

PLACEHOLDER = re.compile(r"\{(U0|U1|u0|u1|u0n|u1n|u0d4|UC|U0X|U0UP)(?::(\d+))?\}")


def placeholders(uuids):
    """The values of the placeholders for a host whose GPUs have these UUIDs (NVML order)."""
    u0 = uuids[0]
    u1 = uuids[1] if len(uuids) > 1 else FAKE_UUID
    common = os.path.commonprefix([u0, u1])
    last = u0[-1]
    return {"U0": u0, "U1": u1, "u0": u0[4:], "u1": u1[4:], "UC": common,
            "U0X": u0[:-1] + ("0" if last != "0" else "1"), "U0UP": "GPU-" + u0[4:].upper(),
            "u0n": u0[4:].replace("-", ""), "u1n": u1[4:].replace("-", ""),
            "u0d4": "-".join(u0[4:].replace("-", "")[i:i + 4] for i in range(0, 32, 4))}


def expand(template, values):
    if template is None:
        return None

    def sub(m):
        v = values[m.group(1)]
        return v[:int(m.group(2))] if m.group(2) else v
    return PLACEHOLDER.sub(sub, template)


def cases(uuids, corpus=CORPUS):
    """Every (id, group, template, mask, order) of the corpus (version `corpus`) for this host."""
    values = placeholders(uuids)
    out = []
    seen = set()
    for group, template in TEMPLATES:
        if ADDED.get(group, 1) > corpus:
            continue
        for order in ORDERS:
            out.append((group, template, order))
    for template in EXTRA_ORDER_MASKS:
        for order in EXTRA_ORDERS:
            out.append(("order", template, order))
    result = []
    for group, template, order in out:
        mask = expand(template, values)
        if (mask, order) in seen:
            continue
        seen.add((mask, order))
        result.append({"id": len(result), "group": group, "template": template, "mask": mask, "order": order})
    return result


CHILD = r'''
import ctypes, json
out = {"init": None, "error": None, "uuids": [], "pci_bus_ids": []}
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out["error"] = "libcuda: %s" % exc
    print(json.dumps(out)); raise SystemExit
def name(rc):
    s = ctypes.c_char_p()
    cu.cuGetErrorName(rc, ctypes.byref(s))
    return s.value.decode() if s.value else str(rc)
rc = cu.cuInit(0)
out["init"] = rc
if rc != 0:
    out["error"] = name(rc)
else:
    n = ctypes.c_int()
    rc = cu.cuDeviceGetCount(ctypes.byref(n))
    if rc:
        out["error"] = "cuDeviceGetCount: " + name(rc)
    get_uuid = getattr(cu, "cuDeviceGetUuid_v2", None) or cu.cuDeviceGetUuid
    for i in range(n.value):
        dev = ctypes.c_int()
        cu.cuDeviceGet(ctypes.byref(dev), i)
        raw = (ctypes.c_ubyte * 16)()
        get_uuid(raw, dev)
        h = bytes(raw).hex()
        out["uuids"].append("GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:]))
        bus = ctypes.create_string_buffer(32)
        cu.cuDeviceGetPCIBusId(bus, 32, dev)
        out["pci_bus_ids"].append(bus.value.decode())
print(json.dumps(out))
'''


def case_env(case):
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    if case["mask"] is not None:
        env["CUDA_VISIBLE_DEVICES"] = case["mask"]
    if case["order"] is not None:
        env["CUDA_DEVICE_ORDER"] = case["order"]
    return env


def ask_cuda(case):
    """What the CUDA driver enumerates in a fresh process with this case's environment."""
    p = subprocess.run([sys.executable, "-I", "-S", "-c", CHILD], env=case_env(case), capture_output=True,
                       text=True, timeout=120)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"init": None, "error": "child rc %s: %s" % (p.returncode, p.stderr.strip()[-300:]), "uuids": []}


def ask_agent(agent, case):
    """The real agent's answer, run live with this case's environment."""
    p = subprocess.run(agent + ["--deadline", "60"], env=case_env(case), capture_output=True, text=True,
                       timeout=120)
    try:
        h = json.loads(p.stdout)
    except ValueError:
        return {"error": "agent rc %s: %s" % (p.returncode, p.stderr.strip()[-300:])}
    contract = next((c for c in h.get("contracts") or [] if c.get("name") == "device_mask"), {})
    m = h.get("mask") or {}
    return {"state": m.get("state"), "selected": [s.get("uuid") for s in m.get("selected") or []],
            "status": contract.get("status"), "agent_version": (h.get("probe") or {}).get("version")}


def nvml_gpus():
    p = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id,name", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=60)
    gpus = []
    for line in p.stdout.strip().splitlines():
        index, uuid, bus, name = [f.strip() for f in line.split(",")]
        gpus.append({"index": int(index), "uuid": uuid, "pci_bus_id": bus, "name": name})
    return gpus


def smi_value(field):
    p = subprocess.run(["nvidia-smi", "--query-gpu=" + field, "--format=csv,noheader"], capture_output=True,
                       text=True, timeout=60)
    return (p.stdout.strip().splitlines() or [None])[0]


def record(path, agent, workers):
    gpus = nvml_gpus()
    corpus = cases([g["uuid"] for g in gpus])
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        answers = list(pool.map(ask_cuda, corpus))
    cuda_s = time.monotonic() - started
    for case, answer in zip(corpus, answers):
        case["cuda"] = answer
    agent_s = None
    if agent:
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for case, answer in zip(corpus, pool.map(lambda c: ask_agent(agent, c), corpus)):
                case["agent"] = answer
        agent_s = time.monotonic() - started
    doc = {
        "format": "sweep-mask-oracle", "version": 1, "corpus": CORPUS,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hostname": socket.gethostname(), "driver": smi_value("driver_version"),
        "oracle": "CUDA driver API via ctypes (cuInit, cuDeviceGetCount, cuDeviceGetUuid_v2), one fresh process per case",
        "environment": {k: os.environ[k] for k in ("NVIDIA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY") if k in os.environ},
        "gpus": gpus, "seconds": {"cuda": round(cuda_s, 2), "agent": agent_s and round(agent_s, 2)},
        "cases": corpus,
    }
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=True)
        fh.write("\n")
    agree = sum(1 for c in corpus if "agent" in c and c["agent"].get("selected") == c["cuda"]["uuids"])
    print("%d cases, CUDA %.1f s, agent %s s; agent agrees on %d" % (len(corpus), cuda_s, agent_s, agree))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--record", metavar="FILE", required=True, help="write the corpus with CUDA's answers here")
    p.add_argument("--agent", help="the agent's command line, e.g. 'python3 -I -S agent.pyz'")
    p.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 4))
    opts = p.parse_args(argv)
    record(opts.record, opts.agent.split() if opts.agent else None, opts.workers)


if __name__ == "__main__":
    main()
