"""What a run costs the history index grows with its hosts only through array lookups: each distinct
value of a fact is made and encoded once per run, not once per host (issue 52: the index is updated
after every `sweep run` that reports, 10,000 hosts at a time). Counted in calls, not seconds."""
from __future__ import annotations

import fleet_variants as fv
from sweep.history import runs


def encodes_for(tmp_path, monkeypatch, n_healthy: int) -> tuple[int, runs.RunRows]:
    """Calls of `runs.encode` to read the Must-show fleet plus `n_healthy` more healthy hosts."""
    extra = [fv.record(f"ok{i:03d}", fv.must_show_health(f"ok{i:03d}")) for i in range(n_healthy)]
    folder = fv.write_run(tmp_path / f"run{n_healthy}", fv.must_show_fleet(extra=extra))
    calls = [0]
    plain = runs.encode

    def counted(value):
        calls[0] += 1
        return plain(value)

    monkeypatch.setattr(runs, "encode", counted)
    rows = runs.read_run(folder)
    monkeypatch.setattr(runs, "encode", plain)
    return calls[0], rows


def test_more_hosts_with_the_same_values_encode_no_more_values(tmp_path, monkeypatch):
    few, small = encodes_for(tmp_path, monkeypatch, 0)
    many, large = encodes_for(tmp_path, monkeypatch, 60)
    assert len(large.hosts) == len(small.hosts) + 60  # every host is in the run's rows ...
    per_host = len(large.facts) // len(large.hosts)
    assert len(large.facts) >= len(small.facts) + 60 * (per_host - 2)
    assert set(large.vals) == set(small.vals)  # ... with no value not seen before
    assert many == few  # ... and none of them encoded again for the 60 hosts that add no new value


def test_each_host_keeps_its_own_value_of_a_fact_its_gpus_disagree_on(tmp_path, monkeypatch):
    _, rows = encodes_for(tmp_path, monkeypatch, 3)
    by_host = {}
    for host, gpu, key, val in rows.facts.tolist():
        if gpu == -1 and rows.keys[key][0] == "power_limit":
            by_host[rows.hosts[host]] = rows.vals[val]
    assert by_host["gpu09"] != by_host["gpu01"] == by_host["ok000"]  # one card capped at 250 W: two values
    assert "250" in by_host["gpu09"] and "250" in by_host["gpu07"] and "250" not in by_host["gpu01"]
