"""Long runs: every sample counted, a bounded number kept (`--wrap`'s samples,
thinned as the run grows).

Every sample taken during a wrapped command goes through `Stream.add`, which keeps three things:

- **the verdict's figures, exact over every sample**: per GPU the number of samples, SM clock
  min and median, power max and median, the last enforced limit, the fraction of samples with
  each clock-event reason, and the processes seen (pid, name, GPUs, first seen, how often).
  Values are counted (a counter of distinct clock or power readings), not stored, so memory
  stays bounded too; `summaries()` answers exactly what `load.summarize` answers on the full list;
- **`intervals`, complete**: every interval a GPU spent in a HW slowdown (per reason) or with
  another process on it (per pid): the first and the last sample's `t`, and how many samples.
  It is never thinned, however long the run;
- **`kept`, at most `max_samples` samples**: all of them until the budget is reached; then the
  plain samples are thinned on a grid whose stride doubles; when no plain sample is left to drop,
  every other state change goes (a sample whose reasons or processes differ from the one before,
  or the sample just before such a change), and last every other first or last sample of a
  HW-slowdown or other-process interval. The run's first and last samples always stay. A 1-hour
  run on 8 GPUs at 0.2 s (144,000 GPU readings, ~35 MB kept whole) keeps at most `max_samples`
  samples: ~2 MB at the default 1000.
"""

import collections

HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
FOREIGN = ("other", "not_visible")
DEFAULT_MAX_SAMPLES = 1000


class Stream(object):
    """Counts every sample, keeps every HW-slowdown / other-process interval,
    keeps a bounded few."""

    def __init__(self, max_samples=DEFAULT_MAX_SAMPLES):
        if max_samples < 2:
            raise ValueError("max_samples must be 2 or more")
        self.max_samples = max_samples
        self.seen = 0
        self.stride = 1
        self.kept = []  # [index, priority, sample]
        self.intervals = []
        self._open = {}  # (gpu, what, pid) -> interval
        self._prev = None  # (index, sample, state, protected, priority)
        self._gpus = {}  # index -> per-GPU counters
        self._procs = {}  # owner -> pid -> note
        self.unreadable_max = 0

    # --- taking samples in --------------------------------------------------------------------

    def add(self, sample):
        index, self.seen = self.seen, self.seen + 1
        t = sample.get("t")
        state, protected = {}, set()
        for g in sample.get("gpus") or []:
            i = g.get("index")
            self._count(i, g)
            reasons = tuple(sorted(r for r in g.get("active_reasons") or [] if isinstance(r, str)))
            procs = tuple(
                sorted((str(p.get("pid")), str(p.get("owner"))) for p in g.get("processes") or [])
            )
            state[i] = (reasons, procs)
            for r in reasons:
                if r in HW_REASONS:
                    protected.add((i, r, None))
            for p in g.get("processes") or []:
                owner = p.get("owner")
                self._note(owner, p, i, t)
                if owner in FOREIGN:
                    protected.add((i, "other_process", p.get("pid")))
            self.unreadable_max = max(self.unreadable_max, g.get("processes_unreadable") or 0)
        self._track(protected, t, sample)
        priority = 1 if index == 0 else 0
        if self._prev is not None:
            p_index, p_sample, p_state, p_protected, p_priority = self._prev
            if state != p_state:
                priority, p_priority = max(priority, 1), max(p_priority, 1)
            if protected - p_protected:
                priority = 2  # an interval starts here
            if p_protected - protected:
                p_priority = 2  # an interval ended with the sample before
            self._offer(p_index, p_priority, p_sample)
        elif protected:
            priority = 2
        self._prev = (index, sample, state, protected, priority)

    def finish(self):
        """The run is over: the last sample is kept and open intervals are closed."""
        if self._prev is not None:
            p_index, p_sample, _, p_protected, p_priority = self._prev
            self._offer(p_index, 2 if p_protected else max(p_priority, 1), p_sample)
            self._prev = None
        for key in list(self._open):
            self.intervals.append(self._open.pop(key))
        self.intervals.sort(
            key=lambda iv: (iv["from_s"] if iv["from_s"] is not None else -1, iv["gpu"], iv["what"])
        )
        return self

    def _track(self, protected, t, sample):
        for key in protected:
            iv = self._open.get(key)
            if iv is None:
                gpu, what, pid = key
                iv = {"gpu": gpu, "what": what, "from_s": t, "to_s": t, "samples": 0}
                if what == "other_process":
                    iv["pid"] = pid
                    iv["name"] = next(
                        (
                            p.get("name")
                            for g in sample.get("gpus") or []
                            if g.get("index") == gpu
                            for p in g.get("processes") or []
                            if p.get("pid") == pid
                        ),
                        None,
                    )
                self._open[key] = iv
            iv["to_s"] = t
            iv["samples"] += 1
        for key in [k for k in self._open if k not in protected]:
            self.intervals.append(self._open.pop(key))

    def _offer(self, index, priority, sample):
        if priority == 0 and index % self.stride:
            return
        self.kept.append([index, priority, sample])
        while len(self.kept) > self.max_samples:
            self._compact()

    def _compact(self):
        """Drop some kept samples (never the first nor the newest): plain ones off a
        doubled grid first; when none is left to drop, every other state change; then every
        other interval edge."""
        first, last = self.kept[0], self.kept[-1]
        if any(k[1] == 0 and k[0] for k in self.kept[1:-1]):
            before = len(self.kept)
            while len(self.kept) == before:
                self.stride *= 2
                self.kept = [
                    k for k in self.kept if k[1] > 0 or k[0] % self.stride == 0 or k is last
                ]
            return
        for level in (1, 2):
            drop = [id(k) for k in self.kept[1:-1] if k[1] == level]
            if drop:
                drop = set(drop[1::2] if len(drop) > 1 else drop)
                self.kept = [k for k in self.kept if id(k) not in drop or k is first]
                return

    # --- exact figures ------------------------------------------------------------------------

    def _count(self, i, g):
        c = self._gpus.get(i)
        if c is None:
            c = self._gpus[i] = {
                "rows": 0,
                "sm": collections.Counter(),
                "power": collections.Counter(),
                "limit": None,
                "reasons": collections.Counter(),
                "pcie_gen": None,
            }
        c["rows"] += 1
        if g.get("sm_mhz") is not None:
            c["sm"][g["sm_mhz"]] += 1
        if g.get("power_w") is not None:
            c["power"][g["power_w"]] += 1
        if g.get("enforced_limit_w"):
            c["limit"] = g["enforced_limit_w"]
        if g.get("pcie_gen") is not None:
            c["pcie_gen"] = (
                g["pcie_gen"] if c["pcie_gen"] is None else max(c["pcie_gen"], g["pcie_gen"])
            )
        for r in set(g.get("active_reasons") or []):
            if isinstance(r, str):
                c["reasons"][r] += 1

    def _note(self, owner, p, gpu, t):
        pid = p.get("pid")
        n = self._procs.setdefault(owner, {}).get(pid)
        if n is None:
            n = self._procs[owner][pid] = {
                "pid": pid,
                "name": p.get("name"),
                "gpus": [],
                "first_seen_s": t,
                "samples_seen": 0,
                "max_used_memory_bytes": None,
            }
        n["name"] = n["name"] or p.get("name")
        if gpu not in n["gpus"]:
            n["gpus"].append(gpu)
        n["samples_seen"] += 1
        used = p.get("used_memory_bytes")
        if isinstance(used, int):
            n["max_used_memory_bytes"] = max(n["max_used_memory_bytes"] or 0, used)

    def processes(self, owner):
        """pid -> what the samples saw of that owner's processes."""
        return self._procs.get(owner, {})

    def summaries(self, max_sm):
        """Per GPU, exactly `load.summarize(all samples, max_sm)`."""
        out = []
        for i in sorted(self._gpus):
            c = self._gpus[i]
            rows = float(c["rows"])
            frac = lambda name: round(c["reasons"][name] / rows, 3)
            out.append(
                {
                    "gpu": i,
                    "samples": c["rows"],
                    "sm_mhz_min": min(c["sm"]) if c["sm"] else None,
                    "sm_mhz_median": counted_median(c["sm"]),
                    "sm_mhz_max_allowed": (max_sm or {}).get(i),
                    "power_w_max": max(c["power"]) if c["power"] else None,
                    "power_w_median": counted_median(c["power"]),
                    "enforced_limit_w": c["limit"],
                    "sw_power_cap_fraction": frac("sw_power_cap"),
                    "hw_slowdown_fraction": max(frac(r) for r in HW_REASONS),
                    "sw_thermal_fraction": frac("sw_thermal_slowdown"),
                    "pcie_gen_max": c["pcie_gen"],
                }
            )
        return out

    def samples(self):
        """The kept samples, in order."""
        return [k[2] for k in self.kept]

    def report(self):
        return {
            "max_samples": self.max_samples,
            "seen": self.seen,
            "kept": len(self.kept),
            "stride": self.stride,
            "intervals": len(self.intervals),
        }


def counted_median(counter):
    """statistics.median of the values a Counter counts, without expanding them."""
    n = sum(counter.values())
    if not n:
        return None
    want = [(n - 1) // 2, n // 2]
    got, seen = [], 0
    for value in sorted(counter):
        seen += counter[value]
        while want and want[0] < seen:
            got.append(value)
            want.pop(0)
        if not want:
            break
    return got[0] if n % 2 else (got[0] + got[1]) / 2
