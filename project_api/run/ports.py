"""Finding a real board's console among the host's serial ports.

A board's ``[serial]`` hints give USB VID:PID pairs (its debug probe's virtual COM port) and
optionally the probe's serial number. :func:`find_port` matches them against
``serial.tools.list_ports`` and returns the stable ``/dev/serial/by-id/...`` name of the one
port that matches (the ``/dev/ttyACM<n>`` numbering changes with plug order); zero or several
matches are an error listing what was seen, so the user can pin a serial number or a port.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from ..board import Board
from ..errors import TransportError

BY_ID_DIR = Path("/dev/serial/by-id")


@dataclass(frozen=True)
class PortCriteria:
    """What a port must match: a serial number (exact, case-insensitive), else any of the
    VID:PID pairs."""

    vid_pid: Tuple[Tuple[int, int], ...] = ()
    serial_number: Optional[str] = None

    def describe(self) -> str:
        if self.serial_number:
            return f"serial number {self.serial_number}"
        if self.vid_pid:
            return "USB VID:PID " + " or ".join(f"{v:04x}:{p:04x}" for v, p in self.vid_pid)
        return "anything"

    def matches(self, port: Any) -> bool:
        if self.serial_number:
            found = getattr(port, "serial_number", None) or ""
            return found.lower() == self.serial_number.lower()
        vid, pid = getattr(port, "vid", None), getattr(port, "pid", None)
        return vid is not None and (vid, pid) in self.vid_pid


def criteria_for(board: Board, serial_number: Optional[str] = None) -> PortCriteria:
    """The board's hints, with ``serial_number`` (e.g. from the command line) taking over."""
    return PortCriteria(
        vid_pid=board.serial.vid_pid, serial_number=serial_number or board.serial.serial_number
    )


def list_ports() -> List[Any]:
    """The host's serial ports (``ListPortInfo`` objects)."""
    from serial.tools import list_ports as pyserial_list_ports

    return list(pyserial_list_ports.comports())


def find_port(
    board: Board,
    *,
    serial_number: Optional[str] = None,
    ports: Optional[Sequence[Any]] = None,
    by_id_dir: Path = BY_ID_DIR,
) -> str:
    """The device path of ``board``'s console port, preferring its ``/dev/serial/by-id`` name.

    ``serial_number`` overrides the board's; ``ports`` (default: the host's) and
    ``by_id_dir`` exist for tests. Raises :class:`TransportError` naming the candidate ports
    when none or several match."""
    criteria = criteria_for(board, serial_number)
    if not criteria.serial_number and not criteria.vid_pid:
        raise TransportError(
            f"board {board.name} says nothing about its serial port",
            hint="add [serial] vid_pid or serial_number to its TOML, or pass the port explicitly",
        )
    seen = list(list_ports() if ports is None else ports)
    matching = [port for port in seen if criteria.matches(port)]
    if len(matching) > 1:
        matching = _prefer_uart_interface(matching)
    if not matching:
        raise TransportError(
            f"no serial port matches {board.name} ({criteria.describe()}); "
            f"ports seen: {_describe_ports(seen)}",
            hint="is the board plugged in and its probe's driver loaded? "
            "A serial number or an explicit port pins it",
        )
    if len(matching) > 1:
        raise TransportError(
            f"{len(matching)} serial ports match {board.name} ({criteria.describe()}): "
            f"{_describe_ports(matching)}",
            hint="pin one with its serial number ([serial] serial_number, or --serial-number) "
            "or pass the port explicitly",
        )
    return stable_name(matching[0].device, by_id_dir)


def stable_name(device: str, by_id_dir: Path = BY_ID_DIR) -> str:
    """``/dev/serial/by-id/<...>`` for ``device`` when udev made such a link, else ``device``."""
    try:
        entries = sorted(by_id_dir.iterdir())
    except OSError:
        return device
    target = os.path.realpath(device)
    for entry in entries:
        if os.path.realpath(entry) == target:
            return str(entry)
    return device


def _prefer_uart_interface(ports: List[Any]) -> List[Any]:
    """One USB probe can expose several ports (e.g. a CMSIS-DAP with a UART bridge and a
    GDB port); the one described as a UART is the console."""
    uart = [
        port
        for port in ports
        if "uart" in f"{getattr(port, 'interface', '') or ''} {port.description or ''}".lower()
    ]
    return uart if len(uart) == 1 else ports


def _describe_ports(ports: Sequence[Any]) -> str:
    if not ports:
        return "none"
    parts = []
    for port in ports:
        usb = (
            f"{port.vid:04x}:{port.pid:04x}"
            if getattr(port, "vid", None) is not None and getattr(port, "pid", None) is not None
            else "no USB id"
        )
        serial_number = getattr(port, "serial_number", None) or "-"
        description = getattr(port, "description", None) or "n/a"
        parts.append(f"{port.device} [{usb}, serial {serial_number}, {description}]")
    return "; ".join(parts)
