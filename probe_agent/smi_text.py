"""nvidia-smi's text outputs read by structure: `topo -m`, `-L` and the
`-q -d PERFORMANCE` counters.

Real outputs differ across driver versions and the way people copy them: tabs or runs of spaces,
NIC columns named `NICn` (with a legend), `mlx5_n`, `mlx4_n` or anything else, a `GPU NUMA ID`
column or none, header cells that run together (`NIC8NIC9`), rows with an empty cell before the
last column. So `topo -m` is not paired cell by cell from the left: the GPU columns are the
header's leading `GPUn` names, the named columns (CPU Affinity, NUMA Affinity, GPU NUMA ID) are
taken from the right, and the NIC columns are whatever lies between. A row that cannot be
reconciled with its header leaves that part unread, with the reason (`unread`), never a value
from the wrong column. Checked against the corpus of real outputs in tests/fixtures/corpus.
"""

import re

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NAMED = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
HEADER_TOKEN = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|\S+")
# Column names that can run together in a header cell ("NIC8NIC9", "GPU7mlx5_0")
NAME_PART = re.compile(r"GPU\d+|NIC\d+|mlx\d+_\d+")
# Link classes of the legend; SOC is the older drivers' name for SYS
LINK_PART = re.compile(r"X|SYS|SOC|NODE|PHB|PXB|PIX|NV\d+")
GPU_NAME = re.compile(r"^GPU(\d+)$")
LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _split(token, part):
    """A cell that is several names or link classes run together, split; others as they are."""
    pieces = part.findall(token)
    return pieces if len(pieces) > 1 and "".join(pieces) == token else [token]


def _header(line):
    """(GPU column count, NIC column names, named columns) of a header line; None if it is none."""
    tokens = [t for raw in HEADER_TOKEN.findall(line) for t in _split(raw, NAME_PART)]
    first = next((n for n, t in enumerate(tokens) if GPU_NAME.match(t)), None)
    if first is None or "CPU Affinity" not in tokens:
        return None
    tokens = tokens[first:]
    gpus = 0
    while gpus < len(tokens) and GPU_NAME.match(tokens[gpus]) and int(tokens[gpus][3:]) == gpus:
        gpus += 1
    named = len(tokens)
    while named > gpus and tokens[named - 1] in NAMED:
        named -= 1
    return gpus, tokens[gpus:named], tokens[named:]


def _is_link(token):
    return LINK_PART.fullmatch(token) is not None


def _row(i, tokens, header, out):
    """Fill `out` from the cells of GPU i's row, or say in out['unread'] what could not be read."""
    gpus, nics, named = header
    cells = [c for t in tokens for c in (_split(t, LINK_PART) if LINK_PART.match(t) else [t])]
    links = []
    while len(links) < len(cells) and _is_link(cells[len(links)]):
        links.append(cells[len(links)])
    rest = cells[len(links) :]
    if not rest and named and len(links) < gpus + len(nics):
        # the row stops before its named columns: its last cell may be cut ("NV1" of "NV18")
        links.pop()
    key = str(i)
    why = []
    if i < len(links) and links[i] == "X":
        for j in range(i + 1, min(gpus, len(links))):
            out["pairs"]["%d-%d" % (i, j)] = links[j]
    else:
        why.append("its GPU cells do not put X at GPU%d" % i)
    whole = len(links) == gpus + len(nics)
    if whole and nics:
        out["nics"][key] = dict(zip(nics, links[gpus:]))
    elif nics:
        why.append(
            "it has %d link cells where the header names %d GPU and %d NIC columns"
            % (len(links), gpus, len(nics))
        )
    if len(rest) == len(named):
        for name, value in zip(named, rest):
            field = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity"}.get(name)
            if field:
                out[field][key] = value
    else:
        why.append(
            "its %d values after the link cells do not match the header's %s"
            % (len(rest), ", ".join(named) or "named columns")
        )
    if why:
        out["unread"][key] = "GPU%d's row of nvidia-smi topo -m: %s" % (i, "; ".join(why))


def parse_topo_matrix(text):
    """`nvidia-smi topo -m`: GPU-pair link classes, each GPU's CPU and NUMA affinity and its link to
    each NIC column (named as the header names it; `nic_legend` maps NICn to the device), and
    `unread`: {GPU index: why part of its row could not be read}."""
    out = {
        "pairs": {},
        "cpu_affinity": {},
        "numa_affinity": {},
        "nics": {},
        "nic_legend": {},
        "unread": {},
    }
    header = None
    seen = set()
    for line in (ANSI.sub("", raw) for raw in (text or "").splitlines()):
        legend = LEGEND.match(line)
        if legend:
            out["nic_legend"][legend.group(1)] = legend.group(2)
            continue
        if header is None:
            header = _header(line)
            continue
        tokens = line.split()
        label = GPU_NAME.match(tokens[0]) if tokens else None
        if label and int(label.group(1)) < header[0] and label.group(1) not in seen:
            seen.add(label.group(1))
            _row(int(label.group(1)), tokens[1:], header, out)
    if header is not None:
        for i in range(header[0]):
            if str(i) not in seen:
                out["unread"][str(i)] = "GPU%d's row of nvidia-smi topo -m is missing" % i
    return out


SMI_LIST = re.compile(r"^\s*GPU (\d+): (.*?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
SMI_LIST_MIG = re.compile(r"^\s+MIG (.*?)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$")


def parse_smi_list(text):
    """`nvidia-smi -L`: [{"index", "name", "uuid", "mig": [{"index", "profile",
    "uuid"}]}], in order."""
    gpus = []
    for line in (text or "").splitlines():
        m = SMI_LIST.match(line)
        if m:
            gpus.append(
                {"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3), "mig": []}
            )
            continue
        m = SMI_LIST_MIG.match(line)
        if m and gpus:
            gpus[-1]["mig"].append(
                {"index": int(m.group(2)), "profile": m.group(1), "uuid": m.group(3)}
            )
    return gpus


COUNTERS = re.compile(r"^\s+Clocks? (?:Event|Throttle) Reasons Counters\s*$")
REASONS = re.compile(r"^\s+Clocks? (?:Event|Throttle) Reasons\s*$")
REASON = re.compile(r"^\s+([A-Za-z][A-Za-z ]*?)\s*:\s*(Active|Not Active)\s*$")
COUNTER = re.compile(r"^\s+([A-Za-z][A-Za-z ]*?)\s*:\s*(\d+) us\s*$")
GPU_BLOCK = re.compile(r"^GPU ([0-9A-Fa-f:.]+)\s*$")


def parse_reason_counters(text):
    """The clock event reason counters of `nvidia-smi -q -d PERFORMANCE`, per GPU bus id, in us: the
    block is 'Clocks Event Reasons Counters' on current drivers, 'Clocks Throttle Reasons Counters'
    before; drivers without it give none (an empty dict for that GPU is never made up)."""
    result = {}
    gpu = None
    depth = None
    for line in (text or "").splitlines():
        m = GPU_BLOCK.match(line)
        if m:
            gpu, depth = m.group(1), None
            continue
        if COUNTERS.match(line):
            depth = len(line) - len(line.lstrip())
            result.setdefault(gpu, {})
            continue
        if depth is None:
            continue
        indent = len(line) - len(line.lstrip())
        m = COUNTER.match(line)
        if m and indent > depth:
            result[gpu][m.group(1).strip().lower().replace(" ", "_")] = int(m.group(2))
        elif line.strip() and indent <= depth:
            depth = None
    return result


def parse_active_reasons(text):
    """The active clock event reasons of `nvidia-smi -q [-d PERFORMANCE]`, per GPU bus id (None
    for an excerpt without its GPU line), named as probe_agent.collect.CLOCK_EVENT_REASONS names
    them ("SW Power Cap" ->
    sw_power_cap): under 'Clocks Event Reasons' on current drivers, 'Clocks
    Throttle Reasons' before."""
    result = {}
    gpu, depth = None, None
    for line in (text or "").splitlines():
        m = GPU_BLOCK.match(line)
        if m:
            gpu, depth = m.group(1), None
            continue
        if REASONS.match(line):
            depth = len(line) - len(line.lstrip())
            result.setdefault(gpu, [])
            continue
        if depth is None:
            continue
        m = REASON.match(line)
        if m and len(line) - len(line.lstrip()) > depth:
            if m.group(2) == "Active":
                result[gpu].append(m.group(1).strip().lower().replace(" ", "_"))
        elif line.strip():
            depth = None
    return result
