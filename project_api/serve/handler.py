"""The Project API methods, on top of :class:`project_api.driver.Project` and a Runner's link.

A server runs in a directory: the template (``template_project/``, or any directory without
``model.tar``) or a generated project (it contains ``model.tar``). ``generate_project`` works
in both; ``build``, ``flash`` and the transport need a generated project.

The transport is the firmware's console link: ``open_transport`` starts the already-built
firmware through ``Project.runner()`` (it builds nothing) and keeps the ``serial.Serial``-like
link that ``Runner.start`` returns; ``close_transport`` stops the runner, which reaps every
child process. The bytes are passed through untouched.
"""

from __future__ import annotations

import array
import errno
import fcntl
import importlib
import logging
import os
import select
import termios
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from ..errors import (
    ProjectApiError,
    TransportClosedError,
    TransportTimeoutError,
    describe_exit_status,
)
from .options import MAX_TIMEOUT_SEC, coerce_options, invalid_params, project_options

_LOG = logging.getLogger(__name__)

PLATFORM_NAME = "mlf-project-api"
MODEL_TAR = "model.tar"
CLIENT_CWD_ENV = "MLF_PROJECT_CLIENT_CWD"

# (session_start_retry, session_start, session_established) seconds, per kind of board.
# A host process answers at once; QEMU is slow to boot, slower still under -icount; a real
# board behind a USB UART sits in between.
# The established timeout bounds every reply TVM waits for, a whole inference or a
# time_evaluator call included; the retry resends a start-session message a device that was
# still booting may have missed (replies to older attempts are ignored, so it costs nothing).
# Under QEMU's -icount the guest runs slower still: both QEMU limits double.
TIMEOUTS: Dict[str, Dict[str, float]] = {
    "host": {
        "session_start_retry_timeout_sec": 2,
        "session_start_timeout_sec": 10,
        "session_established_timeout_sec": 20,
    },
    "qemu": {
        "session_start_retry_timeout_sec": 2,
        "session_start_timeout_sec": 30,
        "session_established_timeout_sec": 30,
    },
    "serial": {
        "session_start_retry_timeout_sec": 2,
        "session_start_timeout_sec": 10,
        "session_established_timeout_sec": 10,
    },
}
# read_transport may return 1..n bytes: larger requests get this many at most.
MAX_READ_BYTES = 1 << 20
# Seconds Runner.start may take before the firmware's link is up, when the driver's Project
# does not say (Project.start_timeout()).
START_TIMEOUTS = {"host": 10.0, "qemu": 30.0, "serial": 10.0}
# What a host_driven firmware speaks when a Project API caller (TVM's client: its scripts,
# tvmc, AutoTVM) does not choose: the protocol tvm.micro.Session opens. Our own driver and CLI
# call the generator directly and keep its default (our device protocol).
PROJECT_API_PROTOCOLS = {"host_driven": "microtvm"}


def board_kind(board: Any) -> str:
    """``host``, ``qemu`` or ``serial`` (a real board) for a board or board name."""
    if board is None or isinstance(board, str):
        name = board or "host"
        try:
            boards: Any = importlib.import_module("project_api.board")
            board = boards.load_board(name)
        except Exception:  # noqa: BLE001 - unknown board or no board module: go by the name
            lowered = name.lower()
            if lowered == "host" or lowered.startswith(("host-", "host_")):
                return "host"
            return "qemu" if "qemu" in lowered else "serial"
    if getattr(board, "is_host", False):
        return "host"
    if getattr(board, "is_qemu", False):
        return "qemu"
    return "serial"


class ProjectApiHandler:
    """The state of one server: its directory and, while open, the running firmware."""

    def __init__(self, server_dir: Union[str, Path], *, client_cwd: Optional[str] = None) -> None:
        self.server_dir = Path(server_dir).resolve()
        if client_cwd is None:
            client_cwd = os.environ.get(CLIENT_CWD_ENV) or None
        self.client_cwd = client_cwd
        self._runner: Any = None
        self._link: Any = None
        self._closed_reason: Optional[str] = None
        # The request pipe (set by the server): watched while a transport call waits.
        self.client_fd: Optional[int] = None

    # --- queries --------------------------------------------------------------------------

    @property
    def is_template(self) -> bool:
        return not (self.server_dir / MODEL_TAR).is_file()

    def server_info_query(self, tvm_version: Optional[str] = None) -> Dict[str, Any]:
        is_template = self.is_template
        return {
            "platform_name": PLATFORM_NAME,
            "is_template": is_template,
            "model_library_format_path": "" if is_template else str(self.server_dir / MODEL_TAR),
            "project_options": [o.to_json() for o in project_options()],
            "protocol_version": 1,
        }

    # --- generate / build / flash ---------------------------------------------------------

    def generate_project(
        self,
        model_library_format_path: str,
        standalone_crt_dir: Optional[str],
        project_dir: str,
        options: Mapping[str, Any],
    ) -> None:
        del standalone_crt_dir  # we ship our own runtime (crt/)
        opts = coerce_options("generate_project", options)
        archive = self._client_path(
            "generate_project", "model_library_format_path", model_library_format_path
        )
        target = self._client_path("generate_project", "project_dir", project_dir)
        if not archive.exists():
            raise invalid_params(
                f"generate_project: model_library_format_path {archive}: no such file"
            )
        from ..driver import Project

        board = opts.pop("board")
        project_type = opts.pop("project_type")
        model = opts.pop("model", None)
        extra_files_tar = opts.pop("extra_files_tar", None)
        if extra_files_tar:
            from ..generate.extra_files import check_extra_files

            # Relative to the client's directory; the generator checks and unpacks it.
            extra = self._client_path("generate_project", "extra_files_tar", extra_files_tar)
            if not extra.is_file():
                raise invalid_params(
                    f"generate_project: option extra_files_tar {extra}: no such file"
                )
            check_extra_files(extra)
            opts["extra_files_tar"] = str(extra)
        generate_options = {k: v for k, v in opts.items() if v is not None}
        chosen = PROJECT_API_PROTOCOLS.get(project_type)
        if chosen is not None and "device_protocol" in opts:
            generate_options.setdefault("device_protocol", chosen)
        _LOG.info("generating %s for board %s from %s", target, board, archive)
        Project.generate(
            archive,
            target,
            board=board,
            project_type=project_type,
            model=model,
            options=generate_options,
            progress=_progress,
        )

    def build(self, options: Mapping[str, Any]) -> None:
        project = self._project("build", options)
        project.build(progress=_progress)  # whose last progress line says "built <firmware>"

    def flash(self, options: Mapping[str, Any]) -> None:
        project = self._project("flash", options)
        project.flash()

    # --- transport ------------------------------------------------------------------------

    def open_transport(self, options: Mapping[str, Any]) -> Dict[str, float]:
        self.close_transport()
        project = self._project("open_transport", options)
        kind = board_kind(_board_of(project))
        timeout_sec = project.options.get("timeout_sec")
        if timeout_sec is not None and not 0 < timeout_sec <= MAX_TIMEOUT_SEC:
            raise invalid_params(
                f"open_transport: option timeout_sec: want a number of seconds above 0, "
                f"got {timeout_sec}"
            )
        driver_timeout = getattr(project, "start_timeout", None)
        if callable(driver_timeout):
            start_timeout = float(driver_timeout())
        else:
            start_timeout = float(timeout_sec) if timeout_sec else START_TIMEOUTS[kind]
        runner = project.runner()
        try:
            link = runner.start(start_timeout)
        except BaseException:
            runner.stop()
            raise
        self._runner, self._link, self._closed_reason = runner, link, None
        timeouts = dict(TIMEOUTS[kind])
        if kind == "qemu" and project.options.get("qemu_icount"):
            timeouts["session_start_timeout_sec"] *= 2
            timeouts["session_established_timeout_sec"] *= 2
        if timeout_sec:
            timeouts["session_start_timeout_sec"] = timeout_sec
            timeouts["session_established_timeout_sec"] = timeout_sec
        return timeouts

    def close_transport(self) -> None:
        runner, link = self._runner, self._link
        self._runner = self._link = None
        self._closed_reason = None
        if link is not None:
            try:
                link.close()
            except Exception as err:  # noqa: BLE001 - closing a dead link may fail; go on
                _LOG.debug("closing the link: %s", err)
        if runner is not None:
            status = runner.stop()
            _LOG.debug("firmware stopped (status %s)", status)

    def read_transport(self, n: int, timeout_sec: Optional[float]) -> bytes:
        link = self._open_link()
        n = min(n, MAX_READ_BYTES)  # the reply may hold 1..n bytes: no n-sized buffer
        try:
            fd = _posix_fd(link)
            if fd is not None:
                data = _read_fd(fd, n, timeout_sec, self.client_fd)
            else:
                _set_timeout(link, "timeout", timeout_sec)
                data = bytes(link.read(1))
                if data and n > 1:
                    _set_timeout(link, "timeout", 0)
                    data += bytes(link.read(n - 1))
        except (TransportTimeoutError, TransportClosedError):
            raise
        except Exception as err:  # noqa: BLE001 - serial/OS errors mean the link is dead
            raise self._lost(self._ended(f"reading failed: {err}")) from err
        if not data:
            self._check_alive()
            raise TransportTimeoutError(f"read_transport: no data within {timeout_sec} s")
        return data

    def write_transport(self, data: bytes, timeout_sec: Optional[float]) -> None:
        link = self._open_link()
        if not data:
            return
        try:
            fd = _posix_fd(link)
            if fd is not None:
                written: Optional[int] = _write_fd(fd, data, timeout_sec, self.client_fd)
            else:
                _set_timeout(link, "write_timeout", timeout_sec)
                # No flush(): on a pty, pyserial's flush is tcdrain(), which waits without any
                # limit until the device has read everything; write() has handed it all over.
                written = link.write(data)
        except Exception as err:  # noqa: BLE001 - classified below
            if type(err).__name__ == "SerialTimeoutException":
                raise TransportTimeoutError(
                    f"write_transport: not written within {timeout_sec} s"
                ) from err
            raise self._lost(f"writing failed: {err}") from err
        if written is not None and written < len(data):
            self._check_alive()
            raise TransportTimeoutError(
                f"write_transport: {written} of {len(data)} bytes written within {timeout_sec} s"
            )

    def shutdown(self) -> None:
        """Stops the firmware (if running) and reaps its processes; called when serving ends."""
        self.close_transport()

    # --- helpers --------------------------------------------------------------------------

    def _project(self, method: str, options: Mapping[str, Any]) -> Any:
        if self.is_template:
            raise ProjectApiError(
                f"{method}: {self.server_dir} is a template directory, not a generated project "
                f"(no {MODEL_TAR}); call generate_project, then {method} through the "
                "generated project's microtvm_api_server.py"
            )
        opts = coerce_options(method, options)
        from ..driver import Project

        project = Project.open(self.server_dir)
        # The runner and the build read their settings from the project's options; the
        # call's options (those given, for this method) override what generation stored.
        for name, value in opts.items():
            if value is not None:
                project.options[name] = value
        return project

    def _client_path(self, method: str, what: str, value: str) -> Path:
        path = Path(os.path.expanduser(value))
        if path.is_absolute():
            return path
        if self.client_cwd and os.path.isabs(self.client_cwd):
            return Path(self.client_cwd) / path
        raise invalid_params(
            f"{method}: {what} {value!r} is relative and the client's working directory is "
            f"unknown (this server runs in {self.server_dir}); pass an absolute path or set "
            f"{CLIENT_CWD_ENV} in the server's environment"
        )

    def _open_link(self) -> Any:
        if self._link is None:
            raise TransportClosedError(
                self._closed_reason or "the transport is not open (call open_transport first)"
            )
        return self._link

    def _check_alive(self) -> None:
        status = getattr(self._runner, "exit_status", None)
        if status is not None:
            raise self._lost(describe_exit_status(status))

    def _ended(self, what_failed: str) -> str:
        """Why the link failed: how the firmware ended when it did (a crash closes the link
        a moment before the process is seen to end), else what failed."""
        status = self._runner.exit_status_within(0.5) if self._runner is not None else None
        return what_failed if status is None else f"{describe_exit_status(status)} ({what_failed})"

    def _lost(self, reason: str) -> TransportClosedError:
        """Stops a dead device and returns the error; later calls repeat the reason."""
        log = ""
        if self._runner is not None:
            try:
                log = self._runner.log
            except Exception:  # noqa: BLE001 - the log is a courtesy
                log = ""
        self.close_transport()
        message = reason + (f"; its output: {log.strip()[-2000:]}" if log.strip() else "")
        self._closed_reason = f"the transport was closed: {message}"
        _LOG.info("%s", self._closed_reason)
        return TransportClosedError(message)


def _board_of(project: Any) -> Any:
    """The project's Board (or board name) as the driver exposes it."""
    board = getattr(project, "board", None)
    if board is not None:
        return board
    name = project.options.get("board")
    return name if isinstance(name, str) else None


def _posix_fd(link: Any) -> Optional[int]:
    """The descriptor of a pyserial POSIX port (ttys and ptys), read and written directly:
    assigning pyserial's ``timeout``/``write_timeout`` reconfigures the tty, which fails with
    EIO once the device side has gone, before the bytes it sent last could be read."""
    fd = getattr(link, "fd", None)
    if isinstance(fd, int) and fd >= 0 and getattr(link, "is_open", True):
        return fd
    return None


class ClientGoneError(TransportClosedError):
    """The client closed its end of the request pipe while a transport call waited."""


def _client_gone(client_fd: Optional[int], readable: List[int]) -> bool:
    """Requests come one at a time: the request pipe turning readable during a transport call
    with nothing to read is its end of file (a client that died while waiting)."""
    if client_fd is None or client_fd not in readable:
        return False
    pending = array.array("i", [0])
    try:
        fcntl.ioctl(client_fd, termios.FIONREAD, pending)
    except OSError:
        return True
    return pending[0] == 0


def _read_fd(fd: int, n: int, timeout_sec: Optional[float], client_fd: Optional[int]) -> bytes:
    """1..n bytes, or b"" when none arrive in time; OSError when the device is gone,
    ClientGoneError when the client is."""
    deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
    watched = [fd] if client_fd is None else [fd, client_fd]
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select(watched, [], [], wait)
        if _client_gone(client_fd, ready):
            raise ClientGoneError("the client went away while read_transport waited")
        if fd in ready:
            try:
                data = os.read(fd, n)
            except BlockingIOError:
                data = None
            if data is not None:
                if not data:
                    raise OSError(errno.EIO, "end of file on the device link")
                return data
        if deadline is not None and time.monotonic() >= deadline:
            return b""


def _write_fd(fd: int, data: bytes, timeout_sec: Optional[float], client_fd: Optional[int]) -> int:
    """Writes until everything is written or the time is up; returns the count written."""
    deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
    view = memoryview(data)
    written = 0
    watched = [] if client_fd is None else [client_fd]
    while written < len(data):
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        readable, ready, _ = select.select(watched, [fd], [], wait)
        if _client_gone(client_fd, readable):
            raise ClientGoneError("the client went away while write_transport waited")
        if ready:
            try:
                written += os.write(fd, view[written:])
                continue
            except BlockingIOError:
                pass
        if deadline is not None and time.monotonic() >= deadline:
            break
    return written


def _set_timeout(link: Any, attr: str, value: Optional[float]) -> None:
    # pyserial reconfigures the tty on every assignment: skip it when nothing changes.
    if getattr(link, attr, object()) != value:
        setattr(link, attr, value)


def _progress(message: str) -> None:
    _LOG.info("%s", message)
