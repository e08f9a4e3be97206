"""Running a firmware built for the ``host`` board: a native process on a pseudo-terminal.

The process gets the pty's master side as stdin and stdout; we open the slave side with
``serial.Serial`` — the same kind of object a QEMU pty or a real board's tty gives — so the
transport code cannot tell the difference. The slave is switched to raw mode before the
child starts, so no echo or line editing ever touches the first bytes. When the child
ends, its master side closes and reads on our side fail at once (EIO) instead of hanging.

The firmware is confined (:func:`project_api.sandbox.policies.host_firmware`: its own
binary, its own pty, no other file, socket or process) unless the caller opted out, and gets
a clean environment. Its stderr is a pipe that a thread copies into the log file, since a
confined firmware may not grow any file itself.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import tty
from pathlib import Path
from typing import IO, Any, Optional, Sequence, Union

from ..errors import FlashError, TransportClosedError
from ..sandbox import policies, prepare
from ..transport.link import open_serial
from .base import Runner, copy_in_background, reap, spawn

# How long stop() lets a firmware end by itself after its link closed, before TERM.
EXIT_GRACE_SECONDS = 0.2
# What is kept of the firmware's stderr (its own words, as long as it likes).
LOG_LIMIT = 1 << 20


class HostRunner(Runner):
    """Runs ``executable`` (with ``args``, in ``cwd``) on a pty. stderr goes to a log file
    (``log_path``, default a temporary file), readable through :attr:`log`. ``sandbox``
    False (or ``$MLF_PROJECT_SANDBOX=off`` when it is None) runs it unconfined, with ``env``
    or our environment; confined, it gets ``env`` or an empty one."""

    def __init__(
        self,
        executable: Union[str, Path],
        args: Sequence[str] = (),
        cwd: Optional[Union[str, Path]] = None,
        *,
        env: Optional[dict] = None,
        log_path: Optional[Union[str, Path]] = None,
        baudrate: int = 115200,
        sandbox: Optional[bool] = None,
    ) -> None:
        self.executable = Path(executable)
        self.args = [str(a) for a in args]
        self.cwd = str(cwd) if cwd is not None else None
        self.env = env
        self.baudrate = baudrate
        self.log_path = Path(log_path) if log_path is not None else None
        self.port: Any = None
        self._proc: Any = None
        self._slave_fd: Optional[int] = None
        self._log_file: Optional[IO[bytes]] = None
        self._own_log = log_path is None
        self._status: Optional[int] = None
        self._log_text: Optional[str] = None
        self.sandbox = sandbox
        self._log_copier: Optional[threading.Thread] = None

    def start(self, timeout: float = 10.0) -> Any:
        if self._proc is not None:
            raise FlashError("this host runner was already started")
        if not self.executable.is_file():
            raise FlashError(f"no firmware at {self.executable}", hint="build the project first")
        if not os.access(self.executable, os.X_OK):
            raise FlashError(f"{self.executable} is not executable")
        master, slave = os.openpty()
        # Named now: once a short-lived child has exited, ttyname() on the hung-up pty fails.
        slave_path = os.ttyname(slave)
        try:
            tty.setraw(slave)
            confine = prepare(
                lambda: policies.host_firmware(self.executable, slave_path), self.sandbox
            )
            env = self.env if self.env is not None or confine is None else {}
            if self.log_path is None:
                handle, name = tempfile.mkstemp(prefix="mlf-host-", suffix=".log")
                os.close(handle)
                self.log_path = Path(name)
            self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - lives until stop()
            errors_read, errors_write = os.pipe()
            try:
                self._proc = spawn(
                    [str(self.executable.resolve()), *self.args],
                    stdin=master,
                    stdout=master,
                    stderr=errors_write,
                    cwd=self.cwd,
                    env=env,
                    confine=confine,
                )
            except BaseException:
                os.close(errors_read)
                raise
            finally:
                os.close(errors_write)
            self._log_copier = copy_in_background(
                errors_read, self._log_file, "mlf-host-stderr", LOG_LIMIT
            )
        except BaseException:
            os.close(slave)
            raise
        finally:
            # Only the child may hold the master: once it exits, our reads see EIO.
            os.close(master)
        self._slave_fd = slave
        try:
            self.port = open_serial(
                slave_path,
                baudrate=self.baudrate,
                write_timeout=max(timeout, 1.0),
            )
        except TransportClosedError as exc:
            # The pty is hung up: the firmware is gone already (e.g. a bad configuration).
            self._wait_exit(1.0)
            status = self.exit_status
            self.stop()
            tail = self.log.strip()[-600:].replace("\n", " | ")
            if status is None:
                raise TransportClosedError(
                    f"cannot open the pty of {self.executable.name}: {exc}"
                ) from exc
            raise TransportClosedError(
                f"{self.executable.name} ended with status {status} before its link was "
                f"opened{': ' + tail if tail else ''}"
            ) from exc
        except BaseException:
            self.stop()  # no child outlives a start that failed
            raise
        finally:
            # pyserial has its own descriptor now; ours would keep the pty alive for the child
            # after the port is closed.
            if self._slave_fd is not None:
                os.close(self._slave_fd)
                self._slave_fd = None
        return self.port

    def stop(self) -> Optional[int]:
        if self.port is not None:
            with contextlib.suppress(Exception):
                self.port.close()
            self.port = None
        if self._slave_fd is not None:
            os.close(self._slave_fd)
            self._slave_fd = None
        if self._proc is not None and self._status is None:
            # A firmware sees the closed link (EOF/EIO) and ends by itself; give it a moment.
            self._wait_exit(EXIT_GRACE_SECONDS)
            self._status = reap(self._proc)
        if self._log_copier is not None:
            self._log_copier.join(timeout=2.0)  # the pipe ended with the process
            self._log_copier = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
            self._log_text = self._read_log()
            if self._own_log and self.log_path is not None:
                with contextlib.suppress(OSError):
                    self.log_path.unlink()
        return self._status

    def _wait_exit(self, seconds: float) -> None:
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=seconds)

    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc is not None else None

    @property
    def exit_status(self) -> Optional[int]:
        if self._status is not None:
            return self._status
        if self._proc is None:
            return None
        return self._proc.poll()

    @property
    def log(self) -> str:
        """The firmware's stderr so far (kept after stop())."""
        if self._log_text is not None:
            return self._log_text
        if self._log_copier is not None and self.exit_status is not None:
            # Ended: its last words (why it stopped) may still be in the pipe, not yet copied.
            self._log_copier.join(timeout=1.0)
        return self._read_log()

    def _read_log(self) -> str:
        if self._log_file is not None:
            with contextlib.suppress(ValueError, OSError):
                self._log_file.flush()
        if self.log_path is None:
            return ""
        try:
            return self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""
