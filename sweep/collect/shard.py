"""``--shard i/n``: split one inventory among n controllers, each sweeping its share.

A host's shard is a stable hash of its name (the first 8 bytes of SHA-256, mod n): the same host
lands in the same shard on every controller and in every run, whatever the inventory's order, and
adding or removing hosts moves no other host. ``--shard-by index`` takes every n-th host of the
selected list instead (exactly even shares, but a host moves when the inventory above it changes).
The n run folders are reported together with ``sweep report RUN_1 ... RUN_n``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence, TypeVar

from sweep.errors import ConfigError

H = TypeVar("H")
SHARD_BY = ("hash", "index")


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/8"`` -> (2, 8); shards count from 1."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match:
        raise ConfigError(
            f"--shard {text!r} is not I/N", fix="write it as I/N, e.g. --shard 1/4 ... --shard 4/4"
        )
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ConfigError(
            f"--shard {text} is out of range: I must be 1..N and N 1 or more",
            fix=f"use --shard 1/{max(count, 1)} ... --shard {max(count, 1)}/{max(count, 1)}",
        )
    return index, count


def shard_of(name: str, count: int) -> int:
    """The shard (1..count) of the host called `name`, by a stable hash of the name."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def select_shard(hosts: Sequence[H], index: int, count: int, by: str = "hash") -> list[H]:
    """The hosts of shard `index` of `count` (objects with a ``name``), in their order."""
    if by not in SHARD_BY:
        raise ConfigError(f"--shard-by {by!r} is unknown", fix="use hash or index")
    if by == "index":
        return [host for i, host in enumerate(hosts) if i % count == index - 1]
    return [host for host in hosts if shard_of(host.name, count) == index]
