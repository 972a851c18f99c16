"""sweep.collect.signals.Gate: Ctrl-C and SIGTERM held off inside each record's block, delivered at
its end by their own handlers, and given back to those handlers when the gate closes; one set of
handlers for the whole collect, not two installed and restored per record."""

from __future__ import annotations

import signal

import pytest

from sweep.collect.signals import Gate, sigterm_as_interrupt


@pytest.fixture(autouse=True)
def _handlers_back():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.fixture
def gate():
    gate = Gate()
    yield gate
    gate.close()


def test_ctrl_c_inside_a_block_waits_for_its_end(gate):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with gate:
            signal.raise_signal(signal.SIGINT)
            done.append("record written")  # the block runs to its end first
            done.append("record counted")
    assert done == ["record written", "record counted"]


def test_ctrl_c_outside_a_block_is_raised_at_once(gate):
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
    with gate:  # the gate holds nothing over from it
        pass


def test_nested_blocks_deliver_at_the_outermost_end_once(gate):
    seen = []
    with pytest.raises(KeyboardInterrupt):
        with gate:
            with gate:
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)
            seen.append("inner block ended, still held")
    assert seen == ["inner block ended, still held"]
    with gate:  # the second Ctrl-C of the block is not raised again later
        pass


def test_close_gives_the_signals_back_to_their_handlers():
    calls = []

    def mine(signum, frame):
        calls.append(signum)

    signal.signal(signal.SIGTERM, mine)
    gate = Gate()
    assert signal.getsignal(signal.SIGTERM) != mine
    gate.close()
    assert signal.getsignal(signal.SIGTERM) == mine
    assert signal.getsignal(signal.SIGINT) == signal.default_int_handler
    signal.raise_signal(signal.SIGTERM)
    assert calls == [signal.SIGTERM]


def test_sigterm_ends_the_sweep_once_and_a_second_stays_ignored():
    """Under sigterm_as_interrupt the first SIGTERM is a KeyboardInterrupt and sets SIGTERM ignored:
    closing the gate must not undo that (a second SIGTERM would cut the drain short)."""
    with sigterm_as_interrupt():
        gate = Gate()
        with pytest.raises(KeyboardInterrupt):
            with gate:
                signal.raise_signal(signal.SIGTERM)
        gate.close()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN


def test_an_ignored_signal_stays_ignored():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    gate = Gate()
    try:
        with gate:
            signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        gate.close()
