"""Board descriptions: every boards/*.toml loads and means what it says, every schema rule
rejects bad input with a message naming the file and key, the linker script and toolchain
file work, every Cortex-M seam compiles warning-free, and `mlf-project boards` lists them."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Sequence

import pytest
from conftest import REPO_ROOT, have_tool

from project_api.board import (
    Board,
    board_names,
    list_boards,
    load_board,
    load_board_file,
    parse_board,
)
from project_api.cli import main as cli_main
from project_api.errors import BoardError
from project_api.resources import boards_dir, crt_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REQUIRED = [
    "host",
    "qemu-mps2-an385",
    "qemu-mps2-an386",
    "qemu-mps2-an500",
    "qemu-mps2-an505",
    "qemu-lm3s6965evb",
    "qemu-mps3-an547",
    "qemu-netduinoplus2",
    "nucleo-l4r5zi",
    "nucleo-f746zg",
    "stm32f746g-disco",
    "nucleo-f401re",
    "qemu-microbit",
    "nucleo-g071rb",
]
requires_arm_gcc = pytest.mark.skipif(
    not have_tool("arm-none-eabi-gcc"),
    reason="needs arm-none-eabi-gcc (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)",
)


def raw(name: str) -> Dict[str, Any]:
    return tomllib.loads((boards_dir() / f"{name}.toml").read_text())


# --- the shipped boards -------------------------------------------------------------------


def test_required_boards_exist_and_load():
    assert set(REQUIRED) <= set(board_names())
    boards = list_boards()
    assert [b.name for b in boards] == sorted(b.name for b in boards)
    for board in boards:
        assert board.source is not None and board.source.stem == board.name
        assert board.description


def test_kinds():
    assert load_board("host").is_host and not load_board("host").is_qemu
    assert load_board("qemu-mps2-an385").is_qemu and load_board("qemu-mps2-an385").semihosting
    nucleo = load_board("nucleo-l4r5zi")
    assert nucleo.is_real and not nucleo.semihosting and not nucleo.is_qemu


def test_cpu_flags():
    assert load_board("qemu-mps2-an386").cpu_flags() == [
        "-mcpu=cortex-m4",
        "-mthumb",
        "-mfloat-abi=hard",
        "-mfpu=fpv4-sp-d16",
    ]
    assert load_board("qemu-mps2-an385").cpu_flags() == [
        "-mcpu=cortex-m3",
        "-mthumb",
        "-mfloat-abi=soft",
    ]
    assert load_board("qemu-mps2-an500").cpu_flags()[-1] == "-mfpu=fpv5-d16"
    assert load_board("host").cpu_flags() == []


def test_memory_maps_match_the_machines():
    an505 = load_board("qemu-mps2-an505")
    assert an505.flash is not None and an505.ram is not None
    assert (an505.flash.origin, an505.ram.origin, an505.console.address) == (
        0x10000000,
        0x38000000,
        0x50200000,
    )
    lm3s = load_board("qemu-lm3s6965evb")
    assert lm3s.flash is not None and lm3s.ram is not None
    assert (lm3s.flash.length, lm3s.ram.length) == (256 * 1024, 64 * 1024)
    nucleo = load_board("nucleo-l4r5zi")
    assert nucleo.flash is not None and nucleo.ram is not None
    assert (nucleo.flash.origin, nucleo.flash.length) == (0x08000000, 2 << 20)
    assert (nucleo.ram.origin, nucleo.ram.length) == (0x20000000, 640 * 1024)
    assert str(nucleo.ram) == "640 KiB @0x20000000"
    assert load_board("host").ram is None


def test_microcontrollers_keep_a_small_receive_buffer():
    """The input streams in SET_INPUT chunks, so a few hundred bytes of buffer do: the RAM
    goes to the model (issue 14)."""
    for name in ("qemu-lm3s6965evb", "qemu-mps2-an385", "qemu-mps2-an505", "nucleo-l4r5zi"):
        assert 64 <= load_board(name).max_payload <= 256
    assert load_board("host").max_payload == 65535


def test_seam_sources_and_include_dirs_exist():
    for board in list_boards():
        if board.is_host:
            assert board.family_dir == crt_dir() / "platform" / "host"
            continue
        sources = board.seam_sources()
        assert sources and all(path.is_file() for path in sources)
        names = {path.parent.name for path in sources}
        shared = {"cortex-m": "cortex_m", "riscv32": "riscv"}[board.arch]
        assert names == {"common", shared, *board.family_shared, board.family}
        assert all(path.is_dir() for path in board.seam_include_dirs())


def test_compile_definitions_carry_the_board_constants():
    definitions = load_board("qemu-mps2-an505").compile_definitions()
    assert definitions["MLF_BOARD_CONSOLE_BASE"] == "0x50200000u"
    assert definitions["MLF_BOARD_TICK_HZ"] == "20000000"
    assert definitions["MLF_BOARD_SEMIHOSTING"] == "1"
    assert load_board("nucleo-l4r5zi").compile_definitions()["MLF_BOARD_SEMIHOSTING"] == "0"
    assert "MLF_BOARD_CONSOLE_BASE" not in load_board("host").compile_definitions()


def test_every_microcontroller_names_its_console_receive_interrupt():
    """The firmware sleeps on it while waiting for input (mlf_console_wait): board data, from
    each machine's source or reference manual."""
    expected = {"qemu-mps2-an385": 0, "qemu-mps2-an386": 0, "qemu-mps2-an500": 0,
                "qemu-mps2-an505": 32, "qemu-lm3s6965evb": 5, "nucleo-l4r5zi": 70,
                "qemu-microbit": 2, "nucleo-g071rb": 28}  # fmt: skip
    for name, irq in expected.items():
        board = load_board(name)
        assert board.console.irq == irq, name
        assert board.compile_definitions()["MLF_BOARD_CONSOLE_IRQ"] == f"{irq}u"
    host = load_board("host")
    assert host.console.irq is None
    assert "MLF_BOARD_CONSOLE_IRQ" not in host.compile_definitions()


def test_toolchain_file_and_cmake_args():
    board = load_board("qemu-mps2-an386")
    assert board.toolchain_file is not None and board.toolchain_file.is_file()
    assert board.cmake_args() == [
        f"-DCMAKE_TOOLCHAIN_FILE={board.toolchain_file}",
        "-DMLF_CPU_FLAGS=-mcpu=cortex-m4;-mthumb;-mfloat-abi=hard;-mfpu=fpv4-sp-d16",
    ]
    assert load_board("host").toolchain_file is None
    assert load_board("host").cmake_args() == []


def test_instructions_per_tick():
    assert load_board("qemu-mps2-an385").instructions_per_tick() == 40
    assert load_board("qemu-mps2-an505").instructions_per_tick() == 50
    assert load_board("qemu-lm3s6965evb").instructions_per_tick() == 20
    assert load_board("qemu-mps2-an385").instructions_per_tick(icount_shift=1) == 20


def test_qemu_command_only_for_qemu_boards():
    with pytest.raises(BoardError, match="does not run under QEMU"):
        load_board("nucleo-l4r5zi").qemu_command(Path("fw.elf"))


def test_summary_is_json_friendly():
    summary = load_board("nucleo-l4r5zi").summary()
    json.dumps(summary)
    assert summary["serial"]["vid_pid"][0] == "0483:374b"
    assert summary["cpu"]["flags"][0] == "-mcpu=cortex-m4"


# --- linker script ------------------------------------------------------------------------


def test_linker_script_is_rendered_from_the_memory_map():
    script = load_board("qemu-lm3s6965evb").render_linker_script()
    assert "FLASH (rx)  : ORIGIN = 0x00000000, LENGTH = 0x00040000" in script
    assert "RAM   (rwx) : ORIGIN = 0x20000000, LENGTH = 0x00010000" in script
    assert "__mlf_stack_size = 4096;" in script
    assert "__mlf_heap_size = 0;" in script
    script = load_board("qemu-mps2-an505").render_linker_script(stack_bytes=2048, heap_bytes=64)
    assert "ORIGIN = 0x38000000" in script and "__mlf_stack_size = 2048;" in script
    assert "__mlf_heap_size = 64;" in script


@pytest.mark.parametrize(
    "stack, heap, message",
    [(0, 0, "positive multiple of 8"), (1001, 0, "multiple of 8"), (8, -1, "heap_bytes >= 0")],
)
def test_linker_script_rejects_bad_sizes(stack, heap, message):
    with pytest.raises(BoardError, match=message):
        load_board("qemu-mps2-an385").render_linker_script(stack_bytes=stack, heap_bytes=heap)


def test_linker_script_rejects_stack_and_heap_beyond_ram():
    with pytest.raises(BoardError, match="exceed qemu-lm3s6965evb's RAM"):
        load_board("qemu-lm3s6965evb").render_linker_script(stack_bytes=32768, heap_bytes=40000)


def test_host_has_no_linker_script():
    with pytest.raises(BoardError, match="no memory map"):
        load_board("host").render_linker_script()


# --- compiling the seams ------------------------------------------------------------------


NEWLIB_NANO = ("--specs=nano.specs", "--specs=nosys.specs")


def _compile_and_link(
    board: Board, tmp_path: Path, extra_source: str, libraries: Sequence[str] = NEWLIB_NANO
) -> subprocess.CompletedProcess:
    """The seam and ``extra_source`` built with the board's compiler (warnings are errors) and
    linked with its rendered script and ``libraries`` (flags selecting the C library)."""
    script = tmp_path / "link.ld"
    script.write_text(board.render_linker_script())
    main = tmp_path / "main.c"
    main.write_text(extra_source)
    definitions = [f"-D{k}={v}" for k, v in board.compile_definitions().items()]
    includes = [f"-I{crt_dir() / 'include'}"] + [f"-I{d}" for d in board.seam_include_dirs()]
    command = [
        board.architecture.compiler,
        *board.cpu_flags(),
        "-std=c11",
        "-O2",
        "-Wall",
        "-Wextra",
        "-Werror",
        *definitions,
        *includes,
        *[str(s) for s in board.seam_sources()],
        str(main),
        *libraries,
        "-nostartfiles",
        "-Wl,--gc-sections",
        f"-T{script}",
        "-o",
        str(tmp_path / "fw.elf"),
    ]
    return subprocess.run(command, capture_output=True, text=True)


MINIMAL_MAIN = """
#include "mlf_platform.h"
int main(void) {
  mlf_platform_init();
  uint8_t byte;
  while (mlf_platform_read(&byte, 1) == 1) {
    mlf_platform_write(&byte, 1);
    if (byte == 'q') mlf_platform_exit((int)mlf_platform_ticks());
  }
  mlf_platform_log("bye");
  mlf_platform_abort((int)mlf_platform_tick_hz());
}
"""


@requires_arm_gcc
@pytest.mark.parametrize("name", [n for n in REQUIRED if n != "host"])
def test_every_cortex_m_seam_compiles_warning_free_and_links(name, tmp_path):
    # nucleo-l4r5zi cannot run here, but its seam must build like the others.
    result = _compile_and_link(load_board(name), tmp_path, MINIMAL_MAIN)
    assert result.returncode == 0, result.stderr
    symbols = subprocess.run(
        ["arm-none-eabi-nm", str(tmp_path / "fw.elf")], capture_output=True, text=True
    ).stdout
    for symbol in ("mlf_vector_table", "mlf_reset_handler", "mlf_fault_report", "_sbrk"):
        assert symbol in symbols


@requires_arm_gcc
def test_image_too_big_for_ram_is_refused_by_the_linker(tmp_path):
    source = MINIMAL_MAIN.replace(
        "int main(void) {",
        "static volatile uint8_t arena[70 * 1024];\nint main(void) {\n  arena[0] = 1;",
    )
    result = _compile_and_link(load_board("qemu-lm3s6965evb"), tmp_path, source)
    assert result.returncode != 0
    assert "region `RAM' overflowed" in result.stderr


def _compile_seam_file(source: Path, definitions: Dict[str, str], out: Path) -> Any:
    """Compiles one seam file of qemu-mps2-an385 with only the given board constants."""
    board = load_board("qemu-mps2-an385")
    return subprocess.run(
        [
            "arm-none-eabi-gcc",
            *board.cpu_flags(),
            "-c",
            *[f"-D{k}={v}" for k, v in definitions.items()],
            f"-I{crt_dir() / 'include'}",
            *[f"-I{d}" for d in board.seam_include_dirs()],
            str(source),
            "-o",
            str(out / "x.o"),
        ],
        capture_output=True,
        text=True,
    )


@requires_arm_gcc
def test_seam_refuses_to_build_without_board_constants(tmp_path):
    result = _compile_seam_file(load_board("qemu-mps2-an385").seam_sources()[0], {}, tmp_path)
    assert result.returncode != 0
    assert "MLF_BOARD_TICK_HZ missing" in result.stderr


@requires_arm_gcc
def test_sleeping_console_refuses_to_build_without_its_interrupt(tmp_path):
    board = load_board("qemu-mps2-an385")
    definitions = board.compile_definitions()
    del definitions["MLF_BOARD_CONSOLE_IRQ"]
    (console,) = [p for p in board.seam_sources() if p.parent.name == "mps2"]
    result = _compile_seam_file(console, definitions, tmp_path)
    assert result.returncode != 0
    assert "MLF_BOARD_CONSOLE_IRQ missing" in result.stderr


@pytest.mark.skipif(not have_tool("cmake"), reason="needs cmake on PATH (pip install cmake)")
def test_toolchain_file_demands_cpu_flags(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.20)\nproject(x C)\n")
    board = load_board("qemu-mps2-an385")
    result = subprocess.run(
        [
            "cmake",
            "-S",
            str(tmp_path),
            "-B",
            str(tmp_path / "build"),
            f"-DCMAKE_TOOLCHAIN_FILE={board.toolchain_file}",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "needs -DMLF_CPU_FLAGS" in result.stderr


@pytest.mark.skipif(not have_tool("clang-format"), reason="needs clang-format")
def test_seam_c_is_clang_formatted():
    # The checkout's files (not an installed copy), so that the repository's .clang-format
    # applies.
    sources = sorted((REPO_ROOT / "boards" / "families").rglob("*.[ch]"))
    sources += sorted((REPO_ROOT / "tests" / "firmware_qemu").glob("*.c"))
    # and the CMSIS-NN adapter, compiled into firmware beside the seam
    sources += sorted((REPO_ROOT / "crt" / "cmsis_nn").glob("*.[ch]"))
    sources += sorted((REPO_ROOT / "tests" / "cmsis_nn_c").glob("*.c"))
    result = subprocess.run(
        ["clang-format", "--dry-run", "-Werror", *map(str, sources)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[:2000]


# --- schema rules: one bad input each -----------------------------------------------------


def variant(edit) -> Dict[str, Any]:
    data = copy.deepcopy(raw("qemu-mps2-an386"))
    edit(data)
    return data


def _set(path: str, value: Any):
    def edit(data: Dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value

    return edit


DELETE = object()

BAD_INPUTS = [
    ("name", DELETE, "name is missing"),
    ("name", "Bad Name", "name must be lower-case"),
    ("description", "", "description must be a non-empty string"),
    ("arch", "riscv", "arch must be one of host, cortex-m"),
    ("family", "../etc", "family must name a directory"),
    ("stack_bytes", 1004, "stack_bytes must be a multiple of 8"),
    ("stack_bytes", "16k", "stack_bytes must be an integer"),
    ("stack_bytes", 0x400000, "leaves no RAM"),
    ("cpu", DELETE, "cpu is missing"),
    ("cpu.mcpu", DELETE, "cpu.mcpu is missing"),
    ("cpu.fpu", DELETE, "cpu.fpu is required with float_abi = 'hard'"),
    ("cpu.float_abi", "double", "cpu.float_abi must be one of soft, softfp, hard"),
    ("cpu.thumb", "yes", "cpu.thumb must be true or false"),
    ("cpu.neon", True, "cpu.neon is not a known key"),
    ("memory.ram.origin", 0x00100000, "memory.ram overlaps memory.flash"),
    ("memory.flash.length", 0, "memory.flash.length must be at least 1"),
    ("memory.ram.origin", 0xFFFFF000, "memory.ram ends beyond the 32-bit address space"),
    ("memory.sram2", {"origin": 0, "length": 1}, "memory.sram2 is not a known key"),
    ("console.kind", "stdio", "console.kind must be one of cmsdk-uart"),
    ("console.kind", "usb", "console.kind must be one of"),
    ("console.address", DELETE, "console.address is missing"),
    ("console.irq", -1, "console.irq must be at least 0"),
    ("console.irq", "rx", "console.irq must be an integer"),
    ("timer.kind", "host-monotonic", "timer.kind must be one of systick, stm32-tim2 for cortex-m"),
    ("timer.clock_hz", 0, "timer.clock_hz must be at least 1"),
    ("run.kind", "host", "run.kind is 'host' exactly for a host board"),
    ("run.machine", DELETE, "run.machine is missing"),
    ("run.args", "-d guest_errors", "run.args must be a list of strings"),
    ("link.max_payload", 2 << 20, "link.max_payload .* is more than a quarter of RAM"),
    ("link.max_payload", 16, "link.max_payload must be at least 64"),
    ("link", DELETE, "link is missing"),
    ("colour", "blue", "colour is not a known key"),
    ("family_shared", ["cortex_m"], "family_shared entry 'cortex_m' must name another"),
    ("family_shared", "stm32", "family_shared must be a list of strings"),
    ("definitions", {"MLF_BOARD_TICK_HZ": 1}, "definitions.MLF_BOARD_TICK_HZ must be an upper"),
    ("definitions", {"lower": 1}, "definitions.lower must be an upper-case C macro"),
    ("definitions", {"X": 1.5}, "definitions.X must be an integer or a string"),
    ("definitions", {"X": -1}, "definitions.X must be a non-negative integer"),
]


@pytest.mark.parametrize("path, value, message", BAD_INPUTS)
def test_schema_rule(path, value, message):
    with pytest.raises(BoardError, match=message):
        parse_board(variant(_set(path, value)))


def test_real_board_rules():
    nucleo = raw("nucleo-l4r5zi")
    for path, value, message in [
        ("run.openocd_args", DELETE, "run.openocd_args is required when kind = 'openocd'"),
        ("serial.vid_pid", ["0483-374b"], "serial.vid_pid entry '0483-374b' is not 'vvvv:pppp'"),
        ("serial.serial_number", 1234, "serial.serial_number must be a non-empty string"),
    ]:
        data = copy.deepcopy(nucleo)
        _set(path, value)(data)
        with pytest.raises(BoardError, match=message):
            parse_board(data)
    data = copy.deepcopy(nucleo)
    data["run"]["kind"] = "pyocd"
    del data["run"]["pyocd_target"]
    with pytest.raises(BoardError, match="run.pyocd_target is required when kind = 'pyocd'"):
        parse_board(data)


def test_host_board_rules():
    data = copy.deepcopy(raw("host"))
    data["cpu"] = {"mcpu": "cortex-m3"}
    with pytest.raises(BoardError, match="a host board has no CPU flags or memory map"):
        parse_board(data)
    data = copy.deepcopy(raw("host"))
    data["console"]["irq"] = 0  # stdin: the process blocks in read(), no interrupt to name
    with pytest.raises(BoardError, match="console.irq is not a known key"):
        parse_board(data)


def test_file_name_must_match_board_name(tmp_path):
    path = tmp_path / "other-name.toml"
    shutil.copy(boards_dir() / "qemu-mps2-an385.toml", path)
    with pytest.raises(BoardError, match=r"name is 'qemu-mps2-an385' but the file is"):
        load_board_file(path)


def test_invalid_toml_names_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("name = \n")
    with pytest.raises(BoardError, match=r"broken.toml: not valid TOML"):
        load_board_file(path)


@pytest.mark.parametrize("name", ["nosuch", "../host", "", "Host"])
def test_unknown_board_lists_the_available_ones(name):
    with pytest.raises(BoardError, match="unknown board") as info:
        load_board(name)
    assert "qemu-mps2-an385" in str(info.value) and "host" in str(info.value)


# --- CLI ----------------------------------------------------------------------------------


def test_cli_lists_every_board(capsys):
    assert cli_main(["boards"]) == 0
    out = capsys.readouterr().out
    for name in REQUIRED:
        assert name in out


def test_cli_json(capsys):
    assert cli_main(["boards", "--json"]) == 0
    boards = json.loads(capsys.readouterr().out)
    assert {b["name"] for b in boards} == set(board_names())


def test_cli_describes_one_board(capsys):
    assert cli_main(["boards", "qemu-mps2-an385"]) == 0
    out = capsys.readouterr().out
    assert "-mcpu=cortex-m3" in out and "40 instructions per tick" in out
    assert cli_main(["boards", "qemu-mps2-an385", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "qemu-mps2-an385"


def test_cli_unknown_board_is_exit_2(capsys):
    assert cli_main(["boards", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlf-project boards: error: unknown board 'nosuch'")
    assert "qemu-mps2-an385" in err


# --- the boards of issue 29 -----------------------------------------------------------------


def test_an547_is_a_secure_m55_with_helium_booting_from_itcm():
    board = load_board("qemu-mps3-an547")
    assert board.cpu is not None and board.cpu.mve and board.cpu.dsp
    assert board.cpu_flags()[:3] == ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"]
    assert board.flash is not None and board.flash.origin == 0  # VTOR_S resets to 0 (ITCM)
    assert board.ram is not None and board.ram.origin == 0x21000000
    command = board.qemu_command(Path("fw.elf"), icount=True)
    assert command[command.index("-m") + 1] == "2G"
    assert board.instructions_per_tick() == 31.25  # SysTick at the 32 MHz main clock


def test_stm32_boards_share_the_stm32_seam_and_name_their_console_pins():
    for name, family in [
        ("nucleo-l4r5zi", "stm32l4"),
        ("qemu-netduinoplus2", "stm32f4"),
        ("nucleo-f401re", "stm32f4"),
        ("nucleo-f746zg", "stm32f7"),
        ("stm32f746g-disco", "stm32f7"),
        ("nucleo-g071rb", "stm32g0"),
    ]:
        board = load_board(name)
        assert board.family == family and board.family_shared == ("stm32",)
        assert [d.name for d in board.seam_dirs()] == ["common", "cortex_m", "stm32", family]
        definitions = board.compile_definitions()
        assert definitions["MLF_STM32_CONSOLE_AF"] in ("0x1u", "0x7u", "0x8u")
        assert board.summary()["definitions"]["MLF_STM32_CONSOLE_RCC_BIT"]


def test_timer_kind_selects_its_c_file():
    netduino = load_board("qemu-netduinoplus2")
    assert netduino.compile_definitions()["MLF_BOARD_TIMER_STM32_TIM2"] == "1"
    assert "MLF_BOARD_TIMER_SYSTICK" not in netduino.compile_definitions()
    assert netduino.instructions_per_tick() == 1.0  # TIM2 at QEMU's 1 GHz
    assert load_board("nucleo-f401re").compile_definitions()["MLF_BOARD_TIMER_SYSTICK"] == "1"


def test_real_boards_say_they_have_not_run_and_how_they_are_flashed():
    for name in ("nucleo-f746zg", "stm32f746g-disco", "nucleo-f401re", "nucleo-g071rb"):
        board = load_board(name)
        assert board.is_real and "not yet run on hardware" in board.description
        assert board.run.openocd_args and board.run.pyocd_target
        assert (0x0483, 0x374B) in board.serial.vid_pid
        assert name in (boards_dir() / "README.md").read_text()
