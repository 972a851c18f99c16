"""The device mask, checked against CUDA itself.

tests/fixtures/masks/<kind>.json holds, for every mask of the corpus (tools/mask_corpus.py,
expanded with the host's real UUIDs) and every CUDA_DEVICE_ORDER, the UUIDs the CUDA driver
enumerated in a fresh process on a real H200 host (one GPU and two), or the error cuInit returned.
The agent's resolver must select the same GPUs in the same order, and call the mask broken exactly
where CUDA sees no device.
"""
import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings, strategies as st

from probe_agent.contracts import check_mask
from probe_agent.mask import cuda_int, resolve_mask

ROOT = Path(__file__).resolve().parents[2]
MASKS = ROOT / "tests" / "fixtures" / "masks"
KINDS = ("h200", "x2")
sys.path.insert(0, str(ROOT / "tools"))
import mask_corpus  # noqa: E402  (tools/ is not a package)


def oracle(kind):
    return json.loads((MASKS / f"{kind}.json").read_text())


def case_env(case):
    return {k: v for k, v in (("CUDA_VISIBLE_DEVICES", case["mask"]), ("CUDA_DEVICE_ORDER", case["order"]))
            if v is not None}


def agent_answer(case, gpus):
    mask = resolve_mask(case_env(case), gpus)
    status = check_mask({"mask": mask, "driver": {"gpu_count": len(gpus)}})["status"]
    return [s["uuid"] for s in mask["selected"]], status, mask


@pytest.mark.parametrize("kind,gpu_count", [("h200", 1), ("x2", 2)])
def test_the_corpus_was_recorded_from_the_template_on_real_gpus(kind, gpu_count):
    doc = oracle(kind)
    assert doc["format"] == "sweep-mask-oracle" and len(doc["gpus"]) == gpu_count
    recorded = [(c["group"], c["template"], c["mask"], c["order"]) for c in doc["cases"]]
    expected = [(c["group"], c["template"], c["mask"], c["order"])
                for c in mask_corpus.cases([g["uuid"] for g in doc["gpus"]], doc.get("corpus", 1))]
    assert recorded == expected  # generated, not hand-edited
    assert len({c["mask"] for c in doc["cases"]}) >= 150
    assert {c["order"] for c in doc["cases"]} >= {None, "PCI_BUS_ID", "FASTEST_FIRST"}
    assert all(c["cuda"]["error"] in (None, "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INVALID_DEVICE")
               for c in doc["cases"])
    assert all(c["cuda"]["uuids"] or c["cuda"]["init"] for c in doc["cases"])  # no device <=> cuInit failed


@pytest.mark.parametrize("kind", KINDS)
def test_the_resolver_agrees_with_cuda_on_every_mask(kind):
    doc = oracle(kind)
    disagree = []
    for case in doc["cases"]:
        selected, status, mask = agent_answer(case, doc["gpus"])
        cuda = case["cuda"]
        if selected != cuda["uuids"] or (status == "broken") != (not cuda["uuids"]) \
                or mask["cuda_error"] != cuda["error"]:
            disagree.append((case["mask"], case["order"], selected, status, mask["cuda_error"], cuda))
    assert disagree == [], f"{len(disagree)} of {len(doc['cases'])} cases disagree with CUDA"


@pytest.mark.parametrize("mask,order,physical,status", [
    ("0,1,0", None, [], "broken"),        # a repeat: cuInit fails, CUDA sees nothing
    ("{U1},{U0},{U1}", None, [], "broken"),
    ("{U0:8},{U0}", None, [], "broken"),  # the same GPU by prefix and full UUID
    ("0,{U1}", None, [0], "warning"),         # the first entry's kind rules: a UUID after an index stops the list
    ("{U1},0", None, [1], "warning"),
    ("1 0", None, [1], "warning"),        # no separator but commas: the rest of the entry is ignored
    ("01,00", None, [1, 0], "ok"),
    ("4294967297", None, [1], "warning"),  # 32-bit wrap
    ("-0", None, [0], "warning"),
    ("{U0UP}", None, [0], "ok"),          # hex is compared case-insensitively
    ("MIG-{u0}", None, [0], "ok"),        # MIG off: MIG-<GPU hex> names the GPU itself
    (" {U0}", None, [], "broken"),        # leading blank before a UUID: no such device
    ("1,0", "pci_bus_id", [], "broken"),  # CUDA_DEVICE_ORDER is matched exactly
    ("1,0", "", [], "broken"),
])
def test_rules_seen_on_the_two_gpu_host(mask, order, physical, status):
    doc = oracle("x2")
    uuids = [g["uuid"] for g in doc["gpus"]]
    text = mask_corpus.expand(mask, mask_corpus.placeholders(uuids))
    case = next(c for c in doc["cases"] if c["mask"] == text and c["order"] == order)
    assert case["cuda"]["uuids"] == [uuids[i] for i in physical]
    selected, got_status, _ = agent_answer(case, doc["gpus"])
    assert selected == case["cuda"]["uuids"] and got_status == status


@pytest.mark.parametrize("mask,physical,status", [
    ("GPU-{u0n}", [0], "ok"),             # issue 22: the UUID's digits without dashes select the GPU
    ("GPU-{u0n:10}", [0], "ok"),          # a dashless prefix that runs past the first dash
    ("GPU-{u0d4}", [0], "warning"),       # dashes where NVML puts none: skipped, so read loosely
    ("GPU--", [0], "warning"),            # a dash and no digit: an empty prefix, the one GPU
    ("GPU-", [], "broken"),               # nothing after the prefix: invalid
    ("gpu-{u0n}", [], "broken"),          # the prefix itself is case-sensitive
    ("{U0},GPU-{u0n}", [], "broken"),     # the same GPU twice in two spellings
])
def test_dashes_in_a_uuid_are_skipped_as_cuda_skips_them_on_the_h200(mask, physical, status):
    doc = oracle("h200")
    uuids = [g["uuid"] for g in doc["gpus"]]
    text = mask_corpus.expand(mask, mask_corpus.placeholders(uuids))
    case = next(c for c in doc["cases"] if c["mask"] == text and c["order"] is None)
    assert case["cuda"]["uuids"] == [uuids[i] for i in physical]
    selected, got_status, _ = agent_answer(case, doc["gpus"])
    assert selected == case["cuda"]["uuids"] and got_status == status


def test_the_messages_name_the_entry_and_the_fix():
    gpus = oracle("x2")["gpus"]
    c = check_mask({"mask": resolve_mask({"CUDA_VISIBLE_DEVICES": "0,1,0"}, gpus), "driver": {"gpu_count": 2}})
    assert c["message"] == ("device mask '0,1,0': entry '0' names the same GPU as entry '0' again, so CUDA "
                            "refuses the whole mask and sees no GPU (CUDA_ERROR_INVALID_DEVICE)")
    assert c["fix"] == "name each GPU once"
    c = check_mask({"mask": resolve_mask({"CUDA_DEVICE_ORDER": "pci_bus_id"}, gpus), "driver": {"gpu_count": 2}})
    assert c["message"] == ("CUDA_DEVICE_ORDER=pci_bus_id: CUDA_DEVICE_ORDER is neither PCI_BUS_ID nor "
                            "FASTEST_FIRST (exactly), so CUDA sees no GPU (CUDA_ERROR_INVALID_DEVICE)")
    c = check_mask({"mask": resolve_mask({"CUDA_VISIBLE_DEVICES": "0 1"}, gpus), "driver": {"gpu_count": 2}})
    assert c["status"] == "warning" and "'0 1' as 0" in c["message"]


def test_the_real_agent_replays_a_mask_case_like_the_resolver(tmp_path):
    """End to end: the x2 idle capture under a corpus mask, through the agent's command line."""
    import subprocess

    doc = oracle("x2")
    capture = json.loads((ROOT / "tests" / "fixtures" / "x2" / "x2-idle.json").read_text())
    assert [g["uuid"] for g in doc["gpus"]] == [capture["nvml"][f"gpu{i}.uuid"]["value"] for i in range(2)]
    for case in doc["cases"][::37]:
        capture["env"] = {k: v for k, v in capture["env"].items() if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
        capture["env"].update(case_env(case))
        path = tmp_path / "case.json"
        path.write_text(json.dumps(capture))
        proc = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", str(path)], capture_output=True,
                              text=True, cwd=ROOT)
        h = json.loads(proc.stdout)
        status = next(c["status"] for c in h["contracts"] if c["name"] == "device_mask")
        assert [s["uuid"] for s in h["mask"]["selected"]] == case["cuda"]["uuids"]
        assert (status == "broken") == (not case["cuda"]["uuids"])


def _sharing_gpus(digits):
    """The two-GPU host's GPUs with GPU 1's UUID made to share its first `digits` hex digits with GPU 0's."""
    gpus = [dict(g) for g in oracle("x2")["gpus"]]
    u0, u1 = gpus[0]["uuid"], gpus[1]["uuid"]
    gpus[1]["uuid"] = u0[:4 + digits] + u1[4 + digits:]
    return gpus


@pytest.mark.parametrize("mask,gpus,physical,status", [
    ("GPU--", oracle("x2")["gpus"], [], "broken"),      # no digit after a dash: both GPUs' prefix
    ("GPU-----", oracle("x2")["gpus"], [], "broken"),
    ("GPU-8069", _sharing_gpus(4), [], "broken"),        # 4 digits two GPUs share
    ("GPU-80696e65", _sharing_gpus(4), [0], "ok"),       # 8 digits name one of them
    ("GPU-80696e65,GPU-8069", _sharing_gpus(4), [0], "warning"),  # an ambiguous entry stops the list
])
def test_a_uuid_prefix_that_several_gpus_share_names_none_of_them(mask, gpus, physical, status):
    """Issue 39: CUDA's documentation asks for "enough digits ... to uniquely identify that GPU"; the
    x2 recording (corpus 1) holds no such mask, so this is the resolver's assumption until the next
    multi-GPU host records corpus 2 (GPU--, GPU----- are ambiguous there)."""
    mask_doc = resolve_mask({"CUDA_VISIBLE_DEVICES": mask}, gpus)
    c = check_mask({"mask": mask_doc, "driver": {"gpu_count": len(gpus)}})
    assert [s["physical_index"] for s in mask_doc["selected"]] == physical and c["status"] == status
    assert all(x.get("matches") == [0, 1] for x in mask_doc["invalid"])


def test_an_ambiguous_prefix_is_said_as_such_with_the_fix():
    gpus = oracle("x2")["gpus"]
    c = check_mask({"mask": resolve_mask({"CUDA_VISIBLE_DEVICES": "GPU--"}, gpus), "driver": {"gpu_count": 2}})
    assert c["message"] == ("device mask 'GPU--': first entry 'GPU--' is ambiguous: its UUID prefix matches 2 GPUs "
                            "(0, 1), and CUDA needs enough digits to name one; the agent counts on CUDA seeing no "
                            "GPU (what CUDA does with an ambiguous prefix is not recorded)")
    assert c["fix"] == "write enough of the UUID to name one GPU (nvidia-smi -L lists them)"


# --- an index as strtoul reads it (the C library owns that part of CUDA's rule) -------------------

def _strtoul_int32(text):
    """What CUDA makes of an index entry: glibc's strtoul(text, NULL, 10), cut to a 32-bit int."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.strtoul.restype, libc.strtoul.argtypes = ctypes.c_ulong, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    return ctypes.c_int32(libc.strtoul(text.encode(), None, 10) & 0xFFFFFFFF).value


X2_GPUS = oracle("x2")["gpus"]
INDEX_TEXT = st.from_regex(r"\A[ \t\n\v\f\r]{0,2}[+-]?[0-9]{1,24}[x ,.]?\Z")


@settings(max_examples=300, deadline=None)
@given(INDEX_TEXT)
@example("99999999999999999999")      # past 2**64: strtoul saturates
@example(str(2 ** 64))
@example(str(2 ** 64 + 5))            # saturated, not wrapped (5)
@example(str(2 ** 64 - 1))
@example("-18446744073709551615")     # negation modulo 2**64: 1
@example("-18446744073709551616")     # past the range, negated: saturated
@example("4294967297")
@example("2147483648")             # 2**31: the first negative int32
def test_an_index_is_the_int_glibcs_strtoul_reads_cut_to_32_bits(text):
    value = _strtoul_int32(text)
    sign, digits = re.match(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)", text).groups()
    assert cuda_int(sign, digits) == value
    out = resolve_mask({"CUDA_VISIBLE_DEVICES": text}, X2_GPUS)
    assert [s["physical_index"] for s in out["selected"]] == ([value] if 0 <= value < 2 else [])


# --- MIG enabled: not recorded (no lease had MIG on), the resolver's documented assumption --------

MIG_GPUS = [
    {"index": 0, "uuid": "GPU-80696e65-04e6-e4cb-7322-49590644e06b", "pci_bus_id": "00000000:00:06.0",
     "mig": {"devices": [
         {"uuid": "MIG-1a2b3c4d-0000-5555-6666-777777777777", "gpu_instance_id": 1, "compute_instance_id": 0,
          "profile": "1g.18gb"},
         {"uuid": "MIG-9f8e7d6c-1111-5555-6666-777777777777", "gpu_instance_id": 2, "compute_instance_id": 0,
          "profile": "3g.71gb"}]}},
    {"index": 1, "uuid": "GPU-2080378b-ac67-e39e-df1c-389174d5baea", "pci_bus_id": "00000000:00:07.0"},
]


@pytest.mark.parametrize("mask,selected", [
    ("MIG-1a2b3c4d-0000-5555-6666-777777777777", [(0, "MIG-1a2b3c4d-0000-5555-6666-777777777777", "1g.18gb")]),
    ("MIG-9F8E7D6C", [(0, "MIG-9f8e7d6c-1111-5555-6666-777777777777", "3g.71gb")]),  # a prefix, any case
    ("MIG-GPU-80696e65-04e6-e4cb-7322-49590644e06b/2/0",                               # the legacy form
     [(0, "MIG-9f8e7d6c-1111-5555-6666-777777777777", "3g.71gb")]),
    ("MIG-GPU-80696e65-04e6-e4cb-7322-49590644e06b/2/1", []),                           # no such instance
    ("MIG-GPU-2080378b-ac67-e39e-df1c-389174d5baea/1/0", []),                           # a GPU without MIG
    ("MIG-1a2b3c4d,MIG-9f8e7d6c", [(0, "MIG-1a2b3c4d-0000-5555-6666-777777777777", "1g.18gb"),
                                   (0, "MIG-9f8e7d6c-1111-5555-6666-777777777777", "3g.71gb")]),
    ("MIG-1a2b3c4d,MIG-1A2B", []),                                                      # one device twice
    ("MIG-80696e65", [(0, None, None)]),   # a GPU's own digits after MIG-: the GPU, as with MIG off
])
def test_mig_devices_are_named_by_uuid_prefix_or_the_legacy_form(mask, selected):
    out = resolve_mask({"CUDA_VISIBLE_DEVICES": mask}, MIG_GPUS)
    assert [(s["physical_index"], s.get("mig_uuid"), s.get("mig_profile")) for s in out["selected"]] == selected
    assert [s["cuda_index"] for s in out["selected"]] == list(range(len(selected)))


# --- what the agent's mask record and message say of each entry (issue 39: mask.py's mutants) -----

U1 = "GPU-2080378b-ac67-e39e-df1c-389174d5baea"  # the two-GPU host's GPU 1


@pytest.mark.parametrize("mask,message", [
    ("0,x,1", "device mask entry 'x' is invalid (not an index): CUDA stops there and drops '1'"),
    (f"0, {U1}", f"device mask entry ' {U1}' is invalid (a UUID after an index (CUDA reads every entry as the "
                 "first one's kind)): CUDA stops there and drops nothing more"),
    (f"{U1},0", "device mask entry '0' is invalid (an index after a UUID (CUDA reads every entry as the first "
                "one's kind)): CUDA stops there and drops nothing more"),
    (f"{U1},x", "device mask entry 'x' is invalid (not a UUID): CUDA stops there and drops nothing more"),
    ("1,", "device mask entry '' is invalid (empty entry): CUDA stops there and drops nothing more"),
    ("5", "device mask '5' names no GPU of this host: CUDA sees none (first entry '5': no GPU 5 on this host (it has 2))"),
    ("GPU-ffff", "device mask 'GPU-ffff' names no GPU of this host: CUDA sees none (first entry 'GPU-ffff': "
                 "no GPU of this host has this UUID)"),
    ("GPU-208037-8bac67e39edf1c389174d5baea", "device mask 'GPU-208037-8bac67e39edf1c389174d5baea': CUDA reads "
     "'GPU-208037-8bac67e39edf1c389174d5baea' as GPU-2080378bac67e39edf1c389174d5baea (it ignores what follows a "
     "number or a UUID)"),  # dashes where the GPU's UUID has none: read as its digits
])
def test_each_entry_cuda_stops_at_or_reads_loosely_is_named_with_why(mask, message):
    gpus = oracle("x2")["gpus"]
    c = check_mask({"mask": resolve_mask({"CUDA_VISIBLE_DEVICES": mask}, gpus), "driver": {"gpu_count": 2}})
    assert c["message"] == message


def test_the_mask_record_keeps_the_environment_and_each_selected_gpus_bus_id():
    gpus = oracle("x2")["gpus"]
    unset = resolve_mask({"NVIDIA_VISIBLE_DEVICES": "all"}, gpus)
    assert {k: unset[k] for k in ("state", "order", "nvidia_visible_devices", "ignored")} == {
        "state": "unset", "order": "FASTEST_FIRST", "nvidia_visible_devices": "all", "ignored": []}
    assert [(s["cuda_index"], s["physical_index"], s["pci_bus_id"]) for s in unset["selected"]] == [
        (0, 0, "00000000:00:06.0"), (1, 1, "00000000:00:07.0")]
    repeat = resolve_mask({"CUDA_VISIBLE_DEVICES": "0,1,0,1"}, gpus)  # refused at the repeat: the rest unread
    assert (repeat["state"], repeat["selected"], repeat["ignored"]) == ("invalid", [], ["1"])
