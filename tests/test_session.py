"""Session against the pure-Python device (project_api.transport.emulator) on a pty: the
protocol's happy path, input validation, and every error path (time-outs, closed links,
corrupt, truncated and hidden frames in both directions, device errors, restarts) — each
must recover or give a clear error, never a hang."""

from __future__ import annotations

import struct
import time
from contextlib import contextmanager
from typing import Any, Iterator, List

import numpy as np
import pytest

from project_api.errors import (
    DeviceError,
    InputError,
    MlfProjectError,
    ProtocolError,
    TransportClosedError,
    TransportTimeoutError,
)
from project_api.read.dtypes import BFLOAT16
from project_api.transport import messages as msg
from project_api.transport.emulator import DeviceEmulator, EmulatedModel, Faults
from project_api.transport.frames import encode_frame
from project_api.transport.session import RunStats, Session


def adder() -> EmulatedModel:
    return EmulatedModel(
        "adder",
        [("x", (2, 3), "float32"), ("y\u00e9", (4,), "int8")],
        [((2, 3), "float32"), ((1,), "int32")],
        lambda a: [a[0] * 2 + 1, np.array([a[1].astype(np.int32).sum()])],
        raw_input_names=[b"x", b"y\\u00e9"],
    )


def echo(n: int) -> EmulatedModel:
    return EmulatedModel(
        "echo", [("data", (n,), "uint8")], [((n,), "uint8")], lambda a: [a[0] ^ 0x5A]
    )


X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.array([1, 2, 3, -4], dtype=np.int8)


@contextmanager
def connected(emulator: DeviceEmulator, **options: Any) -> Iterator[Session]:
    options.setdefault("timeout", 2.0)
    with emulator.serve_on_pty() as port:
        session = Session(port, **options)
        try:
            session.connect()
            yield session
        finally:
            session.close()


def test_connect_identifies_the_device_and_its_models() -> None:
    emulator = DeviceEmulator([adder(), echo(10)], board="emu-board", tick_hz=1000)
    with connected(emulator) as s:
        info = s.info
        assert (info.board, info.project_type, info.protocol_version) == (
            "emu-board",
            "host_driven",
            1,
        )
        assert info.max_payload == 4096 and info.tick_hz == 1000
        assert [m.name for m in s.models] == ["adder", "echo"]
        model = s.model("adder")
        assert [(t.name, t.shape, t.dtype, t.nbytes) for t in model.inputs] == [
            ("x", (2, 3), "float32", 24),
            ("y\u00e9", (4,), "int8", 4),  # the JSON escape was decoded
        ]
        assert [(t.name, t.shape, t.dtype) for t in model.outputs] == [
            ("output0", (2, 3), "float32"),
            ("output1", (1,), "int32"),
        ]
        assert s.model(1).name == "echo"


def test_run_with_names_and_with_a_list() -> None:
    with connected(DeviceEmulator([adder()])) as s:
        out = s.run({"x": X, "y\u00e9": Y})
        assert list(out) == ["output0", "output1"]
        np.testing.assert_array_equal(out["output0"], X * 2 + 1)
        assert out["output0"].dtype == np.float32 and out["output0"].shape == (2, 3)
        assert out["output1"].tolist() == [2]
        out = s.run([X + 1, [0, 0, 0, 1]], model="adder")  # a plain list takes the input dtype
        np.testing.assert_array_equal(out["output0"], (X + 1) * 2 + 1)
        assert out["output1"].tolist() == [1]


def test_large_tensors_travel_in_chunks_of_the_devices_max_payload() -> None:
    emulator = DeviceEmulator([echo(10_000)], max_payload=256)
    with connected(emulator) as s:
        data = np.random.default_rng(0).integers(0, 256, 10_000, dtype=np.uint8)
        out = s.run([data])
        np.testing.assert_array_equal(out["output0"], data ^ 0x5A)
        sets = emulator.requests.count(msg.MsgType.SET_INPUT)
        gets = emulator.requests.count(msg.MsgType.GET_OUTPUT)
        assert sets == -(-10_000 // (256 - 8)) and gets == -(-10_000 // 256)


def test_set_input_invoke_get_output_and_stats() -> None:
    with connected(DeviceEmulator([adder()], tick_hz=1_000_000), ticks_to_instructions=2.5) as s:
        s.set_input("x", X)
        s.set_input(1, Y)
        stats = s.invoke()
        assert isinstance(stats, RunStats) and s.last_stats is stats
        assert stats.tick_hz == 1_000_000 and stats.device_seconds == stats.ticks / 1e6
        assert stats.instructions == round(stats.ticks * 2.5)
        assert stats.host_seconds > 0
        np.testing.assert_array_equal(s.get_output(0), X * 2 + 1)
    with connected(DeviceEmulator([adder()])) as s:
        assert s.invoke().instructions is None


def test_dtypes_numpy_lacks_and_byte_order() -> None:
    model = EmulatedModel(
        "kinds",
        [("h", (3,), "float16"), ("b", (2,), "bfloat16"), ("flag", (2,), "bool")],
        [((3,), "float16"), ((2,), "bfloat16"), ((2,), "bool")],
        lambda a: [a[0] * 2, a[1], ~a[2]],
    )
    with connected(DeviceEmulator([model])) as s:
        bf = np.array([0x3F80, 0x4000], dtype=np.uint16)  # 1.0, 2.0 as bfloat16 words
        out = s.run([np.array([1, 2, 3], ">f2"), bf.view(BFLOAT16), np.array([True, False])])
        np.testing.assert_array_equal(out["output0"], [2, 4, 6])
        assert out["output1"].dtype == BFLOAT16 and out["output1"].tolist() == [0x3F80, 0x4000]
        assert out["output2"].tolist() == [False, True]


# ---- validation before anything is sent ----------------------------------------------


@pytest.mark.parametrize(
    "inputs, pattern",
    [
        ({"x": X, "y\u00e9": Y, "z": X}, "no input 'z'"),
        ({"x": X}, "no value for input 'y\u00e9'"),
        ({"x": X.astype(np.float64), "y\u00e9": Y}, "expects dtype float32, got float64"),
        ({"x": X.reshape(3, 2), "y\u00e9": Y}, r"expects shape \[2, 3\], got \[3, 2\]"),
        ([X], "takes 2 inputs, 1 given"),
        (X, "must map input names"),
        ({"x": X, "y\u00e9": ["a", "b", "c", "d"]}, "cannot make a int8 array"),
    ],
)
def test_bad_inputs_are_refused_with_clear_errors(inputs: Any, pattern: str) -> None:
    emulator = DeviceEmulator([adder()])
    with connected(emulator) as s:
        with pytest.raises(InputError, match=pattern):
            s.run(inputs)
        assert msg.MsgType.SET_INPUT not in emulator.requests


def test_bad_model_or_tensor_references() -> None:
    with connected(DeviceEmulator([adder()])) as s:
        with pytest.raises(InputError, match="no model 'nope'"):
            s.run([X, Y], model="nope")
        with pytest.raises(InputError, match="no model 3"):
            s.model(3)
        with pytest.raises(InputError, match="no input 'q'"):
            s.set_input("q", X)
        with pytest.raises(InputError, match="no input 5"):
            s.set_input(5, X)
        with pytest.raises(InputError, match="no 7"):
            s.get_output(7)
    assert issubclass(InputError, MlfProjectError) and issubclass(InputError, ValueError)


def test_describe_pages_through_many_long_names() -> None:
    names = [f"input_{i:03d}_" + "n" * 240 for i in range(300)]  # > 64 KiB of description
    model = EmulatedModel(
        "wide",
        [(n, (1,), "int8") for n in names],
        [((1,), "int8")],
        lambda a: [a[0]],
    )
    emulator = DeviceEmulator([model])
    with connected(emulator) as s:
        assert [t.name for t in s.model(0).inputs] == names
        assert emulator.requests.count(msg.MsgType.DESCRIBE) >= 2


# ---- connecting ---------------------------------------------------------------------


def test_connect_asks_with_hello_when_the_boot_hello_was_missed() -> None:
    emulator = DeviceEmulator([adder()], announce=False)
    with connected(emulator) as s:
        assert s.counters.hello_requests >= 1
        assert s.model(0).name == "adder"


def test_connect_gets_past_boot_noise_with_a_stuck_header() -> None:
    noise = b"booting\r\n\xa5\x5a\x81\x00\xff\xff junk"  # claims a 65535-byte frame
    emulator = DeviceEmulator([adder()], faults=Faults(boot_noise=noise))
    with connected(emulator) as s:
        np.testing.assert_array_equal(s.run([X, Y])["output0"], X * 2 + 1)


def test_connect_times_out_on_a_silent_device() -> None:
    emulator = DeviceEmulator([adder()], announce=False, faults=Faults(drop_replies=10**9))
    with emulator.serve_on_pty() as port:
        session = Session(port, timeout=0.6, hello_interval=0.05)
        started = time.monotonic()
        with pytest.raises(TransportTimeoutError, match="did not identify itself within 0.6 s"):
            session.connect()
        assert time.monotonic() - started < 2.0
        assert session.counters.hello_requests >= 3
        session.close()


def test_protocol_version_and_magic_are_checked() -> None:
    class Future(DeviceEmulator):
        def _hello(self, seq: int) -> bytes:
            frame = super()._hello(seq)
            payload = bytearray(frame[6:-4])
            payload[4:6] = struct.pack("<H", 9)
            return encode_frame(0x81, seq, bytes(payload))

    port = Future([adder()]).serve_on_pty()
    with port as serial_port, pytest.raises(ProtocolError, match="protocol version 9"):
        Session(serial_port, timeout=2).connect()


# ---- failures while running ----------------------------------------------------------


def test_a_corrupt_reply_is_retried_once_and_then_refused() -> None:
    emulator = DeviceEmulator([adder()])
    with connected(emulator) as s:
        emulator.faults.corrupt_replies = 1
        np.testing.assert_array_equal(s.run([X, Y])["output0"], X * 2 + 1)
        assert s.counters.retries == 1
        emulator.faults.corrupt_replies = 100
        with pytest.raises(ProtocolError, match="corrupt frame from the device.*CRC mismatch"):
            s.invoke()


def test_garbage_between_replies_is_skipped() -> None:
    emulator = DeviceEmulator([adder()])
    with connected(emulator) as s:
        emulator.faults.garbage_before_replies = b"\x00log line\r\n\xa5"
        np.testing.assert_array_equal(s.run([X, Y])["output0"], X * 2 + 1)


def test_a_lost_reply_times_out() -> None:
    emulator = DeviceEmulator([adder()])
    with connected(emulator, timeout=0.4) as s:
        emulator.faults.drop_replies = 1
        started = time.monotonic()
        with pytest.raises(TransportTimeoutError, match="no reply to SET_INPUT within 0.4 s"):
            s.set_input(0, X)
        assert time.monotonic() - started < 1.5


def test_a_truncated_reply_is_asked_for_again() -> None:
    # Half a reply, then silence: the host settles it as cut short and resends the request.
    emulator = DeviceEmulator([adder()])
    with connected(emulator, timeout=5.0) as s:
        s.run([X, Y])
        emulator.faults.truncate_replies = 1
        started = time.monotonic()
        np.testing.assert_array_equal(s.get_output(0), X * 2 + 1)
        assert time.monotonic() - started < 2.0  # the idle gap, not the 5 s time-out
        assert s.counters.retries == 1 and s.counters.bad_frames == 1
        assert s.run([X, Y])["output1"].tolist() == [2]  # nothing left behind


def test_truncated_replies_every_time_end_in_a_clear_error() -> None:
    emulator = DeviceEmulator([adder()])
    with connected(emulator, timeout=5.0) as s:
        emulator.faults.truncate_replies = 100
        with pytest.raises(ProtocolError, match="corrupt frame .*cut short, type 0x85"):
            s.get_output(0)


def test_a_reply_behind_a_cut_short_frame_arrives_without_a_time_out() -> None:
    # The device writes the start of a frame claiming 3000 bytes, then the real reply: the
    # reply is taken for its payload until the silence, then found by the rescan.
    emulator = DeviceEmulator([adder()])
    with connected(emulator, timeout=5.0) as s:
        s.set_input(0, X)
        emulator.faults.cut_frame_before_replies = 1
        started = time.monotonic()
        s.set_input(1, Y)
        assert time.monotonic() - started < 2.0
        assert s.counters.bad_frames == 1 and s.counters.retries == 0  # nothing resent
        assert emulator.requests.count(msg.MsgType.SET_INPUT) == 2
        assert s.run([X, Y])["output1"].tolist() == [2]


def test_a_request_behind_a_cut_short_frame_is_answered_without_a_time_out() -> None:
    # Something wrote the start of a long SET_INPUT right before our request: the device
    # takes the request for its payload until our wake-up byte after a silence makes it
    # rescan, finds the request, and answers it (after a BAD_CRC for the cut-short frame).
    emulator = DeviceEmulator([adder()])
    with connected(emulator, timeout=5.0) as s:
        s.link.write_all(encode_frame(msg.MsgType.SET_INPUT, 0x99, bytes(3000))[:40])
        started = time.monotonic()
        assert s.invoke().tick_hz == emulator.tick_hz
        assert time.monotonic() - started < 2.0
        assert s.counters.wake_ups >= 1 and s.counters.retries == 0
        assert emulator.requests.count(msg.MsgType.RUN) == 1  # answered once
        np.testing.assert_array_equal(s.run([X, Y])["output0"], X * 2 + 1)


def test_garbage_with_fake_markers_before_replies_is_skipped() -> None:
    # Fake headers whose lengths the real reply completes: CRC failures, rescans, no wait.
    emulator = DeviceEmulator([adder()])
    with connected(emulator) as s:
        emulator.faults.garbage_before_replies = b"\xa5\x5a\x84\x01\x02\x00\xa5\x5a\x83\x02\x00\x00"
        started = time.monotonic()
        for _ in range(3):
            np.testing.assert_array_equal(s.run([X, Y])["output0"], X * 2 + 1)
        assert time.monotonic() - started < 1.5
        assert s.counters.bad_frames >= 6 and s.counters.retries == 0


def test_frames_inside_tensor_data_are_never_taken_for_frames() -> None:
    # Input bytes hold whole requests (EXIT!), output bytes whole replies — among them a boot
    # HELLO that would read as a device restart: each is data, in both directions.
    requests = encode_frame(msg.MsgType.EXIT, 1, b"\x07\0\0\0") + encode_frame(msg.MsgType.HELLO, 2)
    hello = DeviceEmulator([adder()])._hello(0)
    replies = encode_frame(msg.MsgType.RUN | msg.REPLY, 3, bytes(24)) + hello
    data = np.frombuffer(requests + bytes(b ^ 0x5A for b in replies), dtype=np.uint8)
    emulator = DeviceEmulator([echo(len(data))])
    with connected(emulator) as s:
        stale = s.counters.stale_frames  # connect may see its own HELLO's answer late
        out = s.run([data])["output0"]
        assert out.tobytes()[len(requests) :] == replies
        assert emulator.exit_status is None
        assert emulator.requests.count(msg.MsgType.HELLO) == s.counters.hello_requests
        assert s.counters.bad_frames == 0 and s.counters.stale_frames == stale


def test_a_hanging_run_times_out_with_run_timeout() -> None:
    emulator = DeviceEmulator([adder()], faults=Faults(hang_on_run=True))
    with connected(emulator, timeout=2.0, run_timeout=0.3) as s:
        started = time.monotonic()
        with pytest.raises(TransportTimeoutError, match="no reply to RUN within 0.3 s"):
            s.run([X, Y])
        assert time.monotonic() - started < 1.5


def test_a_device_dying_mid_run_closes_the_link_at_once() -> None:
    emulator = DeviceEmulator([adder()], faults=Faults(die_on_run=True))
    with connected(emulator, timeout=5.0) as s:
        started = time.monotonic()
        with pytest.raises(TransportClosedError, match="closed while waiting for the reply to RUN"):
            s.run([X, Y])
        assert time.monotonic() - started < 2.0
        with pytest.raises(TransportClosedError):
            s.invoke()


def test_a_device_error_carries_code_and_node() -> None:
    emulator = DeviceEmulator([adder()], faults=Faults(run_error=(9, 42, "add failed")))
    with connected(emulator) as s:
        with pytest.raises(DeviceError) as info:
            s.run([X, Y])
        assert info.value.code == 9 and info.value.node == 42
        assert "operator failed (code 9, graph node 42): add failed" in str(info.value)


def test_a_protocol_error_from_the_device() -> None:
    with connected(DeviceEmulator([adder()])) as s:
        with pytest.raises(DeviceError) as info:
            s._request(msg.MsgType.DESCRIBE, msg.describe_request(7))
        assert info.value.code == msg.ErrorCode.BAD_MODEL and info.value.node is None
        with pytest.raises(DeviceError, match="unknown request type"):
            s._request(0x33, b"")


def test_a_model_that_failed_to_initialise() -> None:
    broken = EmulatedModel("broken", [], [], lambda a: [], init_error=(7, "fused_add missing"))
    with connected(DeviceEmulator([adder(), broken])) as s:
        model = s.model("broken")
        assert (
            model.error_code == 7 and "missing function (code 7): fused_add missing" in model.error
        )
        with pytest.raises(DeviceError, match="failed to initialise") as info:
            s.run([], model="broken")
        assert info.value.code == 7
        assert s.run([X, Y])["output1"].tolist() == [2]  # the other model still works


def test_a_device_restart_is_detected() -> None:
    emulator = DeviceEmulator([adder()], faults=Faults(restart_on_run=True))
    with connected(emulator) as s, pytest.raises(ProtocolError, match="device restarted"):
        s.run([X, Y])


def test_exit_and_use_after_close() -> None:
    emulator = DeviceEmulator([adder()])
    with connected(emulator) as s:
        s.exit(4)
        assert emulator.exit_status == 4
        with pytest.raises(TransportClosedError, match="EXIT 4"):
            s.invoke()
    with connected(DeviceEmulator([adder()])) as s:
        s.close()
        with pytest.raises(TransportClosedError, match="closed"):
            s.run([X, Y])


def test_context_manager_connects_and_closes() -> None:
    with DeviceEmulator([adder()]).serve_on_pty() as port:
        with Session(port, timeout=2) as s:
            assert s.models[0].name == "adder"
        assert s.link.closed


def test_stale_replies_are_ignored() -> None:
    # Replies from an earlier conversation (same seq numbers) wait in the link.
    class Doubler(DeviceEmulator):
        def _reply(self, frame: bytes) -> bytes:
            out = super()._reply(frame)
            return out + out  # every reply twice

    with Doubler([adder()]).serve_on_pty() as port, Session(port, timeout=2) as s:
        for _ in range(3):
            assert s.run([X, Y])["output1"].tolist() == [2]
        assert s.counters.stale_frames > 0


def test_every_request_kind_round_trips_through_messages() -> None:
    # The request builders and reply parsers agree with the documented layouts.
    assert msg.describe_request(1, 2) == b"\x01\x00\x02\x00"
    assert msg.set_input_request(1, 2, 3, b"ab") == b"\x01\x00\x02\x00\x03\x00\x00\x00ab"
    assert msg.run_request(5) == b"\x05\x00"
    assert msg.get_output_request(1, 0, 16, 4096) == struct.pack("<HHII", 1, 0, 16, 4096)
    assert msg.exit_request(-1) == b"\xff\xff\xff\xff"
    with pytest.raises(ProtocolError, match="too short"):
        msg.RunReply.decode(b"\x00" * 10)
    # RUN: 24 bytes (before the stack field), 28, or 28 + each call's workspace (host).
    head = struct.pack("<IQQII", 0, 5, 1000, 1400, 0xFFFFFFFF)
    assert msg.RunReply.decode(head[:24]).workspace_marks is None
    assert msg.RunReply.decode(head).workspace_marks is None
    run = msg.RunReply.decode(head + struct.pack("<III", 2, 1392, 0))
    assert run.workspace_marks == (1392, 0) and run.stack_bytes_used is None
    assert msg.RunReply.decode(head + struct.pack("<I", 0)).workspace_marks == ()
    with pytest.raises(ProtocolError, match="too short"):
        msg.RunReply.decode(head + struct.pack("<II", 2, 1392))
    with pytest.raises(ProtocolError, match="too many"):
        msg.RunReply.decode(head + struct.pack("<III", 1, 1392, 0))
    with pytest.raises(ProtocolError, match="magic"):
        msg.HelloReply.decode(b"XXXX" + bytes(30))
    names: List[str] = [
        msg.decode_name(b"a\\u00e9"),
        msg.decode_name(b"bad\\q"),
        msg.decode_name(b"\xff"),
    ]
    assert names == ["a\u00e9", "bad\\q", "\ufffd"]


def test_reason_codes_are_explained_from_the_runtime_catalogue() -> None:
    """Firmware built without the runtime's English texts sends ``#<code>``; the host puts the
    description back from crt/src/mlf_internal.h, numbered as the C enum numbers it."""
    from project_api.transport.messages import ErrorReply
    from project_api.transport.reasons import explain, reason_texts

    texts = reason_texts()
    assert texts[0] == "" and texts[1] == "table missing or too large"
    assert (
        texts.index("text after the graph")
        == texts.index("workspace request beyond its window") + 1
    )
    assert explain("bad graph: #2 at node 3") == "bad graph: view outside its storage at node 3"
    assert explain("bad graph: #9999") == "bad graph: #9999"
    assert explain("a name with #2 inside") == "a name with #2 inside"
    payload = struct.pack("<HBBI", 9, 0x03, 0, 5) + b"operator failed: #11 'f'"
    assert ErrorReply.decode(payload).message == "operator failed: operator returned an error 'f'"


@pytest.mark.parametrize(
    "message, text",
    [
        ("0 11 4294967295 f", "operator returned an error 'f'"),
        ("1 8 4294967295 a b", "model init failed: function not in the system library 'a b'"),
        ("1 0 4294967295", "model init failed"),
        ("0 0 4294967295", ""),
        ("0 2 17", "view outside its storage at byte 17"),
        ("0 9999 4294967295", "reason #9999"),
        ("operator failed: #11 'f'", "operator failed: operator returned an error 'f'"),
        ("2 11 4294967295", "2 11 4294967295"),  # not the runtime's shape: as it came
    ],
)
def test_runtime_failures_are_worded(message: str, text: str) -> None:
    from project_api.transport.messages import DescribeReply, ErrorReply
    from project_api.transport.reasons import runtime_text

    assert runtime_text(message) == text
    payload = struct.pack("<HBBI", 9, 0x04, 0, 5) + message.encode()
    assert ErrorReply.decode(payload).message == text
    describe = struct.pack("<HHHHHHH", 0, 7, 0, 0, 0, 0, 1) + b"m" + message.encode()
    assert DescribeReply.decode(describe).error == text


@pytest.mark.parametrize(
    "code, request_type, message, text",
    [
        (0x100, 0x04, "0", "CRC mismatch"),
        (0x100, 0x04, "1", "frame cut short (the line went idle)"),
        (0x101, 0x03, "100 64", "payload of 100 bytes exceeds max 64"),
        (0x102, 0x42, "", "unknown request type"),
        (0x103, 0x04, "", "RUN takes u16 model"),
        (0x104, 0x04, "3 1", "no model 3 (the device has 1)"),
        (0x105, 0x05, "2 1", "no output 2 (the model has 1)"),
        (0x105, 0x03, "4 2", "no input 4 (the model has 2)"),
        (0x106, 0x03, "10 8 16", "bytes 10+8 beyond the tensor's 16"),
        (0x106, 0x02, "5 3", "describe index 5 beyond the 3 tensors"),
        (0x106, 0x07, "9 0 4", "record 9 beyond the 4 recorded"),
        (0x107, 0x02, "1", "tensor cannot be described"),
        (0x105, 0x05, "free text", "free text"),
        (0x104, 0x04, "7 8 9 10", "7 8 9 10"),
    ],
)
def test_protocol_errors_are_worded_by_the_host(
    code: int, request_type: int, message: str, text: str
) -> None:
    """The firmware sends a protocol error's numbers only (docs/protocol.md 2.3); the host
    words them, and shows any other message as it came."""
    payload = struct.pack("<HBBI", code, request_type, 0, msg.NO_NODE) + message.encode()
    assert msg.ErrorReply.decode(payload).message == text
