"""HostRunner: the C device loop (over the fake runtime, tests/device_c/) as a native
process on a pty, driven by Session — including a killed, crashed, hung or mute device, and
the throughput of the host link."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from conftest import reap_leftover_children
from device_c import cbuild

from project_api.errors import (
    DeviceError,
    FlashError,
    TransportClosedError,
    TransportTimeoutError,
)
from project_api.run.host import HostRunner
from project_api.transport.session import Session

X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.array([1, 2, 3, -4], dtype=np.int8)


@pytest.fixture(scope="module")
def firmware(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cbuild.device_test_firmware(tmp_path_factory.getbasetemp() / "cbuild")


@pytest.fixture(autouse=True)
def no_leftover_children() -> Iterator[None]:
    yield
    assert reap_leftover_children() == []


def open_session(firmware: Path, *args: str, **options: object) -> Session:
    runner = HostRunner(firmware, args)
    port = runner.start(timeout=5)
    options.setdefault("timeout", 5.0)
    return Session(port, runner=runner, **options)  # type: ignore[arg-type]


def test_round_trip_through_the_c_device_loop(firmware: Path) -> None:
    with open_session(firmware, "--echo-bytes", "100000") as s:
        assert s.info.board == "host" and s.info.project_type == "host_driven"
        assert s.info.max_payload == 16384 and s.info.tick_hz == 1_000_000_000
        assert [m.name for m in s.models] == ["adder", "echo", "broken"]
        adder = s.model("adder")
        assert [(t.name, t.shape, t.dtype) for t in adder.inputs] == [
            ("x", (2, 3), "float32"),
            ("y\u00e9", (4,), "int8"),
        ]
        out = s.run({"x": X, "y\u00e9": Y})
        np.testing.assert_array_equal(out["output0"], X * 2 + 1)
        assert out["output1"].tolist() == [2]
        data = np.random.default_rng(1).integers(0, 200, 100_000, dtype=np.uint8)
        out = s.run([data], model="echo")
        np.testing.assert_array_equal(out["output0"], data ^ 0x5A)
        assert s.last_stats is not None and s.last_stats.workspace_bytes == 4096
        assert 0 < s.last_stats.device_seconds < 1
        broken = s.model("broken")
        assert broken.error_code == 7 and "not in the system library" in broken.error


def test_exit_status_reaches_the_runner(firmware: Path) -> None:
    session = open_session(firmware)
    session.connect()
    session.exit(5)
    runner = session.runner
    session.close()
    assert runner.exit_status == 5


def test_device_errors_from_c(firmware: Path) -> None:
    with open_session(firmware, "--echo-bytes", "16") as s:
        failing = np.zeros(16, dtype=np.uint8)
        failing[0] = 0xFF
        with pytest.raises(DeviceError) as info:
            s.run([failing], model="echo")
        assert info.value.code == 9 and info.value.node == 3
        # The device sends numbers ("0 11 4294967295 <name>"); the host words them.
        assert str(info.value).endswith(
            "operator failed (code 9, graph node 3): operator returned an error "
            "'tvmgen_default_fused_add'"
        )
        with pytest.raises(DeviceError, match="failed to initialise") as info:
            s.run([X, Y], model="broken")
        assert info.value.code == 7
        assert "function not in the system library 'tvmgen_default_fused_nn_conv2d'" in str(
            info.value
        )


def test_killed_device_gives_a_closed_link_error_fast(firmware: Path) -> None:
    with open_session(firmware) as s:
        s.connect()
        os.kill(s.runner.pid, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(TransportClosedError, match="killed by SIGKILL"):
            s.run([X, Y])
        assert time.monotonic() - started < 2.0


def test_crash_mid_run_names_the_signal(firmware: Path) -> None:
    with open_session(firmware, "--echo-bytes", "8") as s:
        crash = np.full(8, 0xFD, dtype=np.uint8)
        started = time.monotonic()
        with pytest.raises(TransportClosedError, match="waiting for the reply to RUN.*SIGABRT"):
            s.run([crash], model="echo")
        assert time.monotonic() - started < 2.0


def test_hung_device_times_out_and_is_reaped(firmware: Path) -> None:
    s = open_session(firmware, "--echo-bytes", "8", run_timeout=0.5)
    with s:
        hang = np.full(8, 0xFE, dtype=np.uint8)
        with pytest.raises(TransportTimeoutError, match="no reply to RUN within 0.5 s"):
            s.run([hang], model="echo")
    assert s.runner.exit_status == -signal.SIGTERM


def test_mute_device_times_out_connect(firmware: Path) -> None:
    s = open_session(firmware, "--mute", timeout=0.5)
    started = time.monotonic()
    with pytest.raises(TransportTimeoutError, match="did not identify itself"), s:
        pass
    assert time.monotonic() - started < 2.5


def test_boot_noise_and_a_missed_boot_hello(firmware: Path) -> None:
    with open_session(firmware, "--noise") as s:
        assert s.run([X, Y])["output1"].tolist() == [2]
    with open_session(firmware, "--no-announce") as s:
        assert s.counters.hello_requests >= 1
        assert s.run([X, Y])["output1"].tolist() == [2]


def test_bad_configuration_is_reported_with_the_firmware_log(firmware: Path) -> None:
    # The firmware ends before (or just after) the link is opened: either way the error
    # names its status and what it logged.
    with pytest.raises(TransportClosedError, match="status 125.*bad configuration"):
        s = open_session(firmware, "--max-payload", "8", timeout=3.0)
        with s:
            pass


def test_child_exit_makes_reads_fail_fast(firmware: Path) -> None:
    runner = HostRunner(firmware, ["--mute"])
    port = runner.start()
    os.kill(runner.pid, signal.SIGTERM)
    deadline = time.monotonic() + 2
    while runner.exit_status is None and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    with pytest.raises(Exception) as info:  # pyserial reports EIO as SerialException
        port.timeout = 5
        port.read(1)
    assert time.monotonic() - started < 1.0
    assert "Input/output error" in str(info.value) or "returned no data" in str(info.value)
    assert runner.stop() == -signal.SIGTERM
    assert runner.stop() == -signal.SIGTERM  # idempotent


def test_runner_refuses_a_missing_or_non_executable_firmware(tmp_path: Path) -> None:
    with pytest.raises(FlashError, match="no firmware"):
        HostRunner(tmp_path / "nope").start()
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(FlashError, match="not executable"):
        HostRunner(plain).start()


def test_real_runtime_end_to_end(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The device loop over crt/src with a hand-written TVM-ABI model (tiny_model.c)."""
    real = cbuild.real_runtime_firmware(tmp_path_factory.getbasetemp() / "cbuild")
    with open_session(real) as s:
        (model,) = s.models
        assert model.name == "tiny" and [t.name for t in model.inputs] == ["x", "y\u00e9"]
        assert [(t.shape, t.dtype) for t in model.outputs] == [((2, 4), "float32")]
        x = np.arange(8, dtype=np.float32).reshape(2, 4) - 4
        y = np.full((2, 4), 0.5, dtype=np.float32)
        out = s.run({"x": x, "y\u00e9": y})
        np.testing.assert_array_equal(out["output0"], np.maximum(x + y, 0))
        assert s.last_stats is not None and s.last_stats.workspace_bytes >= 256
        x[1, 2] = np.nan
        with pytest.raises(DeviceError) as info:
            s.run([x, y])
        assert info.value.code == 9 and info.value.node == 3
        assert "tvmgen_default_fused_nn_relu" in str(info.value)
        out = s.run([np.ones((2, 4), np.float32), y])  # the workspace is usable again
        np.testing.assert_array_equal(out["output0"], np.full((2, 4), 1.5, np.float32))
        s.exit(0)
    assert s.runner.exit_status == 0


def test_host_link_throughput(firmware: Path) -> None:
    size = 8 << 20
    with open_session(firmware, "--echo-bytes", str(size)) as s:
        data = np.random.default_rng(2).integers(0, 256, size, dtype=np.uint8)
        data[0] = 1
        s.run([data], model="echo")  # warm up
        started = time.monotonic()
        out = s.run([data], model="echo")
        seconds = time.monotonic() - started
        np.testing.assert_array_equal(out["output0"], data ^ 0x5A)
    rate = 2 * size / seconds / 1e6
    print(f"host pty round trip: {2 * size / 1e6:.1f} MB in {seconds:.3f} s = {rate:.1f} MB/s")
    assert rate >= 1.0


def test_open_serial_keeps_what_the_device_wrote_before_the_port_was_opened() -> None:
    import tty

    from project_api.transport.link import open_serial

    master, slave = os.openpty()
    try:
        tty.setraw(slave)
        os.write(master, b"boot HELLO")
        port = open_serial(os.ttyname(slave), timeout=0.5)
        assert port.read(10) == b"boot HELLO"
        os.write(master, b"later")
        port.reset_input_buffer()  # explicit resets still flush
        assert port.read(5) == b""
        port.close()
    finally:
        os.close(master)
        os.close(slave)
    with pytest.raises(TransportClosedError, match="cannot open serial port"):
        open_serial("/dev/nonexistent-tty")
