"""The device mask: which physical GPUs CUDA will show a process, and how it renumbers them.

NVML ignores CUDA_VISIBLE_DEVICES; CUDA applies it. The rules below are CUDA's as observed on
H200 hosts (driver 580) against a corpus of masks (docs/device-mask.md, tests/fixtures/masks/):

- CUDA_DEVICE_ORDER must be unset, PCI_BUS_ID or FASTEST_FIRST, exactly: any other value (even
  "", a lower-case or padded name) makes cuInit fail with CUDA_ERROR_INVALID_DEVICE.
- The mask is split at commas only. Its FIRST entry decides how every entry is read: as a UUID
  when it starts with "GPU-" or "MIG-", otherwise as an index.
- An index is read like strtoul: leading whitespace, an optional sign, decimal digits; whatever
  follows is ignored ("0abc", "0 1", "1.5" are 0, 0, 1), and the value is cut to a 32-bit int
  ("4294967297" is 1, "2147483648" is negative). No digits is invalid.
- A UUID entry is "GPU-" or "MIG-" then hex digits and dashes; CUDA skips the dashes wherever they
  are (none at all, "GPU-9ea52b196c69...", selects the GPU) and compares the first 32 digits
  case-insensitively as a prefix of the device's UUID digits (one digit, or none after a dash, is
  enough); what follows is ignored. Leading whitespace makes it invalid, as does an index among
  UUIDs (and a UUID among indices).
- A UUID prefix that several GPUs share is invalid here: CUDA's documentation asks for "enough
  digits from the beginning of the GPU UUID to uniquely identify that GPU"; what CUDA does with one
  is not recorded yet (docs/device-mask.md, "What was not observed").
- The first invalid entry stops the list: devices before it stay visible, the rest are dropped.
- A device named twice (before that stop, in any spelling) makes cuInit fail with
  CUDA_ERROR_INVALID_DEVICE: CUDA then sees no device at all.
"""

import re

ORDERS = ("PCI_BUS_ID", "FASTEST_FIRST")
UUID_PREFIXES = ("GPU-", "MIG-")
NO_DEVICE = "CUDA_ERROR_NO_DEVICE"
INVALID_DEVICE = "CUDA_ERROR_INVALID_DEVICE"
_INDEX = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")
_UUID_HEX = re.compile(r"[0-9a-fA-F-]*")
_LEGACY_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/(\d+)/(\d+)$")


def resolve_mask(env, gpus):
    """Resolve the environment's mask against the GPUs NVML sees (a list of gpu fact
    dicts, NVML order)."""
    raw = env.get("CUDA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER")
    out = {
        "cuda_visible_devices": raw,
        "cuda_device_order": order,
        "nvidia_visible_devices": env.get("NVIDIA_VISIBLE_DEVICES"),
        "state": None,
        "selected": [],
        "invalid": [],
        "ignored": [],
        "lenient": [],
        "cuda_error": None,
        "order": order or "FASTEST_FIRST",
    }
    if order is not None and order not in ORDERS:
        return unknown_order(out, order)
    if raw is None:
        out["state"] = "unset"
        out["selected"] = [entry(i, g) for i, g in enumerate(gpus)]
        return out
    entries = raw.split(",")
    by_uuid = entries[0].startswith(UUID_PREFIXES)
    seen = {}
    for pos, text in enumerate(entries):
        gpu, mig, problem, read_as = (match_uuid if by_uuid else match_index)(text, gpus)
        if gpu is None:
            bad = problem if isinstance(problem, dict) else {"reason": problem}
            out["invalid"].append(dict(bad, entry=text, position=pos))
            out["ignored"] = entries[pos + 1 :]
            break
        key = (gpu.get("index"), mig and mig.get("uuid"))
        if key in seen:
            return named_twice(out, entries, pos, seen[key])
        seen[key] = text
        if read_as is not None:
            out["lenient"].append({"entry": text, "position": pos, "read_as": read_as})
        item = entry(len(out["selected"]), gpu)
        if mig is not None:
            item["mig_uuid"] = mig.get("uuid")
            item["mig_profile"] = mig.get("profile")
        out["selected"].append(item)
    if not out["selected"]:
        out["state"] = "empty" if raw.strip() == "" else "invalid"
        out["cuda_error"] = NO_DEVICE
    else:
        out["state"] = "partly_invalid" if out["invalid"] else "set"
    return out


def unknown_order(out, order):
    """`out` for a CUDA_DEVICE_ORDER that CUDA refuses: cuInit fails, no device is visible."""
    out.update(state="invalid", cuda_error=INVALID_DEVICE)
    out["invalid"].append(
        {
            "entry": "CUDA_DEVICE_ORDER=%s" % order,
            "position": None,
            "reason": "CUDA_DEVICE_ORDER is neither PCI_BUS_ID nor FASTEST_FIRST (exactly)",
        }
    )
    return out


def named_twice(out, entries, pos, first):
    """`out` for a mask whose entry `pos` names the GPU entry `first` named: cuInit fails, CUDA
    sees no device at all."""
    out.update(state="invalid", selected=[], cuda_error=INVALID_DEVICE, ignored=entries[pos + 1 :])
    out["invalid"].append(
        {
            "entry": entries[pos],
            "position": pos,
            "reason": "names the same GPU as entry %r again" % first,
        }
    )
    return out


def entry(cuda_index, gpu):

    return {
        "cuda_index": cuda_index,
        "physical_index": gpu.get("index"),
        "uuid": gpu.get("uuid"),
        "pci_bus_id": gpu.get("pci_bus_id"),
    }


def cuda_int(sign, digits):
    """The int CUDA makes of an index: strtoul (saturating at 2**64-1, negation modulo
    2**64), cut to int32."""
    n = int(digits)
    value = 2**64 - 1 if n >= 2**64 else ((-n) % 2**64 if sign == "-" else n)
    value &= 0xFFFFFFFF
    return value - 2**32 if value >= 2**31 else value


def match_index(text, gpus):
    """(gpu, None, problem, read_as) for an index entry; read_as names what CUDA
    made of a sloppy one."""
    m = _INDEX.match(text)
    if not m:
        if text.startswith(UUID_PREFIXES) or text.lstrip().startswith(UUID_PREFIXES):
            return (
                None,
                None,
                "a UUID after an index (CUDA reads every entry as the first one's kind)",
                None,
            )
        return None, None, "empty entry" if text.strip() == "" else "not an index", None
    i = cuda_int(m.group(1), m.group(2))
    if not 0 <= i < len(gpus):
        return None, None, "no GPU %d on this host (it has %d)" % (i, len(gpus)), None
    sloppy = text[m.end() :].strip() != "" or m.group(1) != "" or int(m.group(2)) != i
    return gpus[i], None, None, (str(i) if sloppy else None)


def match_uuid(text, gpus):
    """(gpu, mig device or None, problem, read_as) for a UUID entry ("GPU-..." or "MIG-...")."""
    if not text.startswith(UUID_PREFIXES):
        return (
            None,
            None,
            (
                "an index after a UUID (CUDA reads every entry as the first one's kind)"
                if _INDEX.match(text)
                else "not a UUID"
            ),
            None,
        )
    run = _UUID_HEX.match(text, 4).group(0)
    hexpart = run.replace("-", "")[:32].lower()  # CUDA skips dashes wherever they are: digits count
    if text.startswith("MIG-"):
        found = match_mig(text, hexpart, gpus)
        if found:
            return (
                found[0],
                found[1],
                None,
                _read_as(text, run, hexpart, found[1] if found[1] else found[0]),
            )
    if not run:
        return None, None, "no UUID digits after %r" % text[:4], None
    hits = [g for g in gpus if _digits(g.get("uuid")).startswith(hexpart)]
    # CUDA's documentation asks for "enough digits ... to uniquely identify that GPU"
    if len(hits) > 1:
        matches = [g.get("index") for g in hits]
        return (
            None,
            None,
            {
                "reason": (
                    "its UUID prefix matches %d GPUs (%s), and CUDA needs enough digits to "
                    "name one" % (len(hits), ", ".join(str(i) for i in matches))
                ),
                "matches": matches,
            },
            None,
        )
    if not hits:
        return None, None, "no GPU of this host has this UUID", None
    return hits[0], None, None, _read_as(text, run, hexpart, hits[0])


def _digits(uuid):
    """A "GPU-..." or "MIG-..." UUID's hex digits, lower case, without its dashes."""
    return (uuid or "")[4:].replace("-", "").lower()


def _read_as(text, run, hexpart, device):
    """How CUDA read a UUID entry it accepted, when that is not what it says (None when it is): text
    after the UUID ignored, digits past the 32nd ignored, or dashes where the GPU's UUID has none
    (an entry with no dash at all is a plain spelling of the UUID, not a loose one)."""
    dashed = (device.get("uuid") or "")[4:].lower()
    exact = (
        len(text) == 4 + len(run)
        and len(run.replace("-", "")) <= 32
        and ("-" not in run or dashed.startswith(run.lower()))
    )
    return None if exact else text[:4] + hexpart


def match_mig(text, hexpart, gpus):
    """(gpu, mig device) a MIG entry names among the MIG devices NVML lists, or None."""
    for g in gpus:
        for d in (g.get("mig") or {}).get("devices", []):
            uuid = (d.get("uuid") or "").lower()
            if hexpart and uuid.startswith("mig-") and _digits(uuid).startswith(hexpart):
                return g, d
    m = _LEGACY_MIG.match(text)
    if m:
        for g in gpus:
            if g.get("uuid") == m.group(1):
                for d in (g.get("mig") or {}).get("devices", []):
                    if str(d.get("gpu_instance_id")) == m.group(2) and str(
                        d.get("compute_instance_id")
                    ) == m.group(3):
                        return g, d
    return None


def smi_list_gpus(listed):
    """`nvidia-smi -L`'s GPUs (probe_agent.smi_text.parse_smi_list) in the form resolve_mask reads,
    for a host where NVML failed: index, UUID and MIG devices (GPU and compute instance from a
    MIG-GPU-.../gi/ci UUID)."""
    gpus = []
    for g in listed or ():
        devices = []
        for d in g.get("mig") or ():
            m = re.match(r"^MIG-GPU-[0-9a-fA-F-]+/(\d+)/(\d+)$", d.get("uuid") or "")
            devices.append(
                {
                    "uuid": d.get("uuid"),
                    "profile": d.get("profile"),
                    "gpu_instance_id": int(m.group(1)) if m else None,
                    "compute_instance_id": int(m.group(2)) if m else None,
                }
            )
        gpus.append(
            {
                "index": g.get("index"),
                "uuid": g.get("uuid"),
                "pci_bus_id": None,
                "name": g.get("name"),
                "mig": {"devices": devices} if devices else None,
            }
        )
    return gpus
