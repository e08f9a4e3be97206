"""What the trusted parent takes from what a confined child wrote or printed (issue 41, part
1; docs/security.md, "What the parent takes from its children"): bounded text and numbers,
never a place. Each case feeds what a hostile model can make a child produce — the compiler's
output, a firmware's console, files planted in the build directory — and checks that the
parent stays bounded, raises its own one-line errors and follows no link; the honest input
beside it is the control."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any, Callable, List

import pytest

from project_api.build.log import BoundedLog, parse_memory_usage
from project_api.build.summary import summarise
from project_api.errors import GenerateError, ProtocolError
from project_api.footprint.linked import read_built
from project_api.generate.sizes import linker_overflow
from project_api.run.base import copy_in_background
from project_api.sandbox import outputs
from project_api.transport.eembc import ANSWER_LINE_MAX, ANSWER_LINES, EembcDevice
from project_api.transport.standalone import SHOWN_CHARS, parse_standalone

_TABLE = "Memory region  Used Size  Region Size  %age Used\n    FLASH:  12 KB  256 KB  4.69%\n"


def quickly(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``, which must take less than 2 s on this machine."""
    started = time.monotonic()
    result = function(*args)
    assert time.monotonic() - started < 2.0, function.__name__
    return result


def test_the_build_log_parsers_stay_linear_and_bounded() -> None:
    assert quickly(parse_memory_usage, _TABLE) == {"FLASH": {"used": 12 << 10, "size": 256 << 10}}
    for log in ("\n" * 200_000, " \n" * 200_000, "x" * (1 << 20), "FLASH: " * 100_000):
        assert quickly(parse_memory_usage, log) is None
        quickly(summarise, log)
        assert quickly(linker_overflow, log) is None
    # Numbers past Python's 4,300-digit limit would have raised ValueError out of the build.
    huge = "9" * 5000
    assert quickly(parse_memory_usage, f"  FLASH: {huge} B  1 B  1%\n") is None
    assert linker_overflow(f"region `FLASH' overflowed by {huge} bytes") is None
    assert linker_overflow("region `FLASH' overflowed by 96 bytes") is not None


def test_the_kept_build_output_is_bounded() -> None:
    log = BoundedLog(limit=1000)
    for index in range(1000):
        log.append(f"line {index}\n")
    assert len(log.text) < 1100
    assert log.text.startswith("line 0\n") and log.text.endswith("line 999\n")
    assert "characters of output left out" in log.text


def test_files_the_build_planted_are_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("mlf-secret\n")
    build = tmp_path / "build"
    build.mkdir()
    (build / "firmware.map").symlink_to(secret)
    os.mkfifo(build / "fifo.map")  # a read would block for ever
    (build / "big.map").write_bytes(b"x" * 100)
    (build / "ok.map").write_bytes(b"the map\n")
    for name in ("firmware.map", "fifo.map"):
        with pytest.raises(OSError):
            outputs.read_regular(build, [name], 1 << 20)
    with pytest.raises(GenerateError, match="cannot read"):
        read_built(build / "big.map", 10)
    assert read_built(build / "ok.map") == b"the map\n"  # the control
    (build / "sub").symlink_to(tmp_path)
    with pytest.raises(OSError):
        outputs.read_regular(build, ["sub", "secret"], 1 << 20)
    victim = tmp_path / "victim"
    victim.write_text("the user's\n")
    (build / "build.log").symlink_to(victim)
    outputs.write_file(build, ["build.log"], b"the log\n")
    assert victim.read_text() == "the user's\n"
    assert (build / "build.log").read_bytes() == b"the log\n"


def test_a_firmwares_stream_is_copied_up_to_a_limit() -> None:
    read_end, write_end = os.pipe()
    target = io.BytesIO()
    thread = copy_in_background(read_end, target, "test-copy", limit=1000)
    for _ in range(100):
        os.write(write_end, b"y" * 1000)
    os.close(write_end)
    thread.join(timeout=10)
    assert target.getvalue().startswith(b"y" * 1000)
    assert len(target.getvalue()) < 1100 and b"99000 more bytes left out" in target.getvalue()


class _Port:
    """A serial-like port that answers with ``chunks``, then nothing."""

    def __init__(self, chunks: List[bytes]) -> None:
        self.chunks = chunks
        self.timeout = 0.01

    def read(self, size: int) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def write(self, data: bytes) -> int:
        return len(data)

    def close(self) -> None:
        pass


def test_the_benchmark_protocol_bounds_what_a_device_says() -> None:
    endless = [b"z" * 65536 for _ in range(ANSWER_LINE_MAX // 65536 + 2)]
    with pytest.raises(ProtocolError, match="longer than"):
        EembcDevice(_Port(endless), timeout=5).command("name")
    chatter = [b"m-chatter\r\n" * 1000 for _ in range(ANSWER_LINES // 1000 + 2)]
    with pytest.raises(ProtocolError, match="more than"):
        EembcDevice(_Port(chatter), timeout=5).command("name")
    digits = b"m-lap-us-" + b"9" * 5000 + b"\r\nm-results-[1]\r\nm-infer-done\r\nm-ready\r\n"
    result = EembcDevice(_Port([digits]), timeout=5).infer(1, 0)  # no ValueError
    assert result.start_us is None and result.results == [1]
    answer = [b"m-name-dut-[acme]\r\nm-ready\r\n"]  # the control
    assert EembcDevice(_Port(answer), timeout=5).name() == "acme"


def test_a_malformed_standalone_line_is_quoted_short() -> None:
    text = "mlf-standalone 1 board=host\nrun model=x" + "y" * 100_000 + "\n"
    with pytest.raises(ProtocolError) as caught:
        parse_standalone(text)
    assert len(str(caught.value)) < 3 * SHOWN_CHARS
    shape = "mlf-standalone 1 board=host\noutput model=0 sample=0 index=0 dtype=float32 "
    shape += "shape=1000x1000 nbytes=4 crc32=2144df1c check=none\n"
    shape += "data model=0 sample=0 index=0 offset=0 hex=00000000\n"
    with pytest.raises(ProtocolError, match="shape"):
        parse_standalone(shape)
    report = parse_standalone(shape.replace("1000x1000", "1"))  # the control
    assert report.outputs_of()["output0"].shape == (1,)
