"""Long wrapped runs: samples thinned to a bound, figures exact, no HW-slowdown or other-process interval lost."""
import json

from hypothesis import given, settings, strategies as st

from probe_agent.load import summarize
from probe_agent.wrap.sample_stream import HW_REASONS, Stream, counted_median

REASONS = ("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "idle")
OWN = {"pid": 100, "name": "python3", "used_memory_bytes": 1 << 30, "owner": "command"}


def gpu_reading(draw_gpu):
    return st.fixed_dictionaries({
        "sm_mhz": st.one_of(st.none(), st.sampled_from([345, 1035, 1470, 1500, 1980])),
        "power_w": st.one_of(st.none(), st.floats(50, 700, allow_nan=False).map(lambda w: round(w, 2))),
        "enforced_limit_w": st.sampled_from([None, 700.0, 500.0]),
        "pcie_gen": st.sampled_from([None, 1, 5]),
        "active_reasons": st.lists(st.sampled_from(REASONS), max_size=3, unique=True),
        "processes": st.lists(st.sampled_from([
            OWN, {"pid": 48213, "name": "python3 orphan_eval.py", "used_memory_bytes": 11 << 30, "owner": "other"},
            {"pid": 7, "name": None, "used_memory_bytes": None, "owner": "not_visible"}]), max_size=2, unique_by=lambda p: p["pid"]),
    })


@st.composite
def sample_streams(draw):
    gpus = draw(st.integers(1, 2))
    n = draw(st.integers(0, 60))
    # runs of repeated states, as real runs have (a state lasts several samples)
    out, t = [], 0.0
    while len(out) < n:
        readings = [dict(draw(gpu_reading(None)), index=i) for i in range(gpus)]
        for _ in range(draw(st.integers(1, 12))):
            t = round(t + 0.2, 3)
            out.append({"t": t, "gpus": [dict(g) for g in readings]})
    return out[:n]


def naive_intervals(samples):
    """Every maximal run of consecutive samples in which a GPU holds a condition."""
    found, open_ = [], {}
    for s in samples:
        now = set()
        for g in s["gpus"]:
            now |= {(g["index"], r, None) for r in g["active_reasons"] if r in HW_REASONS}
            now |= {(g["index"], "other_process", p["pid"]) for p in g["processes"] if p["owner"] != "command"}
        for key in now:
            iv = open_.setdefault(key, [s["t"], s["t"], 0])
            iv[1], iv[2] = s["t"], iv[2] + 1
        for key in set(open_) - now:
            found.append((key, tuple(open_.pop(key))))
    found += [(k, tuple(v)) for k, v in open_.items()]
    return sorted(found)


def stream_of(samples, max_samples):
    s = Stream(max_samples)
    for sample in samples:
        s.add(sample)
    return s.finish()


@settings(max_examples=150, deadline=None)
@given(sample_streams(), st.integers(2, 30))
def test_thinned_stream_keeps_every_interval_and_exact_figures_within_the_bound(samples, max_samples):
    s = stream_of(samples, max_samples)
    kept = s.samples()
    assert s.seen == len(samples) and len(kept) <= max_samples
    # kept samples are the stream's own, in order; the first and the last are always there
    where = {id(x): n for n, x in enumerate(samples)}
    positions = [where[id(k)] for k in kept]
    assert positions == sorted(set(positions))
    if samples:
        assert positions[0] == 0 and positions[-1] == len(samples) - 1
    if len(samples) <= max_samples:
        assert kept == samples
    got = sorted(((iv["gpu"], iv["what"], iv.get("pid")), (iv["from_s"], iv["to_s"], iv["samples"]))
                 for iv in s.intervals)
    assert got == naive_intervals(samples)
    max_sm = {0: 1980, 1: 1980}
    assert s.summaries(max_sm) == summarize(samples, max_sm)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-5, 5), max_size=40))
def test_counted_median_is_the_median(values):
    import collections
    import statistics

    assert counted_median(collections.Counter(values)) == (statistics.median(values) if values else None)


def test_an_hour_on_eight_gpus_stays_under_5_mb_and_keeps_the_slowdowns_and_the_intruder():
    """18,000 samples of 8 GPUs (0.2 s for an hour): SW power cap flapping every few samples, two
    HW slowdowns of a few seconds, and a foreign process for a minute."""
    samples = []
    for k in range(18000):
        t = round(k * 0.2, 1)
        gpus = []
        for i in range(8):
            reasons = ["sw_power_cap"] if (k + i) % 7 < 5 else []
            if (i == 3 and 4000 <= k < 4012) or (i == 6 and 15000 <= k < 15003):
                reasons.append("hw_slowdown")
            procs = [dict(OWN)]
            if i == 2 and 9000 <= k < 9300:
                procs.append({"pid": 48213, "name": "python3 orphan_eval.py", "used_memory_bytes": 11 << 30,
                              "owner": "other"})
            gpus.append({"index": i, "sm_mhz": 1470 + 15 * ((k + i) % 3), "mem_mhz": 3201,
                         "power_w": round(680 + (k * 7 + i) % 20 + 0.37, 2), "enforced_limit_w": 700.0,
                         "temperature_c": 55 + (k // 3000), "utilization_gpu_pct": 100,
                         "active_reasons": reasons, "processes": procs, "processes_unreadable": 0})
        samples.append({"t": t, "gpus": gpus})
    s = stream_of(samples, 1000)
    doc = {"samples": s.samples(), "intervals": s.intervals, "thinning": s.report(),
           "gpus": s.summaries({i: 1980 for i in range(8)})}
    size = len(json.dumps(doc, indent=1))
    whole = len(json.dumps(samples, indent=1))
    assert size < 5 * 1024 * 1024 < 30 * 1024 * 1024 < whole
    assert [(iv["gpu"], iv["what"], iv["from_s"], iv["to_s"], iv["samples"]) for iv in s.intervals] == [
        (3, "hw_slowdown", 800.0, 802.2, 12), (2, "other_process", 1800.0, 1859.8, 300),
        (6, "hw_slowdown", 3000.0, 3000.4, 3)]
    kept_t = {x["t"] for x in s.samples()}
    assert {800.0, 802.2, 1800.0, 1859.8, 3000.0, 3000.4} <= kept_t  # the intervals' own samples are kept
    assert s.summaries({})[3]["hw_slowdown_fraction"] == round(12 / 18000, 3)
