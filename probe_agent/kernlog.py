"""The kernel log's NVIDIA events, read bounded and folded as they are read.

A host can log hundreds of thousands of Xid lines (one report: 800k Xid 95 lines, 29 distinct), so
lines are never kept one by one: each event kind (the text from "Xid (" or "SXid (" to the first
comma after the code, e.g. "Xid (PCI:0000:18:00): 95") keeps its count and its first and last line,
and at most MAX_EVENTS kinds are kept (the rest are counted in `dropped`). An SXid's Data line is a
kind of its own (the event, where its first line was not read); a "fallen off the bus" message that
dmesg or journalctl print over three lines is kept joined to the line naming the GPU. The read stops
at MAX_BYTES or after SECONDS (`complete` is then false: the newest lines were not reached).

Sources, the first that can be read: /dev/kmsg (each record's time since boot kept as a dmesg
`[   12.345678]` stamp), `journalctl -k -b 0 -o short-monotonic`, /var/log/kern.log (its tail).
`boot` says which boot the log is of (boot id, boot time), so that times since boot become wall
times and a later sweep can tell a reboot.
"""

import errno
import os
import subprocess
import threading
import time

MARKERS = (b"Xid (", b"fallen off the bus")
MAX_EVENTS = 256
MAX_BYTES = 256 << 20
SECONDS = 1.0


class Fold(object):
    """Event kinds in the order first seen: key -> [first raw line, last raw line,
    count]. Lines stay bytes until `events()`: a flooded log costs a few byte searches
    and a dict lookup per line."""

    def __init__(self, text=None):
        self.kinds = {}
        self.dropped = 0
        self.cut = False
        self.text = text or plain_text

    def add(self, raw):
        key = event_key(raw)
        if key is None:
            return
        kind = self.kinds.get(key)
        if kind is not None:
            kind[1] = raw
            kind[2] += 1
        elif len(self.kinds) < MAX_EVENTS:
            self.kinds[key] = [raw, raw, 1]
        else:
            self.dropped += 1

    def events(self):
        return [[self.text(first), self.text(last), n] for first, last, n in self.kinds.values()]


def plain_text(raw):
    return raw.rstrip(b"\r\n").decode("utf-8", "replace")


def kmsg_text(raw):
    """A /dev/kmsg record ("3,1234,5678901,-;text") as dmesg shows it: "[    5.678901] text"."""
    head, _, text = raw.partition(b";")
    fields = head.split(b",")
    stamp = "[%12.6f] " % (int(fields[2]) / 1e6) if len(fields) > 2 and fields[2].isdigit() else ""
    return stamp + plain_text(text)


def event_key(raw):
    """The kind of one kept line (bytes): from "Xid (" (or "SXid (") to the first comma after the
    code, "Xid (PCI:0000:18:00): 95"; None for a line that reports no event (an SXid's detail
    lines). Byte searches, no regex: this runs for every line of a flooded log."""
    i = raw.find(b"Xid (")
    if i < 0:
        i = raw.find(b"NVRM:")
        return raw[i if i >= 0 else 0 :].rstrip(b"\r\n")[:160]
    comma = raw.find(b",", i + 6)
    # "S": an NVSwitch SXid, followed by two detail lines that are no event of their own
    if i and raw[i - 1] == 83:
        i -= 1
        if comma > 0 and raw.startswith(b" Severity", comma + 1):
            return None
        # counted apart: the event where its first line is not read
        if comma > 0 and raw.startswith(b" Data", comma + 1):
            return raw[i:comma][:155] + b" Data"
    return raw[i : comma if comma > 0 else len(raw.rstrip(b"\r\n"))][:160]


GPU_HEAD = b"NVRM: The NVIDIA GPU "


def joined(before, line):
    """A "fallen off the bus" line whose message began on an earlier line: dmesg and journalctl
    print a kernel message's further lines on lines of their own ("[ 1843.3] NVRM: The NVIDIA GPU
    0000:b3:00.0", " NVRM: (PCI ID: 10de:26b5) installed in this system has", " NVRM: fallen off the
    bus and ..."), so the GPU's address is on the message's first line. `before`: the two lines read
    before this one. The message joined from its first line, or the line as it is (/dev/kmsg keeps a
    message in one record)."""
    if GPU_HEAD in line:
        return line
    for n, head in enumerate(before):
        if GPU_HEAD in head:
            rest = [x.strip() for x in before[n + 1 :]] + [line.strip()]
            return head.rstrip(b"\r\n") + b" " + b" ".join(rest)
    return line


def answer(source, fold, tried, boot):
    return {
        "source": source,
        "events": fold.events(),
        "dropped": fold.dropped,
        "tried": tried,
        "complete": not fold.cut,
        "boot": boot,
    }


def read_kmsg(path):
    """/dev/kmsg, non-blocking, one record per read (a plain file in tests: several, cut anywhere);
    (Fold, None) or (None, error class name)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, type(exc).__name__
    fold, total, rest, deadline = Fold(kmsg_text), 0, b"", time.monotonic() + SECONDS
    try:
        while True:
            if total >= MAX_BYTES or time.monotonic() >= deadline:
                # the newest records were not reached: say so rather than pass for "no Xid"
                fold.cut = True
                break
            try:
                chunk = os.read(fd, 65536)
            except OSError as exc:
                # records overwritten while reading: go on with the next
                if exc.errno == errno.EPIPE:
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
        # not a KEY=value continuation
        if (MARKERS[0] in record or MARKERS[1] in record) and b";" in record:
            fold.add(record)


def fold_stream(lines, fold, deadline, limit=MAX_BYTES):
    """Fold the lines of a byte stream (journalctl's stdout, a log file), within its
    bounds. The hot loop of a flooded log: names bound locally, a kind already seen counted
    without a call to `add`."""
    total, xid, bus, kinds, key_of, add = 0, MARKERS[0], MARKERS[1], fold.kinds, event_key, fold.add
    # the two lines before this one (a message's first line, where it spans three)
    back2 = back1 = b""
    for n, line in enumerate(lines):
        total += len(line)
        if total > limit or ((n & 4095) == 0 and time.monotonic() >= deadline):
            fold.cut = True
            break
        if xid in line:
            kind = kinds.get(key_of(line))
            if kind is not None:
                kind[1] = line
                kind[2] += 1
            else:
                add(line)
        elif bus in line:
            add(joined((back2, back1), line))
        back2, back1 = back1, line
    return fold


def read_journal(argv):
    """`journalctl -k` streamed and folded; (Fold, None) or (None, why it failed). A journalctl that
    stops answering is ended a little after the time bound, and the read is then cut, not clean."""
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
    except OSError as exc:
        return None, ("%s: command not found" % argv[0]) if isinstance(
            exc, FileNotFoundError
        ) else str(exc)[:200]
    ended = []
    watchdog = threading.Timer(SECONDS + 2.0, lambda: ended.append(proc.kill()))
    watchdog.daemon = True
    watchdog.start()
    try:
        fold = fold_stream(proc.stdout, Fold(), time.monotonic() + SECONDS)
        if fold.cut:
            proc.kill()
        err = proc.stderr.read(4096).decode("utf-8", "replace")
        rc = proc.wait()
    finally:
        watchdog.cancel()
        proc.stdout.close()
        proc.stderr.close()
    fold.cut = fold.cut or bool(ended)
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
    """This boot: {"id": boot id, "booted_at": boot time in seconds since the epoch}, None
    where unreadable."""
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
    """The events of lines kept one by one (a capture of version 2, a test's text),
    folded as a log is."""
    raw = (line.encode("utf-8", "replace") for line in lines or () if isinstance(line, str))
    return fold_stream(raw, Fold(), time.monotonic() + 3600.0, limit=1 << 62).events()
