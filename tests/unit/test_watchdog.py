"""The host-deadline watchdog (sweep/collect/ssh/watchdog.py): each attempt is shut at its own
deadline, whatever order the deadlines were registered in, and a finished attempt is not kept."""
import gc
import threading
import time
import weakref

from sweep.collect.ssh.watchdog import Watchdog


class _Probe:
    """An attempt stand-in that records when it was aborted."""

    def __init__(self):
        self.when = None
        self.done = threading.Event()

    def abort(self, reason):
        self.when = time.monotonic()
        self.reason = reason
        self.done.set()


def test_an_earlier_deadline_registered_after_a_later_one_fires_on_time():
    dog = Watchdog()
    start = time.monotonic()
    late, soon = _Probe(), _Probe()
    dog.watch(start + 30, late)
    time.sleep(0.05)  # the thread is asleep until the later deadline
    dog.watch(start + 0.3, soon)
    assert soon.done.wait(10), "the earlier deadline was missed"
    assert soon.reason == "deadline" and soon.when - start < 5
    assert late.when is None
    dog.abort_all()


def test_many_hosts_with_one_deadline_length_each_end_at_theirs():
    dog = Watchdog()
    start = time.monotonic()
    probes = [_Probe() for _ in range(50)]
    for i, probe in enumerate(probes):
        dog.watch(start + 0.2 + i * 0.01, probe)
    assert all(p.done.wait(10) for p in probes)
    assert [p.when for p in probes] == sorted(p.when for p in probes)


def test_a_finished_attempt_is_freed_at_unwatch_not_at_its_deadline():
    dog = Watchdog()
    probe = _Probe()
    token = dog.watch(time.monotonic() + 600, probe)
    dog.watch(time.monotonic() + 600, _Probe())
    time.sleep(0.2)  # the thread is asleep until the first of the two deadlines, ten minutes off
    ref = weakref.ref(probe)
    dog.unwatch(token)
    del probe
    gc.collect()
    assert ref() is None, "the watchdog still holds an attempt that ended"
    dog.abort_all()
