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
    assert counts["tile-other-classes"][0] == sum(c["size"] for c in s["classes"][1:])  # hosts, not classes
    broken_hosts = {f["host"] for f in s["findings"] if f["severity"] == "broken"}
    assert counts["tile-broken"] == (len(broken_hosts), "broken-hosts")
    listed = page.text("#broken-hosts")
    assert f"{len(broken_hosts)} hosts broken (a contract, a speed figure or an Xid repair)" in listed
    assert counts["tile-held-out"][0] == page.evaluate("document.querySelectorAll('#held-out li.held-out').length")
    assert counts["tile-unreachable"][0] == len(s["unreachable"])


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
    headline = page.text("#verdict .headline")
    assert headline == s["verdict_brief"] and "listed below" in headline
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
