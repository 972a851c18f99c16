"""Convert a folder recorded by nvml_dump.py (NVML answers as JSON) beside nvidia-smi outputs to a sweep capture.

The NVML answers keep their keys; values nvml_dump.py could only store as a repr (process
objects, CPU affinity) are taken from the nvidia-smi output of the same moment instead, and the
conversion says so in the capture's note. Usage: convert_h200_fixture.py FOLDER HOSTDIR OUT.json
"""
import json
import re
import sys
from pathlib import Path


def main(folder, hostdir, out):
    folder, hostdir = Path(folder), Path(hostdir)
    dump = json.loads((folder / "nvml.json").read_text())
    nvml = {}
    for key, answer in dump["calls"].items():
        value = answer.get("value")
        if isinstance(value, str) and value.startswith("<pynvml."):
            continue
        if isinstance(value, list) and any(isinstance(v, str) and v.startswith("<pynvml.") for v in value):
            continue
        nvml[key] = {"value": value}
    for key, answer in dump["errors"].items():
        name = answer["error"].split(":")[0]
        nvml[key] = {"error": name, "message": answer["error"].split(": ", 1)[-1]}
    apps = (folder / "smi_apps.txt").read_text().splitlines()[1:]
    procs = []
    for line in apps:
        uuid, pid, name, mem = [c.strip() for c in line.split(",")]
        procs.append({"pid": int(pid), "name": name, "usedGpuMemory": int(mem.split()[0]) * 1048576})
    nvml["gpu0.procs"] = {"value": procs}
    env_txt = (hostdir / "env.txt").read_text()
    env = {}
    for line in env_txt.splitlines():
        m = re.match(r"^(CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|NVIDIA_VISIBLE_DEVICES|NVIDIA_DRIVER_CAPABILITIES)=(.*)$", line)
        if m:
            env[m.group(1)] = m.group(2)
    torch = (folder / "torch.txt").read_text().splitlines()
    mask = eval(torch[3])  # repr of os.environ.get('CUDA_VISIBLE_DEVICES'), written by capture_gpu.sh
    if mask is not None:
        env["CUDA_VISIBLE_DEVICES"] = mask
    tv, cuda = torch[0].split()
    avail, count = torch[1].split()
    cudnn, arch = torch[2].split(" ", 1)
    commands = {}
    for mode in ("metadata", "deep"):
        result = {"python": "3.12.3", "executable": "/usr/bin/python3", "mode": mode, "torch_version": tv,
                  "cuda_runtime": cuda, "hip_runtime": None, "cudnn": int(cudnn) if mode == "deep" else "9.14.0.64"}
        if mode == "deep":
            result.update({"cuda_available": avail == "True", "device_count": int(count), "arch_list": eval(arch),
                           "devices": [{"name": "NVIDIA H200", "capability": "9.0"}] * int(count)})
        commands["framework python3 " + mode] = {"rc": 0, "stdout": json.dumps(result), "stderr": "", "seconds": 0.05}
    commands["nvidia-smi -q -d PERFORMANCE"] = {"rc": 0, "stdout": (folder / "smi_perf.txt").read_text(), "stderr": ""}
    commands["nvidia-smi topo -m"] = {"rc": 0, "stdout": (folder / "smi_topo.txt").read_text(), "stderr": ""}
    lines = env_txt.splitlines()
    capture = {
        "format": "sweep-capture", "version": 1,
        "recorded_at": "2026-11-29T14:54:00Z",
        "note": "converted by tools/convert_h200_fixture.py from the H200 capture folder '%s' "
                "(nvml_dump.py + nvidia-smi); processes from nvidia-smi --query-compute-apps" % folder.name,
        "host": {"hostname": lines[3].strip(), "kernel": lines[0].split()[2], "machine": "x86_64", "cpus": 16,
                 "python": "3.12.3"},
        "env": env,
        "files": {"/proc/driver/nvidia/version": "\n".join(lines[1:3]) + "\n", "/etc/os-release": None},
        "nvml": nvml, "commands": commands, "samples": [], "load": None,
    }
    Path(out).write_text(json.dumps(capture, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
