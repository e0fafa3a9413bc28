"""The socket host link's one-host rule, shared by the virtual board (main.py) and the emulated
boards' machine (boards/emulated/emulated_machine.py), docs/PROTOCOL.md "One host at a time": a
holder heard from within LINK_IDLE_MS keeps the link; a second connection is told who holds it
and closed."""
import os
import select
import socket
import time

RDHUP = 0x2000  # POLLRDHUP (Linux): the peer hung up, though what it sent may wait unread
LINK_IDLE_MS = int(os.getenv("SABOT_LINK_IDLE_MS") or 10000)


class Holder:
    """Who holds the link: its connection, its IP:PORT, when it connected and when it last sent
    bytes (ticks_ms)."""

    def __init__(self):
        self.conn = None
        self.peer = ""
        self.since = 0
        self.heard = 0

    def admit(self, server):
        """A host connecting: its connection (non-blocking), for the caller to take as the
        link's in place of a holder silent for LINK_IDLE_MS (its host gone). None when the
        holder keeps the link (the newcomer is told so and hung up on), or when the holder hung
        up: its last bytes and its hang-up are read first, and the newcomer is taken on a later
        pass."""
        if self.conn is not None and hung_up(self.conn):
            return None
        conn, addr = server.accept()
        now = time.ticks_ms()
        if self.conn is not None and time.ticks_diff(now, self.heard) < LINK_IDLE_MS:
            refuse(conn, self.peer, time.ticks_diff(now, self.since) // 1000)
            return None
        conn.setblocking(False)
        self.peer = peer_name(addr)
        self.since = self.heard = now
        return conn


def hung_up(conn):
    """The holder has hung up (its last bytes may still wait to be read)."""
    watch = select.poll()
    watch.register(conn, RDHUP)
    events = watch.poll(0)
    return bool(events) and bool(events[0][1] & (RDHUP | select.POLLHUP | select.POLLERR))


def peer_name(addr):
    """IP:PORT of an accepted connection's peer ([IP]:PORT for IPv6)."""
    try:
        family, ip, port = socket.sockaddr(addr)[:3]
        name = socket.inet_ntop(family, ip)
    except (OSError, ValueError, TypeError):
        return "unknown"
    return ("[%s]:%d" if ":" in name else "%s:%d") % (name, port)


def refuse(conn, holder, seconds):
    """The taken line to a connection, then its close: what it sent is read first, so the close
    is a clean one (a reset instead could cost its host the line)."""
    conn.setblocking(False)
    try:
        conn.send(("sabot-link taken by %s for %d s\n" % (holder, seconds)).encode())
        for _ in range(8):  # a hello or two; a host that floods it is reset instead
            if not conn.recv(256):
                break
    except OSError:
        pass  # nothing more waiting (EAGAIN), or the host is gone already
    conn.close()
