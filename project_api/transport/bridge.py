"""A running firmware's console handed to other programs (``mlf-project attach``).

:class:`ConsoleBridge` relays the bytes of a device :class:`~project_api.transport.link.Link`
both ways to

- a **pseudo-terminal** of its own (:attr:`ConsoleBridge.pty_path`), which any serial tool
  opens like a board's tty: the MLPerf Tiny runner (``serial.Serial(path)``), a terminal
  (``picocom``, ``screen``), a script; and
- optionally a **TCP port** on 127.0.0.1 (:attr:`ConsoleBridge.url`,
  ``socket://127.0.0.1:PORT``, pyserial's ``serial_for_url`` form; ``nc`` works too), one
  client at a time (a new one replaces the old).

What the device writes while nobody has the pty open (or no client is connected) is dropped,
as a real serial line would lose it: a tool that opens the port later must not read stale
answers as replies to its own commands. Pending output is capped at :data:`BACKLOG_LIMIT`
bytes per side. The bridge never interprets the bytes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import threading
import time
import tty
from typing import Any, List, Optional

from ..errors import TransportClosedError, TransportError, TransportTimeoutError

BACKLOG_LIMIT = 1 << 20
POLL_SECONDS = 0.1
HOST = "127.0.0.1"


class ConsoleBridge:
    """Relays ``link`` to a pty and (``tcp_port`` not None; 0 picks a free port) a TCP port on
    127.0.0.1. :meth:`start`, then :meth:`wait` until the device goes away; :meth:`close`."""

    def __init__(self, link: Any, *, tcp_port: Optional[int] = 0) -> None:
        self.link = link
        self.tcp_port = tcp_port
        self.pty_path: Optional[str] = None
        self.url: Optional[str] = None
        self.closed_reason: Optional[str] = None
        self.dropped = 0  # device bytes nobody was there to read
        self._master: Optional[int] = None
        self._server: Optional[socket.socket] = None
        self._client: Optional[socket.socket] = None
        self._to_pty = bytearray()
        self._to_client = bytearray()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._device_gone = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._threads: List[threading.Thread] = []

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        master, slave = os.openpty()
        try:
            tty.setraw(slave)  # kept after we close it: bytes pass untouched until a tool opens it
            self.pty_path = os.ttyname(slave)
        finally:
            os.close(slave)  # only a tool's opening makes the pty "connected"
        os.set_blocking(master, False)
        self._master = master
        if self.tcp_port is not None:
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((HOST, self.tcp_port))
            server.listen(1)
            self._server = server
            self.url = f"socket://{HOST}:{server.getsockname()[1]}"
        for target, name in ((self._from_device, "device"), (self._relay, "relay")):
            thread = threading.Thread(target=target, name=f"mlf-bridge-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Whether the device went away (its link closed) within ``timeout`` seconds."""
        return self._device_gone.wait(timeout)

    def close(self) -> None:
        """Stops relaying and closes the pty and the sockets (not the device link). Idempotent."""
        self._stop.set()
        self._wake()
        for thread in self._threads:
            thread.join(timeout=2.0)
        self._threads = []
        for sock in (self._client, self._server):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        self._client = self._server = None
        for fd in (self._master, self._wake_r, self._wake_w):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._master = None
        self._wake_r = self._wake_w = -1

    def __enter__(self) -> ConsoleBridge:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- device → tools ----------------------------------------------------------------------

    def _from_device(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.link.read_some(time.monotonic() + POLL_SECONDS, what="console output")
            except TransportTimeoutError:
                continue
            except TransportError as err:
                self.closed_reason = str(err)
                self._device_gone.set()
                self._wake()
                return
            with self._lock:
                for backlog, open_ in (
                    (self._to_pty, self._pty_open()),
                    (self._to_client, self._client is not None),
                ):
                    if open_:
                        backlog += data
                        excess = len(backlog) - BACKLOG_LIMIT
                        if excess > 0:
                            del backlog[:excess]
                            self.dropped += excess
                if not self._pty_open() and self._client is None:
                    self.dropped += len(data)
            self._wake()

    def _pty_open(self) -> bool:
        """Whether a tool holds the pty open (otherwise the master sees a hang-up)."""
        if self._master is None:
            return False
        poller = select.poll()
        poller.register(self._master, select.POLLIN)
        return not any(ev & select.POLLHUP for _, ev in poller.poll(0))

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"\0")

    # --- tools → device, and the writes ------------------------------------------------------

    def _relay(self) -> None:
        while not self._stop.is_set():
            readers: List[Any] = [self._wake_r]
            writers: List[Any] = []
            pty_open = self._pty_open()
            assert self._master is not None
            if pty_open:
                readers.append(self._master)
            if self._server is not None:
                readers.append(self._server)
            if self._client is not None:
                readers.append(self._client)
            with self._lock:
                if not pty_open:
                    self._to_pty.clear()  # its reader went away
                if self._to_pty and pty_open:
                    writers.append(self._master)
                if self._to_client and self._client is not None:
                    writers.append(self._client)
            try:
                readable, writable, _ = select.select(readers, writers, [], POLL_SECONDS)
            except (OSError, ValueError):
                return  # closed under us by close()
            if self._wake_r in readable:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 4096)
            try:
                self._serve(readable, writable)
            except TransportClosedError:
                return  # the device went away; _from_device says so

    def _serve(self, readable: List[Any], writable: List[Any]) -> None:
        master = self._master
        if master is not None and master in readable:
            try:
                data = os.read(master, 4096)
            except OSError as err:  # EIO: the tool closed the pty in between
                if err.errno not in (errno.EIO, errno.EAGAIN):
                    raise
                data = b""
            if data:
                self.link.write_all(data, what="input for the device")
        if self._server is not None and self._server in readable:
            client, _ = self._server.accept()
            client.setblocking(False)
            with self._lock:
                if self._client is not None:
                    with contextlib.suppress(OSError):
                        self._client.close()
                self._client = client
                self._to_client.clear()
        if self._client is not None and self._client in readable:
            received: Optional[bytes]
            try:
                received = self._client.recv(4096)
            except (BlockingIOError, InterruptedError):
                received = None
            except OSError:
                received = b""
            if received == b"":
                self._drop_client()
            elif received:
                self.link.write_all(received, what="input for the device")
        self._flush(writable)

    def _flush(self, writable: List[Any]) -> None:
        with self._lock:
            master = self._master
            if master is not None and master in writable and self._to_pty:
                try:
                    written = os.write(master, bytes(self._to_pty[:4096]))
                    del self._to_pty[:written]
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:  # the tool closed the pty in between
                    self._to_pty.clear()
            client = self._client
            if client is not None and client in writable and self._to_client:
                try:
                    sent = client.send(bytes(self._to_client[:65536]))
                    del self._to_client[:sent]
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    self._client = None
                    self._to_client.clear()
                    with contextlib.suppress(OSError):
                        client.close()

    def _drop_client(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            self._to_client.clear()
        if client is not None:
            with contextlib.suppress(OSError):
                client.close()
