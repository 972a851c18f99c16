"""Host names folded the way operators write them: gpu[01-08,10] (ClusterShell's NodeSet)."""

from __future__ import annotations

import numbers
import re
from functools import lru_cache

from ClusterShell.NodeSet import NodeSet

# natural order; also the name the analysis modules import from here
from sweep.text import host_key


def fold_messages(items) -> list[str]:
    """(host, message) pairs as one line per message, its hosts folded, as ClusterShell's clubak -b
    does: ten hosts with the same sentence read ``h[0001-0010]: 1 GPU visible ...``, not ten lines.

    A message that starts with its host's name ("h0001: ...") is compared without it. Lines keep
    the order in which each message first appears.
    """
    hosts: dict[str, list[str]] = {}
    for host, message in items:
        text = message[len(host) + 2 :] if message.startswith(f"{host}: ") else message
        hosts.setdefault(text, []).append(host)
    return [f"{fold_hosts(names)}: {text}" for text, names in hosts.items()]


# What differs from host to host inside one kind of failure message: its own name, its address and
# its key's fingerprint. Failures alike but for these fold into one line that shows them as <host>,
# <address> and <fingerprint> (each host's own message stays in its record and the report's detail).
_FINGERPRINT = re.compile(
    r"SHA256:[A-Za-z0-9+/]{43}=?|(?:MD5:)?\b(?:[0-9a-f]{2}:){15}[0-9a-f]{2}\b"
)
_ADDRESS = re.compile(r"\[?\b(?:\d{1,3}\.){3}\d{1,3}\b\]?(?::\d+)?|\[[0-9A-Fa-f:]+\](?::\d+)?")


@lru_cache(maxsize=4096)
def _generalised(text: str) -> str:
    """The text with addresses and key fingerprints generalised (100,000 hosts share a few
    texts)."""
    return _FINGERPRINT.sub("<fingerprint>", _ADDRESS.sub("<address>", text))


def failure_shape(host: str, message: str) -> tuple[str, str]:
    """(the message without its leading "host: ", the same with the host's own values
    generalised)."""
    text = message[len(host) + 2 :] if message.startswith(f"{host}: ") else message
    shape = _generalised(text)
    # a pattern per host: compiled only where its name is in the text (100,000 hosts: 56 s)
    if host and host in shape:
        shape = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", "<host>", shape)
    return text, shape


def fold_failures(items) -> list[dict]:
    """(host, failure class, message) triples as one row per kind of failure, its hosts folded as
    ClusterShell's clubak -b folds identical output: rows in the order each first appears, each with
    `hosts` (the names), `failure_class` and `message`: the host's own when one host has it, the
    generalised one (``the host key of <address> ...``) when several share it."""
    rows: dict[tuple, dict] = {}
    for host, cls, message in items:
        text, shape = failure_shape(host, message or "")
        row = rows.setdefault(
            (cls, shape), {"hosts": [], "failure_class": cls, "texts": set(), "shape": shape}
        )
        row["hosts"].append(host)
        row["texts"].add(text)
    return [
        {
            "hosts": r["hosts"],
            "failure_class": r["failure_class"],
            "message": next(iter(r["texts"])) if len(r["texts"]) == 1 else r["shape"],
        }
        for r in rows.values()
    ]


def fold_hosts(names) -> str:
    """Host names folded the way operators write them (``gpu[01-08,10]``), odd names listed as they
    are.

    ClusterShell's NodeSet does the folding. It parses every name it is given, which takes seconds
    for 10,000 names, so names that differ in one number only are first written as one pattern
    (``gpu[00001-00100]``) and NodeSet folds the few patterns; the result is checked by expanding
    it. A report folds its pool several times (verdict, headline, summary): the last folds are kept.
    """
    return _fold(tuple(dict.fromkeys(names)))


@lru_cache(maxsize=32)
def _fold(names: tuple) -> str:
    plain = [n for n in names if _FOLDABLE.match(n)]
    odd = sorted(n for n in names if not _FOLDABLE.match(n))
    parts = []
    if plain:
        patterns = _patterns(plain)
        if len(patterns) == 1:
            # one varying number: the pattern is already NodeSet's text (parsing it back took 20
            # ms for 10,000 names)
            return ",".join([patterns[0], *odd])
        try:
            folded = str(NodeSet.fromlist(patterns))
            if len(NodeSet(folded)) != len(plain):
                folded = str(NodeSet.fromlist(plain))
                if len(NodeSet(folded)) != len(plain):
                    raise ValueError("fold does not round-trip")
            parts.append(folded)
        except Exception:  # NodeSet reads some names as ranges or operators: list them plainly
            parts.append(",".join(sorted(plain)))
    return ",".join(parts + odd)


# A name a node set can hold as itself: letters, digits, '.', '_' and '-' (what NodeSet and Slurm's
# hostlist read as syntax, brackets, commas, '@', '!', '&', '^', blanks, is not in it).
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_LAST_NUMBER = re.compile(r"^(.*?)(\d{1,9})$")
# Slurm's hostlist refuses a single range of more hosts ("Too many hosts in range")
SLURM_RANGE_MAX = 65536


def fold_nodeset(names) -> tuple[str, tuple[str, ...]]:
    """(the names as one node set, the names no node set can hold): a string that Slurm
    (``--nodelist``, ``--exclude``, ``scontrol``) and ClusterShell (``NodeSet``, ``clush -w``,
    ``nodeset -e``) both read back as exactly the names given.

    Only a name's last number is folded, and only when nothing follows it (``gpu[01-04,07]``,
    ``rack1-n[1-8]``): Slurm 22.05 refuses text after a range (``gpu[01-02].dc1``), so ``gpu01.dc1``
    is listed as it is. Numbers fold with numbers of their own width when one of them is zero-padded
    (``gpu[08-10]``; ``gpu1`` and ``gpu01`` stay apart). A name outside `NODE_NAME` is returned
    apart. A report folds the same large sets several times (host_sets, summary.json's lists): the
    last folds are kept.
    """
    return _fold_nodeset(tuple(dict.fromkeys(names)))


@lru_cache(maxsize=32)
def _fold_nodeset(unique: tuple) -> tuple[str, tuple[str, ...]]:
    odd = tuple(n for n in unique if not NODE_NAME.match(n))
    listed, numbered = [], []  # names listed as they are; (prefix, digits) of the names to fold
    skip = set(odd)
    for name in unique:
        if name in skip:
            continue
        m = _LAST_NUMBER.match(name)
        if m is None or not m.group(1):
            listed.append(name)
        else:
            numbered.append(m.groups())
    padded = {
        (prefix, len(digits)) for prefix, digits in numbered if len(digits) > 1 and digits[0] == "0"
    }
    groups: dict = {}  # (prefix, width when zero-padded, else 0) -> numbers
    for prefix, digits in numbered:
        width = len(digits) if (prefix, len(digits)) in padded else 0
        groups.setdefault((prefix, width), set()).add(int(digits))
    parts = [(host_key(n), n) for n in listed]
    for (prefix, width), numbers in groups.items():
        ranges = [
            f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}"
            for start, end in _runs(sorted(numbers))
            for a, b in (
                (s, min(s + SLURM_RANGE_MAX - 1, end))
                for s in range(start, end + 1, SLURM_RANGE_MAX)
            )
        ]
        text = f"{prefix}{ranges[0]}" if len(numbers) == 1 else f"{prefix}[{','.join(ranges)}]"
        parts.append((host_key(f"{prefix}{min(numbers):0{width}d}"), text))
    return ",".join(text for _, text in sorted(parts)), odd


def abbreviate(folded: str, limit: int = 120) -> str:
    """A folded host list cut to about `limit` characters at a comma:
    ``gpu[0001-0008,0010,…]``."""
    if len(folded) <= limit:
        return folded
    cut = folded.rfind(",", 0, limit)
    head = folded[: cut if cut > 0 else limit]
    return head + (",…]" if head.count("[") > head.count("]") else ",…")


_FOLDABLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_DIGITS = re.compile(r"(\d+)")


def _patterns(names) -> list[str]:
    """Names that differ in one digit run only, as one NodeSet pattern per group; others as they
    are."""
    groups: dict = {}
    for name in names:
        parts = _DIGITS.split(name)  # text, digits, text, digits, ..., text
        skeleton = tuple(parts[0::2]) + tuple(len(d) for d in parts[1::2])
        groups.setdefault(skeleton, []).append(parts)
    out = []
    for members in groups.values():
        digits = list(zip(*(m[1::2] for m in members)))
        varying = [i for i, column in enumerate(digits) if len(set(column)) > 1]
        if len(varying) != 1:
            out.extend("".join(m) for m in members)
            continue
        i = varying[0]
        width = len(digits[i][0])
        numbers = sorted({int(d) for d in digits[i]})
        ranges = ",".join(
            f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}"
            for a, b in _runs(numbers)
        )
        parts = list(members[0])
        parts[1 + 2 * i] = f"[{ranges}]"
        out.append("".join(parts))
    return out


def _runs(numbers):
    start = prev = numbers[0]
    for n in numbers[1:]:
        if n != prev + 1:
            yield start, prev
            start = n
        prev = n
    yield start, prev


def fold_numbers(items) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``; items that are not all whole numbers (GPU pairs) are listed as
    they are."""
    items = list(items)
    if not all(isinstance(i, numbers.Integral) for i in items):
        return ",".join(str(i) for i in items)
    ints = sorted({int(x) for x in items})
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in _runs(ints)) if ints else ""


def natural_ranks(names) -> dict:
    """Each name's place in natural order (`host_key`; equal keys in their order in `names`)."""
    return {name: n for n, name in enumerate(sorted(names, key=host_key))}


def by_rank(names, ranks: dict) -> list:
    """`names` in natural order by their `natural_ranks`: an int sorts in a fifth of a `host_key`
    tuple's time (10,000 hosts); by `host_key` where a name has no rank."""
    names = list(names)
    try:
        return sorted(names, key=ranks.__getitem__)
    except KeyError:
        return sorted(names, key=host_key)
