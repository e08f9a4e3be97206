"""Real boards: flashing with openocd or pyOCD, and a runner on the board's serial port.

The board's ``[run]`` table names the preferred tool (``kind = "openocd"`` or ``"pyocd"``)
and how to address the chip with each (``openocd_args``, ``pyocd_target``); when the
preferred tool is not installed, the other one is used if the board describes it. Tools run
through :func:`run.base.spawn`, so a hung flasher is killed at its time-out.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, List, Optional, Union

from ..board import Board
from ..errors import FlashError, TransportError
from .base import Runner, reap, spawn
from .ports import find_port

TOOLS = ("openocd", "pyocd")
_INSTALL_HINTS = {
    "openocd": "apt-get install openocd",
    "pyocd": "pip install pyocd, then `pyocd pack install <target>` for the chip",
}


def configured_tools(board: Board) -> List[str]:
    """The flash tools this board describes, the preferred one first."""
    described = []
    if board.run.openocd_args:
        described.append("openocd")
    if board.run.pyocd_target:
        described.append("pyocd")
    return sorted(described, key=lambda tool: tool != board.run.kind)


def choose_tool(board: Board, tool: Optional[str] = None) -> str:
    """The tool to use: ``tool`` if given, else the first configured one that is installed.
    :class:`FlashError` names what is missing."""
    if not board.is_real:
        raise FlashError(f"board {board.name!r} is not flashed ({board.run.kind} board)")
    candidates = configured_tools(board)
    if tool is not None:
        if tool not in candidates:
            raise FlashError(
                f"board {board.name} does not describe how to use {tool}",
                hint=f"configured: {', '.join(candidates) or 'none'}",
            )
        candidates = [tool]
    for candidate in candidates:
        if shutil.which(candidate) is not None:
            return candidate
    missing = " or ".join(candidates)
    raise FlashError(
        f"cannot flash {board.name}: {missing} is not installed",
        hint="; ".join(f"{name}: {_INSTALL_HINTS[name]}" for name in candidates),
    )


def flash_command(
    board: Board, firmware: Path, tool: str, serial_number: Optional[str] = None
) -> List[str]:
    """The command line that programs ``firmware`` (an ELF) and starts it."""
    serial_number = serial_number or board.serial.serial_number
    if tool == "openocd":
        command = ["openocd", *board.run.openocd_args]
        if serial_number:
            command += ["-c", f"adapter serial {serial_number}"]
        return command + ["-c", f"program {{{firmware}}} verify reset exit"]
    if tool == "pyocd":
        assert board.run.pyocd_target is not None
        command = ["pyocd", "flash", "--target", board.run.pyocd_target]
        if serial_number:
            command += ["--uid", serial_number]
        return command + [str(firmware)]
    raise FlashError(f"unknown flash tool {tool!r} (known: {', '.join(TOOLS)})")


def reset_command(board: Board, tool: str, serial_number: Optional[str] = None) -> List[str]:
    """The command line that resets the board (so its firmware greets again)."""
    serial_number = serial_number or board.serial.serial_number
    if tool == "openocd":
        command = ["openocd", *board.run.openocd_args]
        if serial_number:
            command += ["-c", f"adapter serial {serial_number}"]
        return command + ["-c", "init", "-c", "reset run", "-c", "shutdown"]
    if tool == "pyocd":
        assert board.run.pyocd_target is not None
        command = ["pyocd", "reset", "--target", board.run.pyocd_target]
        if serial_number:
            command += ["--uid", serial_number]
        return command
    raise FlashError(f"unknown flash tool {tool!r} (known: {', '.join(TOOLS)})")


def flash(
    board: Board,
    firmware: Union[str, Path],
    *,
    tool: Optional[str] = None,
    serial_number: Optional[str] = None,
    timeout: float = 120.0,
) -> str:
    """Programs ``firmware`` into ``board`` and starts it; returns the tool used."""
    firmware = Path(firmware)
    if not firmware.is_file():
        raise FlashError(f"firmware {firmware} does not exist", hint="build it first")
    chosen = choose_tool(board, tool)
    _run_tool(flash_command(board, firmware.resolve(), chosen, serial_number), timeout, "flash")
    return chosen


def reset(
    board: Board,
    *,
    tool: Optional[str] = None,
    serial_number: Optional[str] = None,
    timeout: float = 30.0,
) -> str:
    """Resets ``board``; returns the tool used."""
    chosen = choose_tool(board, tool)
    _run_tool(reset_command(board, chosen, serial_number), timeout, "reset")
    return chosen


def _run_tool(command: List[str], timeout: float, what: str) -> str:
    proc = spawn(command, stderr=subprocess.STDOUT)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as err:
        raise FlashError(
            f"{command[0]} did not finish the {what} within {timeout:g} s: {' '.join(command)}"
        ) from err
    finally:
        reap(proc)
    text = (output or b"").decode("utf-8", "replace")
    if proc.returncode != 0:
        tail = " | ".join(line for line in text.strip().splitlines()[-8:] if line.strip())
        raise FlashError(
            f"{command[0]} {what} failed with status {proc.returncode}: {tail or 'no output'}",
            hint=" ".join(command),
        )
    return text


class RealBoardRunner(Runner):
    """A firmware already flashed on a real board (see :func:`flash`): ``start`` opens the
    board's serial port (found by :func:`ports.find_port` unless ``port`` is given) and, with
    ``reset=True``, resets the board after opening it so the firmware's greeting is not
    missed. The board keeps running after :meth:`stop`: only the port is closed."""

    def __init__(
        self,
        board: Board,
        *,
        port: Optional[str] = None,
        serial_number: Optional[str] = None,
        reset: bool = True,
        tool: Optional[str] = None,
        read_timeout: float = 1.0,
    ) -> None:
        if not board.is_real:
            raise FlashError(f"board {board.name!r} is not a real board ({board.run.kind})")
        self.board = board
        self.port_name = port
        self.serial_number = serial_number
        self.reset = reset
        self.tool = tool
        self.read_timeout = read_timeout
        self._serial: Any = None
        self._log: List[str] = []

    def start(self, timeout: float = 10.0) -> Any:
        import serial

        deadline = time.monotonic() + timeout
        name = self.port_name or find_port(self.board, serial_number=self.serial_number)
        try:
            self._serial = serial.Serial(
                name, baudrate=self.board.console.baud, timeout=self.read_timeout
            )
        except (serial.SerialException, OSError) as err:
            raise TransportError(
                f"cannot open {self.board.name}'s serial port {name}: {err}"
            ) from err
        try:
            self._serial.reset_input_buffer()
            if self.reset:
                remaining = max(1.0, deadline - time.monotonic())
                used = reset(
                    self.board,
                    tool=self.tool,
                    serial_number=self.serial_number,
                    timeout=remaining,
                )
                self._log.append(f"reset {self.board.name} with {used}")
        except BaseException:
            self.stop()
            raise
        return self._serial

    def stop(self) -> Optional[int]:
        serial_port, self._serial = self._serial, None
        if serial_port is not None:
            try:
                serial_port.close()
            except Exception:  # a port whose device vanished may fail to close cleanly
                self._log.append("closing the serial port failed")
        return None

    @property
    def log(self) -> str:
        return "\n".join(self._log)
