"""What a person sees of the report at fleet scale, in a real headless Chromium driven by mouse clicks:
findings folded across hosts, tiles that count hosts and lead to their list, the verdict's exit code
explained, the idle SM column said once, the watch line, an unreachable host's message once."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import fleet_variants as fv  # noqa: E402

from sweep.report.build import build_report  # noqa: E402

from browser_page import Page  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("needs_chromium")]
BROKEN = {f"gpu{n:04d}": watts for n, watts in zip(range(100, 1001, 100), range(200, 700, 50))}


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """1,000 hosts: 990 share a warning (persistence mode off), 10 have a broken contract (a power cap, each its own)."""
    base = tmp_path_factory.mktemp("fold")
    records = []
    for n in range(1, 1001):
        name = f"gpu{n:04d}"
        health = fv.h200(8, name)
        health = fv.power_cap(health, BROKEN[name]) if name in BROKEN else fv.persistence_off(health)
        records.append(fv.record(name, health))
    fv.write_run(base / "run", records)
    result = build_report([base / "run"], base / "report")
    with Page(result.files["html"].resolve().as_uri()) as page:
        yield result, page


def test_a_thousand_hosts_fold_into_a_few_entries_broken_first(big):
    result, page = big
    assert result.files["html"].stat().st_size < 2_000_000
    entries = page.evaluate("[...document.querySelectorAll('details.finding')].map(d => "
                            "[d.querySelector('.badge').innerText, +d.dataset.hosts])")
    assert len(entries) <= 12
    broken = [n for severity, n in entries if severity == "broken"]
    assert entries[:len(broken)] == [["broken", n] for n in broken] and sum(broken) == 10
    assert entries[len(broken):] == [["warning", 990]]
    # the 10 power caps differ in their value only: one entry, the values listed with their counts
    summary = page.text("details.finding > summary")
    assert "10 hosts" in summary and "values: 200 W x1, 250 W x1 (gpu0200)" in summary


def test_opening_the_folded_entry_shows_all_990_hosts_each_a_link_to_its_chain(big):
    _, page = big
    entry = 'details.finding[data-hosts="990"]'
    assert page.text(f"{entry} .fbody") == ""  # closed: the hosts are one click away, not on the page
    page.click(f"{entry} > summary")
    shown = page.text(f"{entry} .fbody").split()
    want = {f"gpu{n:04d}" for n in range(1, 1001)} - set(BROKEN)
    assert len(shown) == 990 and set(shown) == want
    links = page.evaluate(f"[...document.querySelectorAll('{entry} a.fhost')].map(a => "
                          "[a.innerText, document.getElementById(a.hash.slice(1)).querySelector('summary b').innerText])")
    assert links and all(name == target for name, target in links)  # each link opens that host's block


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The Must-show fleet, with an HBM a few degrees from slowdown on a pool host and two HW slowdowns
    that differ in their values only."""
    base = tmp_path_factory.mktemp("demo")
    records = fv.must_show_fleet()
    by_name = {r["host"]: r for r in records}
    by_name["gpu01"]["health"] = fv.hbm_hot(by_name["gpu01"]["health"], 92)
    by_name["gpu02"]["health"] = fv.hw_thermal(by_name["gpu02"]["health"], gpu=3, sm_mhz=1035)
    fv.write_run(base / "run", records)
    result = build_report([base / "run"], base / "report")
    with Page(result.files["html"].resolve().as_uri()) as page:
        yield result, page


def test_every_tile_counts_hosts_and_leads_to_their_list(demo):
    result, page = demo
    s = result.summary
    tiles = page.evaluate("[...document.querySelectorAll('a.stat')].map(a => [a.id, +a.querySelector('b').innerText, "
                          "a.hash.slice(1), !!document.getElementById(a.hash.slice(1))])")
    assert all(present for *_, present in tiles), tiles
    counts = {id_: (n, target) for id_, n, target, _ in tiles}
    states = s["verdict_model"]["counts"]  # each host counted once, in its state: the tiles add up
    for tile, state in (("pool-size", "pool"), ("tile-other-classes", "other_class"), ("tile-held-out", "held_out"),
                        ("tile-broken", "broken"), ("tile-cannot-run", "cannot_run"),
                        ("tile-unreachable", "unreachable")):
        assert counts[tile][0] == states[state], tile
        shown = page.evaluate(f"[...document.querySelectorAll('#held-out li.cause[data-state={state}]')]"
                              ".reduce((n, li) => n + +li.querySelector('.muted').innerText.match(/\\d+/)[0], 0)")
        assert state in ("pool", "other_class") or shown == states[state], (state, shown)  # its causes count them
    assert sum(n for id_, (n, _) in counts.items() if id_ != "tile-hosts") == counts["tile-hosts"][0] == \
        s["hosts_total"]
    assert len(s["unreachable"]) == states["unreachable"]


def test_the_reference_card_says_how_many_of_its_hosts_are_held_out(demo):
    result, page = demo
    s = result.summary
    card = page.text("#pool")
    held = len(s["held_out"])
    assert held and f"{s['reference_class']['size']} hosts: {s['pool']['size']} in the pool, {held} held out for health" in card


def test_the_verdict_says_what_its_exit_code_means_and_the_headline_does_not_repeat_the_list(demo):
    result, page = demo
    s = result.summary
    kicker = page.text("#exit-code")
    assert kicker.lower() == f"verdict · exit code {s['exit_code']}: {s['exit_meaning']}".lower()
    headline = page.text("#verdict #headline")
    held = result.verdict.hosts_in("held_out")
    assert headline == s["headline"] and held and f"; {len(held)} held out for health" in headline
    assert not [h for h in held if h in headline]  # counted in the headline, named in the list under it
    for held in s["held_out"]:  # the reasons are in the list under it, not in the headline too
        assert held["cause"] not in headline


def test_idle_probes_are_said_once_and_get_no_sm_bar(demo):
    _, page = demo
    text = page.text("#chart ~ .chartwrap") + page.text("#sm-idle")
    assert text.count("probed without load") == 1
    assert page.evaluate("document.querySelectorAll('rect.sm-bar').length") == 0


def test_a_pool_host_near_hbm_slowdown_is_named_in_the_watch_line(demo):
    result, page = demo
    assert "gpu01" in result.summary["pool"]["hosts"]
    watch = page.text("#watch")
    assert "gpu01" in watch and "HBM at 92 C, 3 C below its slowdown threshold 95 C" in watch


def test_hosts_differing_in_a_value_fold_under_one_entry_that_lists_the_values(demo):
    _, page = demo
    rows = page.evaluate("[...document.querySelectorAll('details.finding > summary')].map(s => s.innerText)")
    slow = [r for r in rows if "HW thermal slowdown" in r]  # each host's one cause (issue 48)
    assert len(slow) == 1 and "2 hosts gpu[02,16]" in slow[0], rows
    # the same fault, not said again
    assert not [r for r in rows if "Lowest broken contract: clocks" in r], rows
    # gpu02 (GPU 3 at 1035 MHz) and gpu16 (GPU 5 at 1125 MHz): one sentence, the values that differ listed
    assert "values: (GPU 3, 1035) x1, (GPU 5, 1125) x1 (gpu16)" in slow[0]


def test_an_unreachable_host_says_its_message_once_when_opened(demo):
    result, page = demo
    u = result.summary["unreachable"][0]
    block = page.evaluate(f"[...document.querySelectorAll('details.host')].findIndex(d => "
                          f"d.querySelector('summary b').innerText === {u['host']!r})")
    page.evaluate(f"document.querySelectorAll('details.host')[{block}].id = 'probe-target'")
    page.click("#probe-target > summary")
    opened = page.text("#probe-target")
    assert page.evaluate("document.getElementById('probe-target').open") is True
    assert opened.count(u["message"]) == 1, opened


@pytest.fixture(scope="module")
def three_hundred(tmp_path_factory):
    """300 hosts: 277 healthy, 10 capped at 250 W (broken), 5 with a foreign process (held out), 5 unreachable,
    3 with an empty device mask (cannot run)."""
    base = tmp_path_factory.mktemp("scale")
    records = []
    for n in range(1, 301):
        name = f"gpu{n:03d}"
        if n % 30 == 0:
            records.append(fv.record(name, fv.power_cap(fv.h200(8, name), 250.0)))
        elif n % 60 == 7:
            records.append(fv.record(name, fv.foreign_process(fv.h200(8, name))))
        elif n % 60 == 11:
            records.append(fv.record(name, None, ("refused", "connection refused on port 22")))
        elif n % 100 == 55:
            records.append(fv.record(name, fv.empty_mask(fv.h200(8, name))))
        else:
            records.append(fv.record(name, fv.h200(8, name)))
    fv.write_run(base / "run", records)
    result = build_report([base / "run"], base / "report")
    with Page(result.files["html"].resolve().as_uri(), width=1400, height=900) as page:
        yield result, page


def test_at_300_hosts_the_first_screen_says_it_all_and_the_page_stays_short(three_hundred):
    """The first screen (1400 x 900) holds the headline, the tiles, every cause with its hosts folded and
    its fix, and what to run next; the hosts with nothing to say are one folded line, not a block each,
    so the page stays a few screens long."""
    result, page = three_hundred
    causes = page.evaluate("[...document.querySelectorAll('#held-out li.cause')].map(li => [li.dataset.state, "
                           "li.dataset.hosts, li.innerText, li.getBoundingClientRect().bottom + scrollY])")
    assert [(state, hosts) for state, hosts, _, _ in causes] == [
        ("cannot_run", "gpu[055,155,255]"), ("broken", "gpu[030,060,090,120,150,180,210,240,270,300]"), ("held_out", "gpu[007,067,127,187,247]"),
        ("unreachable", "gpu[011,071,131,191,251]")], causes
    assert all("fix: " in text for _, _, text, _ in causes)
    bottom = page.evaluate("document.getElementById('next').getBoundingClientRect().bottom + scrollY")
    assert max(b for *_, b in causes) < bottom <= 900, (causes, bottom)  # what to run next, on the first screen
    assert page.evaluate("document.querySelectorAll('details.host').length") == 23
    quiet = page.text("#quiet-hosts")
    assert quiet.startswith("277 hosts with every contract ok and nothing to say, folded: gpu[001-006,008-010,")
    # the hosts that cannot run share their cause: one row of the Kept out section, not one per host
    rows = page.evaluate("[...document.querySelectorAll('#cannot-run + p + table tbody tr')].map(r => r.innerText)")
    assert len(rows) == 1 and rows[0].startswith("gpu[055,155,255]\tdevice_mask\t"), rows
    assert page.evaluate("document.documentElement.scrollHeight") < 5 * 900  # 3,806 px when written
