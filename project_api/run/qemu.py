"""Running a firmware under QEMU (``qemu-system-arm``, ``qemu-system-riscv32``).

:class:`QemuRunner` starts the board's QEMU machine with the firmware's console UART on a
pseudo-terminal we open (QEMU gets its master side as an inherited descriptor through
``-add-fd``, so it opens nothing itself and a byte we send before the guest listens waits in
the pty), semihosting on (diagnostics and the exit status) and optionally ``-icount`` (one
instruction per virtual nanosecond, so tick counts are exact instruction counts), and hands
back the pty's slave side opened with pyserial. QEMU is started through
:func:`run.base.spawn`, confined (:func:`project_api.sandbox.policies.qemu`: semihosting's
file calls fail inside the guest), and killed and reaped on :meth:`QemuRunner.stop`, on error
and on interpreter exit.

Facts this relies on (measured with QEMU 7.2): ``-serial /dev/fdset/N`` with
``-add-fd fd=M,set=N`` drives the UART over descriptor M (``file:/dev/fdset/N`` writes it to
a file the same way); semihosting output goes to **stderr**; the exit status of QEMU is the
firmware's ``SYS_EXIT_EXTENDED`` status; a CPU lockup (a fault while entering the fault
handler, e.g. a stack overflow on ARMv7-M) makes QEMU print ``qemu: fatal: Lockup`` and abort
(SIGABRT).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import tty
from pathlib import Path
from typing import IO, Any, List, Optional, Sequence, Union

from ..board import ARCHITECTURES, Board
from ..errors import FlashError, TransportError
from ..sandbox import policies, prepare
from .base import Runner, reap, spawn

# Exit statuses reserved by the board seams (boards/families/cortex_m/mlf_cortex_m.h,
# boards/families/riscv/mlf_riscv.h).
EXIT_FAULT = 0xFA
EXIT_ABORT = 0xFB

# The descriptor set whose first descriptor QEMU's console UART uses (-add-fd ... set=N).
CONSOLE_FD_SET = 1
_LOG_LIMIT = 256 * 1024  # keep the tail of a chatty firmware's semihosting output
# Lines QEMU prints on every run of a machine, which say nothing about the firmware.
_NOISE = ("Timer with period zero, disabling",)


class QemuRunner(Runner):
    """A firmware running on a QEMU machine; ``start`` returns its console as a
    ``serial.Serial``. Use as a context manager, or call :meth:`stop`."""

    def __init__(
        self,
        board: Board,
        firmware: Union[str, Path],
        *,
        icount: bool = False,
        extra_args: Sequence[str] = (),
        read_timeout: float = 1.0,
        sandbox: Optional[bool] = None,
    ) -> None:
        if not board.is_qemu:
            raise FlashError(f"board {board.name!r} does not run under QEMU ({board.run.kind})")
        self.board = board
        self.firmware = Path(firmware)
        self.icount = icount
        self.read_timeout = read_timeout
        self.sandbox = sandbox
        self.command: List[str] = board.qemu_command(
            self.firmware, icount=icount, serial=fd_serial(CONSOLE_FD_SET), extra_args=extra_args
        )
        self.pty_path: Optional[str] = None
        self.startup_seconds: Optional[float] = None
        self._proc: Optional[subprocess.Popen] = None
        self._serial: Any = None
        self._readers: List[threading.Thread] = []
        self._log = bytearray()
        self._log_lock = threading.Lock()
        self._killed = False
        self._stopped = False

    # --- Runner -------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> Any:
        """Starts QEMU and returns the opened console pty. Raises :class:`FlashError` when
        QEMU or the firmware is missing and :class:`TransportError` when the pty cannot be
        opened; QEMU is reaped either way. A QEMU that ends at once (a bad machine option)
        shows as a closed link whose :meth:`link_closed_reason` quotes it."""
        if self._proc is not None:
            raise FlashError("QemuRunner.start() called twice; make a new runner")
        if not self.firmware.is_file():
            raise FlashError(f"firmware {self.firmware} does not exist", hint="build it first")
        if shutil.which(self.command[0]) is None:
            raise FlashError(
                f"{self.command[0]} is not installed: cannot run board {self.board.name}",
                hint=f"apt-get install {self.board.architecture.qemu_package}",
            )
        began = time.monotonic()
        master, slave = os.openpty()
        try:
            tty.setraw(slave)
            self.pty_path = os.ttyname(slave)
            # Opened before QEMU starts: the pty's node goes away when QEMU, which holds the
            # master, ends — however soon that is.
            self._serial = self._open_pty()
            confine = prepare(lambda: policies.qemu(self.command[0], self.firmware), self.sandbox)
            self._proc = spawn(
                with_console_fd(self.command, master, CONSOLE_FD_SET),
                pass_fds=(master,),
                confine=confine,
            )
            self._readers = [
                self._reader(self._proc.stdout, "stdout"),
                self._reader(self._proc.stderr, "stderr"),
            ]
            self.startup_seconds = time.monotonic() - began
            return self._serial
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(master)  # only QEMU holds it: when QEMU ends, our reads end too
            os.close(slave)  # pyserial has its own descriptor

    def stop(self) -> Optional[int]:
        """Closes the console, kills QEMU if it still runs and reaps it. Idempotent. Returns
        the firmware's exit status when it ended by itself."""
        if not self._stopped:
            self._stopped = True
            serial_port, self._serial = self._serial, None
            if serial_port is not None:
                # A pty whose master is gone may fail to close cleanly.
                with contextlib.suppress(Exception):
                    serial_port.close()
            if self._proc is not None:
                if self._proc.poll() is None:
                    self._killed = True
                reap(self._proc)
            for reader in self._readers:
                reader.join(timeout=2.0)
        return self.exit_status

    @property
    def log(self) -> str:
        """Everything QEMU and the firmware's semihosting said (stdout and stderr). When QEMU
        died of a signal (a CPU lockup aborts it) a last line says why, since QEMU's own
        message is followed by a register dump that buries it."""
        text = self._raw_log()
        status = self.exit_status
        if status is not None and status < 0:
            text += f"\n[mlf-project] {describe_exit(status, text)}\n"
        return text

    @property
    def exit_status(self) -> Optional[int]:
        """The firmware's exit status (QEMU's) once QEMU has ended by itself; None while it
        runs or when it was killed. Negative for a signal (e.g. -6 after a CPU lockup)."""
        if self._proc is None or self._killed:
            return None
        return self._proc.poll()

    # --- extras -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> Optional[int]:
        return None if self._proc is None else self._proc.pid

    def wait(self, timeout: float) -> Optional[int]:
        """Waits up to ``timeout`` seconds for the firmware to end by itself; its exit
        status, or None if it is still running (it is not killed: call :meth:`stop`)."""
        if self._proc is None:
            return None
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        for reader in self._readers:
            reader.join(timeout=2.0)  # so the log holds everything QEMU said
        return self.exit_status

    def ticks_to_instructions(self, tick_hz: Optional[int] = None) -> Optional[float]:
        """The factor turning the firmware's tick counts into guest instructions: under
        ``-icount shift=0`` one instruction is one virtual ns, so ``1e9 / tick_hz`` (40 at
        25 MHz). None without icount, where ticks follow the host's clock."""
        if not self.icount:
            return None
        return 1e9 / (tick_hz if tick_hz else self.board.timer.clock_hz)

    def exit_reason(self) -> Optional[str]:
        """One line saying how the firmware ended (None while it runs): a clean exit, its
        status, a fault with the registers the fault handler reported, or a CPU lockup."""
        if self._proc is None or self._proc.poll() is None:
            return None
        if self._killed:
            return "stopped by the host (killed)"
        return describe_exit(self._proc.returncode, self._raw_log())

    def link_closed_reason(self, wait: float = 0.5) -> str:
        """Why the console link died, for a transport error: how the firmware ended (a fault
        with the registers the seam reported, an abort, a CPU lockup, an exit status) and,
        unless that says it all, the tail of its log. Waits up to ``wait`` seconds for QEMU
        to be seen ending (its pty may close a moment before it exits)."""
        if self._proc is not None and not self._killed:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=wait)
            if self._proc.poll() is not None:
                for reader in self._readers:
                    reader.join(timeout=wait)  # so the log holds the fault report
        reason = self.exit_reason() or "QEMU is still running"
        if reason.startswith(("firmware fault", "firmware abort", "CPU lockup", "QEMU died")):
            return reason  # these name the cause (and QEMU's death quotes its output)
        tail = _tail(self._raw_log())
        return f"{reason}; its log ends with: {tail}" if tail else reason

    # --- internals ----------------------------------------------------------------------

    def _raw_log(self) -> str:
        with self._log_lock:
            return bytes(self._log).decode("utf-8", "replace")

    def _reader(self, stream: Optional[IO[bytes]], name: str) -> threading.Thread:
        thread = threading.Thread(
            target=self._pump, args=(stream,), name=f"qemu-{name}", daemon=True
        )
        thread.start()
        return thread

    def _pump(self, stream: Optional[IO[bytes]]) -> None:
        if stream is None:
            return
        try:
            # Lines cut at the log's size: the firmware decides what QEMU prints.
            for line in iter(lambda: stream.readline(_LOG_LIMIT), b""):
                if line.strip().decode("utf-8", "replace") in _NOISE:
                    continue
                with self._log_lock:
                    self._log += line
                    if len(self._log) > _LOG_LIMIT:
                        del self._log[: len(self._log) - _LOG_LIMIT]
        except (OSError, ValueError):
            pass  # the stream was closed by reap()

    def _open_pty(self) -> Any:
        # Deferred so that merely listing boards does not need pyserial.
        from ..transport.link import open_serial

        assert self.pty_path is not None
        try:
            return open_serial(self.pty_path, timeout=self.read_timeout, write_timeout=10.0)
        except TransportError as err:
            raise TransportError(f"cannot open the console pty {self.pty_path}: {err}") from err


def fd_serial(fd_set: int, kind: str = "") -> str:
    """QEMU's ``-serial`` backend over the first descriptor of set ``fd_set``: a terminal or
    pipe (``kind`` empty), or ``file`` for a plain file."""
    return f"{kind + ':' if kind else ''}/dev/fdset/{fd_set}"


def with_console_fd(command: Sequence[str], fd: int, fd_set: int) -> List[str]:
    """``command`` with ``-add-fd`` putting ``fd`` in ``fd_set`` (a command that does not use
    the set, such as a stand-in for QEMU in a test, is left as it is)."""
    if not any(f"/dev/fdset/{fd_set}" in arg for arg in command):
        return list(command)
    return [command[0], "-add-fd", f"fd={fd},set={fd_set}", *command[1:]]


def describe_exit(status: Optional[int], log: str = "") -> str:
    """Explains an exit status of a firmware (QEMU's exit status) with the diagnostic lines
    the seam wrote: ``exited normally``, ``fault: HardFault pc=...``, ``CPU lockup``, ..."""
    if status is None:
        return "still running"
    if status == 0:
        return "exited normally (status 0)"
    if status == EXIT_FAULT:
        line = _last_line_with(log, "mlf: fault:")
        detail = line.split("mlf: fault:", 1)[1].strip() if line else "no report"
        return f"firmware fault (status {status}): {_named_fault(detail)}"
    if status == EXIT_ABORT:
        line = _last_line_with(log, "mlf: abort:")
        detail = line.split("mlf: abort:", 1)[1].strip() if line else "no report"
        why = _last_line_with(log, "mlf: cmsis-nn:")  # the CMSIS-NN adapter says why it stopped
        return f"firmware abort (status {status}): {detail}" + (f" ({why.strip()})" if why else "")
    if status < 0:
        name = _signal_name(-status)
        if "Lockup" in log:
            line = _last_line_with(log, "Lockup")
            return (
                f"CPU lockup: a fault while entering the fault handler, typically a stack "
                f"overflow ({line.strip()}; QEMU died of {name})"
            )
        return f"QEMU died of {name}: {_tail(log) or 'no output'}"
    return f"exited with status {status}"


def _named_fault(detail: str) -> str:
    """``exception=0x00000003 pc=...`` as ``HardFault exception=0x00000003 pc=...``: the
    architecture whose seam reports that field names the number."""
    for arch in ARCHITECTURES.values():
        if not arch.fault_field:
            continue
        found = re.search(rf"\b{arch.fault_field}=0x([0-9a-fA-F]+)", detail)
        if found is not None:
            return f"{arch.fault_name(int(found.group(1), 16))} {detail}"
    return detail


def _last_line_with(log: str, needle: str) -> str:
    for line in reversed(log.splitlines()):
        if needle in line:
            return line
    return ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(line for line in text.strip().splitlines()[-lines:] if line.strip())
