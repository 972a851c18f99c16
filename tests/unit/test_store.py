"""The run folder: safe names, atomic records, the resume set, refusals of folders it cannot use."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

import sweep.store as store
from sweep.errors import ReadBackWarning, RunFolderError
from sweep.store import RECORD_VERSION, RunFolder, default_run_dir, safe_name

REPO = Path(__file__).resolve().parents[2]


def record(host: str, status: str = "ok", **extra) -> dict:
    return {
        "record_version": RECORD_VERSION, "host": host, "address": "10.0.0.1", "status": status,
        "failure": None if status == "ok" else {"class": "refused", "message": f"{host}: refused"},
        "attempts": 1, "started_at": "2026-11-29T18:00:00.000Z", "ended_at": "2026-11-29T18:00:01.000Z",
        "duration_s": 1.0, "health": {"schema_version": "1.0"} if status == "ok" else None, **extra,
    }


def new_folder(tmp_path: Path) -> RunFolder:
    folder = RunFolder.create(tmp_path / "run")
    folder.write_manifest({"format": "sweep-run", "record_version": RECORD_VERSION, "state": "running",
                           "hosts": []})
    return folder


@pytest.mark.parametrize("name", ["gpu01", "gpu01.dc1.example.com", "node-7_b", "10.0.0.5"])
def test_plain_host_names_are_kept(name):
    assert safe_name(name) == name


@pytest.mark.parametrize("name", ["../x", "../../etc/passwd", "/abs", ".hidden", "..", ".", "",
                                  "<script>alert(1)</script>", "a/b", "a\\b", "gpu 01", "gpu\x00x",
                                  "gpü01", "x" * 300, "[::1]:22"])
def test_unsafe_host_names_become_one_plain_file_name(name):
    safe = safe_name(name)
    assert "/" not in safe and "\\" not in safe and "\x00" not in safe
    assert not safe.startswith(".") and 0 < len(safe) <= 120
    assert all(c.isascii() and (c.isalnum() or c in "._-~") for c in safe)


def test_distinct_names_never_share_a_file():
    names = ["a/b", "a_b", "a:b", "a b", "../a_b", "a_b~", "A_B"]
    assert len({safe_name(n) for n in names}) == len(names)


def test_a_hostile_name_is_written_inside_the_folder_and_kept_in_the_record(tmp_path):
    folder = new_folder(tmp_path)
    path = folder.write_record(record("../../<script>x</script>"))
    assert path.parent == folder.hosts_dir
    assert json.loads(path.read_text())["host"] == "../../<script>x</script>"
    assert set(folder.read_records()) == {"../../<script>x</script>"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_resume_set_is_the_hosts_with_a_record(tmp_path):
    folder = new_folder(tmp_path)
    folder.write_record(record("gpu01"))
    folder.write_record(record("gpu02", "failed"))
    (folder.hosts_dir / "gpu03.json").write_text('{"record_version": 1, "host": "gp')  # damaged
    (folder.hosts_dir / ".tmp-abc.json").write_text("{")
    reopened = RunFolder.open(folder.path)
    with pytest.warns(ReadBackWarning, match=r"gpu03\.json: left out \(Unterminated string"):
        assert set(reopened.read_records()) == {"gpu01", "gpu02"}
    assert not list(folder.hosts_dir.glob(".tmp-*")), "open() removes what a killed sweep left"


@pytest.mark.parametrize("name", ["gpu01", "gpu01~attempt-1", "gpu01.attempt-1", "x" * 200])
def test_a_set_aside_record_is_kept_and_never_read_as_a_host(tmp_path, name):
    folder = new_folder(tmp_path)
    folder.write_record(record(name, "failed"))
    assert folder.set_aside(name) == f"{safe_name(name)}~attempt-1.json"
    folder.write_record(record(name, "failed"))
    assert folder.set_aside(name) == f"{safe_name(name)}~attempt-2.json"
    folder.write_record(record(name))
    assert not store.is_attempt_file(folder.record_path(name).name)  # no host's own file looks like an attempt
    assert {n: r["status"] for n, r in folder.read_records().items()} == {name: "ok"}
    assert [p.name for p in store.list_records(folder.path).files] == [folder.record_path(name).name]
    assert len(list(folder.hosts_dir.iterdir())) == 3  # the two earlier attempts are still there


def test_record_of_another_version_is_refused(tmp_path):
    folder = new_folder(tmp_path)
    folder.write_record(record("gpu01", record_version=2))
    with pytest.raises(RunFolderError, match="gpu01.json has record version 2; this sweep reads version 1"):
        RunFolder.open(folder.path).read_records()


def test_an_existing_record_survives_a_failed_rewrite(tmp_path, monkeypatch):
    folder = new_folder(tmp_path)
    path = folder.write_record(record("gpu01"))
    before = path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the store writes through os.fsync
    with pytest.raises(RunFolderError) as caught:
        folder.write_record(record("gpu01", "failed"))
    assert str(caught.value) == (
        f"{folder.hosts_dir}: cannot write gpu01.json (No space left on device); free space on that "
        "filesystem (or choose a folder elsewhere with --out), then finish the sweep with --resume "
        "RUN_DIR: the records already written are kept")
    assert path.read_bytes() == before
    assert [p.name for p in folder.hosts_dir.iterdir()] == ["gpu01.json"]


WRITER = """
import sys
from pathlib import Path
from sweep.store import RunFolder
folder = RunFolder(Path(sys.argv[1]))
n = 0
while True:
    n += 1
    folder.write_record({"record_version": 1, "host": "gpu%02d" % (n % 7), "address": "a", "status": "ok",
                         "failure": None, "attempts": n, "started_at": "", "ended_at": "", "duration_s": 0,
                         "health": {"schema_version": "1.0", "pad": "x" * 200000}})
    if n == 20:
        print("writing", flush=True)
"""


def test_kill_9_while_writing_leaves_only_whole_records(tmp_path):
    folder = new_folder(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(folder.path)], env=env,
                                stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"writing\n"
        time.sleep(0.05)
        proc.kill()
        proc.wait()
        proc.stdout.close()
        for path in folder.hosts_dir.glob("[!.]*.json"):
            assert json.loads(path.read_text())["health"]["pad"] == "x" * 200000
    assert len(RunFolder.open(folder.path).read_records()) == 7
    assert not list(folder.hosts_dir.glob(".*"))


def test_create_refuses_a_folder_in_use(tmp_path):
    folder = new_folder(tmp_path)
    with pytest.raises(RunFolderError, match="already holds a sweep run; resume it with --resume"):
        RunFolder.create(folder.path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(RunFolderError, match="is not empty"):
        RunFolder.create(tmp_path / "other")


def test_unwritable_place_names_the_path_and_the_fix(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(RunFolderError) as caught:
        RunFolder.create(tmp_path / "file" / "run")
    assert str(caught.value) == (f"{tmp_path / 'file' / 'run'}: cannot create the run folder (Not a directory); "
                                 "a file is in the way of the folder: choose another path with --out")


def test_open_refuses_what_is_not_a_run_folder(tmp_path):
    with pytest.raises(RunFolderError, match="no such run folder"):
        RunFolder.open(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunFolderError, match=r"is not a sweep run folder \(no manifest.json\)"):
        RunFolder.open(tmp_path / "empty")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(RunFolderError, match="manifest format 'something-else'"):
        RunFolder.open(tmp_path / "other")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text('{"format": ')
    with pytest.raises(RunFolderError, match="manifest.json is not valid JSON, cut short or garbled"):
        RunFolder.open(tmp_path / "broken")


@pytest.mark.parametrize("blob, why", [(b'{"format": ', "manifest.json is not valid JSON, cut short or garbled"),
                                       (b"\xff\xfe{}", "manifest.json is not UTF-8"),
                                       (b"[1, 2]", "is not a sweep run folder (manifest.json is not a JSON object)")])
def test_resume_and_history_read_a_manifest_through_one_reader(tmp_path, blob, why):
    """`sweep run --resume` and `sweep history` say the same about the same broken manifest, each with its fix."""
    from sweep.history.runs import read_manifest

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_bytes(blob)
    with pytest.raises(RunFolderError) as resumed:
        RunFolder.open(tmp_path / "run")
    with pytest.raises(RunFolderError) as indexed:
        read_manifest(tmp_path / "run")
    assert resumed.value.message.startswith(why) and resumed.value.message == indexed.value.message


def test_open_refuses_another_record_version(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "manifest.json").write_text('{"format": "sweep-run", "record_version": 0}')
    with pytest.raises(RunFolderError) as caught:
        RunFolder.open(tmp_path / "old")
    assert str(caught.value) == (
        f"{tmp_path / 'old'}: was written with record version 0; this sweep reads version 1; resume it "
        "with the sweep version that started it, or start a new run without --resume")


def test_default_run_dir_is_timestamped_and_unique(tmp_path):
    now = datetime(2026, 11, 29, 18, 12, 23, tzinfo=timezone.utc)
    first = default_run_dir("/etc/ansible/prod-gpus.yml", tmp_path / "reports", now)
    assert first == tmp_path / "reports" / "20261129T181223Z-prod-gpus"
    first.mkdir(parents=True)
    assert default_run_dir("prod-gpus.yml", tmp_path / "reports", now).name == "20261129T181223Z-prod-gpus-2"


def test_write_record_refuses_an_incomplete_record(tmp_path):
    folder = new_folder(tmp_path)
    with pytest.raises(ValueError, match="record lacks health"):
        folder.write_record({k: v for k, v in record("gpu01").items() if k != "health"})


@pytest.mark.parametrize("size", [0, 1, 44_000, 65_536, 65_537, 300_000])
def test_read_bounded_reads_a_file_whole_up_to_its_limit(tmp_path, size):
    from sweep.store.files import read_bounded

    path = tmp_path / "record.json"
    blob = os.urandom(size)
    path.write_bytes(blob)
    assert read_bounded(path, size) == blob
    if size:
        with pytest.raises(OSError) as err:
            read_bounded(path, size - 1)
        assert err.value.errno == errno.EFBIG


def test_read_bounded_refuses_a_file_that_grows_past_its_limit(tmp_path, monkeypatch):
    from sweep.store import files

    path = tmp_path / "record.json"
    path.write_bytes(b"x" * 100)
    real_fstat = os.fstat

    def grows(fd):  # fstat saw 100 bytes; by the read, the file has 10,000
        info = real_fstat(fd)
        with open(path, "ab") as fh:
            fh.write(b"y" * 9_900)
        return info

    monkeypatch.setattr(files.os, "fstat", grows)
    with pytest.raises(OSError, match="it grew past the 1,000 bytes sweep reads"):
        files.read_bounded(path, 1_000)
    monkeypatch.setattr(files.os, "fstat", real_fstat)
    assert len(files.read_bounded(path, 10_000)) == 10_000


def test_records_written_by_a_forked_worker_and_its_parent_are_all_listed(tmp_path):
    """A record writer keeps hosts/, records.sha256 and records.mac open between records; a worker
    forked from it writes through the same descriptors, closes its copies when it ends, and every
    record of either process is in place with its digest line whole."""
    folder = new_folder(tmp_path)
    folder.write_record(record("gpu01"))
    pid = os.fork()
    if pid == 0:  # the worker
        code = 1
        try:
            folder.write_record(record("gpu02"))
            folder.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    folder.write_record(record("gpu03"))  # the parent's descriptors still work after the child's close
    folder.close()
    lines = (folder.path / "records.sha256").read_text().splitlines()
    assert sorted(line.split("  ")[1] for line in lines) == ["hosts/gpu01.json", "hosts/gpu02.json",
                                                             "hosts/gpu03.json"]
    reopened = RunFolder.open(folder.path)
    assert sorted(reopened.read_records()) == ["gpu01", "gpu02", "gpu03"]
    assert set(store.read_digests(folder.path)) == {"gpu01.json", "gpu02.json", "gpu03.json"}


def test_a_digest_list_swapped_for_a_link_mid_run_is_not_written_through(tmp_path):
    """The digest list opened (no link followed) at the first record is the one written to; a link
    put in its place later is neither followed nor written (its target stays as it was), the records
    are still read (strictly: the folder holds no digest line of theirs), and a new writer refuses
    the link."""
    folder = new_folder(tmp_path)
    folder.write_record(record("gpu01"))
    target = tmp_path / "elsewhere.txt"
    target.write_text("theirs\n")
    listed = folder.path / "records.sha256"
    listed.unlink()
    listed.symlink_to(target)
    folder.write_record(record("gpu02"))
    assert target.read_text() == "theirs\n"
    folder.close()
    with pytest.raises(RunFolderError, match="records.sha256 .*symbolic link"):
        RunFolder(folder.path).write_record(record("gpu03"))
    assert "gpu02.json" not in store.read_digests(folder.path)
    assert sorted(RunFolder(folder.path).read_records()) == ["gpu01", "gpu02", "gpu03"]


def test_a_folder_object_dropped_without_close_gives_its_kept_descriptors_back(tmp_path):
    """A writer that never calls close (a script, a demo writing many runs) holds no descriptor per
    folder once the object is gone: only the lock, as before, stays until the process ends."""
    import gc

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    folder = new_folder(tmp_path)
    folder.write_record(record("gpu01"))
    before = open_fds()
    for i in range(20):
        other = RunFolder.create(tmp_path / f"run{i}")
        other.write_record(record("gpu01"))
        other.write_record(record("gpu02"))
        del other
    gc.collect()
    assert open_fds() - before <= 20, "each dropped folder kept more than its lock open"
    folder.close()
