"""The JSON-RPC loop of TVM's Project API, protocol version 1 (see docs of the wire contract).

One JSON object per ``\\n``-terminated UTF-8 line in, exactly one reply line out, strictly in
turn. Unlike TVM's own servers, no input ends the loop except end of file: every malformed
line or bad request gets an error reply and the server goes on to the next line.

Decisions where the protocol leaves room (all tested in tests/test_serve_server.py):

- A request without ``"id"`` (a JSON-RPC notification) is *not executed*; since the protocol
  is strictly request -> reply and a client waiting for an answer must not hang, it is
  answered with ``-32600`` and ``"id": null``. An id that is not an integer or a string
  (``null``, ``true``, ``1.5``, objects) is treated the same way.
- An error about a request whose id could be read echoes that id, so the client can match it.
- ``params`` may be omitted (= ``{}``); anything else but an object is ``-32600``.
- ``server_info_query``'s ``tvm_version`` and ``generate_project``'s ``standalone_crt_dir``
  may be omitted (TVM 0.8's client sends ``{}`` to server_info_query; we ignore the crt dir);
  ``options`` may be ``null`` (= ``{}``). Every other missing or extra parameter is ``-32602``.
- Handler failures are ``-32000``: the message is one human-readable line and
  ``data.traceback`` holds the Python traceback; a timeout on the link is exactly
  ``IoTimeoutError`` (``data: null``), a dead link exactly ``TransportClosedError`` (the reason
  in ``data.traceback``). ``-32603`` is only used when a result cannot be encoded.
- The loop ends on end of file of the read side or when the reply cannot be written (the
  client is gone); the handler's :meth:`shutdown` then stops the device and reaps every child.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import json
import logging
import os
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import (
    MlfProjectError,
    ProjectApiError,
    TransportClosedError,
    TransportTimeoutError,
)
from ..jsontext import parse_json
from .options import MAX_TIMEOUT_SEC, json_type

_LOG = logging.getLogger(__name__)

PROTOCOL_VERSION = 1

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000
ERROR_CODES = frozenset(
    (PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR, SERVER_ERROR)
)

# The exact -32000 messages TVM's client turns into exception classes.
IO_TIMEOUT = "IoTimeoutError"
TRANSPORT_CLOSED = "TransportClosedError"
UNSUPPORTED_TVM_VERSION = "UnsupportedTVMVersionError"

MAX_LINE_BYTES = 64 << 20
_METHOD_NAME = re.compile(r"[A-Za-z0-9_]+\Z")

JsonId = Union[int, str, None]


class _RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


# --- parameter checking ---------------------------------------------------------------------


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_timeout(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _is_options(value: Any) -> bool:
    return value is None or isinstance(value, dict)


def _is_opt_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


class _Param:
    def __init__(
        self, name: str, check: Callable[[Any], bool], want: str, required: bool = True
    ) -> None:
        self.name = name
        self.check = check
        self.want = want
        self.required = required


_OPTIONS = _Param("options", _is_options, "object")
_TIMEOUT = _Param("timeout_sec", _is_timeout, "number or null")

METHOD_PARAMS: Dict[str, List[_Param]] = {
    "server_info_query": [_Param("tvm_version", _is_opt_str, "string", required=False)],
    "generate_project": [
        _Param("model_library_format_path", _is_str, "string"),
        _Param("standalone_crt_dir", _is_opt_str, "string or null", required=False),
        _Param("project_dir", _is_str, "string"),
        _OPTIONS,
    ],
    "build": [_OPTIONS],
    "flash": [_OPTIONS],
    "open_transport": [_OPTIONS],
    "close_transport": [],
    "read_transport": [_Param("n", _is_int, "integer"), _TIMEOUT],
    "write_transport": [_Param("data", _is_str, "string"), _TIMEOUT],
}


def _check_params(method: str, params: Mapping[str, Any]) -> Dict[str, Any]:
    spec = METHOD_PARAMS[method]
    checked: Dict[str, Any] = {}
    for param in spec:
        if param.name not in params:
            if param.required:
                raise _RpcError(
                    INVALID_PARAMS, f"method {method}: parameter {param.name} not given"
                )
            checked[param.name] = None
            continue
        value = params[param.name]
        if not param.check(value):
            raise _RpcError(
                INVALID_PARAMS,
                f"method {method}: parameter {param.name}: want {param.want}, "
                f"got {json_type(value)}",
            )
        checked[param.name] = value
    known = {p.name for p in spec}
    extra = [name for name in params if name not in known]
    if extra:
        raise _RpcError(INVALID_PARAMS, f"{method}: extra parameters: {', '.join(extra)}")
    if "options" in checked and checked["options"] is None:
        checked["options"] = {}
    timeout = checked.get("timeout_sec")
    # NaN compares false with everything: only a finite number in range passes.
    if timeout is not None and not 0 <= timeout <= MAX_TIMEOUT_SEC:
        raise _RpcError(
            INVALID_PARAMS,
            f"method {method}: parameter timeout_sec: want >= 0 or null (at most "
            f"{int(MAX_TIMEOUT_SEC)}, a year), got {checked['timeout_sec']}",
        )
    if method == "read_transport" and checked["n"] < 1:
        raise _RpcError(
            INVALID_PARAMS, f"method read_transport: parameter n: want >= 1, got {checked['n']}"
        )
    return checked


# --- the server -----------------------------------------------------------------------------


class ProjectApiServer:
    """Serves one client over a pair of binary files until end of file.

    ``handler`` has one method per Project API method (see
    :class:`project_api.serve.handler.ProjectApiHandler`), taking the parameters by name and
    returning plain values: ``read_transport`` returns ``bytes``, ``write_transport`` receives
    ``bytes``, ``open_transport`` returns the timeouts dict; this class does the wire shapes,
    base85 and error replies. ``handler.shutdown()`` is called when serving ends.
    """

    def __init__(self, read_file: IO[bytes], write_file: IO[bytes], handler: Any) -> None:
        self._read_file = read_file
        self._write_file = write_file
        self._handler = handler

    def serve_forever(self) -> None:
        try:
            while self.serve_one():
                pass
        finally:
            shutdown = getattr(self._handler, "shutdown", None)
            if shutdown is not None:
                shutdown()

    def serve_one(self) -> bool:
        """Reads one line and answers it; False at end of file or when the client is gone."""
        try:
            line = self._read_file.readline(MAX_LINE_BYTES)
        except (OSError, ValueError) as err:
            _LOG.debug("reading a request failed: %s", err)
            return False
        if not line:
            _LOG.debug("end of file on the request channel")
            return False
        if len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
            self._skip_rest_of_line()
            reply = _error_reply(
                None, PARSE_ERROR, f"parse error: request line longer than {MAX_LINE_BYTES} bytes"
            )
        else:
            reply = self.handle_line(line)
        return self._write_reply(reply)

    def handle_line(self, line: bytes) -> Dict[str, Any]:
        """The reply to one request line (without writing it)."""
        _LOG.debug("request <- %r", line[:2000])
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return _error_reply(None, PARSE_ERROR, "parse error: request is not valid UTF-8")
        if not text.strip():
            return _error_reply(None, PARSE_ERROR, "parse error: empty request line")
        try:
            request = parse_json(text.rstrip("\r\n"))
        except ValueError as err:
            return _error_reply(None, PARSE_ERROR, f"parse error: {err}")
        return self.handle_request(request)

    def handle_request(self, request: Any) -> Dict[str, Any]:
        request_id: JsonId = None
        method = "?"
        try:
            request_id = _request_id(request)
            method, params = _method_and_params(request)
            if method not in METHOD_PARAMS:
                raise _RpcError(METHOD_NOT_FOUND, f"{method}: no such method")
            checked = _check_params(method, params)
            result = self._dispatch(method, checked)
            return _result_reply(request_id, result)
        except _RpcError as err:
            return _error_reply(request_id, err.code, err.message, err.data)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - any handler failure becomes a reply
            code, message, data = error_from_exception(method, exc)
            return _error_reply(request_id, code, message, data)

    def _dispatch(self, method: str, params: Dict[str, Any]) -> Any:
        if method == "write_transport":
            try:
                params["data"] = base64.b85decode(params["data"])
            except (ValueError, binascii.Error) as err:
                raise _RpcError(
                    INVALID_PARAMS, f"method write_transport: parameter data: not base85: {err}"
                ) from None
        result = getattr(self._handler, method)(**params)
        if method == "server_info_query":
            result = dict(result)
            result.setdefault("protocol_version", PROTOCOL_VERSION)
        elif method == "open_transport":
            result = {"timeouts": dict(result)}
        elif method == "read_transport":
            data = bytes(result)
            if not data:
                # Never hand the client empty data: it would spin; an empty read is a time-out.
                raise TransportTimeoutError("read_transport: the handler returned no data")
            result = {"data": base64.b85encode(data).decode("ascii")}
        elif method in ("generate_project", "build", "flash", "close_transport", "write_transport"):
            result = None
        return result

    def _write_reply(self, reply: Dict[str, Any]) -> bool:
        try:
            text = json.dumps(reply)
        except (TypeError, ValueError) as err:
            text = json.dumps(
                _error_reply(
                    reply.get("id"), INTERNAL_ERROR, f"internal error: reply is not JSON: {err}"
                )
            )
        _LOG.debug("reply -> %s", text[:2000])
        try:
            self._write_file.write(text.encode("utf-8") + b"\n")
            self._write_file.flush()
        except (OSError, ValueError) as err:
            _LOG.info("the client is gone (%s); stopping", err)
            return False
        return True

    def _skip_rest_of_line(self) -> None:
        while True:
            chunk = self._read_file.readline(MAX_LINE_BYTES)
            if not chunk or chunk.endswith(b"\n"):
                return


def _request_id(request: Any) -> Union[int, str]:
    """The id of a request; errors raised here are answered with ``"id": null``."""
    if not isinstance(request, dict):
        raise _RpcError(
            INVALID_REQUEST, f"invalid request: want a JSON object, got {json_type(request)}"
        )
    if "id" not in request:
        raise _RpcError(
            INVALID_REQUEST,
            'invalid request: no "id": notifications are not supported, the request was not '
            "executed",
        )
    request_id = request["id"]
    if not (_is_int(request_id) or isinstance(request_id, str)):
        raise _RpcError(
            INVALID_REQUEST,
            f'invalid request: "id" must be an integer or a string, got '
            f"{json.dumps(request_id)[:100]}; the request was not executed",
        )
    return request_id


def _method_and_params(request: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    if request.get("jsonrpc") != "2.0":
        got = json.dumps(request["jsonrpc"])[:100] if "jsonrpc" in request else "nothing"
        raise _RpcError(INVALID_REQUEST, f'invalid request: "jsonrpc" must be "2.0", got {got}')
    method = request.get("method")
    if not isinstance(method, str) or not _METHOD_NAME.match(method):
        got = json.dumps(method)[:100] if "method" in request else "nothing"
        raise _RpcError(
            INVALID_REQUEST,
            f'invalid request: "method" must be a string of [A-Za-z0-9_], got {got}',
        )
    params = request.get("params", {})
    if not isinstance(params, dict):
        raise _RpcError(
            INVALID_REQUEST,
            f'invalid request: "params" must be an object, got {json_type(params)}',
        )
    return method, params


def error_from_exception(method: str, exc: BaseException) -> Tuple[int, str, Any]:
    """The (code, message, data) of the error reply for an exception raised by a handler."""
    if isinstance(exc, TransportTimeoutError):
        return SERVER_ERROR, IO_TIMEOUT, None
    if isinstance(exc, TransportClosedError):
        return SERVER_ERROR, TRANSPORT_CLOSED, {"traceback": str(exc)}
    if isinstance(exc, ProjectApiError) and exc.code in ERROR_CODES:
        data = exc.data
        if exc.code == SERVER_ERROR and data is None:
            data = {"traceback": _format_traceback(exc)}
        return exc.code, _one_line(str(exc)), data
    if isinstance(exc, MlfProjectError):
        return SERVER_ERROR, _one_line(str(exc)), {"traceback": _format_traceback(exc)}
    message = f"{method} failed: {type(exc).__name__}: {exc}"
    return SERVER_ERROR, _one_line(message), {"traceback": _format_traceback(exc)}


def _format_traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "error"


def _result_reply(request_id: JsonId, result: Any) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error_reply(request_id: JsonId, code: int, message: str, data: Any = None) -> Dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": data},
    }


# --- entry points ---------------------------------------------------------------------------


def _parent_cwd() -> Optional[str]:
    """The working directory of the process that started the server (Linux): TVM's client
    starts it in the project directory, while the relative paths it sends are its own."""
    try:
        return os.readlink(f"/proc/{os.getppid()}/cwd")
    except OSError:
        return None


def serve(
    read_fd: int,
    write_fd: int,
    server_dir: Union[str, Path],
    *,
    client_cwd: Optional[str] = None,
) -> int:
    """Serves the Project API for ``server_dir`` (a template or generated project) on two file
    descriptors until end of file; returns the exit status (0)."""
    from .handler import CLIENT_CWD_ENV, ProjectApiHandler

    if client_cwd is None and not os.environ.get(CLIENT_CWD_ENV):
        client_cwd = _parent_cwd()
    handler = ProjectApiHandler(server_dir, client_cwd=client_cwd)
    handler.client_fd = read_fd
    read_file = os.fdopen(read_fd, "rb", buffering=1 << 16)
    write_file = os.fdopen(write_fd, "wb", buffering=0)
    previous = _stop_on_sigterm()
    try:
        ProjectApiServer(read_file, write_file, handler).serve_forever()
    finally:
        _restore_sigterm(previous)
        for stream in (read_file, write_file):
            with contextlib.suppress(OSError):
                stream.close()
    return 0


def main(argv: Optional[Sequence[str]] = None, *, server_dir: Union[str, Path, None] = None) -> int:
    """``microtvm_api_server.py --read-fd R --write-fd W [--debug]``: what TVM's client runs.
    ``server_dir`` is the directory the script lives in."""
    parser = argparse.ArgumentParser(
        prog="microtvm_api_server.py",
        description="mlf-project-api's microTVM Project API server (JSON-RPC protocol v1).",
    )
    parser.add_argument("--read-fd", type=int, required=True, help="fd to read requests from")
    parser.add_argument("--write-fd", type=int, required=True, help="fd to write replies to")
    parser.add_argument("--debug", action="store_true", help="log every request and reply")
    args = parser.parse_args(argv)
    configure_logging(args.debug)
    directory = Path(server_dir) if server_dir is not None else Path.cwd()
    return serve(args.read_fd, args.write_fd, directory)


def configure_logging(debug: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        stream=sys.stderr,
        format="%(name)s: %(message)s" if not debug else "%(asctime)s %(name)s: %(message)s",
    )


def _stop_on_sigterm() -> Any:
    """SIGTERM ends the loop through SystemExit, so the handler still reaps the device."""

    def _raise(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    try:
        return signal.signal(signal.SIGTERM, _raise)
    except ValueError:  # not the main thread (tests serve from a thread)
        return None


def _restore_sigterm(previous: Any) -> None:
    if previous is not None:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)
