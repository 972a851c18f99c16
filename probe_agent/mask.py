"""The device mask: which physical GPUs CUDA will show a process, and how it renumbers them.

NVML ignores CUDA_VISIBLE_DEVICES; CUDA applies it. Entries are indices (into CUDA's order),
GPU UUIDs (a unique prefix is enough) or MIG UUIDs. CUDA stops at the first invalid entry:
the devices before it stay visible, the rest are dropped.
"""
import re


def resolve_mask(env, gpus):
    """Resolve the environment's mask against the GPUs NVML sees (a list of gpu fact dicts)."""
    raw = env.get("CUDA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER") or "FASTEST_FIRST"
    out = {
        "cuda_visible_devices": raw,
        "cuda_device_order": env.get("CUDA_DEVICE_ORDER"),
        "nvidia_visible_devices": env.get("NVIDIA_VISIBLE_DEVICES"),
        "state": None,
        "selected": [],
        "invalid": [],
        "ignored": [],
    }
    if raw is None:
        out["state"] = "unset"
        out["selected"] = [entry(i, g) for i, g in enumerate(gpus)]
        return out
    if raw.strip() == "":
        out["state"] = "empty"
        return out
    tokens = [t.strip() for t in raw.split(",")]
    seen = set()
    for pos, token in enumerate(tokens):
        gpu, mig = match_token(token, gpus)
        if gpu is None or (gpu["index"], mig and mig.get("uuid")) in seen:
            reason = "duplicate" if gpu is not None else "no such device"
            out["invalid"].append({"entry": token, "position": pos, "reason": reason})
            out["ignored"] = tokens[pos + 1:]
            break
        seen.add((gpu["index"], mig and mig.get("uuid")))
        item = entry(len(out["selected"]), gpu)
        if mig is not None:
            item["mig_uuid"] = mig.get("uuid")
            item["mig_profile"] = mig.get("profile")
        out["selected"].append(item)
    out["state"] = "set" if not out["invalid"] else ("invalid" if not out["selected"] else "partly_invalid")
    out["order"] = order
    return out


def entry(cuda_index, gpu):
    return {
        "cuda_index": cuda_index,
        "physical_index": gpu.get("index"),
        "uuid": gpu.get("uuid"),
        "pci_bus_id": gpu.get("pci_bus_id"),
    }


def match_token(token, gpus):
    """The (gpu, mig device or None) an entry names, or (None, None)."""
    if re.match(r"^\d+$", token):
        i = int(token)
        return (gpus[i], None) if i < len(gpus) else (None, None)
    if token.startswith("MIG-"):
        for g in gpus:
            for d in (g.get("mig") or {}).get("devices", []):
                if d.get("uuid") and (d["uuid"] == token or d["uuid"].startswith(token)):
                    return g, d
        m = re.match(r"^MIG-(GPU-[0-9a-fA-F-]+)/(\d+)/(\d+)$", token)
        if m:
            for g in gpus:
                if g.get("uuid") == m.group(1):
                    for d in (g.get("mig") or {}).get("devices", []):
                        if str(d.get("gpu_instance_id")) == m.group(2) and str(d.get("compute_instance_id")) == m.group(3):
                            return g, d
        return None, None
    prefix = token if token.startswith("GPU-") else None
    if prefix and len(prefix) > 4:
        hits = [g for g in gpus if (g.get("uuid") or "").startswith(prefix)]
        if len(hits) == 1:
            return hits[0], None
    return None, None
