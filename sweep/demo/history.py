"""A generated history: daily runs of the demo fleet in which a few hosts degrade one by one.

The probes are real: each configuration (the demo fleet's hosts, and the degraded states) is a
capture derived from the recorded H200 under load (`sweep.synth`), read by the agent itself
(`--replay --load`). What varies from day to day is the load samples: the recorded samples are
given to every GPU, scaled by a small per-day jitter (and, for a sinking host, by its sink), and
summarised by the agent's own `probe_agent.load.summarize`. Every fourth sample is kept, so that
six weeks of 40 hosts stay a few hundred MB smaller.

The power cap is lowered in a change window: on its day the fleet is swept at 03:00 as every
day, then again at 10:00 (still 700 W), 11:30 (500 W from then on) and 15:00, so that the change
point carries a time, not only a date, and the last run before it is on the same day.

`six_weeks(root)` writes the run folders and returns the `Degradation`s a history must find;
`change_window(root)` writes one day of it, the cap lowered in its last run, swept without `--load`
(what the issue's real H200 history looked like: one state drawn, "0 hosts drifted").
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import tempfile
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from probe_agent.load import summarize
from probe_agent.main import main as agent_main
from sweep.demo import synth
from sweep.demo.fleet import demo_fleet
from sweep.store import RECORD_VERSION, RUN_FORMAT, RunFolder

START = date(2026, 10, 5)
DAYS = 42
JITTER = (0.996, 0.998, 1.0, 1.002, 1.004)
DAILY_HOUR = 3.0  # every day's run, UTC


@dataclass(frozen=True)
class Degradation:
    """What happens to one host, from which day on."""

    host: str
    day: int  # days after START; the change is first seen in that day's run
    what: str  # "power", "driver", "ecc", "sink"
    edits: tuple = ()  # capture edits from that day on
    sink_per_week: float = 0.0
    hour: float = DAILY_HOUR  # UTC hour of that day's first run that shows it
    window: tuple = ()  # UTC hours of that day's extra runs (a change window)

    @property
    def date(self) -> date:
        return START + timedelta(days=self.day)

    @property
    def at(self) -> datetime:
        """When the run that first shows it started."""
        return _when(self.date, self.hour)

    def applies(self, day: int, hour: float) -> bool:
        return day > self.day or (day == self.day and hour >= self.hour)


def _when(on: date, hour: float) -> datetime:
    return datetime.combine(on, datetime.min.time(), timezone.utc) + timedelta(hours=hour)


def degradations() -> list[Degradation]:
    """The default story: a cap lowered, a driver changed, ECC switched off, a card
    sinking 1% a week."""
    return [
        Degradation(
            "gpu09", 9, "power", (synth.power_cap(500),), hour=11.5, window=(10.0, 11.5, 15.0)
        ),
        Degradation("gpu15", 28, "driver", (synth.driver("590.44.01", 13010),)),
        Degradation("gpu22", 20, "ecc", (synth.ecc(False),)),
        Degradation("gpu30", 0, "sink", sink_per_week=0.01),
    ]


def _probe(capture: dict, workdir: Path) -> dict:
    """health.json of the agent replaying `capture` under --load (in this process: no
    interpreter start)."""
    name = hashlib.sha256(json.dumps(capture, sort_keys=True).encode()).hexdigest()[:16]
    cap_path, out = workdir / f"{name}.json", workdir / name
    if not (out / "health.json").is_file():
        synth.write(capture, cap_path)
        with contextlib.redirect_stdout(io.StringIO()):
            agent_main(["--replay", str(cap_path), "--load", "20", "--force", "--out", str(out)])
    return json.loads((out / "health.json").read_text())


def _load(health: dict, scale: float, cap_w: float | None) -> dict:
    """The health's load section with the recorded samples on every GPU, SM clocks scaled."""
    base = health["load"]
    gpus = [g["index"] for g in health["gpus"]]
    samples = []
    for s in base["samples"][::4]:
        row = s["gpus"][0]
        busy = "idle" not in (row.get("active_reasons") or [])
        sm = round(row["sm_mhz"] * (scale if busy else 1.0))
        power = row["power_w"] if cap_w is None else min(row["power_w"], cap_w)
        one = dict(row, sm_mhz=sm, power_w=power, enforced_limit_w=cap_w or row["enforced_limit_w"])
        samples.append({"t": s["t"], "gpus": [dict(one, index=i) for i in gpus]})
    max_sm = {g["index"]: (g.get("clocks") or {}).get("sm_max_mhz") for g in health["gpus"]}
    return dict(base, samples=samples, summary=summarize(samples, max_sm))


def _jitter(host: str, day: int) -> float:
    return JITTER[int(hashlib.sha256(f"{host}/{day}".encode()).hexdigest(), 16) % len(JITTER)]


def six_weeks(
    root: str | Path,
    hosts: int = 40,
    days: int = DAYS,
    story: list[Degradation] | None = None,
    start: date = START,
    load: bool = True,
) -> list[Degradation]:
    """Write `days` daily run folders of the demo fleet (`hosts` hosts) under `root`, and the
    extra runs of each change window; `load=False`: runs without `--load` (no load samples:
    drift not measured)."""
    root = Path(root)
    story = degradations() if story is None else story
    by_host = {d.host: d for d in story}
    names = [f"gpu{n:02d}" for n in range(1, hosts + 1)]
    with tempfile.TemporaryDirectory(prefix="sweep-history-") as tmp:
        work = Path(tmp)
        fleet = {
            h.name: json.loads(Path(h.capture).read_text())
            for h in demo_fleet(work / "fleet", count=hosts, unreachable=False, base="h200-load")
        }
        cache: dict[tuple, dict] = {}
        for day in range(days):
            hours = sorted({DAILY_HOUR, *(h for d in story if d.day == day for h in d.window)})
            for hour in hours:
                folder = RunFolder.create(
                    root / f"{_when(start + timedelta(days=day), hour):%Y%m%dT%H%M%SZ}-demo"
                )
                stamp = _when(start + timedelta(days=day), hour).isoformat().replace("+00:00", "Z")
                for name in names:
                    health = _health(name, by_host.get(name), day, hour, fleet, cache, work)
                    if not load:
                        health["load"] = None
                    health["probe"] = dict(health["probe"], started_at=stamp)
                    folder.write_record(
                        {
                            "record_version": RECORD_VERSION,
                            "host": name,
                            "address": "127.0.0.1",
                            "status": "ok",
                            "failure": None,
                            "attempts": 1,
                            "started_at": stamp,
                            "ended_at": stamp,
                            "duration_s": 0.2,
                            "health": health,
                        }
                    )
                _manifest(folder, names, hosts, stamp, load)
                folder.close()
    return story


def _health(
    name: str, d: Degradation | None, day: int, hour: float, fleet: dict, cache: dict, work: Path
) -> dict:
    """One host's health.json in the run of `day` at `hour`: its capture (degraded from the run `d`
    applies on) probed once per state, with that day's load samples."""
    on = d is not None and d.applies(day, hour)
    extra = list(d.edits) if on and d.edits else []
    state = (name, len(extra))
    if state not in cache:
        cap = synth.derive(fleet[name], extra, hostname=name) if extra else fleet[name]
        cache[state] = _probe(cap, work)
    health = copy.copy(cache[state])
    scale = _jitter(name, day)
    if on and d.what == "sink":
        scale = 1.0 - d.sink_per_week * (day - d.day) / 7.0
    cap_w = 500.0 if on and d.what == "power" else None
    if cap_w:
        scale *= 0.9  # a 500 W cap costs a loaded H200 about a tenth of its clock
    health["load"] = _load(health, scale, cap_w)
    return health


def _manifest(folder: RunFolder, names: list[str], hosts: int, stamp: str, load: bool) -> None:
    folder.write_manifest(
        {
            "format": RUN_FORMAT,
            "record_version": RECORD_VERSION,
            "sweep_version": "synthetic",
            "inventory": {
                "path": "demo.yml",
                "snapshot": {
                    "hosts": [
                        {"name": h, "groups": ["rack_a" if i < hosts // 2 else "rack_b"]}
                        for i, h in enumerate(names)
                    ]
                },
            },
            "options": {"agent_args": ["--load", "20"] if load else []},
            "started_at": stamp,
            "ended_at": stamp,
            "state": "complete",
            "hosts": names,
            "sessions": [],
        }
    )


def change_window(root: str | Path, hosts: int = 8) -> list[Degradation]:
    """One day of the demo fleet without `--load`: runs at 03:00, 10:00 and 11:30, gpu03's power
    limit lowered to 500 W in the last one."""
    story = [
        Degradation("gpu03", 0, "power", (synth.power_cap(500),), hour=11.5, window=(10.0, 11.5))
    ]
    return six_weeks(root, hosts=hosts, days=1, story=story, load=False)
