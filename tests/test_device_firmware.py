"""The firmware side of the device protocol in C (template_project/firmware/): raw frames
against the host_driven loop (every protocol error code, one reply per request, requests
hidden behind garbage or a truncated frame found after a silence, frames inside payloads
never answered, exit), a Session over the C loop recovering from a truncated frame, the
standalone runner's text and exit status, portability builds, and a short libFuzzer run of
the decoder + dispatcher."""

from __future__ import annotations

import os
import select
import shutil
import struct
import subprocess
import time
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

import numpy as np
import pytest
from device_c import cbuild

from project_api.transport import messages as msg
from project_api.transport.frames import BadFrame, Frame, FrameDecoder, encode_frame
from project_api.transport.standalone import parse_standalone

E = msg.ErrorCode
T = msg.MsgType


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "cbuild"


@pytest.fixture(scope="module")
def firmware(cache: Path) -> Path:
    return cbuild.device_test_firmware(cache)


class RawDevice:
    """The test firmware on pipes, spoken to in raw frames."""

    def __init__(self, firmware: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(firmware), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.decoder = FrameDecoder()
        self.frames: List[Frame] = []

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def replies(self, count: int, timeout: float = 3.0) -> List[Frame]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while len(self.frames) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                break
            data = os.read(fd, 65536)
            if not data:
                break
            for event in self.decoder.feed(data):
                assert isinstance(event, Frame), f"device sent a bad frame: {event}"
                self.frames.append(event)
        taken, self.frames = self.frames[:count], self.frames[count:]
        return taken

    def request(self, type_: int, seq: int, payload: bytes = b"") -> Frame:
        self.send(encode_frame(type_, seq, payload))
        (reply,) = self.replies(1)
        assert reply.seq == seq
        return reply

    def close(self) -> Optional[int]:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self.proc.returncode


@pytest.fixture
def device(firmware: Path) -> Iterator[RawDevice]:
    dev = RawDevice(firmware, "--max-payload", "64", "--echo-bytes", "100")
    (boot,) = dev.replies(1)
    assert boot.type == T.HELLO | msg.REPLY and boot.seq == 0
    yield dev
    dev.close()


def test_boot_hello_identifies_the_device(device: RawDevice) -> None:
    hello = msg.HelloReply.decode(device.request(T.HELLO, 1).payload)
    assert hello == msg.HelloReply(1, 3, 64, 1_000_000_000, "host", "host_driven")


def test_describe_layout(device: RawDevice) -> None:
    reply = msg.DescribeReply.decode(device.request(T.DESCRIBE, 2, b"\0\0\0\0").payload)
    assert (reply.model, reply.status, reply.num_inputs, reply.num_outputs) == (0, 0, 2, 2)
    assert reply.raw_name == b"adder" and reply.first == 0 and len(reply.entries) == 4
    x, y, out0, out1 = reply.entries
    assert (x.raw_name, x.code, x.bits, x.lanes, x.shape, x.nbytes) == (b"x", 2, 32, 1, (2, 3), 24)
    assert (y.raw_name, y.shape, y.nbytes) == (b"y\\u00e9", (4,), 4)
    assert (out0.raw_name, out1.code, out1.bits, out1.shape) == (b"", 0, 32, (1,))
    later = msg.DescribeReply.decode(device.request(T.DESCRIBE, 3, b"\0\0\x03\0").payload)
    assert later.first == 3 and [e.shape for e in later.entries] == [(1,)]
    broken = msg.DescribeReply.decode(device.request(T.DESCRIBE, 4, b"\x02\0\0\0").payload)
    assert broken.status == 7 and broken.raw_name == b"broken"
    assert "not in the system library" in broken.error


def _error(frame: Frame) -> msg.ErrorReply:
    assert frame.type == T.ERROR, f"expected an ERROR, got type 0x{frame.type:02x}"
    return msg.ErrorReply.decode(frame.payload)


@pytest.mark.parametrize(
    "type_, payload, code",
    [
        (0x33, b"", E.UNKNOWN_TYPE),
        (0x00, b"", E.UNKNOWN_TYPE),
        (T.DESCRIBE, b"\0\0\0", E.BAD_PAYLOAD),
        (T.DESCRIBE, struct.pack("<HH", 9, 0), E.BAD_MODEL),
        (T.DESCRIBE, struct.pack("<HH", 0, 5), E.OUT_OF_RANGE),
        (T.SET_INPUT, bytes(7), E.BAD_PAYLOAD),
        (T.SET_INPUT, struct.pack("<HHI", 0, 2, 0) + b"x", E.BAD_INDEX),
        (T.SET_INPUT, struct.pack("<HHI", 0, 0, 20) + bytes(8), E.OUT_OF_RANGE),
        (T.SET_INPUT, struct.pack("<HHI", 0, 0, 0xFFFFFFFF) + bytes(2), E.OUT_OF_RANGE),
        (T.SET_INPUT, struct.pack("<HHI", 3, 0, 0), E.BAD_MODEL),
        (T.RUN, b"", E.BAD_PAYLOAD),
        (T.RUN, struct.pack("<H", 2), 7),  # the broken model: its init status
        (T.GET_OUTPUT, bytes(11), E.BAD_PAYLOAD),
        (T.GET_OUTPUT, struct.pack("<HHII", 0, 2, 0, 10), E.BAD_INDEX),
        (T.GET_OUTPUT, struct.pack("<HHII", 0, 0, 25, 10), E.OUT_OF_RANGE),
        (T.EXIT, bytes(2), E.BAD_PAYLOAD),
        (T.RUN, bytes(3), E.TOO_LONG),  # longer than RUN's fixed payload
        (T.HELLO, bytes(65), E.TOO_LONG),
        (0x33, bytes(65), E.TOO_LONG),  # unknown types carry at most 64 bytes
    ],
)
def test_every_bad_request_gets_one_error_reply(
    device: RawDevice, type_: int, payload: bytes, code: int
) -> None:
    error = _error(device.request(type_, 0x42, payload))
    assert error.code == code and error.request == type_
    assert error.node == msg.NO_NODE and error.message
    assert device.request(T.HELLO, 0x43).type == T.HELLO | msg.REPLY  # still serving


def test_runtime_failures_come_as_numbers_the_host_words(device: RawDevice) -> None:
    raw = device.request(T.RUN, 0x42, struct.pack("<H", 2))  # the broken model
    assert raw.payload[8:] == b"1 8 4294967295 tvmgen_default_fused_nn_conv2d"
    assert _error(raw).message == (
        "model init failed: function not in the system library 'tvmgen_default_fused_nn_conv2d'"
    )


def test_bad_crc_and_too_long_frames_are_answered(device: RawDevice) -> None:
    bad = bytearray(encode_frame(T.RUN, 0x51, b"\0\0"))
    bad[-2] ^= 0x08
    device.send(bytes(bad))
    error = _error(device.replies(1)[0])
    assert (error.code, error.request) == (E.BAD_CRC, T.RUN)
    device.send(encode_frame(T.SET_INPUT, 0x52, bytes(100)))  # max payload is 64
    (first,) = device.replies(1)
    assert first.seq == 0x52 and _error(first).code == E.TOO_LONG
    assert "100 bytes exceeds max 64" in _error(first).message
    assert device.request(T.HELLO, 0x53).type == T.HELLO | msg.REPLY


def test_replies_sent_back_are_never_answered(device: RawDevice) -> None:
    device.send(encode_frame(T.HELLO | msg.REPLY, 7, b"xx") + encode_frame(T.ERROR, 8, bytes(8)))
    assert device.request(T.HELLO, 9).seq == 9
    assert device.replies(1, timeout=0.2) == []


def test_one_reply_per_request_in_a_burst(device: RawDevice) -> None:
    requests = [
        encode_frame(T.HELLO, 1),
        encode_frame(
            T.SET_INPUT, 2, struct.pack("<HHI", 0, 0, 0) + np.arange(6, dtype="<f4").tobytes()
        ),
        encode_frame(T.SET_INPUT, 3, struct.pack("<HHI", 0, 1, 0) + bytes([1, 2, 3, 0xFC])),
        encode_frame(0x7E, 4),
        encode_frame(T.RUN, 5, b"\0\0"),
        encode_frame(T.GET_OUTPUT, 6, struct.pack("<HHII", 0, 0, 0, 64)),
        encode_frame(T.GET_OUTPUT, 7, struct.pack("<HHII", 0, 1, 0, 64)),
    ]
    device.send(b"noise" + b"".join(requests))
    replies = device.replies(len(requests))
    assert [r.seq for r in replies] == [1, 2, 3, 4, 5, 6, 7]
    assert [r.type for r in replies] == [0x81, 0x83, 0x83, 0xFF, 0x84, 0x85, 0x85]
    run = msg.RunReply.decode(replies[4].payload)
    assert run.status == 0 and run.tick_hz == 1_000_000_000
    assert np.frombuffer(replies[5].payload, "<f4").tolist() == [1, 3, 5, 7, 9, 11]
    assert np.frombuffer(replies[6].payload, "<i4").tolist() == [2]


def test_get_output_chunks_and_end(device: RawDevice) -> None:
    data = bytes(range(100))
    for offset in range(0, 100, 56):
        header = struct.pack("<HHI", 1, 0, offset)
        assert device.request(T.SET_INPUT, 1, header + data[offset : offset + 56]).payload == b""
    device.request(T.RUN, 2, b"\x01\0")
    pieces = [
        device.request(T.GET_OUTPUT, 3, struct.pack("<HHII", 1, 0, 0, 30)).payload,
        device.request(T.GET_OUTPUT, 4, struct.pack("<HHII", 1, 0, 30, 1000)).payload,
        device.request(T.GET_OUTPUT, 5, struct.pack("<HHII", 1, 0, 100, 1000)).payload,
    ]
    assert [len(p) for p in pieces] == [30, 70, 0]
    assert b"".join(pieces) == bytes(b ^ 0x5A for b in data)


def test_exit_answers_then_ends_with_the_status(firmware: Path) -> None:
    dev = RawDevice(firmware)
    dev.replies(1)
    assert dev.request(T.EXIT, 9, struct.pack("<i", 3)).type == T.EXIT | msg.REPLY
    assert dev.proc.wait(timeout=5) == 3
    dev.close()
    dev = RawDevice(firmware)
    dev.replies(1)
    assert dev.proc.stdin is not None
    dev.proc.stdin.close()  # the link goes away: the firmware ends, status 0
    assert dev.proc.wait(timeout=5) == 0
    dev.close()


def test_a_silence_settles_a_half_received_request(firmware: Path) -> None:
    stuck = encode_frame(T.SET_INPUT, 1, bytes(60))[:20]
    dev = RawDevice(firmware, "--idle-ms", "100")
    dev.replies(1)
    dev.send(stuck)
    time.sleep(0.3)
    dev.send(encode_frame(T.HELLO, 2))
    cut, hello = dev.replies(2)
    assert (cut.seq, _error(cut).code, _error(cut).request) == (1, E.BAD_CRC, T.SET_INPUT)
    assert "cut short" in _error(cut).message
    assert (hello.type, hello.seq) == (T.HELLO | msg.REPLY, 2)
    dev.close()
    dev = RawDevice(firmware, "--idle-ms", "0")  # without it, HELLO is taken for payload
    dev.replies(1)
    dev.send(stuck)
    time.sleep(0.3)
    dev.send(encode_frame(T.HELLO, 3))
    assert dev.replies(1, timeout=0.3) == []
    dev.close()


def test_a_request_right_behind_a_truncated_one_is_answered_after_a_silence(
    firmware: Path,
) -> None:
    # No pause between them: the request is payload of the truncated one until the line is
    # silent and a byte arrives (the host's wake-up byte); then it is found and answered.
    dev = RawDevice(firmware, "--idle-ms", "100")
    dev.replies(1)
    dev.send(encode_frame(T.SET_INPUT, 1, bytes(3000))[:40] + encode_frame(T.RUN, 2, b"\0\0"))
    assert dev.replies(1, timeout=0.3) == []
    dev.send(b"\x00")
    cut, run = dev.replies(2)
    assert (cut.seq, _error(cut).code) == (1, E.BAD_CRC)
    assert (run.type, run.seq) == (T.RUN | msg.REPLY, 2)
    assert dev.replies(1, timeout=0.2) == []  # answered once
    dev.close()


def test_garbage_with_fake_markers_hides_no_request(firmware: Path) -> None:
    requests = [
        encode_frame(T.HELLO, 0x61),
        encode_frame(T.SET_INPUT, 0x62, struct.pack("<HHI", 0, 1, 0) + bytes([1, 2, 3, 4])),
        encode_frame(T.RUN, 0x63, b"\0\0"),
        encode_frame(T.GET_OUTPUT, 0x64, struct.pack("<HHII", 0, 1, 0, 4)),
    ]
    garbage = (
        b"boot \xa5\x5a\x03\x10\x00\x01"  # SET_INPUT claiming 256: covers every request
        + b"\xa5\x5a\x04\x11\x02\x00"  # RUN claiming 2: completed by the next bytes
        + b"\xa5\x5a\x01\x12\x60\xea"  # HELLO claiming 60000: refused at once
    )
    dev = RawDevice(firmware, "--idle-ms", "100", "--max-payload", "1024")
    dev.replies(1)
    dev.send(garbage + b"".join(requests))
    time.sleep(0.3)
    dev.send(b"\x00")
    replies = dev.replies(7)
    assert dev.replies(1, timeout=0.2) == []
    answered = [r for r in replies if r.seq in (0x61, 0x62, 0x63, 0x64)]
    assert [(r.type, r.seq) for r in answered] == [
        (0x81, 0x61),
        (0x83, 0x62),
        (0x84, 0x63),
        (0x85, 0x64),
    ]
    assert np.frombuffer(answered[3].payload, "<i4").tolist() == [10]  # 1 + 2 + 3 + 4
    rejected = {(r.seq, _error(r).code) for r in replies if r.type == T.ERROR}
    assert rejected == {(0x10, E.BAD_CRC), (0x11, E.BAD_CRC), (0x12, E.TOO_LONG)}
    dev.close()


def test_a_frame_inside_a_payload_is_never_answered(firmware: Path) -> None:
    dev = RawDevice(firmware, "--idle-ms", "100", "--echo-bytes", "40")
    dev.replies(1)
    inner = encode_frame(T.EXIT, 0x71, struct.pack("<i", 9)) + encode_frame(T.HELLO, 0x72)
    data = inner + bytes(40 - len(inner))
    reply = dev.request(T.SET_INPUT, 0x70, struct.pack("<HHI", 1, 0, 0) + data)
    assert reply.type == T.SET_INPUT | msg.REPLY
    time.sleep(0.3)
    dev.send(b"\x00")  # a silence and a byte: nothing held to settle
    assert dev.replies(1, timeout=0.3) == []
    assert dev.request(T.RUN, 0x73, b"\x01\x00").type == T.RUN | msg.REPLY
    out = dev.request(T.GET_OUTPUT, 0x74, struct.pack("<HHII", 1, 0, 0, 40)).payload
    assert out == bytes(b ^ 0x5A for b in data)
    assert dev.proc.poll() is None  # the EXIT inside the data did not end it
    dev.close()


def test_session_recovers_from_a_truncated_frame_with_the_c_loop(firmware: Path) -> None:
    from project_api.run.host import HostRunner
    from project_api.transport.session import Session

    runner = HostRunner(firmware, ["--idle-ms", "100"])
    with Session(runner.start(timeout=5), runner=runner, timeout=5.0) as s:
        s.link.write_all(encode_frame(T.SET_INPUT, 0x99, bytes(3000))[:40])
        started = time.monotonic()
        out = s.run({"x": np.ones((2, 3), np.float32), "y\u00e9": np.ones(4, np.int8)})
        assert time.monotonic() - started < 3.0  # a silence and a wake-up, not the time-out
        np.testing.assert_array_equal(out["output0"], np.full((2, 3), 3, np.float32))
        assert s.counters.wake_ups >= 1


def test_the_decoder_never_sees_bad_frames_from_the_device(device: RawDevice) -> None:
    events = FrameDecoder().feed(encode_frame(T.HELLO, 1))
    assert not any(isinstance(e, BadFrame) for e in events)


# ---- standalone ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def standalone(cache: Path) -> Path:
    return cbuild.standalone_test_firmware(cache)


def _run_standalone(firmware: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(firmware), *args], capture_output=True, text=True, timeout=10)


def test_standalone_prints_results_and_passes(standalone: Path) -> None:
    result = _run_standalone(standalone)
    assert result.returncode == 0, result.stdout
    report = parse_standalone(result.stdout)
    assert (report.status, report.board, report.models) == ("pass", "host", {0: "adder", 1: "echo"})
    assert len(report.runs) == 3 and all(r.status == 0 for r in report.runs)
    out = report.outputs_of(model=0, sample=1)
    x1 = np.array([-1, -0.5, 0, 0.5, 1, 100], dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(out["output0"], x1 * 2 + 1)
    assert out["output1"].tolist() == [508]
    echo = report.outputs_of(model=1, sample=0)["output0"]
    assert echo.tolist() == [(i * 7 % 256) ^ 0x5A for i in range(40)]
    assert [o.check for o in report.outputs] == ["pass", "pass", "pass", "pass", "none"]
    assert report.outputs[0].argmax == 5
    assert report.runs[2].workspace_bytes == 4096


def test_standalone_mismatch_and_errors_set_the_exit_status(standalone: Path) -> None:
    result = _run_standalone(standalone, "--mismatch")
    report = parse_standalone(result.stdout)
    assert result.returncode == 1 and report.status == "mismatch" and report.mismatches == 1
    result = _run_standalone(standalone, "--fail", "--broken")
    report = parse_standalone(result.stdout)
    assert result.returncode == 2 and report.status == "error"
    assert [(e.model, e.sample, e.code, e.node) for e in report.errors] == [
        (1, 0, 9, 3),
        (2, None, 7, None),
    ]
    # numbers on the console, worded by the host (mlf_text_error, reasons.explain)
    assert report.errors[1].message == "missing function 'tvmgen_default_fused_add'"
    assert "message=error 7 'tvmgen_default_fused_add'" in result.stdout


def test_standalone_parser_rejects_garbled_text() -> None:
    from project_api.errors import ProtocolError

    with pytest.raises(ProtocolError, match="no 'mlf-standalone' header"):
        parse_standalone("hello\n")
    text = (
        "boot noise\nmlf-standalone 1 board=b models=1\n"
        "output model=0 sample=0 index=0 dtype=int8 shape=2 nbytes=2 crc32=00000000 check=none\n"
        "data model=0 sample=0 index=0 offset=0 hex=0102\n"
    )
    with pytest.raises(ProtocolError, match="does not match its size/CRC"):
        parse_standalone(text)
    with pytest.raises(ProtocolError, match="line 2 is malformed"):
        parse_standalone("mlf-standalone 1 board=b\nrun model=x\n")


# ---- portability --------------------------------------------------------------------

FIRMWARE_SOURCES = [
    "mlf_frame.c",
    "mlf_device.c",
    "mlf_standalone.c",
    "mlf_text.c",
    "mlf_mlperftiny.c",
    # the microTVM RPC server (device_protocol=microtvm)
    "mlf_utvm_framing.c",
    "mlf_utvm_session.c",
    "mlf_utvm_minrpc.c",
    "mlf_utvm_globals.c",
    "mlf_utvm_graph.c",
    "mlf_utvm_graph_none.c",
    "mlf_utvm_alloc.c",
]


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_firmware_sources_are_strict_c99(compiler: str, tmp_path: Path) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    for source in FIRMWARE_SOURCES:
        subprocess.run(
            [compiler, "-std=c99", "-pedantic", *cbuild.WARNINGS, "-Wshadow", "-Wconversion",
             "-Wno-sign-conversion", f"-I{cbuild.FIRMWARE}", f"-I{cbuild.CRT_INCLUDE}",
             "-c", str(cbuild.FIRMWARE / source), "-o", str(tmp_path / "x.o")],
            check=True,
        )  # fmt: skip


@pytest.mark.parametrize("cpu", ["cortex-m0", "cortex-m3", "cortex-m33"])
def test_firmware_sources_build_for_cortex_m(cpu: str, tmp_path: Path) -> None:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed (apt-get install gcc-arm-none-eabi)")
    for source in FIRMWARE_SOURCES:
        subprocess.run(
            ["arm-none-eabi-gcc", f"-mcpu={cpu}", "-mthumb", "-Os", "-std=c99",
             *cbuild.WARNINGS, f"-I{cbuild.FIRMWARE}", f"-I{cbuild.CRT_INCLUDE}",
             "-c", str(cbuild.FIRMWARE / source), "-o", str(tmp_path / "x.o")],
            check=True,
        )  # fmt: skip


# ---- fuzzing ------------------------------------------------------------------------


def _seed_inputs() -> Sequence[bytes]:
    frames = [
        encode_frame(T.HELLO, 1),
        encode_frame(T.DESCRIBE, 2, struct.pack("<HH", 0, 0)),
        encode_frame(T.SET_INPUT, 3, struct.pack("<HHI", 1, 0, 0) + bytes(range(40))),
        encode_frame(T.RUN, 4, struct.pack("<H", 1)),
        encode_frame(T.GET_OUTPUT, 5, struct.pack("<HHII", 1, 0, 0, 50)),
        encode_frame(T.EXIT, 6, struct.pack("<i", 0)),
    ]
    cut = encode_frame(T.SET_INPUT, 7, bytes(100))[:30]
    return [
        bytes([1, 7]) + b"".join(frames),
        bytes([0, 0]) + frames[0] + frames[2],
        bytes([0x13, 3]) + cut + frames[0],  # garbage, then the known requests (bit 4)
        bytes([0x3B, 5]) + cut + frames[3] + cut,  # records, silences, recovery by silence
    ]


def test_fuzz_smoke(cache: Path, tmp_path: Path) -> None:
    """A few seconds of libFuzzer (the long runs are done by hand; see docs/protocol.md)."""
    if shutil.which("clang") is None:
        pytest.skip("clang not installed")
    try:
        fuzzer = cbuild.build(
            cache,
            "fuzz_device",
            [
                cbuild.DEVICE_C / "fuzz_device.c",
                cbuild.DEVICE_C / "fake_runtime.c",
                cbuild.FIRMWARE / "mlf_device.c",
                cbuild.FIRMWARE / "mlf_frame.c",
                cbuild.FIRMWARE / "mlf_text.c",
            ],
            compiler="clang",
            flags=("-g", "-O1", "-fsanitize=fuzzer,address,undefined"),
        )
    except AssertionError as exc:
        if "fuzzer" in str(exc) and ("cannot find" in str(exc) or "unsupported" in str(exc)):
            pytest.skip(f"clang without libFuzzer: {str(exc).splitlines()[-1]}")
        raise
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, seed in enumerate(_seed_inputs()):
        (corpus / f"seed{i}").write_bytes(seed)
    result = subprocess.run(
        [
            str(fuzzer),
            "-max_total_time=4",
            "-timeout=5",
            f"-artifact_prefix={tmp_path}/",
            str(corpus),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Done" in result.stderr
