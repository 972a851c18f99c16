"""Host text on stdout: `--json` outputs escape what a terminal obeys or hides, text output shows
invisible characters (issue 23, item 12)."""
from __future__ import annotations

import json

import pytest

from fleet_variants import h200, record, write_run
from sweep.cli import main
from sweep.text import json_text, visible

HOSTILE = "H200\u202eevil\u202c\x9b31m\u200bzw\u2060\ufeff\U000e0041\U000e0042\u00ad\u2028end"
RAW = ["\u202e", "\x9b", "\u200b", "\u2060", "\ufeff", "\U000e0041", "\u00ad", "\u2028"]


def test_json_text_escapes_controls_bidi_and_invisible_characters_and_reads_back():
    value = {"name": HOSTILE, "lone": "\ud800", "plain": "é ü 日本"}
    text = json_text(value)
    assert not any(ch in text for ch in RAW + ["\ud800"])
    assert "é ü 日本" in text  # readable UTF-8 stays readable
    assert json.loads(text) == value


@pytest.mark.parametrize("ch", RAW[2:])
def test_visible_shows_zero_width_and_tag_characters(ch):
    shown = visible(f"gpu{ch}01")
    assert ch not in shown and shown.startswith("gpu\\") and shown.endswith("01")


def test_run_diff_json_passes_no_raw_control_or_bidi_character(tmp_path, capsys):
    a = h200(2, "gpu01")
    b = h200(2, "gpu01")
    for gpu in b["gpus"]:
        gpu["name"] = HOSTILE
    write_run(tmp_path / "a", [record("gpu01", a)])
    write_run(tmp_path / "b", [record("gpu01", b)])
    main(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    out = capsys.readouterr().out
    assert HOSTILE in json.dumps(json.loads(out), ensure_ascii=False)  # the change is there ...
    assert not any(ch in out for ch in RAW)  # ... escaped
