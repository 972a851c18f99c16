"""The agent's parsers against real outputs (issue 51): tests/fixtures/corpus holds `nvidia-smi topo -m`
matrices, kernel-log Xid/SXid lines, `nvidia-smi -L` listings with MIG devices and `-q -d PERFORMANCE`
blocks, each verbatim from a public source named in manifest.json with its licence; the expected answers
there were written by hand from each text and NVIDIA's documentation, not from sweep's code.

Every file is checked by the parser that reads its kind as a host does, and every multi-GPU matrix by the
topology contract's worst link for a mask. A matrix cut by its quote is kept as it is: the rows it cuts
must come out unread (with the reason), never filled from another column.
"""
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from probe_agent.gpuchecks import check_topology, worst_link
from probe_agent.hostfacts import nearest_nics
from probe_agent.mask import resolve_mask, smi_list_gpus
from probe_agent.smi_text import parse_active_reasons, parse_reason_counters, parse_smi_list, parse_topo_matrix
from probe_agent.xid import parse_xid_lines

CORPUS = Path(__file__).parents[1] / "fixtures" / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
ENTRIES = MANIFEST["files"]
LICENCES = ("Apache-2.0", "MIT", "BSD-3-Clause", "sweep's own recording")


def of_kind(kind):
    """The files of one kind; a file whose disagreement the manifest names (`exception`, with why) must still
    disagree (strict), so that the exception is dropped once the parser reads it."""
    return [pytest.param(e, id=Path(e["file"]).stem, marks=[pytest.mark.xfail(strict=True, reason=e["exception"])]
                         if "exception" in e else []) for e in ENTRIES if e["kind"] == kind]


def text(entry):
    return (CORPUS / entry["file"]).read_text()


def test_every_file_is_kept_with_its_source_and_a_compatible_licence():
    kinds = {}
    for e in ENTRIES:
        assert (CORPUS / e["file"]).is_file(), e["file"]
        src = e["source"]
        where = src.get("url", "").startswith("https://github.com/") or src.get("commit") or src.get("recorded")
        assert where, e["file"]
        assert any(name in e["licence"] for name in LICENCES), (e["file"], e["licence"])
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    assert kinds == {"topo": 26, "kernlog": 15, "smi_list": 3, "perf": 4}
    in_dirs = {p.relative_to(CORPUS).as_posix() for p in CORPUS.glob("*/*") if p.is_file()}
    listed = {e["file"] for e in ENTRIES if not e["file"].startswith("..")}
    assert in_dirs == listed, "a file without its manifest entry"


def facts_of(topo, gpus, selected):
    return {"topology": dict(topo, source="nvidia-smi topo -m"), "gpus": [{"index": i} for i in range(gpus)],
            "mask": {"selected": [{"cuda_index": n, "physical_index": i} for n, i in enumerate(selected)]}}


@pytest.mark.parametrize("entry", of_kind("topo"))
def test_topo_matrix_affinities_nics_and_links_are_read_from_their_own_columns(entry):
    exp = entry["expected"]
    topo = parse_topo_matrix(text(entry))
    assert topo["cpu_affinity"] == exp["cpu_affinity"]
    assert topo["numa_affinity"] == exp["numa_affinity"]
    assert sorted(int(k) for k in topo["unread"]) == exp["unread"]
    assert all(r.startswith("GPU%s's row of nvidia-smi topo -m" % k) for k, r in topo["unread"].items())
    rows = set(topo["cpu_affinity"]) | set(topo["unread"]) | set(topo["nics"])
    assert rows == {str(i) for i in range(exp["gpus"])}
    for pair, link in exp["links"].items():
        assert topo["pairs"].get(pair) == link, pair
    near = nearest_nics([{"index": i, "pci_bus_id": None} for i in range(exp["gpus"])], [], None, topo)
    assert set(near) == set(exp["nearest_nic"])
    for gpu, (nics, link) in exp["nearest_nic"].items():
        nic = topo["nic_legend"].get(near[gpu]["nic"], near[gpu]["nic"])
        assert (near[gpu]["nic"] in nics or nic in nics) and near[gpu]["link"] == link, (gpu, near[gpu])


@pytest.mark.parametrize("entry", [e for e in of_kind("topo") if e.values[0]["expected"]["gpus"] > 1])
def test_the_topology_contract_names_the_worst_link_of_a_mask_on_every_multi_gpu_matrix(entry):
    exp = entry["expected"]
    assert exp["worst"], "every multi-GPU matrix checks at least one mask"
    topo = parse_topo_matrix(text(entry))
    for mask, link in exp["worst"].items():
        selected = [int(i) for i in mask.split(",")]
        facts = facts_of(topo, exp["gpus"], selected)
        assert worst_link(facts) == link, mask
        verdict = check_topology(facts)
        if link is None:  # a pair the text does not give: unknown, never a link from another column
            assert verdict["status"] == "unknown", mask
        else:
            assert verdict["status"] in ("ok", "warning") and verdict["evidence"]["worst_link"] == link, mask


@pytest.mark.parametrize("entry", of_kind("kernlog"))
def test_kernel_log_events_are_grouped_and_judged_whatever_the_line_prefix(entry):
    groups = parse_xid_lines(text(entry).splitlines())
    got = [[g["type"], g["bus_id"], g["code"], g["count"], g["action"]] for g in groups]
    want = [g[:5] for g in entry["expected"]["groups"]]
    assert sorted(got) == sorted(want)
    for g in entry["expected"]["groups"]:
        if len(g) > 5:  # the wall time the line itself gives
            assert next(x for x in groups if [x["type"], x["bus_id"], x["code"]] == g[:3])["first_at"] == g[5]
    for said in entry["expected"].get("said", []):  # what the group's first line says: its stamp, process
        group = next(x for x in groups if [x["type"], x["bus_id"], x["code"]] == said["group"])
        assert group["first_s"] == said["first_s"]
        if "pid" in said:  # the report shows the first line's message from the pid on
            assert re.match(r"pid='?%s'?,\s+name=%s," % (re.escape(said["pid"]), re.escape(said["name"])), group["first"])


@pytest.mark.parametrize("entry", of_kind("smi_list"))
def test_nvidia_smi_list_gives_gpu_and_mig_uuids_and_a_mask_resolves_against_it(entry):
    listed = parse_smi_list(text(entry))
    assert [[g["index"], g["uuid"], [m["uuid"] for m in g["mig"]]] for g in listed] == entry["expected"]["gpus"]
    mask = entry["expected"]["mask"]
    out = resolve_mask({"CUDA_VISIBLE_DEVICES": mask["CUDA_VISIBLE_DEVICES"]}, smi_list_gpus(listed))
    assert out["state"] == "set" and len(out["selected"]) == 1
    sel = out["selected"][0]
    assert [sel["physical_index"], sel.get("mig_uuid")] == mask["selects"]


@pytest.mark.parametrize("entry", of_kind("perf"))
def test_clock_event_reasons_are_read_in_both_spellings_with_and_without_counters(entry):
    said = text(entry)
    active = {("null" if k is None else k): v for k, v in parse_active_reasons(said).items()}
    assert active == entry["expected"]["active"]
    assert parse_reason_counters(said) == entry["expected"]["counters"]


# --- generated matrices: the shapes the corpus shows, in every combination -------------------------------

LINKS = st.sampled_from(["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]) | st.integers(1, 18).map(lambda n: "NV%d" % n)


@st.composite
def matrices(draw):
    """(text as nvidia-smi writes it, then copied as people post it, the truth, the rows wholly in the text)."""
    gpus, nics = draw(st.integers(2, 8)), draw(st.integers(0, 6))
    style = draw(st.sampled_from(["NIC%d", "mlx5_%d", "mlx4_%d"]))
    names = [style % k for k in range(nics)]
    gpu_numa = draw(st.booleans())
    link = {}
    for i in range(gpus):
        for j in range(i + 1, gpus):
            link[(i, j)] = link[(j, i)] = draw(LINKS)
    nic = {(i, k): draw(st.sampled_from(["PIX", "PXB", "PHB", "NODE", "SYS"])) for i in range(gpus) for k in range(nics)}
    cpu = {i: draw(st.sampled_from(["0-55,112-167", "56-111,168-223", "0-7", "0,2,4,6"])) for i in range(gpus)}
    numa = {i: draw(st.sampled_from(["0", "1", "N/A", "0,3-9,11-17"])) for i in range(gpus)}
    named = ["CPU Affinity", "NUMA Affinity"] + (["GPU NUMA ID"] if gpu_numa else [])
    header = [""] + ["GPU%d" % i for i in range(gpus)] + names + named
    if nics > 1 and draw(st.booleans()):  # a header whose NIC names run together (vllm-project/vllm#13855)
        k = draw(st.integers(0, nics - 2))
        header[1 + gpus + k:3 + gpus + k] = [header[1 + gpus + k] + header[2 + gpus + k]]
    rows = []
    for i in range(gpus):
        cells = [" X " if i == j else link[(i, j)] for j in range(gpus)] + [nic[(i, k)] for k in range(nics)]
        if nics > 1 and draw(st.booleans()):  # two NIC cells run together (NODENODE)
            k = draw(st.integers(gpus, len(cells) - 2))
            cells[k:k + 2] = [cells[k] + cells[k + 1]]
        rows.append("\t".join(["GPU%d" % i] + cells + [cpu[i], numa[i]] + (["", "N/A"] if gpu_numa else [])))
    lines = ["\t".join(header)] + rows + ["", "Legend:", ""] + ["  %s: mlx5_%d" % (n, k) for k, n in enumerate(names)
                                                                if style == "NIC%d"]
    cut = draw(st.integers(1, gpus))  # the quote keeps rows 0..cut-1 whole, and maybe part of the next row
    kept = lines[:1 + cut]
    if cut < gpus and draw(st.booleans()):
        parts = rows[cut].split("\t")  # cut inside one of the row's link cells, anywhere in it
        p = draw(st.integers(1, len(parts) - 3 - (2 if gpu_numa else 0)))
        kept.append("\t".join(parts[:p] + [parts[p][:draw(st.integers(0, len(parts[p])))]]))
    text = "\n".join(kept if cut < gpus else lines) + "\n"
    if draw(st.booleans()):
        text = text.expandtabs(8)  # copied from a terminal: runs of spaces
    truth = {"link": link, "nic": nic, "cpu": cpu, "numa": numa, "names": names, "gpus": gpus}
    return text, truth, cut


@settings(max_examples=300, deadline=None)
@given(matrices())
def test_a_generated_matrix_is_read_right_or_left_unread_never_from_another_column(generated):
    text, truth, whole = generated
    topo = parse_topo_matrix(text)
    for key, value in topo["pairs"].items():
        i, j = map(int, key.split("-"))
        assert value == truth["link"][(i, j)], key
    for g, value in topo["cpu_affinity"].items():
        assert value == truth["cpu"][int(g)], g
    for g, value in topo["numa_affinity"].items():
        assert value == truth["numa"][int(g)], g
    for g, row in topo["nics"].items():
        assert row == {n: truth["nic"][(int(g), k)] for k, n in enumerate(truth["names"])}, g
    for i in range(whole):  # the rows the text holds whole are read whole
        assert topo["cpu_affinity"][str(i)] == truth["cpu"][i] and str(i) not in topo["unread"]
        for j in range(i + 1, truth["gpus"]):
            assert topo["pairs"]["%d-%d" % (i, j)] == truth["link"][(i, j)]
    for i in range(whole, truth["gpus"]):
        assert str(i) in topo["unread"]


def test_a_row_cut_inside_its_last_cell_leaves_that_pair_unknown():
    """vllm-project/vllm#13855 cut after 'NV1' of GPU5's GPU7 cell (a quote can stop anywhere): GPU5's pairs
    up to GPU6 are read, 5-7 is unknown rather than NV1, and GPU5's NICs and affinities are unread."""
    text = (CORPUS / "topo" / "vllm-13855.txt").read_text()
    row5 = next(line for line in text.splitlines() if line.startswith("GPU5"))
    cut = text[:text.index(row5)] + row5[:row5.index("\tNV18\tSYS") + len("\tNV1")] + "\n"
    topo = parse_topo_matrix(cut)
    assert topo["pairs"]["5-6"] == "NV18" and "5-7" not in topo["pairs"]
    assert "5" in topo["unread"] and "5" not in topo["cpu_affinity"] and "5" not in topo["nics"]
    assert topo["cpu_affinity"]["4"] == "56-111,168-223"
