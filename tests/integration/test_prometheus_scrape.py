"""The export served by a real node_exporter (textfile collector only) and scraped by a real
Prometheus, both started here on a loopback address: a query returns the expected series."""
from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from helpers import loopback_address
from history_parts import NODE_EXPORTER, PROMETHEUS, require_part
from sweep.demo import synth
from sweep.cli import main
from sweep.demo.history import Degradation, six_weeks

WAIT_S = 90


def _free_address() -> tuple[str, int]:
    """A 127.x.y.z address of its own and a port free on it (loopback only, this worker's slice)."""
    return loopback_address()


@contextmanager
def _started(args, log: Path):
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:  # a loopback address we started
        return response.read().decode()


def _until(what, check, proc, log: Path):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{what} exited: {log.read_text()[-2000:]}"
        try:
            got = check()
            if got:
                return got
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{what}: nothing after {WAIT_S} s; log: {log.read_text()[-2000:]}")


def test_node_exporter_serves_and_prometheus_scrapes_the_export(tmp_path):
    exporter, prometheus = require_part(NODE_EXPORTER), require_part(PROMETHEUS)
    reports = tmp_path / "reports"
    six_weeks(reports, days=1, story=[Degradation("gpu09", 0, "power", (synth.power_cap(500),))])
    run = next(p for p in reports.iterdir() if (p / "manifest.json").is_file())
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    assert main(["export", "prometheus", str(run), "-o", str(textfiles / "sweep.prom")]) == 0

    ne_host, ne_port = _free_address()
    with _started([exporter, "--collector.disable-defaults", "--collector.textfile",
                   f"--collector.textfile.directory={textfiles}", f"--web.listen-address={ne_host}:{ne_port}"],
                  tmp_path / "node_exporter.log") as ne:
        served = _until("node_exporter", lambda: _get(f"http://{ne_host}:{ne_port}/metrics"), ne,
                        tmp_path / "node_exporter.log")
        assert 'sweep_gpu_power_limit_enforced_watts{gpu="0",host="gpu09"} 500' in served
        assert 'node_textfile_scrape_error 0' in served  # the collector read the file without complaint

        pr_host, pr_port = _free_address()
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "sweep", "static_configs": [{"targets": [f"{ne_host}:{ne_port}"]}]}]}))
        with _started([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                       f"--web.listen-address={pr_host}:{pr_port}", "--log.level=warn"],
                      tmp_path / "prometheus.log") as pr:
            query = urllib.parse.urlencode({"query": 'sweep_gpu_power_limit_enforced_watts{host="gpu09"}'})

            def result():
                body = json.loads(_get(f"http://{pr_host}:{pr_port}/api/v1/query?{query}"))
                return body["data"]["result"]

            series = _until("prometheus", result, pr, tmp_path / "prometheus.log")
    assert sorted(s["metric"]["gpu"] for s in series) == [str(i) for i in range(8)]
    assert {s["value"][1] for s in series} == {"500"}
    assert {s["metric"]["job"] for s in series} == {"sweep"}
