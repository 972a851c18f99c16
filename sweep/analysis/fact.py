"""What one fact declares (`Fact`), with its Prometheus family (`Metric`) and its expectations
rule (`Expect`), and the readers of the health.json path a declaration names (`path_reader`,
`keyed_reader`).

A fact read straight from health.json declares its `path` once; its column, reader, audit paths,
rendering, metric and "not read" test are derived from that path here. The table of every fact is
`sweep.analysis.facts` (`FACTS`), which every consumer iterates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class Metric:
    """A fact's Prometheus family: a gauge of one column (times `scale`), or an `_info` metric
    (value 1) whose labels carry the columns of `labels` ((label, column) pairs)."""

    name: str
    help: str
    column: Optional[str] = None
    scale: float = 1.0
    labels: tuple = ()

    @classmethod
    def info(cls, name: str, help_text: str, *labels) -> "Metric":
        """An `_info` metric (value 1) whose labels are the (label, column) pairs `labels`."""
        return cls(name, help_text, labels=tuple(labels))


KINDS = ("equal", "glob", "floor", "ceiling")  # how an expectations file's value judges a fact's


@dataclass(frozen=True)
class Expect:
    """A fact's rule in an expectations file (`sweep.audit.expect`): its key, and its kind, chosen
    here (never from the fact's dtype): `equal` (the value, or one of a list), `glob` (a glob or a
    list of them), `floor` / `ceiling` (a number the value may not go below / above). `fix` is what
    a violation tells the operator; `noun` and `unit` word how the file writes the value ("a VBIOS
    version (glob)")."""

    key: str
    kind: str
    fix: str = "bring the host to the expected value, or change the expectation"
    noun: str = ""
    unit: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(
                f"expectation {self.key!r}: kind {self.kind!r} is none of {', '.join(KINDS)}"
            )


# what a reader of a path accepts as a reading of each dtype (anything else is "not read")
ACCEPTS = {
    "category": lambda v: isinstance(v, str) and v != "",
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "Int64": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "Float64": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    # a value as it stands (a hand-written expectations rule judges it)
    "any": lambda v: v is not None,
}
# the same tests as Python expressions of `v`, for the row functions `sweep.analysis.rows` generates
ACCEPTS_SOURCE = {
    "category": 'isinstance(v, str) and v != ""',
    "string": "isinstance(v, str)",
    "boolean": "isinstance(v, bool)",
    "Int64": "isinstance(v, int) and not isinstance(v, bool)",
    "Float64": "isinstance(v, (int, float)) and not isinstance(v, bool)",
    "any": "v is not None",
}


def path_reader(path: str, dtype: str) -> Callable:
    """The reader of one health.json `path` ("firmware.bios_version"; a GPU's: "gpus#.vbios", read
    from the GPU's dict): its value where it is of `dtype`, else None (not read)."""
    steps, accepts = tuple(path.removeprefix("gpus#.").split(".")), ACCEPTS[dtype]

    def read(doc):
        for step in steps:
            doc = doc.get(step) if isinstance(doc, dict) else None
        return doc if accepts(doc) else None

    read.__name__ = f"read_{steps[-1]}"
    read.steps, read.dtype = steps, dtype  # what a generated row function inlines
    return read


def keyed_reader(path: str, dtype: str) -> Callable:
    """The reader of a GPU's value in a host map keyed by GPU index ("topology.cpu_affinity.*": the
    `*` step is the GPU's index): called with the health document and the GPU's index, its value
    where it is of `dtype`, else None (not read)."""
    before, after = path.split(".*")
    steps, rest, accepts = (
        tuple(before.split(".")),
        tuple(s for s in after.split(".") if s),
        ACCEPTS[dtype],
    )

    def host_map(health):
        """The host's map keyed by GPU index (None where there is none): found once per host."""
        doc = health
        for step in steps:
            doc = doc.get(step) if isinstance(doc, dict) else None
        return doc if isinstance(doc, dict) else None

    def at(found, index):
        """The value for GPU `index` in the `host_map` found."""
        doc = found.get(str(index)) if found is not None else None
        for step in rest:
            doc = doc.get(step) if isinstance(doc, dict) else None
        return doc if accepts(doc) else None

    def read(health, index):
        return at(host_map(health), index)

    read.keyed = True  # the frames call it with the host's document and the GPU's index
    read.host_map, read.at = host_map, at  # or find the map once per host (sweep.analysis.rows)
    read.path, read.dtype, read.rest = path, dtype, rest
    read.__name__ = f"read_{(rest or steps)[-1]}"
    return read


@dataclass(frozen=True, kw_only=True)
class Fact:
    """One fact: everything each consumer needs to know about it, by keyword.

    A fact read straight from health.json declares its `path` once (and its `dtype`): its frame
    column (`column`, default its name), reader, audit paths, rendering, export metric and "not
    read" test are derived from it. A fact the frames read in `sweep.analysis.rows` names its
    `columns`, `render` and `paths` itself."""

    name: str
    label: str
    scope: str  # "host" or "gpu"
    # (when, text) rules of `sweep.analysis.impact`; the last always holds
    impact: list
    # its kind in `sweep diff` of runs and in baselines (audit/fields.py)
    diff_kind: str
    path: Optional[str] = None  # the one health.json path of a fact read straight from it
    dtype: str = "category"  # the typed column a `path` fact reads
    column: Optional[str] = None  # that column (default: the fact's name)
    # frame columns (of `hosts` or `gpus`) that hold the typed value
    columns: tuple = ()
    # a row of those columns -> its text (the edge only)
    render: Optional[Callable[[dict], str]] = None
    paths: tuple = ()  # flattened health.json paths ("#" = any index) that carry it
    metric: Optional[Metric] = None
    no_metric: Optional[str] = None  # why it has no metric, when it has none
    contract: Optional[str] = None  # the agent's contract this fact belongs to
    # "value": a change point when the typed value changes; "drift": a measured
    history: str = "value"
    # figure, tracked run on run against the GPU's own first runs (no change point)
    # its rule in an expectations file (audit/expect_rules.py), if any
    expect: Optional[Expect] = None
    # column -> (dtype, reader of a GPU dict / health doc)
    reads: dict = field(default_factory=dict)
    # a row -> its value was not read, so its impact
    unread: Optional[Callable[[dict], bool]] = None
    # says so instead of judging it (None: its text says what a gap means)
    # a row -> the text of one GPU in "700 W x7, 250 W x1 (GPU 3)"
    per_gpu: Optional[Callable] = None
    compares: bool = True  # splits the fleet into comparability classes
    # the GPUs of one host should agree on it (else "GPUs differ within the
    alike: bool = True
    # host"); False where each GPU has its own by design (its CPUs, its NIC)

    def __post_init__(self):
        if self.path is None:
            return
        keyed = self.scope == "gpu" and ".*" in self.path and not self.path.startswith("gpus#.")
        if (self.path.startswith("gpus#.") or keyed) != (self.scope == "gpu"):
            raise ValueError(
                f"fact {self.name!r}: a GPU fact's path starts with 'gpus#.' (or is a host "
                "map keyed by "
                "GPU index, 'topology.cpu_affinity.*'), a host fact's not"
            )
        column = self.column or self.name
        reader = (keyed_reader if keyed else path_reader)(self.path, self.dtype)
        derived = {
            "columns": (column,),
            "paths": (self.path,),
            "reads": {column: (self.dtype, reader)},
            "render": _render_of(column, self.dtype),
            "unread": lambda r: r[column] is None,
        }
        if self.metric is None and self.no_metric is None:
            derived["metric"] = _metric_of(self, column)
        for name, value in derived.items():
            if not getattr(self, name):
                object.__setattr__(self, name, value)


def _render_of(column: str, dtype: str) -> Callable[[dict], str]:
    """The text of a `path` fact's typed value: as read, on/off, a number; NOT_RECORDED where not
    read."""
    show = {
        "boolean": lambda v: "on" if v else "off",
        "Int64": str,
        "Float64": lambda v: f"{v:g}",
    }.get(dtype, str)
    return lambda r: NOT_RECORDED if r[column] is None else show(r[column])


def _metric_of(fact: "Fact", column: str) -> Metric:
    """A `path` fact's Prometheus family: an `_info` metric of a text, a gauge of a number or a
    mode."""
    if fact.dtype in ("category", "string"):
        return Metric(
            f"sweep_{fact.scope}_{fact.name}_info",
            f"{fact.label} ({fact.path}), value 1.",
            labels=((column, column),),
        )
    return Metric(f"sweep_{fact.scope}_{fact.name}", f"{fact.label} ({fact.path}).", column)
