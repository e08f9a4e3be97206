"""Real boards without hardware: serial-port discovery over fake ListPortInfo objects, the
flash tool choice and command lines, flashing through stand-in openocd/pyocd scripts
(success, failure, hang), and the real-board runner on a pseudo-terminal."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Optional

import pytest
from conftest import reap_leftover_children
from serial.tools.list_ports_common import ListPortInfo

from project_api.board import load_board
from project_api.errors import FlashError, TransportError
from project_api.run import flasher
from project_api.run.flasher import (
    RealBoardRunner,
    choose_tool,
    configured_tools,
    flash,
    flash_command,
    reset_command,
)
from project_api.run.ports import find_port, stable_name

NUCLEO = load_board("nucleo-l4r5zi")


def fake_port(
    device: str,
    vid: Optional[int] = None,
    pid: Optional[int] = None,
    serial_number: Optional[str] = None,
    description: str = "n/a",
    interface: Optional[str] = None,
) -> ListPortInfo:
    info = ListPortInfo(device, skip_link_detection=True)
    info.vid, info.pid, info.serial_number = vid, pid, serial_number
    info.description, info.interface = description, interface
    return info


STLINK_A = fake_port("/dev/ttyACM0", 0x0483, 0x374B, "066AFF555", "STM32 STLink")
STLINK_B = fake_port("/dev/ttyACM1", 0x0483, 0x374E, "0023003A", "STLINK-V3")
FTDI = fake_port("/dev/ttyUSB0", 0x0403, 0x6001, "A50285BI", "FT232R USB UART")
BUILTIN = fake_port("/dev/ttyS0")


@pytest.fixture(autouse=True)
def no_children_left():
    yield
    assert reap_leftover_children() == []


# --- port discovery -----------------------------------------------------------------------


def test_single_vid_pid_match(tmp_path):
    assert find_port(NUCLEO, ports=[BUILTIN, FTDI, STLINK_A], by_id_dir=tmp_path) == (
        "/dev/ttyACM0"
    )


def test_prefers_the_by_id_name(tmp_path):
    device = tmp_path / "ttyACM0"
    device.write_text("")
    by_id = tmp_path / "by-id"
    by_id.mkdir()
    (by_id / "usb-STMicroelectronics_STM32_STLink_066AFF555-if02").symlink_to(device)
    (by_id / "usb-FTDI_FT232R_A50285BI-if00-port0").symlink_to(tmp_path / "ttyUSB0")
    port = fake_port(str(device), 0x0483, 0x374B, "066AFF555")
    found = find_port(NUCLEO, ports=[port, FTDI], by_id_dir=by_id)
    assert found == str(by_id / "usb-STMicroelectronics_STM32_STLink_066AFF555-if02")


def test_stable_name_falls_back_to_the_device(tmp_path):
    assert stable_name("/dev/ttyACM7", tmp_path / "missing") == "/dev/ttyACM7"
    assert stable_name("/dev/ttyACM7", tmp_path) == "/dev/ttyACM7"


def test_serial_number_picks_one_of_several_probes(tmp_path):
    ports = [STLINK_A, STLINK_B]
    assert find_port(NUCLEO, serial_number="0023003a", ports=ports, by_id_dir=tmp_path) == (
        "/dev/ttyACM1"
    )


def test_serial_number_from_the_board_description(tmp_path):
    from dataclasses import replace

    pinned = replace(NUCLEO, serial=replace(NUCLEO.serial, serial_number="066AFF555"))
    assert find_port(pinned, ports=[STLINK_A, STLINK_B], by_id_dir=tmp_path) == "/dev/ttyACM0"


def test_no_match_lists_what_was_seen(tmp_path):
    with pytest.raises(TransportError) as info:
        find_port(NUCLEO, ports=[BUILTIN, FTDI], by_id_dir=tmp_path)
    message = str(info.value)
    assert "no serial port matches nucleo-l4r5zi (USB VID:PID 0483:374b or" in message
    assert "/dev/ttyUSB0 [0403:6001, serial A50285BI, FT232R USB UART]" in message
    assert "/dev/ttyS0 [no USB id, serial -, n/a]" in message


def test_no_ports_at_all(tmp_path):
    with pytest.raises(TransportError, match="ports seen: none"):
        find_port(NUCLEO, ports=[], by_id_dir=tmp_path)


def test_unknown_serial_number(tmp_path):
    with pytest.raises(TransportError, match="serial number NOPE"):
        find_port(NUCLEO, serial_number="NOPE", ports=[STLINK_A], by_id_dir=tmp_path)


def test_several_matches_list_the_candidates(tmp_path):
    with pytest.raises(TransportError) as info:
        find_port(NUCLEO, ports=[STLINK_A, STLINK_B, FTDI], by_id_dir=tmp_path)
    message = str(info.value)
    assert message.startswith("2 serial ports match nucleo-l4r5zi")
    assert "/dev/ttyACM0" in message and "/dev/ttyACM1" in message
    assert "/dev/ttyUSB0" not in message
    assert "serial number" in message  # the hint says how to pin one


def test_uart_interface_wins_among_one_devices_ports(tmp_path):
    gdb = fake_port("/dev/ttyACM2", 0x0483, 0x374E, "0023003A", "STLINK-V3", "GDB Server")
    uart = fake_port("/dev/ttyACM3", 0x0483, 0x374E, "0023003A", "STLINK-V3", "UART Bridge")
    assert find_port(NUCLEO, ports=[gdb, uart], by_id_dir=tmp_path) == "/dev/ttyACM3"


def test_board_without_hints():
    with pytest.raises(TransportError, match="says nothing about its serial port"):
        find_port(load_board("qemu-mps2-an385"), ports=[STLINK_A])


# --- flash tools --------------------------------------------------------------------------


def test_configured_tools_preferred_first():
    assert configured_tools(NUCLEO) == ["openocd", "pyocd"]
    from dataclasses import replace

    prefers_pyocd = replace(NUCLEO, run=replace(NUCLEO.run, kind="pyocd"))
    assert configured_tools(prefers_pyocd) == ["pyocd", "openocd"]


def test_missing_tools_are_named(monkeypatch):
    monkeypatch.setattr(flasher.shutil, "which", lambda name: None)
    with pytest.raises(FlashError) as info:
        choose_tool(NUCLEO)
    message = str(info.value)
    assert "cannot flash nucleo-l4r5zi: openocd or pyocd is not installed" in message
    assert "apt-get install openocd" in message and "pip install pyocd" in message


def test_falls_back_to_the_other_tool(monkeypatch):
    monkeypatch.setattr(
        flasher.shutil, "which", lambda name: "/x/pyocd" if name == "pyocd" else None
    )
    assert choose_tool(NUCLEO) == "pyocd"
    with pytest.raises(FlashError, match="openocd is not installed"):
        choose_tool(NUCLEO, "openocd")


def test_unconfigured_tool_is_refused():
    from dataclasses import replace

    openocd_only = replace(NUCLEO, run=replace(NUCLEO.run, pyocd_target=None))
    with pytest.raises(FlashError, match="does not describe how to use pyocd"):
        choose_tool(openocd_only, "pyocd")


def test_qemu_board_is_not_flashed():
    with pytest.raises(FlashError, match="is not flashed"):
        choose_tool(load_board("qemu-mps2-an385"))


def test_flash_command_lines():
    firmware = Path("/build/fw with space.elf")
    assert flash_command(NUCLEO, firmware, "openocd", "066AFF555") == [
        "openocd",
        "-f",
        "interface/stlink.cfg",
        "-f",
        "target/stm32l4x.cfg",
        "-c",
        "adapter serial 066AFF555",
        "-c",
        "program {/build/fw with space.elf} verify reset exit",
    ]
    assert flash_command(NUCLEO, firmware, "pyocd") == [
        "pyocd",
        "flash",
        "--target",
        "stm32l4r5zitx",
        str(firmware),
    ]
    assert reset_command(NUCLEO, "pyocd", "X1")[-2:] == ["--uid", "X1"]
    assert reset_command(NUCLEO, "openocd")[-6:] == [
        "-c",
        "init",
        "-c",
        "reset run",
        "-c",
        "shutdown",
    ]


def install_tool(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


@pytest.fixture
def firmware(tmp_path):
    path = tmp_path / "fw.elf"
    path.write_bytes(b"\x7fELF")
    return path


def test_flash_runs_the_tool(fake_bin, firmware, tmp_path):
    record = tmp_path / "args.txt"
    install_tool(fake_bin, "openocd", f'printf "%s\\n" "$@" > {record}\necho "** Verified OK **"\n')
    assert flash(NUCLEO, firmware) == "openocd"
    args = record.read_text().splitlines()
    assert args[-1] == f"program {{{firmware.resolve()}}} verify reset exit"


def test_flash_failure_shows_the_tools_output(fake_bin, firmware):
    install_tool(fake_bin, "openocd", 'echo "Error: open failed" >&2\nexit 1\n')
    with pytest.raises(FlashError, match="openocd flash failed with status 1: Error: open failed"):
        flash(NUCLEO, firmware, tool="openocd")


def test_hanging_tool_is_killed_at_the_timeout(fake_bin, firmware):
    install_tool(fake_bin, "pyocd", "exec sleep 30\n")
    began = time.monotonic()
    with pytest.raises(FlashError, match="did not finish the flash within 0.5 s"):
        flash(NUCLEO, firmware, tool="pyocd", timeout=0.5)
    assert time.monotonic() - began < 5


def test_flash_needs_the_firmware(tmp_path):
    with pytest.raises(FlashError, match="does not exist"):
        flash(NUCLEO, tmp_path / "missing.elf")


# --- real-board runner on a pty -----------------------------------------------------------


def test_real_board_runner_opens_the_port_and_resets(fake_bin, tmp_path):
    record = tmp_path / "reset.txt"
    install_tool(fake_bin, "openocd", f'printf "%s\\n" "$@" > {record}\n')
    master, slave = os.openpty()
    try:
        with RealBoardRunner(NUCLEO, port=os.ttyname(slave), tool="openocd") as runner:
            port = runner.start(5.0)
            os.write(master, b"hello")
            assert port.read(5) == b"hello"
            port.write(b"ok")
            assert os.read(master, 2) == b"ok"
            assert "reset run" in record.read_text()
            assert "reset nucleo-l4r5zi with openocd" in runner.log
        assert runner.stop() is None
    finally:
        os.close(master)
        os.close(slave)


def test_real_board_runner_without_reset_or_port(monkeypatch):
    monkeypatch.setattr(
        "project_api.run.flasher.find_port", lambda board, serial_number: "/dev/nope"
    )
    runner = RealBoardRunner(NUCLEO, reset=False)
    with pytest.raises(TransportError, match="cannot open nucleo-l4r5zi's serial port /dev/nope"):
        runner.start(1.0)


def test_real_board_runner_refuses_qemu_boards():
    with pytest.raises(FlashError, match="is not a real board"):
        RealBoardRunner(load_board("qemu-mps2-an385"))
