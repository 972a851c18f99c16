"""Drift from a baseline, in words: which kinds of change between a host's baseline and its probe
are drift of the GPU stack (`DRIFT_KINDS`), and one message per kind and host (one per swapped
card) with the field changes behind it (`drift_of` -> `Drift`).

The baseline folder, the comparison of a run with it (`compare_to_baseline`) and the hosts that
could not be compared are `sweep.audit.baseline`'s; the changes themselves are
`sweep.audit.rundiff.host_changes`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweep.analysis.facts import path_labels
from sweep.analysis.names import fold_numbers
from sweep.audit.rundiff import FieldChange
from sweep.text import noun, plural, show_value

DRIFT_KINDS = (
    "gpus",
    "gpu swap",
    "driver",
    "ecc",
    "power",
    "clock policy",
    "mig",
    "modes",
    "topology",
    "firmware",
    "gpu model",
    "links",
    "link errors",
    "host settings",
    "speed",
)


_LABELS = {
    "pcie.width": "PCIe width",
    "pcie.max_gen": "PCIe generation (link)",
    "nvlink.active": "NVLinks active",
    "nvlinks_active": "NVLinks active",
    "fabric.state": "GPU fabric",
    "ecc.current": "ECC mode",
    "ecc.pending_mode": "ECC mode after reset",
    "ecc.pending": "ECC mode after reset",
    "power.enforced_limit_w": "enforced power limit (W)",
    "power.management_limit_w": "power limit (W)",
    "power.default_limit_w": "default power limit (W)",
    "mig_layout": "MIG layout",
    "mig.current": "MIG mode",
    "mig.pending": "MIG mode after reset",
    "persistence_mode": "persistence mode",
    "driver.version": "driver",
    "driver.cuda_driver_version": "CUDA driver API",
    "driver.gpu_count": "GPU count",
    "topology.worst_link_selected": "worst link",
    "topology.pairs": "link",
    "vbios": "VBIOS",
    **path_labels(),
}


@dataclass(frozen=True)
class Drift:
    """One kind of drift on one host (a swapped card is one drift per card)."""

    host: str
    kind: str
    detail: str  # what drifted, without the host (entries carry the host beside the text)
    changes: tuple[FieldChange, ...]

    @property
    def message(self) -> str:
        return f"{self.host}: {self.detail}"

    def as_dict(self) -> dict:
        return {
            "host": self.host,
            "kind": self.kind,
            "message": self.message,
            "detail": self.detail,
            "changes": [
                {k: v for k, v in c.as_dict().items() if k != "kind"} for c in self.changes
            ],
        }


def _label(c: FieldChange) -> str:
    return _LABELS.get(c.field, c.field)


def value_text(v: Any) -> str:
    """A field's value as drift shows it: on / off, none, 250 rather than 250.0."""
    if isinstance(v, bool):
        return "on" if v else "off"
    if v is None:
        return "none"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return show_value(v)


def _on(c: FieldChange) -> str:
    if not c.gpus:
        return ""
    if c.field == "topology.pairs":
        return (
            f" on {plural(len(c.gpus), 'GPU pair')} "
            f"({fold_numbers(c.gpus[:4])}{',…' if len(c.gpus) > 4 else ''})"
        )
    return f" on {noun(len(c.gpus), 'GPU')} {fold_numbers(c.gpus)}"


def _card_text(card: dict | None) -> str:
    return f"serial {(card or {}).get('serial')} ({(card or {}).get('uuid')})"


def drift_of(host: str, changes: list[FieldChange]) -> list[Drift]:
    """The changes of one host that are drift, as messages a person reads (one per kind, one
    per swapped card)."""
    out = []
    by_kind: dict[str, list[FieldChange]] = {}
    for c in changes:
        if c.kind in DRIFT_KINDS:
            by_kind.setdefault(c.kind, []).append(c)
    for kind, items in by_kind.items():
        if kind == "gpu swap":
            out += _swapped_cards(host, kind, items)
        elif kind == "gpus":
            out.append(_gpus_drift(host, kind, items))
        else:
            out.append(_fields_drift(host, kind, items))
    return out


def _swapped_cards(host: str, kind: str, items: list[FieldChange]) -> list[Drift]:
    """One drift per swapped card, with its serial and UUID before and after."""
    cards: dict[Any, dict] = {}
    for c in items:
        for i in c.gpus:
            cards.setdefault(i, {"before": {}, "after": {}, "changes": []})
            cards[i]["before"][c.field], cards[i]["after"][c.field] = c.before, c.after
            cards[i]["changes"].append(FieldChange(c.kind, c.field, (i,), c.before, c.after))
    return [
        Drift(
            host,
            kind,
            f"the card at GPU {i} was swapped: {_card_text(card['before'])} "
            f"-> {_card_text(card['after'])}",
            tuple(card["changes"]),
        )
        for i, card in cards.items()
    ]


def _gpus_drift(host: str, kind: str, items: list[FieldChange]) -> Drift:
    """GPUs missing or added, the GPU count, GPUs renumbered: one drift."""
    parts = []
    for c in items:
        if c.field == "gpu":
            card = c.before or c.after
            state = "missing" if c.after is None else "added"
            parts.append(f"GPU {fold_numbers(c.gpus)} {state} ({_card_text(card)})")
        elif c.field == "driver.gpu_count":
            parts.append(f"{value_text(c.before)} -> {value_text(c.after)} GPUs")
        else:
            parts.append(
                f"GPU {fold_numbers(c.gpus)} index {value_text(c.before)} -> {value_text(c.after)}"
            )
    return Drift(host, kind, "; ".join(parts), tuple(items))


def _fields_drift(host: str, kind: str, items: list[FieldChange]) -> Drift:
    """The fields of one kind that changed (the driver version or the worst link first; three at
    most, one for the topology), and how many more."""
    head = [
        c for c in items if c.field in ("driver.version", "topology.worst_link_selected")
    ] or items
    shown = head[:3] if kind != "topology" else head[:1]
    text = "; ".join(
        f"{_label(c)} {value_text(c.before)} -> {value_text(c.after)}{_on(c)}" for c in shown
    )
    more = len(items) - len(shown)
    return Drift(
        host,
        kind,
        f"{kind} changed: {text}"
        + (f" (+{more} more {'field' if more == 1 else 'fields'})" if more > 0 else ""),
        tuple(items),
    )
