"""--shard I/N: every host in exactly one shard, stable across runs and inventory changes."""
from collections import Counter
from types import SimpleNamespace

import pytest

from sweep.cli import main
from sweep.errors import ConfigError
from sweep.collect.shard import parse_shard, select_shard, shard_of


def hosts(names):
    return [SimpleNamespace(name=n) for n in names]


NAMES = [f"gpu{i:04d}" for i in range(1, 1001)]


@pytest.mark.parametrize("by", ["hash", "index"])
def test_shards_partition_the_hosts(by):
    fleet = hosts(NAMES)
    shares = [select_shard(fleet, i, 4, by=by) for i in range(1, 5)]
    seen = Counter(h.name for share in shares for h in share)
    assert set(seen) == set(NAMES) and set(seen.values()) == {1}
    for share in shares:  # order kept
        assert [h.name for h in share] == sorted(h.name for h in share)
        assert 200 <= len(share) <= 300  # roughly even (index: exactly 250)


def test_hash_shards_are_stable_whatever_the_order_and_the_other_hosts():
    before = {h.name for h in select_shard(hosts(NAMES), 2, 8)}
    shuffled = hosts(list(reversed(NAMES)) + ["new-host-a", "new-host-b"])
    after = {h.name for h in select_shard(shuffled, 2, 8)}
    assert after - {"new-host-a", "new-host-b"} == before
    assert shard_of("gpu0001", 8) == shard_of("gpu0001", 8)  # no per-process hash seed
    assert shard_of("gpu0001", 1) == 1


def test_index_shards_are_exactly_even():
    assert [h.name for h in select_shard(hosts("abcdefg"), 1, 3, by="index")] == ["a", "d", "g"]
    assert [h.name for h in select_shard(hosts("abcdefg"), 3, 3, by="index")] == ["c", "f"]


def test_parse_shard():
    assert parse_shard("1/4") == (1, 4) and parse_shard(" 4 / 4 ") == (4, 4)
    for bad in ("0/4", "5/4", "1/0", "x", "1-4", ""):
        with pytest.raises(ConfigError):
            parse_shard(bad)
    with pytest.raises(ConfigError, match="--shard-by 'random' is unknown"):
        select_shard(hosts("ab"), 1, 2, by="random")


def test_cli_rejects_a_bad_shard(tmp_path, capsys):
    inventory = tmp_path / "inv.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n")
    assert main(["run", str(inventory), "--shard", "3/2", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "sweep: error: --shard 3/2 is out of range: I must be 1..N and N 1 or more" in err
    assert not (tmp_path / "run").exists()
