"""The JSON-RPC loop, byte for byte: reply shapes, base85, every error path, and that the
server keeps serving after each bad request (tests drive it over os.pipe() pairs)."""

from __future__ import annotations

import base64
import json
import os
import threading
from typing import Any, Dict, List, Optional, Tuple

import pytest

from project_api.errors import (
    BuildError,
    ProjectApiError,
    TransportClosedError,
    TransportTimeoutError,
)
from project_api.serve.server import ProjectApiServer

TIMEOUTS = {
    "session_start_retry_timeout_sec": 0,
    "session_start_timeout_sec": 5,
    "session_established_timeout_sec": 5,
}
INFO = {
    "platform_name": "fake",
    "is_template": True,
    "model_library_format_path": "",
    "project_options": [],
    "protocol_version": 1,
}


class FakeHandler:
    """Records calls; ``fail[method]`` is raised, ``results[method]`` returned."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, Dict[str, Any]]] = []
        self.fail: Dict[str, BaseException] = {}
        self.results: Dict[str, Any] = {
            "server_info_query": INFO,
            "open_transport": TIMEOUTS,
            "read_transport": b"\x00\x01abc",
        }
        self.shutdowns = 0

    def _call(self, method: str, **params: Any) -> Any:
        self.calls.append((method, params))
        if method in self.fail:
            raise self.fail[method]
        return self.results.get(method)

    def server_info_query(self, tvm_version: Optional[str]) -> Any:
        return self._call("server_info_query", tvm_version=tvm_version)

    def generate_project(self, **params: Any) -> Any:
        return self._call("generate_project", **params)

    def build(self, options: Dict[str, Any]) -> Any:
        return self._call("build", options=options)

    def flash(self, options: Dict[str, Any]) -> Any:
        return self._call("flash", options=options)

    def open_transport(self, options: Dict[str, Any]) -> Any:
        return self._call("open_transport", options=options)

    def close_transport(self) -> Any:
        return self._call("close_transport")

    def read_transport(self, n: int, timeout_sec: Optional[float]) -> Any:
        return self._call("read_transport", n=n, timeout_sec=timeout_sec)

    def write_transport(self, data: bytes, timeout_sec: Optional[float]) -> Any:
        return self._call("write_transport", data=data, timeout_sec=timeout_sec)

    def shutdown(self) -> None:
        self.shutdowns += 1


class Wire:
    """A server on a thread, spoken to with raw request lines over two pipes."""

    def __init__(self, handler: Any) -> None:
        server_read, self._to_server_fd = os.pipe()
        self._from_server_fd, server_write = os.pipe()
        self.server = ProjectApiServer(
            os.fdopen(server_read, "rb"), os.fdopen(server_write, "wb", buffering=0), handler
        )
        self.to_server = os.fdopen(self._to_server_fd, "wb", buffering=0)
        self.from_server = os.fdopen(self._from_server_fd, "rb")
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            self.server.serve_forever()
        finally:
            self.server._read_file.close()
            self.server._write_file.close()

    def send(self, line: bytes) -> bytes:
        self.to_server.write(line)
        return self.from_server.readline()

    def call(self, obj: Any) -> Dict[str, Any]:
        reply = json.loads(self.send(json.dumps(obj).encode() + b"\n"))
        assert isinstance(reply, dict)
        return reply

    def close(self) -> None:
        if not self.to_server.closed:
            self.to_server.close()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "server did not stop at end of file"
        self.from_server.close()


@pytest.fixture
def handler() -> FakeHandler:
    return FakeHandler()


@pytest.fixture
def wire(handler: FakeHandler) -> Any:
    w = Wire(handler)
    yield w
    w.close()


def request(method: str, params: Any, rid: Any = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": rid}).encode()


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def ok(rid: Any, result: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "result": result})


def err(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    return line(
        {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message, "data": data}}
    )


def still_serving(wire: Wire, rid: int = 99) -> None:
    assert wire.send(request("server_info_query", {"tvm_version": "0.14.0"}, rid) + b"\n") == ok(
        rid, INFO
    )


# --- reply shapes ---------------------------------------------------------------------------


def test_server_info_query_reply(wire: Wire, handler: FakeHandler) -> None:
    reply = wire.send(request("server_info_query", {"tvm_version": "0.14.0"}) + b"\n")
    assert reply == (
        b'{"jsonrpc": "2.0", "id": 1, "result": {"platform_name": "fake", "is_template": true, '
        b'"model_library_format_path": "", "project_options": [], "protocol_version": 1}}\n'
    )
    assert handler.calls == [("server_info_query", {"tvm_version": "0.14.0"})]


def test_server_info_query_without_tvm_version_is_tvm_0_8(wire: Wire, handler: FakeHandler) -> None:
    assert wire.send(request("server_info_query", {}, 5) + b"\n") == ok(5, INFO)
    assert handler.calls == [("server_info_query", {"tvm_version": None})]


def test_protocol_version_added_when_handler_omits_it(wire: Wire, handler: FakeHandler) -> None:
    handler.results["server_info_query"] = {"platform_name": "x"}
    assert wire.send(request("server_info_query", {"tvm_version": "1"}) + b"\n") == ok(
        1, {"platform_name": "x", "protocol_version": 1}
    )


def test_generate_project_reply_and_params(wire: Wire, handler: FakeHandler) -> None:
    params = {
        "model_library_format_path": "/tmp/m.tar",
        "standalone_crt_dir": "/nonexistent/crt",
        "project_dir": "/tmp/p",
        "options": {"board": "host"},
    }
    assert wire.send(request("generate_project", params, 2) + b"\n") == (
        b'{"jsonrpc": "2.0", "id": 2, "result": null}\n'
    )
    assert handler.calls == [("generate_project", params)]


def test_generate_project_without_standalone_crt_dir(wire: Wire, handler: FakeHandler) -> None:
    params = {"model_library_format_path": "/m.tar", "project_dir": "/p", "options": {}}
    assert wire.send(request("generate_project", params, 2) + b"\n") == ok(2, None)
    assert handler.calls[0][1]["standalone_crt_dir"] is None


@pytest.mark.parametrize("method", ["build", "flash"])
def test_build_and_flash_reply_null(wire: Wire, handler: FakeHandler, method: str) -> None:
    handler.results[method] = "ignored"
    assert wire.send(request(method, {"options": {"verbose": "false"}}, 3) + b"\n") == ok(3, None)
    assert handler.calls == [(method, {"options": {"verbose": "false"}})]


def test_null_options_mean_empty(wire: Wire, handler: FakeHandler) -> None:
    assert wire.send(request("build", {"options": None}) + b"\n") == ok(1, None)
    assert handler.calls == [("build", {"options": {}})]


def test_open_transport_reply(wire: Wire) -> None:
    assert wire.send(request("open_transport", {"options": {}}, 4) + b"\n") == (
        b'{"jsonrpc": "2.0", "id": 4, "result": {"timeouts": '
        b'{"session_start_retry_timeout_sec": 0, "session_start_timeout_sec": 5, '
        b'"session_established_timeout_sec": 5}}}\n'
    )


def test_close_transport_reply(wire: Wire, handler: FakeHandler) -> None:
    assert wire.send(request("close_transport", {}, 6) + b"\n") == ok(6, None)
    assert handler.calls == [("close_transport", {})]


def test_base85_example_of_the_spec() -> None:
    assert base64.b85encode(b"\x00\x01abc") == b"00CiQV*"
    assert base64.b85decode("00CiQV*") == b"\x00\x01abc"


def test_read_transport_base85_byte_exact(wire: Wire, handler: FakeHandler) -> None:
    assert wire.send(request("read_transport", {"n": 5, "timeout_sec": 0.5}, 7) + b"\n") == (
        b'{"jsonrpc": "2.0", "id": 7, "result": {"data": "00CiQV*"}}\n'
    )
    assert handler.calls == [("read_transport", {"n": 5, "timeout_sec": 0.5})]


def test_write_transport_base85_byte_exact(wire: Wire, handler: FakeHandler) -> None:
    reply = wire.send(
        b'{"jsonrpc": "2.0", "method": "write_transport", '
        b'"params": {"data": "00CiQV*", "timeout_sec": null}, "id": 8}\n'
    )
    assert reply == b'{"jsonrpc": "2.0", "id": 8, "result": null}\n'
    assert handler.calls == [("write_transport", {"data": b"\x00\x01abc", "timeout_sec": None})]


def test_string_ids_are_echoed(wire: Wire) -> None:
    assert wire.send(request("close_transport", {}, "abc") + b"\n") == ok("abc", None)


def test_params_may_be_omitted(wire: Wire) -> None:
    assert wire.send(b'{"jsonrpc": "2.0", "method": "close_transport", "id": 3}\n') == ok(3, None)


# --- transport errors -----------------------------------------------------------------------


def test_empty_read_becomes_io_timeout(wire: Wire, handler: FakeHandler) -> None:
    handler.results["read_transport"] = b""
    reply = wire.send(request("read_transport", {"n": 4, "timeout_sec": 0}) + b"\n")
    assert reply == err(1, -32000, "IoTimeoutError")


def test_timeout_error_is_io_timeout_error(wire: Wire, handler: FakeHandler) -> None:
    handler.fail["read_transport"] = TransportTimeoutError("nothing")
    reply = wire.send(request("read_transport", {"n": 4, "timeout_sec": 0.1}, 9) + b"\n")
    assert (
        reply == b'{"jsonrpc": "2.0", "id": 9, "error": {"code": -32000, '
        b'"message": "IoTimeoutError", "data": null}}\n'
    )
    still_serving(wire)


def test_closed_error_is_transport_closed_error(wire: Wire, handler: FakeHandler) -> None:
    handler.fail["write_transport"] = TransportClosedError("the firmware exited with status 3")
    reply = wire.send(request("write_transport", {"data": "00CiQV*", "timeout_sec": 1}) + b"\n")
    assert reply == err(
        1, -32000, "TransportClosedError", {"traceback": "the firmware exited with status 3"}
    )
    still_serving(wire)


# --- handler failures -----------------------------------------------------------------------


def test_package_error_is_32000_with_message_and_traceback(
    wire: Wire, handler: FakeHandler
) -> None:
    handler.fail["build"] = BuildError("cmake failed:\n  main.c:3: error", hint="see the log")
    reply = wire.call({"jsonrpc": "2.0", "method": "build", "params": {"options": {}}, "id": 11})
    assert reply["id"] == 11
    error = reply["error"]
    assert error["code"] == -32000
    assert error["message"] == "cmake failed: main.c:3: error (see the log)"
    assert "Traceback" in error["data"]["traceback"]
    assert "BuildError" in error["data"]["traceback"]
    still_serving(wire)


def test_unexpected_exception_is_32000(wire: Wire, handler: FakeHandler) -> None:
    handler.fail["flash"] = ValueError("bad\nthing")
    reply = wire.call({"jsonrpc": "2.0", "method": "flash", "params": {"options": {}}, "id": 12})
    assert reply["error"]["code"] == -32000
    assert reply["error"]["message"] == "flash failed: ValueError: bad thing"
    assert "ValueError: bad" in reply["error"]["data"]["traceback"]
    still_serving(wire)


def test_invalid_params_from_handler_keep_their_code(wire: Wire, handler: FakeHandler) -> None:
    handler.fail["build"] = ProjectApiError("build: option x: nope", code=-32602)
    reply = wire.send(request("build", {"options": {}}) + b"\n")
    assert reply == err(1, -32602, "build: option x: nope")


def test_unknown_error_codes_become_32000(wire: Wire, handler: FakeHandler) -> None:
    handler.fail["build"] = ProjectApiError("odd", code=12)
    reply = wire.call({"jsonrpc": "2.0", "method": "build", "params": {"options": {}}, "id": 1})
    assert reply["error"]["code"] == -32000
    assert reply["error"]["message"] == "odd"


def test_unencodable_result_is_32603(wire: Wire, handler: FakeHandler) -> None:
    handler.results["server_info_query"] = {"x": object()}
    reply = wire.call({"jsonrpc": "2.0", "method": "server_info_query", "params": {}, "id": 5})
    assert reply["id"] == 5
    assert reply["error"]["code"] == -32603
    assert reply["error"]["message"].startswith("internal error: reply is not JSON")


# --- malformed input: every one answered, and the server keeps serving ----------------------

BAD_LINES = [
    # (raw line, reply id, code, message)
    (b"garbage", None, -32700, "parse error: Expecting value: line 1 column 1 (char 0)"),
    (b"", None, -32700, "parse error: empty request line"),
    (b"  \t", None, -32700, "parse error: empty request line"),
    (
        b'{"jsonrpc": "2.0", ',
        None,
        -32700,
        "parse error: Expecting property name enclosed in double quotes: "
        "line 1 column 20 (char 19)",
    ),
    (b"\xff\xfe{}", None, -32700, "parse error: request is not valid UTF-8"),
    (b"[1, 2]", None, -32600, "invalid request: want a JSON object, got array"),
    (b"42", None, -32600, "invalid request: want a JSON object, got number"),
    (b'"build"', None, -32600, "invalid request: want a JSON object, got string"),
    (b"null", None, -32600, "invalid request: want a JSON object, got null"),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {}}}',
        None,
        -32600,
        'invalid request: no "id": notifications are not supported, the request was not executed',
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {}}, "id": null}',
        None,
        -32600,
        'invalid request: "id" must be an integer or a string, got null; '
        "the request was not executed",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {}}, "id": true}',
        None,
        -32600,
        'invalid request: "id" must be an integer or a string, got true; '
        "the request was not executed",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {}}, "id": 1.5}',
        None,
        -32600,
        'invalid request: "id" must be an integer or a string, got 1.5; '
        "the request was not executed",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {}}, "id": [1]}',
        None,
        -32600,
        'invalid request: "id" must be an integer or a string, got [1]; '
        "the request was not executed",
    ),
    (
        b'{"jsonrpc": "1.0", "method": "build", "params": {"options": {}}, "id": 3}',
        3,
        -32600,
        'invalid request: "jsonrpc" must be "2.0", got "1.0"',
    ),
    (
        b'{"jsonrpc": 2.0, "method": "build", "params": {"options": {}}, "id": 3}',
        3,
        -32600,
        'invalid request: "jsonrpc" must be "2.0", got 2.0',
    ),
    (
        b'{"method": "build", "params": {"options": {}}, "id": 3}',
        3,
        -32600,
        'invalid request: "jsonrpc" must be "2.0", got nothing',
    ),
    (
        b'{"jsonrpc": "2.0", "params": {}, "id": 4}',
        4,
        -32600,
        'invalid request: "method" must be a string of [A-Za-z0-9_], got nothing',
    ),
    (
        b'{"jsonrpc": "2.0", "method": 7, "params": {}, "id": 4}',
        4,
        -32600,
        'invalid request: "method" must be a string of [A-Za-z0-9_], got 7',
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build.x", "params": {}, "id": 4}',
        4,
        -32600,
        'invalid request: "method" must be a string of [A-Za-z0-9_], got "build.x"',
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": [{}], "id": 5}',
        5,
        -32600,
        'invalid request: "params" must be an object, got array',
    ),
    (
        b'{"jsonrpc": "2.0", "method": "frobnicate", "params": {}, "id": 6}',
        6,
        -32601,
        "frobnicate: no such method",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "shutdown", "params": {}, "id": 6}',
        6,
        -32601,
        "shutdown: no such method",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": {}, "id": 7}',
        7,
        -32602,
        "method build: parameter options not given",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {}, "x": 1}, "id": 7}',
        7,
        -32602,
        "build: extra parameters: x",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "close_transport", "params": {"a": 1, "b": 2}, "id": 7}',
        7,
        -32602,
        "close_transport: extra parameters: a, b",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "build", "params": {"options": "x"}, "id": 7}',
        7,
        -32602,
        "method build: parameter options: want object, got string",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "generate_project", "params": {"project_dir": "/p", '
        b'"options": {}}, "id": 8}',
        8,
        -32602,
        "method generate_project: parameter model_library_format_path not given",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "generate_project", "params": {"model_library_format_path":'
        b' 1, "project_dir": "/p", "options": {}}, "id": 8}',
        8,
        -32602,
        "method generate_project: parameter model_library_format_path: want string, got number",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": 4}, "id": 9}',
        9,
        -32602,
        "method read_transport: parameter timeout_sec not given",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": "4", "timeout_sec": 1},'
        b' "id": 9}',
        9,
        -32602,
        "method read_transport: parameter n: want integer, got string",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": true, "timeout_sec": 1},'
        b' "id": 9}',
        9,
        -32602,
        "method read_transport: parameter n: want integer, got boolean",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": 0, "timeout_sec": 1},'
        b' "id": 9}',
        9,
        -32602,
        "method read_transport: parameter n: want >= 1, got 0",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": 1, "timeout_sec": -1},'
        b' "id": 9}',
        9,
        -32602,
        "method read_transport: parameter timeout_sec: want >= 0 or null (at most 31536000, a "
        "year), got -1",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": 1, "timeout_sec": NaN},'
        b' "id": 9}',
        9,
        -32602,
        "method read_transport: parameter timeout_sec: want >= 0 or null (at most 31536000, a "
        "year), got nan",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "write_transport", "params": {"data": "", "timeout_sec":'
        b' Infinity}, "id": 9}',
        9,
        -32602,
        "method write_transport: parameter timeout_sec: want >= 0 or null (at most 31536000, a "
        "year), got inf",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": 1, "timeout_sec": 1e300},'
        b' "id": 9}',
        9,
        -32602,
        "method read_transport: parameter timeout_sec: want >= 0 or null (at most 31536000, a "
        "year), got 1e+300",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "read_transport", "params": {"n": 1, "timeout_sec": "1"},'
        b' "id": 9}',
        9,
        -32602,
        "method read_transport: parameter timeout_sec: want number or null, got string",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "write_transport", "params": {"data": 5, "timeout_sec": 1},'
        b' "id": 10}',
        10,
        -32602,
        "method write_transport: parameter data: want string, got number",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "write_transport", "params": {"data": "a b", '
        b'"timeout_sec": 1}, "id": 10}',
        10,
        -32602,
        "method write_transport: parameter data: not base85: bad base85 character at position 1",
    ),
    (
        b'{"jsonrpc": "2.0", "method": "server_info_query", "params": {"tvm_version": 14}, '
        b'"id": 11}',
        11,
        -32602,
        "method server_info_query: parameter tvm_version: want string, got number",
    ),
]


@pytest.mark.parametrize(
    "raw, rid, code, message", BAD_LINES, ids=[repr(b[0][:40]) for b in BAD_LINES]
)
def test_bad_request_answered_and_server_keeps_serving(
    wire: Wire, handler: FakeHandler, raw: bytes, rid: Any, code: int, message: str
) -> None:
    assert wire.send(raw + b"\n") == err(rid, code, message)
    assert handler.calls == [], "a bad request must not reach the handler"
    still_serving(wire)


def test_many_bad_lines_in_a_row(wire: Wire) -> None:
    for i, (raw, rid, code, message) in enumerate(BAD_LINES):
        assert wire.send(raw + b"\n") == err(rid, code, message), i
    still_serving(wire)


def test_notification_is_not_executed(wire: Wire, handler: FakeHandler) -> None:
    reply = wire.call({"jsonrpc": "2.0", "method": "close_transport", "params": {}})
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600
    assert handler.calls == []


def test_bad_request_id_is_echoed_when_readable(wire: Wire) -> None:
    reply = wire.call({"jsonrpc": "2.1", "method": "build", "params": {}, "id": "req-7"})
    assert reply["id"] == "req-7"


def test_crlf_line_endings_are_accepted(wire: Wire) -> None:
    assert wire.send(request("close_transport", {}, 2) + b"\r\n") == ok(2, None)


# --- end of serving -------------------------------------------------------------------------


def test_eof_ends_serving_and_shuts_the_handler_down(handler: FakeHandler) -> None:
    w = Wire(handler)
    still_serving(w)
    w.close()
    assert handler.shutdowns == 1


def test_last_line_without_newline_is_answered_before_eof(handler: FakeHandler) -> None:
    w = Wire(handler)
    w.to_server.write(request("close_transport", {}, 3))
    w.to_server.close()
    assert w.from_server.readline() == ok(3, None)
    assert w.from_server.readline() == b""
    w.close()
    assert handler.shutdowns == 1


def test_client_gone_broken_pipe_ends_serving(handler: FakeHandler) -> None:
    w = Wire(handler)
    still_serving(w)
    w.from_server.close()  # the client stops listening
    w.to_server.write(request("close_transport", {}, 4) + b"\n")
    w.thread.join(timeout=10)
    assert not w.thread.is_alive()
    assert handler.shutdowns == 1
    w.to_server.close()


def test_shutdown_runs_even_when_the_handler_raises_on_eof(handler: FakeHandler) -> None:
    w = Wire(handler)
    handler.fail["build"] = KeyError("x")
    w.call({"jsonrpc": "2.0", "method": "build", "params": {"options": {}}, "id": 1})
    w.close()
    assert handler.shutdowns == 1


def test_overlong_line_is_a_parse_error(
    handler: FakeHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("project_api.serve.server.MAX_LINE_BYTES", 100)
    w = Wire(handler)
    try:
        reply = w.send(
            b'{"jsonrpc": "2.0", "method": "build", "params": {"options": {"x": "'
            + b"y" * 500
            + b'"}}, "id": 1}\n'
        )
        assert reply == err(None, -32700, "parse error: request line longer than 100 bytes")
        assert w.send(request("close_transport", {}, 2) + b"\n") == ok(2, None)
        assert handler.calls == [("close_transport", {})]
    finally:
        w.close()
