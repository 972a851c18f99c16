"""The keys of the report's classes wrap at separators only, as a real headless Chromium lays them out
(issue 41: the keys table broke values mid-token: `2.11.0+cu13 / 0`, `96.00.A5.00.1 / A`, `gpu[01- / 02,...`).
Every rendered line break inside a key value must fall at a space or after `,` `/` `+` `;` `|`."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import fleet_variants as fv  # noqa: E402

from sweep.report.build import build_report  # noqa: E402

from browser_page import Page  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("needs_chromium")]
BREAK_AFTER = ",/+;|"  # where a key value may wrap, besides a space
# the reference card's keys, the keys side by side (its headers: the classes' folded hosts), each class card's
# value and reference columns
KEY_CELLS = (".keygrid div, div[style*='overflow-x'] table td, div[style*='overflow-x'] table th, "
             "div.card table td:nth-child(2), div.card table td:nth-child(3)")

# [(the cell's text, the character before the break, the one after)] for every line break the page
# renders inside the elements `selector` names; a <br> starts a new line on purpose and is no break.
BREAKS = r"""
(selector => {
  const out = [];
  for (const el of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
    let prev = null;
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.nodeType === 1) { if (n.tagName === 'BR') prev = null; continue; }
      for (let i = 0; i < n.textContent.length; i++) {
        const ch = n.textContent[i];
        if (/\s/.test(ch)) { prev = [' ', null]; continue; }
        const range = document.createRange(); range.setStart(n, i); range.setEnd(n, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect) continue;
        if (prev && prev[1] !== null && rect.top > prev[1] + 2) out.push([el.textContent.trim(), prev[0], ch]);
        prev = [ch, rect.top];
      }
    }
  }
  return out;
})
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The Must-show fleet (many classes, long folded host sets), one class on the torch build of the demo fleet."""
    base = tmp_path_factory.mktemp("wrap")
    records = fv.must_show_fleet()
    for r in records:
        if r["host"] in ("gpu31", "gpu32", "gpu33", "gpu34") and r.get("health"):
            r["health"] = fv.torch(r["health"], "2.11.0+cu130", "13.0")
    fv.write_run(base / "run", records)
    return build_report([base / "run"], base / "report").files["html"]


@pytest.mark.parametrize("width", [1400, 900, 700])
def test_no_key_value_breaks_inside_a_token(report, width):
    with Page(report.resolve().as_uri(), width=width) as page:
        breaks = page.evaluate(f"{BREAKS}({json.dumps(KEY_CELLS)})")
        inside = [b for b in breaks if b[1] not in BREAK_AFTER + " "]
        assert not inside, f"line breaks inside a token at {width} px: {inside[:5]}"
        if width == 700:  # the narrow page does wrap its values: at their separators
            assert any(b[1] in BREAK_AFTER for b in breaks), breaks
            # and the check sees a mid-token break where the CSS allows one (the report before issue 41)
            page.evaluate("document.head.insertAdjacentHTML('beforeend', "
                          "'<style>.tok, .tok td, .tok th, .tok .hosts { overflow-wrap:anywhere } .nw { white-space:normal }</style>')")
            forced = page.evaluate(f"{BREAKS}({json.dumps(KEY_CELLS)})")
            assert any(b[1] not in BREAK_AFTER + " " for b in forced), forced


def test_a_separator_gets_a_break_opportunity_and_the_value_stays_escaped():
    from sweep.text import BREAK_AFTER as breaks, breakable_html

    assert breaks == BREAK_AFTER
    def nw(*tokens):
        return "".join(t if t in ("<wbr>", " ") else f'<span class="nw">{t}</span>' for t in tokens)

    assert breakable_html("gpu[01-02,04]") == nw("gpu[01-02,", "<wbr>", "04]")
    assert breakable_html("2.11.0+cu130, CUDA") == nw("2.11.0+", "<wbr>", "cu130,", " ", "CUDA")
    assert breakable_html("<b>a/b</b>") == nw("&lt;b&gt;a/", "<wbr>", "b&lt;/", "<wbr>", "b&gt;")
    assert breakable_html("a'b;c") == nw("a&#39;b;", "<wbr>", "c")  # never inside an entity
