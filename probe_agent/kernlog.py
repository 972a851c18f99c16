"""The kernel log's NVIDIA events, read bounded and folded as they are read.

A host can log hundreds of thousands of Xid lines (one report: 800k Xid 95 lines, 29 distinct), so
lines are never kept one by one: each event kind (the text from "Xid (" or "SXid (" to the first
comma after the code, e.g. "Xid (PCI:0000:18:00): 95") keeps its count and its first and last
line, and at most MAX_EVENTS kinds are kept (the rest are counted in `dropped`). The read stops
at MAX_BYTES or after SECONDS (`complete` is then false: the newest lines were not reached).

Sources, the first that can be read: /dev/kmsg (each record's time since boot kept as a dmesg
`[   12.345678]` stamp), `journalctl -k -b 0 -o short-monotonic`, /var/log/kern.log (its tail).
`boot` says which boot the log is of (boot id, boot time), so that times since boot become wall
times and a later sweep can tell a reboot.
"""
import errno
import os
import subprocess
import time

MARKERS = (b"Xid (", b"fallen off the bus")
MAX_EVENTS = 256
MAX_BYTES = 256 << 20
SECONDS = 1.0


class Fold(object):
    """Event kinds in the order first seen: key -> [first line, last line, count]."""

    def __init__(self):
        self.kinds = {}
        self.dropped = 0
        self.cut = False

    def add(self, text):
        key = event_key(text)
        if key is None:
            return
        kind = self.kinds.get(key)
        if kind is not None:
            kind[1] = text
            kind[2] += 1
        elif len(self.kinds) < MAX_EVENTS:
            self.kinds[key] = [text, text, 1]
        else:
            self.dropped += 1

    def events(self):
        return [list(v) for v in self.kinds.values()]


def event_key(text):
    """The kind of one kept line, or None for a line that reports no event (an SXid's detail lines)."""
    i = text.find("Xid (")
    if i < 0:
        i = text.find("NVRM:")
        return text[i if i >= 0 else 0:][:160]
    if i > 0 and text[i - 1] == "S":
        i -= 1
    close = text.find("):", i)
    comma = text.find(",", close if close > 0 else i)
    key = text[i:comma if comma > 0 else None][:160]
    if key[0] == "S" and comma > 0 and text.startswith((" Severity", " Data"), comma + 1):
        return None  # NVSwitch prints two detail lines after each SXid: one event, not three
    return key


def answer(source, fold, tried, boot):
    return {"source": source, "events": fold.events(), "dropped": fold.dropped, "tried": tried,
            "complete": not fold.cut, "boot": boot}


def read_kmsg(path):
    """/dev/kmsg, non-blocking, one record per read (a plain file in tests: several, cut anywhere);
    (Fold, None) or (None, error class name)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, type(exc).__name__
    fold, total, rest, deadline = Fold(), 0, b"", time.monotonic() + SECONDS
    try:
        while True:
            if total >= MAX_BYTES or time.monotonic() >= deadline:
                fold.cut = True  # the newest records were not reached: say so rather than pass for "no Xid"
                break
            try:
                chunk = os.read(fd, 65536)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on with the next
                    continue
                if exc.errno == errno.EAGAIN:  # the end of the buffer
                    break
                return None, type(exc).__name__
            if not chunk:
                break
            total += len(chunk)
            records = (rest + chunk).split(b"\n")
            rest = records.pop()
            _kmsg_records(records, fold)
        _kmsg_records([rest], fold)
    finally:
        os.close(fd)
    return fold, None


def _kmsg_records(records, fold):
    for record in records:
        if MARKERS[0] not in record and MARKERS[1] not in record:
            continue
        head, sep, text = record.partition(b";")
        if not sep:
            continue  # a record's KEY=value continuation line
        fields = head.split(b",")
        stamp = ""
        if len(fields) > 2 and fields[2].isdigit():
            stamp = "[%12.6f] " % (int(fields[2]) / 1e6)
        fold.add(stamp + text.decode("utf-8", "replace"))


def fold_stream(lines, fold, deadline, limit=MAX_BYTES):
    """Fold the lines of a byte stream (journalctl's stdout, a log file), within its bounds."""
    total = 0
    for n, line in enumerate(lines):
        total += len(line)
        if total > limit or ((n & 4095) == 0 and time.monotonic() >= deadline):
            fold.cut = True
            break
        if MARKERS[0] in line or MARKERS[1] in line:
            fold.add(line.rstrip(b"\r\n").decode("utf-8", "replace"))
    return fold


def read_journal(argv):
    """`journalctl -k` streamed and folded; (Fold, None) or (None, why it failed)."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    except OSError as exc:
        return None, ("%s: command not found" % argv[0]) if isinstance(exc, FileNotFoundError) else str(exc)[:200]
    try:
        fold = fold_stream(proc.stdout, Fold(), time.monotonic() + SECONDS)
        if fold.cut:
            proc.kill()
        err = proc.stderr.read(4096).decode("utf-8", "replace")
        rc = proc.wait()
    finally:
        proc.stdout.close()
        proc.stderr.close()
    if rc != 0 and not fold.cut:
        first = err.strip().splitlines()[0] if err.strip() else "exit %s" % rc
        return None, first[:200]
    return fold, None


def read_tail(path):
    """The last MAX_BYTES of a text log, folded; (Fold, None) or (None, error class name)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            start = max(0, fh.tell() - MAX_BYTES)
            fh.seek(start)
            if start:
                fh.readline()  # the first line read is cut: skip it
            return fold_stream(fh, Fold(), time.monotonic() + SECONDS), None
    except OSError as exc:
        return None, type(exc).__name__


def boot(real_path):
    """This boot: {"id": boot id, "booted_at": boot time in seconds since the epoch}, None where unreadable."""
    out = {"id": None, "booted_at": None}
    try:
        with open(real_path("/proc/sys/kernel/random/boot_id")) as fh:
            out["id"] = fh.read(64).strip() or None
    except (OSError, UnicodeDecodeError):
        pass
    try:
        with open(real_path("/proc/stat"), "rb") as fh:
            for line in fh:
                if line.startswith(b"btime "):
                    out["booted_at"] = int(line.split()[1])
                    break
    except (OSError, ValueError, IndexError):
        pass
    return out


def legacy_fold(lines):
    """The events of a capture that kept the matching lines one by one (capture version 2)."""
    fold = Fold()
    for line in lines or ():
        fold.add(line)
    return fold.events()
