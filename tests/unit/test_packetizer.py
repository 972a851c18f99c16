"""sweep's paramiko Packetizer (issue 52): the handshake still has its time limit without a timer
thread per host, and packets read through its buffer arrive whole and in order."""
import socket
import threading
import time

import pytest

from sweep.collect.ssh.packets import FastTransport, SweepPacketizer


def test_a_server_that_stops_after_its_banner_fails_the_handshake_at_its_limit(monkeypatch):
    def no_timer(*args, **kwargs):
        raise AssertionError("a threading.Timer was started for a handshake")

    monkeypatch.setattr(threading, "Timer", no_timer)
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")  # then nothing: no KEXINIT ever comes
        transport = FastTransport(ours)
        transport.handshake_timeout = 0.5
        start = time.monotonic()
        with pytest.raises(EOFError):  # as paramiko's own Packetizer ends it
            transport.start_client(timeout=10)
        took = time.monotonic() - start
        assert 0.5 <= took < 5, took
        assert isinstance(transport.packetizer, SweepPacketizer)
        transport.close()
    finally:
        theirs.close()


def test_packets_split_and_joined_anyhow_on_the_socket_read_back_whole():
    """Bytes as the socket gives them (one byte at a time, or many packets in one recv) come out
    as the sizes asked for, in order; what was read past a packet is kept for the next one."""
    ours, theirs = socket.socketpair()
    ours.settimeout(0.1)
    packetizer = SweepPacketizer(ours)
    chunks = [bytes([i % 251]) * size for i, size in enumerate((16, 1, 4000, 70000, 16, 3))]
    stream = b"".join(chunks)

    def send():
        theirs.sendall(stream[:5])
        for i in range(5, 40):
            theirs.sendall(stream[i:i + 1])
            time.sleep(0.001)
        theirs.sendall(stream[40:])

    sender = threading.Thread(target=send)
    sender.start()
    got = [packetizer.read_all(len(c)) for c in chunks]
    sender.join()
    assert got == chunks
    theirs.close()
    with pytest.raises(EOFError):
        packetizer.read_all(1)
    ours.close()


def test_the_banner_line_and_the_first_packet_share_a_read():
    """The banner is read by paramiko's readline; bytes after it wait in the remainder that
    read_all takes first."""
    ours, theirs = socket.socketpair()
    ours.settimeout(0.1)
    packetizer = SweepPacketizer(ours)
    theirs.sendall(b"SSH-2.0-test\r\n" + b"P" * 20)
    assert packetizer.readline(1.0) == "SSH-2.0-test"
    assert packetizer.read_all(20) == b"P" * 20
    ours.close()
    theirs.close()


def _debug_message(text):
    import paramiko

    m = paramiko.Message()
    m.add_boolean(False)
    m.add_string(text)
    m.add_string("")
    m.rewind()
    return m


def test_sshd_debug_messages_are_worded_only_for_a_log_that_takes_them(monkeypatch, caplog):
    """OpenSSH sends SSH_MSG_DEBUG at each key login; it is read whole either way, and put in
    words (paramiko's safe_string, a byte at a time) only when DEBUG is logged."""
    import logging

    import paramiko

    worded = []
    real = paramiko.util.safe_string
    monkeypatch.setattr(paramiko.util, "safe_string", lambda s: worded.append(s) or real(s))
    ours, theirs = socket.socketpair()
    transport = FastTransport(ours)
    transport.logger.setLevel(logging.INFO)
    message = _debug_message("/root/.ssh/authorized_keys:1: key options: pty")
    transport._parse_debug(message)
    assert worded == [] and message.get_remainder() == b""
    transport.logger.setLevel(logging.DEBUG)
    with caplog.at_level(logging.DEBUG, logger=transport.logger.name):
        transport._parse_debug(_debug_message("key options: pty"))
    assert worded == [b"key options: pty"]
    assert any("Debug msg" in r.getMessage() and "key options: pty" in r.getMessage() for r in caplog.records)
    ours.close()
    theirs.close()


def test_the_tick_is_long_once_packets_flow_and_a_closed_try_wakes_its_reader_at_once():
    """After the first packet, the transport thread wakes once a second (IDLE_TICK_S), not ten times;
    ending the try (`Attempt.close`) shuts each client's socket before closing it, so a reader
    waiting in recv ends now, not at its next tick."""
    from sweep.collect.ssh.packets import IDLE_TICK_S
    from sweep.collect.ssh.watchdog import Attempt

    ours, theirs = socket.socketpair()
    ours.settimeout(0.1)  # paramiko's, until a packet is handled
    packetizer = SweepPacketizer(ours)
    packetizer.complete_handshake()
    assert ours.gettimeout() == IDLE_TICK_S >= 1.0
    ours.settimeout(30)  # a tick far longer than the test: only the shutdown can wake the reader
    import paramiko

    client = paramiko.SSHClient()  # the try's client, its transport on the socket (never started)
    client._transport = FastTransport(ours)
    attempt = Attempt()
    attempt.add(client)
    attempt.add(ours)
    ended = []

    def reader():
        try:
            packetizer.read_all(4)
        except (EOFError, OSError):  # EOF, or the descriptor closed right after the shutdown woke it
            ended.append(time.monotonic())

    thread = threading.Thread(target=reader)
    thread.start()
    time.sleep(0.2)  # the reader is in recv
    closed = time.monotonic()
    attempt.close()
    thread.join(10)
    assert ended and ended[0] - closed < 5, "the reader waited for its tick"
    theirs.close()


def test_a_server_that_hangs_up_mid_handshake_ends_start_client_at_once():
    """The handshake is waited for in one wait: a server that closes the connection after its banner
    ends start_client as soon as the transport thread ends (the error paramiko raises), not at the
    handshake's time limit."""
    import paramiko

    ours, theirs = socket.socketpair()
    theirs.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
    transport = FastTransport(ours)
    transport.handshake_timeout = 30
    start = time.monotonic()
    threading.Timer(0.3, theirs.close).start()
    with pytest.raises((paramiko.SSHException, EOFError, OSError)):  # as paramiko saw the end
        transport.start_client(timeout=30)
    assert time.monotonic() - start < 10
    transport.close()
