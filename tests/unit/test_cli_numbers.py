"""Issue 53: every numeric option of every command refuses a value outside its meaning (0 where it means
nothing, -1, a value past any use, NaN, infinity) with exit 2 and one line naming the option, before any
work. The walk is driven by the CLI's own command tree: a new numeric option is walked without being listed.
`sweep run ... --load -3` exited 0 and ran no load (the manifest's agent_args empty)."""
from __future__ import annotations

import typing

import pytest

from sweep.cli import main
from test_cli_bad_values import Place, argv_for, walk

# where 0 means something (no load), it is taken; every other numeric option refuses it
ZERO_MEANS = {("run", "load"): "no load", ("probe", "load"): "no load", ("run", "workers"): "as many as the CPUs allow"}


def _numeric(param) -> type | None:
    """int or float for a numeric option (Optional[...] too), else None."""
    annotation = param.type_descriptor.annotation
    for kind in (annotation, *typing.get_args(annotation)):
        if kind in (int, float):
            return kind
    return None


NUMERIC = sorted((path, param.name, _numeric(param).__name__) for path, param in walk() if _numeric(param))


def test_the_walk_finds_every_numeric_option():
    found = {(path, name) for path, name, _ in NUMERIC}
    assert found >= {("run", "forks"), ("run", "load"), ("run", "connect_timeout"), ("run", "host_deadline"),
                     ("run", "interval"), ("run", "max_yaml_values"), ("run", "max_range_hosts"),
                     ("probe", "load"), ("probe", "deadline"), ("wrap", "interval"), ("wrap", "deadline"),
                     ("demo", "hosts"), ("history", "threshold"), ("history", "floor"),
                     ("export prometheus", "floor")}


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    return Place(tmp_path_factory.mktemp("numbers"))


def _said(place, path, name, value, capfd):
    param = next(p for q, p in walk() if q == path and p.name == name)
    argv = argv_for(place, path, param, value)
    code = main(argv)
    out, err = capfd.readouterr()
    return param, code, f"sweep {' '.join(argv)}\n--- exit {code}; output:\n{out}{err}", err


@pytest.mark.parametrize("path,name,kind", NUMERIC)
def test_a_numeric_option_refuses_zero_minus_one_and_a_huge_value_naming_itself(path, name, kind, place, capfd,
                                                                                monkeypatch):
    monkeypatch.setenv("HOME", str(place.root))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.chdir(place.root)
    huge = "1e300" if kind == "float" else str(10**30)
    bad = ["-1", huge] + (["nan", "inf"] if kind == "float" else []) + ([] if (path, name) in ZERO_MEANS else ["0"])
    for value in bad:
        param, code, shown, err = _said(place, path, name, value, capfd)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and "Traceback" not in shown, shown
        assert len(lines) == 1 and lines[0].startswith("sweep: error: ") and param.opts[0] in lines[0], shown


@pytest.mark.parametrize("path,name", sorted(ZERO_MEANS))
def test_zero_is_taken_where_it_means_something(path, name, place, capfd, monkeypatch):
    monkeypatch.setenv("HOME", str(place.root))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.chdir(place.root)
    _, code, shown, _ = _said(place, path, name, "0", capfd)
    assert code != 2, shown
