"""Issue 53: nothing sweep writes goes through a link. Every output option of every command (-o/--out,
--record, --html, --index and their old spellings), walked from the CLI's own command tree, given a path
where a link was planted to a file (or a folder) of someone else's: the command refuses it (exit 2, one
line naming the path) and the link's target keeps its bytes and its mode. `sweep bundle -o LINK` wrote
the agent through the link and chmod-ed its target 0755."""
from __future__ import annotations

import os
import stat

import pytest

from sweep.cli import main
from test_cli_bad_values import KINDS, Place, argv_for, walk

OUTPUTS = sorted((path, param.name) for path, param in walk()
                 if KINDS.get((path, param.name)) in ("out_dir", "out_file"))


def test_the_walk_finds_every_output_option():
    assert set(OUTPUTS) >= {("bundle", "out"), ("report", "out"), ("history", "out"), ("export prometheus", "out"),
                            ("baseline set", "out"), ("probe", "out"), ("wrap", "out"), ("run", "out"),
                            ("demo", "out"), ("diff", "html"), ("probe", "record"), ("history", "index")}


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    return Place(tmp_path_factory.mktemp("links"))


@pytest.mark.parametrize("path,name", OUTPUTS)
def test_an_output_path_that_is_a_link_is_refused_and_its_target_untouched(path, name, place, tmp_path, capfd,
                                                                          monkeypatch):
    monkeypatch.setenv("HOME", str(place.root))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.chdir(place.root)
    folder = KINDS[(path, name)] == "out_dir"
    victim = tmp_path / "victim"
    if folder:
        victim.mkdir(mode=0o700)
    else:
        victim.write_text("someone else's file\n")
        victim.chmod(0o600)
    link = tmp_path / "planted"
    link.symlink_to(victim)
    param = next(p for q, p in walk() if q == path and p.name == name)
    argv = argv_for(place, path, param, str(link))
    if path == "demo":
        argv[1:1] = ["--hosts", "1"]
    code = main(argv)
    out, err = capfd.readouterr()
    shown = f"sweep {' '.join(argv)}\n--- exit {code}; output:\n{out}{err}"
    assert link.is_symlink() and stat.S_IMODE(victim.stat().st_mode) == (0o700 if folder else 0o600), shown
    if folder:
        assert os.listdir(victim) == [], shown
    else:
        assert victim.read_text() == "someone else's file\n", shown
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and lines and lines[-1].startswith("sweep: error: ") and "Traceback" not in shown, shown
    assert str(link) in lines[-1] or str(link.parent) in lines[-1], shown


# --record needs the driver (it records a live probe; --replay excludes it): not walkable without a GPU
@pytest.mark.parametrize("path,name", [key for key in OUTPUTS if key != ("probe", "record")])
def test_under_umask_000_an_output_and_its_new_parents_are_never_writable_by_others(path, name, place, tmp_path,
                                                                                   capfd, monkeypatch):
    """Every folder sweep makes for an output (the parents it makes too) and every file it writes gets its
    mode from creation: under umask 000 none is group- or world-writable (os.makedirs gave its mode to the
    last folder only)."""
    monkeypatch.setenv("HOME", str(place.root))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.chdir(place.root)
    target = tmp_path / "new" / "a" / "b" / ("out" if KINDS[(path, name)] == "out_dir" else "out.file")
    param = next(p for q, p in walk() if q == path and p.name == name)
    argv = argv_for(place, path, param, str(target))
    if path == "demo":
        argv[1:1] = ["--hosts", "1"]
    if path == "diff":  # the HTML diff is of two run folders
        argv = ["diff", str(place.run), str(place.run), "--html", str(target)]
    old = os.umask(0)
    try:
        code = main(argv)
    finally:
        os.umask(old)
    out, err = capfd.readouterr()
    made = [tmp_path / "new", *(tmp_path / "new").rglob("*")]
    assert target.exists(), f"sweep {' '.join(argv)}\n--- exit {code}; output:\n{out}{err}"
    loose = [f"{p.relative_to(tmp_path)} {stat.S_IMODE(p.lstat().st_mode):o}" for p in made
             if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o022]
    assert loose == [], f"writable by others under umask 000: {loose}"
