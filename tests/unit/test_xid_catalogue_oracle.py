"""The Xid catalogue, row by row, against NVIDIA's own table (issue 39).

tests/fixtures/xid/nvidia-xid-catalog.json is NVIDIA's "Xids" sheet (code, mnemonic, "Resolution
Bucket (Immediate Action)") transcribed from a copy of NVIDIA's catalogue page, independently of
probe_agent/xid_catalogue.py; its `source` says where and when. Every code 1-172 is compared: a row
moved to another bucket fails here, whichever row it is. The SXids likewise, against the NVSwitch
table NVIDIA ships with NVSentinel (tests/fixtures/xid/nvsentinel-sxid-mapping.json).
"""
import json
from pathlib import Path

import pytest

from probe_agent import xid_catalogue as cat
from probe_agent.xid import classify

ORACLE = json.loads((Path(__file__).parents[1] / "fixtures" / "xid" / "nvidia-xid-catalog.json").read_text())
NVIDIA = {row["code"]: row for row in ORACLE["rows"]}

# Codes NVIDIA lists without a bucket (162-172): the bucket sweep chose, and why. Where the code is a
# detail or a twin of one NVIDIA does bucket, the choice must stay that code's bucket.
CHOSEN = {
    162: ("IGNORE", None),             # power smoothing re-engaged: the good news after a 163
    163: ("CONTACT_SUPPORT", None),    # disengaged: NVIDIA's text says no reset is needed
    164: ("CONTACT_SUPPORT", None),    # low lifetime: plan a replacement
    165: ("CONTACT_SUPPORT", None),    # lifetime exhausted: replace if power swings matter
    166: ("CONTACT_SUPPORT", None),    # confidential computing only
    167: ("RESTART_BM", 79),           # PCIe fatal timeout: the GPU is lost on the bus, as with Xid 79
    168: ("CONTACT_SUPPORT", None),    # reduced memory capacity: enable ECC or re-boot with a shifted WPR
    169: ("RESET_GPU", 62),            # SEC2 micro-controller halt, as the PMU halt of Xid 62
    170: ("CONTACT_SUPPORT", None),    # confidential computing only
    171: ("WORKFLOW_XID_48", 48),      # details of an Xid 48 (DRAM)
    172: ("WORKFLOW_XID_48", 48),      # details of an Xid 48 (SRAM)
}


def test_the_oracle_is_nvidias_whole_table_with_its_source():
    src = ORACLE["source"]
    assert src["url"] == cat.XID_CATALOGUE["url"] == "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
    assert src["copied"] and src["copied_from"]
    assert sorted(NVIDIA) == list(range(1, 173))
    assert {c for c, r in NVIDIA.items() if r["immediate"] is None} == set(range(162, 173))


@pytest.mark.parametrize("code", sorted(c for c, r in NVIDIA.items() if r["immediate"] is not None))
def test_each_bucketed_code_has_nvidias_immediate_action(code):
    row = NVIDIA[code]
    assert cat.XIDS[code][0] == row["immediate"], f"Xid {code} ({row['mnemonic']})"
    assert (code in cat.UNUSED) == row["unused"]
    assert code not in cat.SWEEP_CHOSEN


@pytest.mark.parametrize("code", sorted(CHOSEN))
def test_each_code_nvidia_leaves_unbucketed_is_marked_sweeps_choice_and_follows_its_twin(code):
    bucket, twin = CHOSEN[code]
    assert code in cat.SWEEP_CHOSEN and cat.XIDS[code][0] == bucket
    if twin is not None:
        assert bucket == NVIDIA[twin]["immediate"] and classify("xid", code, "")[1] == classify("xid", twin, "")[1]


SXID_ORACLE = json.loads((Path(__file__).parents[1] / "fixtures" / "xid" / "nvsentinel-sxid-mapping.json").read_text())


def test_the_sxids_are_the_ones_nvidias_nvswitch_table_lists():
    assert sorted(cat.SXIDS) == [r["code"] for r in SXID_ORACLE["rows"]]
    assert "NVSentinel" in cat.SXID_CATALOGUE["name"] and SXID_ORACLE["source"]["commit"]


@pytest.mark.parametrize("row", SXID_ORACLE["rows"], ids=lambda r: str(r["code"]))
def test_each_sxid_has_nvidias_recommended_action(row):
    assert cat.SXIDS[row["code"]][0] == row["bucket"], f"SXid {row['code']} ({row['mnemonic']})"
