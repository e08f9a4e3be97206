"""The byte link under a session: a ``serial.Serial`` (host pty, QEMU pty, board tty) or
anything with the same ``read``/``write``/``timeout``/``close`` surface.

:class:`Link` adds deadlines: every read and write either completes or raises
:class:`TransportTimeoutError` by its deadline, and a vanished peer (pty hang-up, EIO,
unplugged USB adapter) raises :class:`TransportClosedError` at once instead of hanging.
"""

from __future__ import annotations

import contextlib
import errno
import time
from typing import Any, Callable, Optional

import serial
from serial import SerialException, SerialTimeoutException

from ..errors import TransportClosedError, TransportTimeoutError

# How long one blocking read may wait before the deadline is looked at again.
POLL_SECONDS = 0.05


try:
    from termios import error as _TermiosError
except ImportError:  # pragma: no cover - not a POSIX host

    class _TermiosError(Exception):  # type: ignore[no-redef]
        """Never raised where termios is missing."""


def open_serial(
    port: str,
    *,
    baudrate: int = 115200,
    timeout: float = POLL_SECONDS,
    write_timeout: float = 10.0,
    keep_pending: bool = True,
) -> Any:
    """Opens a serial port (a board's tty, ``/dev/serial/by-id/...``, a pty path, or a
    pyserial URL such as ``socket://host:port``) raw, 8N1, without flow control.

    pyserial's ``open()`` flushes the input queue; with ``keep_pending`` (the default) bytes
    the device wrote before we opened — a boot HELLO, a standalone firmware's whole output
    waiting in a pty — are kept instead."""
    try:
        if "://" in port:
            return serial.serial_for_url(port, baudrate=baudrate, timeout=timeout)
        device = serial.Serial(baudrate=baudrate, timeout=timeout, write_timeout=write_timeout)
        device.port = port
        if keep_pending and hasattr(device, "_reset_input_buffer"):
            device._reset_input_buffer = lambda: None  # instance attribute: open() calls it
        device.open()
        if keep_pending and "_reset_input_buffer" in vars(device):
            del device._reset_input_buffer  # later explicit resets flush as usual
        return device
    except (SerialException, OSError, ValueError, _TermiosError) as exc:
        # termios.error is no OSError: a pty hung up while pyserial configures it raises it.
        raise TransportClosedError(f"cannot open serial port {port}: {exc}") from exc


class Link:
    """Deadline-bounded reads and writes over a serial-like ``port``.

    ``port`` must offer ``read(n)`` (returning b"" on its own time-out), ``write(data)``,
    ``close()`` and a settable ``timeout``; ``in_waiting`` and ``write_timeout`` are used
    when present. ``on_closed`` may return a sentence explaining why the link died (e.g.
    the device process's exit status); it is appended to TransportClosedError messages.
    """

    def __init__(
        self,
        port: Any,
        *,
        write_timeout: float = 10.0,
        on_closed: Optional[Callable[[], str]] = None,
    ) -> None:
        self.port = port
        self.on_closed = on_closed
        self.closed = False
        self.bytes_read = 0
        self.bytes_written = 0
        self.waited = 0.0  # how long the last read_some listened before data came
        try:
            port.timeout = POLL_SECONDS
            if hasattr(port, "write_timeout"):
                port.write_timeout = write_timeout
        except (SerialException, OSError, ValueError) as exc:
            raise self._closed(f"cannot configure the link: {exc}") from exc

    def _closed(self, what: str) -> TransportClosedError:
        self.closed = True
        reason = ""
        if self.on_closed is not None:
            try:
                reason = self.on_closed()
            except Exception:  # noqa: BLE001 - the explanation must never mask the error
                reason = ""
        return TransportClosedError(f"{what}{': ' + reason if reason else ''}")

    def read_some(self, deadline: float, *, what: str = "data") -> bytes:
        """At least one byte (whatever is waiting), or TransportTimeoutError at deadline."""
        if self.closed:
            raise TransportClosedError("the link is closed")
        started = time.monotonic()
        while True:
            try:
                waiting = getattr(self.port, "in_waiting", 0) or 0
                data = self.port.read(max(1, waiting))
                if data:
                    more = getattr(self.port, "in_waiting", 0) or 0
                    if more:
                        data += self.port.read(more)
            except (SerialException, OSError) as exc:
                raise self._closed(f"the device link closed while waiting for {what}") from exc
            except (TypeError, AttributeError, ValueError) as exc:
                # pyserial raises these when its fd was closed under it by another thread
                raise self._closed(f"the device link closed while waiting for {what}") from exc
            if data:
                self.bytes_read += len(data)
                self.waited = time.monotonic() - started
                return bytes(data)
            if time.monotonic() >= deadline:
                raise TransportTimeoutError(f"timed out waiting for {what}")

    def write_all(self, data: bytes, *, what: str = "a request") -> None:
        if self.closed:
            raise TransportClosedError("the link is closed")
        try:
            # No flush(): pyserial's is tcdrain(), which on a pty waits, without any time
            # limit, until the device has read everything.
            written = self.port.write(data)
        except SerialTimeoutException as exc:
            raise TransportTimeoutError(
                f"timed out writing {what}: the device does not read its input"
            ) from exc
        except (SerialException, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EAGAIN:
                raise TransportTimeoutError(f"timed out writing {what}") from exc
            raise self._closed(f"the device link closed while sending {what}") from exc
        except (TypeError, AttributeError, ValueError) as exc:
            raise self._closed(f"the device link closed while sending {what}") from exc
        if written is not None and written != len(data):
            raise TransportTimeoutError(
                f"wrote only {written} of {len(data)} bytes of {what}: the device stopped reading"
            )
        self.bytes_written += len(data)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(SerialException, OSError):
            self.port.close()
