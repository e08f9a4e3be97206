"""A Python client for Project API servers (ours or any microTVM one).

    with ProjectApiClient.launch(template_dir()) as template:
        template.generate_project("model.tar", "/abs/proj", {"board": "host",
                                                            "project_type": "host_driven"})
    with ProjectApiClient.launch("/abs/proj") as project:
        project.build()
        project.open_transport()
        project.write_transport(b"...", timeout_sec=5)
        reply = project.read_transport(64, timeout_sec=5)

It launches a server the way TVM's client does (``launch_microtvm_api_server.sh`` if present,
else ``sys.executable microtvm_api_server.py``; ``--read-fd``/``--write-fd`` over pipes;
``cwd`` = the server's directory), and in addition tells the server the caller's working
directory (``MLF_PROJECT_CLIENT_CWD``) so relative paths mean what the caller means.

Errors: a JSON-RPC error reply raises :class:`~project_api.errors.ProjectApiError` (``code``,
``data``); ``IoTimeoutError`` raises :class:`~project_api.errors.TransportTimeoutError` and
``TransportClosedError`` raises :class:`~project_api.errors.TransportClosedError`. A server
that dies or sends garbage raises ProjectApiError with code -32603.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Dict, Mapping, Optional, Sequence, Type, Union

from ..errors import MlfProjectError, ProjectApiError, TransportClosedError, TransportTimeoutError
from ..jsontext import parse_json
from ..run.base import reap, spawn
from .handler import CLIENT_CWD_ENV

LAUNCH_SCRIPT = "launch_microtvm_api_server.sh"
SERVER_SCRIPT = "microtvm_api_server.py"
_CONNECTION_ERROR = -32603

PathLike = Union[str, Path]


class ProjectApiClient:
    """One connection to a Project API server; requests are strictly one at a time."""

    def __init__(
        self,
        read_file: IO[bytes],
        write_file: IO[bytes],
        *,
        process: Optional[subprocess.Popen] = None,
    ) -> None:
        """Talks over two binary files (e.g. ``os.fdopen`` of pipe ends); ``process`` is the
        server process to reap on :meth:`close`, if this client launched it."""
        self._read_file = read_file
        self._write_file = write_file
        self.process = process
        self._ids = itertools.count(1)
        self._closed = False

    @classmethod
    def launch(
        cls,
        server_dir: PathLike,
        *,
        debug: bool = False,
        env: Optional[Mapping[str, str]] = None,
        python: Optional[str] = None,
    ) -> ProjectApiClient:
        """Starts the server of ``server_dir`` and connects to it.

        ``env`` replaces the server's environment (default: ours); ``MLF_PROJECT_CLIENT_CWD``
        is set to our working directory and, when this package runs from a source checkout,
        the checkout is put first on ``PYTHONPATH`` so the server runs the same code."""
        directory = Path(server_dir).resolve()
        argv = server_argv(directory, python=python)
        server_read, client_write = os.pipe()
        client_read, server_write = os.pipe()
        argv += ["--read-fd", str(server_read), "--write-fd", str(server_write)]
        if debug:
            argv.append("--debug")
        child_env = dict(os.environ if env is None else env)
        child_env[CLIENT_CWD_ENV] = os.getcwd()
        checkout = Path(__file__).resolve().parent.parent.parent
        if (checkout / "pyproject.toml").is_file():
            old = child_env.get("PYTHONPATH", "").split(os.pathsep)
            paths = [str(checkout)] + [p for p in old if p and p != str(checkout)]
            child_env["PYTHONPATH"] = os.pathsep.join(paths)
        try:
            process = spawn(
                argv,
                stdin=None,
                stdout=None,
                stderr=None,
                cwd=str(directory),
                env=child_env,
                pass_fds=(server_read, server_write),
            )
        except BaseException:
            for fd in (server_read, server_write, client_read, client_write):
                os.close(fd)
            raise
        finally:
            with contextlib.suppress(OSError):
                os.close(server_read)
            with contextlib.suppress(OSError):
                os.close(server_write)
        return cls(
            os.fdopen(client_read, "rb", buffering=1 << 16),
            os.fdopen(client_write, "wb", buffering=0),
            process=process,
        )

    # --- the methods ----------------------------------------------------------------------

    def server_info_query(self, tvm_version: str = "0.14.0") -> Dict[str, Any]:
        return dict(self.call("server_info_query", {"tvm_version": tvm_version}))

    def generate_project(
        self,
        model_library_format_path: PathLike,
        project_dir: PathLike,
        options: Optional[Mapping[str, Any]] = None,
        *,
        standalone_crt_dir: PathLike = "",
    ) -> None:
        self.call(
            "generate_project",
            {
                "model_library_format_path": str(model_library_format_path),
                "standalone_crt_dir": str(standalone_crt_dir),
                "project_dir": str(project_dir),
                "options": dict(options or {}),
            },
        )

    def build(self, options: Optional[Mapping[str, Any]] = None) -> None:
        self.call("build", {"options": dict(options or {})})

    def flash(self, options: Optional[Mapping[str, Any]] = None) -> None:
        self.call("flash", {"options": dict(options or {})})

    def open_transport(self, options: Optional[Mapping[str, Any]] = None) -> Dict[str, float]:
        """Starts the firmware; returns the ``timeouts`` dict of the reply."""
        reply = self.call("open_transport", {"options": dict(options or {})})
        return dict(reply["timeouts"])

    def close_transport(self) -> None:
        self.call("close_transport", {})

    def link(self, timeout: Optional[float] = None) -> TransportLink:
        """A serial.Serial-like object over the (already opened) transport."""
        return TransportLink(self, timeout)

    def read_transport(self, n: int, timeout_sec: Optional[float]) -> bytes:
        """1..n bytes; TransportTimeoutError if none arrive within ``timeout_sec``."""
        reply = self.call("read_transport", {"n": n, "timeout_sec": timeout_sec})
        return base64.b85decode(reply["data"])

    def write_transport(self, data: bytes, timeout_sec: Optional[float]) -> None:
        self.call(
            "write_transport",
            {"data": base64.b85encode(bytes(data)).decode("ascii"), "timeout_sec": timeout_sec},
        )

    # --- the wire -------------------------------------------------------------------------

    def call(self, method: str, params: Mapping[str, Any]) -> Any:
        """Sends one request and returns its ``result``, or raises the error it got."""
        if self._closed:
            raise ProjectApiError(f"{method}: the connection is closed", code=_CONNECTION_ERROR)
        request_id = next(self._ids)
        request = {"jsonrpc": "2.0", "method": method, "params": dict(params), "id": request_id}
        reply = self.exchange(json.dumps(request).encode("utf-8") + b"\n", method)
        if reply.get("jsonrpc") != "2.0" or reply.get("id") != request_id:
            raise ProjectApiError(
                f"{method}: malformed reply (want jsonrpc 2.0 and id {request_id}): "
                f"{json.dumps(reply)[:300]}",
                code=_CONNECTION_ERROR,
            )
        if "error" in reply:
            raise error_from_reply(method, reply["error"])
        if "result" not in reply:
            raise ProjectApiError(
                f"{method}: reply has neither result nor error", code=_CONNECTION_ERROR
            )
        return reply["result"]

    def exchange(self, line: bytes, method: str = "request") -> Dict[str, Any]:
        """Writes one raw request line and returns the decoded reply object (for tests that
        need to send malformed requests)."""
        try:
            self._write_file.write(line)
            self._write_file.flush()
            reply_line = self._read_file.readline()
        except (OSError, ValueError) as err:
            raise self._gone(method, f"the connection failed: {err}") from err
        if not reply_line:
            raise self._gone(method, "the server closed the connection")
        try:
            reply = parse_json(reply_line.decode("utf-8"))
        except ValueError as err:
            raise ProjectApiError(
                f"{method}: reply is not JSON ({err}): {reply_line[:300]!r}",
                code=_CONNECTION_ERROR,
            ) from None
        if not isinstance(reply, dict):
            raise ProjectApiError(
                f"{method}: reply is not an object: {reply_line[:300]!r}", code=_CONNECTION_ERROR
            )
        return reply

    def close(self, timeout: float = 30.0) -> Optional[int]:
        """Ends the connection: the server sees end of file, stops any firmware and exits.
        Waits up to ``timeout`` seconds, then kills it. Returns its exit status if launched."""
        if not self._closed:
            self._closed = True
            for stream in (self._write_file, self._read_file):
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
        if self.process is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout)
        return reap(self.process)

    def __enter__(self) -> ProjectApiClient:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def _gone(self, method: str, what: str) -> ProjectApiError:
        status = None
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = self.process.wait(timeout=2)
        self.close(timeout=0)
        suffix = (
            f" (server exit status {status}; its stderr says why)" if status is not None else ""
        )
        return ProjectApiError(f"{method}: {what}{suffix}", code=_CONNECTION_ERROR)


class TransportLink:
    """A ``serial.Serial``-like view of a server's transport (``read``, ``write``,
    ``in_waiting`` and the ``timeout``/``write_timeout`` attributes), so code written for a
    serial port (the device protocol of :mod:`project_api.transport`) can run over JSON-RPC.
    Each read asks the server for up to :attr:`chunk` bytes and keeps the surplus, so a frame
    costs one or two round trips, not one per byte. ``close`` closes the transport, not the
    client."""

    chunk = 4096

    def __init__(self, client: ProjectApiClient, timeout: Optional[float] = None) -> None:
        self.client = client
        self.timeout = timeout
        self.write_timeout: Optional[float] = None
        self.is_open = True
        self._buffer = bytearray()

    def read(self, size: int = 1) -> bytes:
        """``size`` bytes, or fewer when ``timeout`` runs out first (pyserial semantics)."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while len(self._buffer) < size:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                want = max(size - len(self._buffer), self.chunk)
                self._buffer += self.client.read_transport(want, remaining)
            except TransportTimeoutError:
                break
            if remaining == 0.0:
                break
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    @property
    def in_waiting(self) -> int:
        """Bytes readable at once (asks the server without waiting when none are kept)."""
        if not self._buffer:
            with contextlib.suppress(TransportTimeoutError):
                self._buffer += self.client.read_transport(self.chunk, 0)
        return len(self._buffer)

    def write(self, data: bytes) -> int:
        self.client.write_transport(bytes(data), self.write_timeout)
        return len(data)

    def flush(self) -> None:
        """Writes are complete when write() returns."""

    def reset_input_buffer(self) -> None:
        """Drops what the device has sent and nobody has read yet."""
        self._buffer.clear()
        with contextlib.suppress(TransportTimeoutError):
            while self.client.read_transport(self.chunk, 0):
                pass

    def close(self) -> None:
        if self.is_open:
            self.is_open = False
            self._buffer.clear()
            self.client.close_transport()


def server_argv(server_dir: PathLike, *, python: Optional[str] = None) -> list:
    """The command TVM's client would run for ``server_dir`` (without the fd arguments)."""
    directory = Path(server_dir)
    script = directory / SERVER_SCRIPT
    launcher = directory / LAUNCH_SCRIPT
    if launcher.is_file():
        return [str(launcher), str(script)]
    if script.is_file():
        return [python or sys.executable, str(script)]
    raise ProjectApiError(
        f"no Project API server in {directory} (looked for {LAUNCH_SCRIPT} and {SERVER_SCRIPT})",
        code=_CONNECTION_ERROR,
    )


def error_from_reply(method: str, error: Any) -> MlfProjectError:
    """The exception for an ``error`` member of a reply."""
    if not isinstance(error, dict):
        return ProjectApiError(
            f"{method}: malformed error reply: {error!r}", code=_CONNECTION_ERROR
        )
    code = error.get("code")
    message = str(error.get("message", ""))
    data = error.get("data")
    detail = data.get("traceback") if isinstance(data, dict) else None
    if code == -32000 and message == "IoTimeoutError":
        return TransportTimeoutError(f"{method}: no data in time")
    if code == -32000 and message == "TransportClosedError":
        text = f"{method}: the transport is closed" + (f": {detail}" if detail else "")
        return TransportClosedError(text)
    err = ProjectApiError(f"{method}: {message}", code=code if isinstance(code, int) else 0)
    err.data = data
    return err


__all__: Sequence[str] = ["ProjectApiClient", "TransportLink", "error_from_reply", "server_argv"]
