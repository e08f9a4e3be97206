"""A user's own firmware around exported models, as the export tests build it: a main.c (or
main.cpp) that includes only the exported headers, with the test's own start-up and linker
script (tests/export_user/) on bare metal, built through add_subdirectory, through
find_package after an install, or through the Make fragments, with the firmware's own CPU
flags (a :class:`Toolchain`: the board's, or on the host a compiler and flags of the test's
choosing, e.g. clang or ``-m32``); run on the host or in QEMU."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from project_api.board import Board

HERE = Path(__file__).resolve().parent / "export_user"


@dataclass
class Exported:
    """One exported model and the corpus case it came from."""

    dir: Path
    name: str
    inputs: Dict[str, np.ndarray]
    outputs: List[np.ndarray]


@dataclass(frozen=True)
class Toolchain:
    """The user's compiler: the board's cross compiler with its CPU flags, or on the host
    ``cc`` (default: cc) with ``flags`` of the user's (``-m32``)."""

    board: Board
    cc: Optional[str] = None
    flags: Tuple[str, ...] = ()

    @property
    def c_compiler(self) -> str:
        return (self.cc or "cc") if self.board.is_host else self.board.architecture.compiler

    @property
    def cxx_compiler(self) -> str:
        cc = self.c_compiler
        return "clang++" if "clang" in cc else "c++" if cc == "cc" else cc.replace("gcc", "g++")

    def c_flags(self) -> List[str]:
        base = ["-O2", "-Wall", "-Wextra", "-Werror"] if self.board.is_host else c_flags(self.board)
        return [*base, *self.flags]


def _toolchain(board: Union[Board, Toolchain]) -> Toolchain:
    return board if isinstance(board, Toolchain) else Toolchain(board)


def _c_bytes(data: bytes) -> str:
    return ",".join(str(b) for b in data) or "0"


def user_main(models: Sequence[Exported]) -> str:
    """C (valid as C++ too): for every model init, fill inputs in place, run, print every
    output as hex lines ``<name> <i> <hex>``; exit status 0 only when all went well."""
    lines = ["#include <stdint.h>", "#include <string.h>"]
    lines += [f'#include "{m.name}.h"' for m in models]
    lines += [
        "#ifdef USER_BARE_METAL",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "void user_write(const char* text);",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "#define WRITE(text) user_write(text)",
        "#else",
        "#include <stdio.h>",
        "#define WRITE(text) fputs(text, stdout)",
        "#endif",
        "static char line[4096];",
        "static void size_line(const char* name, size_t n) {",
        "  char digits[24];",
        "  int k = 0;",
        "  do { digits[k++] = (char)('0' + (int)(n % 10u)); n /= 10u; } while (n && k < 23);",
        "  size_t at = 0;",
        "  while (*name && at < 64) line[at++] = *name++;",
        '  memcpy(line + at, " arena ", 7);',
        "  at += 7;",
        "  while (k > 0) line[at++] = digits[--k];",
        "  line[at++] = '\\n';",
        "  line[at] = 0;",
        "  WRITE(line);",
        "}",
        "static void hex_line(const char* name, int index, const uint8_t* data, size_t n) {",
        '  static const char digits[] = "0123456789abcdef";',
        "  size_t at = 0;",
        "  while (*name && at < 64) line[at++] = *name++;",
        "  line[at++] = ' '; line[at++] = (char)('0' + index); line[at++] = ' ';",
        "  line[at] = 0;",
        "  WRITE(line);",
        "  for (size_t i = 0; i < n; i += 1024) {",
        "    size_t k = 0;",
        "    for (size_t j = i; j < n && j < i + 1024; ++j) {",
        "      line[k++] = digits[data[j] >> 4]; line[k++] = digits[data[j] & 15];",
        "    }",
        "    line[k] = 0;",
        "    WRITE(line);",
        "  }",
        '  WRITE("\\n");',
        "}",
    ]
    body = ["int main(void) {", "  int failures = 0;"]
    for m in models:
        n = m.name
        N = n.upper()
        arrays = list(m.inputs.values())
        for i, array in enumerate(arrays):
            lines.append(f"static const uint8_t {n}_in{i}[] = {{{_c_bytes(array.tobytes())}}};")
        lines.append(f"static {n}_ctx {n}_context;")
        lines.append(f"{N}_STATIC_ARENA({n}_arena);")
        body.append("  {")
        body.append(f'    size_line("{n}", sizeof {n}_arena);')
        body.append(f"    int status = {n}_init(&{n}_context, {n}_arena, sizeof {n}_arena);")
        for i in range(len(arrays)):
            body.append(
                f"    if (status == {N}_OK) memcpy({n}_input(&{n}_context, {i}), {n}_in{i}, "
                f"{N}_INPUT{i}_BYTES);"
            )
        body.append(f"    if (status == {N}_OK) status = {n}_run(&{n}_context);")
        body.append(f"    if (status != {N}_OK) {{ WRITE({n}_status_str(status)); WRITE(\"\\n\"); "
                    "failures++; }")  # fmt: skip
        for i in range(len(m.outputs)):
            body.append(
                f'    else hex_line("{n}", {i}, (const uint8_t*){n}_output(&{n}_context, {i}), '
                f"{N}_OUTPUT{i}_BYTES);"
            )
        body.append("  }")
    body += ["  return failures;", "}"]
    return "\n".join(lines + body) + "\n"


def arena_sizes(text: str) -> Dict[str, int]:
    """The arena each model's firmware reserved (``<MODEL>_ARENA_BYTES`` as its compiler
    chose it), from :func:`user_main`'s ``<name> arena <bytes>`` lines."""
    found = {}
    for line in text.splitlines():
        parts = line.strip().split(" ")
        if len(parts) == 3 and parts[1] == "arena" and parts[2].isdigit():
            found[parts[0]] = int(parts[2])
    return found


def check_outputs(text: str, models: Sequence[Exported]) -> None:
    """Every model's outputs printed by the firmware equal the corpus references bit for bit."""
    printed = {}
    for line in text.splitlines():
        parts = line.strip().split(" ")
        if len(parts) == 3 and parts[1].isdigit():
            printed[(parts[0], int(parts[1]))] = bytes.fromhex(parts[2])
    for m in models:
        for i, expected in enumerate(m.outputs):
            got = printed.get((m.name, i))
            assert got is not None, f"{m.name} output {i} not printed:\n{text[-2000:]}"
            want = np.ascontiguousarray(expected).tobytes()
            assert got == want, f"{m.name} output {i}: {got.hex()} != {want.hex()}"


# --- toolchains ------------------------------------------------------------------------------


def toolchain_args(board: Union[Board, Toolchain]) -> List[str]:
    """CMake cache entries for the user's own toolchain (no generated toolchain file)."""
    chain = _toolchain(board)
    flags = " ".join(chain.c_flags())
    args = [
        f"-DCMAKE_C_COMPILER={chain.c_compiler}",
        f"-DCMAKE_CXX_COMPILER={chain.cxx_compiler}",
        f"-DCMAKE_C_FLAGS={flags}",
    ]
    if chain.board.is_host:
        return [*args, f"-DCMAKE_CXX_FLAGS={flags}"]
    return [
        *args,
        "-DCMAKE_SYSTEM_NAME=Generic",
        "-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY",
        f"-DCMAKE_CXX_FLAGS={flags} -fno-exceptions -fno-rtti",
        f"-DCMAKE_EXE_LINKER_FLAGS={' '.join(link_flags(chain.board))}",
    ]


def c_flags(board: Board) -> List[str]:
    flags = list(board.cpu_flags()) + ["-O2", "-Wall", "-Wextra", "-Werror"]
    flags += ["-ffunction-sections", "-fdata-sections", "-DUSER_BARE_METAL"]
    if board.arch == "riscv32":
        flags += ["--specs=picolibc.specs"]
    return flags


def link_flags(board: Board) -> List[str]:
    # picolibc's specs are in the C flags already (CMake and our Makefile link with them)
    specs = [] if board.arch == "riscv32" else ["--specs=nano.specs"]
    return [*specs, "-nostartfiles", "-Wl,--gc-sections"]


def linker_script(board: Board, path: Path) -> Path:
    assert board.flash is not None and board.ram is not None
    text = (HERE / "user.ld.in").read_text()
    for key, value in {
        "ENTRY": "_start" if board.arch == "riscv32" else "user_start",
        "FLASH_ORIGIN": hex(board.flash.origin),
        "FLASH_LENGTH": hex(board.flash.length),
        "RAM_ORIGIN": hex(board.ram.origin),
        "RAM_LENGTH": hex(board.ram.length),
    }.items():
        text = text.replace(f"@{key}@", value)
    path.write_text(text)
    return path


# --- builds ------------------------------------------------------------------------------------


def _run(argv: Sequence[str], cwd: Optional[Path] = None, timeout: float = 600) -> str:
    done = subprocess.run(
        list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout + done.stderr


def _sources(
    root: Path, models: Sequence[Exported], board: Board, cxx: bool, main_text: Optional[str]
) -> List[str]:
    main = root / ("main.cpp" if cxx else "main.c")
    main.write_text(user_main(models) if main_text is None else main_text)
    sources = [main.name]
    if not board.is_host:
        shutil.copyfile(HERE / "startup.c", root / "startup.c")
        linker_script(board, root / "user.ld")
        sources.append("startup.c")
    return sources


def build_cmake(
    root: Path,
    models: Sequence[Exported],
    board: Union[Board, Toolchain],
    *,
    mode: str,
    cxx: bool = False,
    main_text: Optional[str] = None,
    link_options: Sequence[str] = (),
) -> Path:
    """The user firmware built by CMake: ``mode`` ``subdirectory`` (add_subdirectory of each
    export) or ``package`` (each export built, installed, then found with find_package).
    ``main_text`` replaces :func:`user_main`'s main (the benchmarks time their own);
    ``link_options`` are added to the link (e.g. ``-Wl,-Map=...``)."""
    args = toolchain_args(board)
    board = _toolchain(board).board
    root.mkdir(parents=True, exist_ok=True)
    sources = _sources(root, models, board, cxx, main_text)
    lines = [
        "cmake_minimum_required(VERSION 3.13)",
        f"project(user_firmware C{' CXX' if cxx else ''})",
    ]
    for m in models:
        if mode == "subdirectory":
            lines.append(f'add_subdirectory("{m.dir}" "export_{m.name}")')
        else:
            lines.append(f"find_package({m.name} CONFIG REQUIRED)")
    lines.append(f"add_executable(app {' '.join(sources)})")
    lines.append(
        "target_link_libraries(app PRIVATE " + " ".join(f"mlf::{m.name}" for m in models) + ")"
    )
    if link_options:
        lines.append(f"target_link_options(app PRIVATE {' '.join(link_options)})")
    if not board.is_host:
        lines.append('target_link_options(app PRIVATE "-T${CMAKE_CURRENT_SOURCE_DIR}/user.ld")')
        # linked by gcc: main.cpp needs no C++ library (Debian's bare-metal libstdc++ is a
        # package of its own)
        lines.append('set_target_properties(app PROPERTIES SUFFIX ".elf" LINKER_LANGUAGE C)')
    (root / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
    if mode == "package":
        prefix = root / "prefix"
        for m in models:
            build = root / f"build-{m.name}"
            _run(["cmake", "-S", str(m.dir), "-B", str(build), "-G", "Ninja", *args])
            _run(["cmake", "--build", str(build)])
            _run(["cmake", "--install", str(build), "--prefix", str(prefix)])
        args = [*args, f"-DCMAKE_PREFIX_PATH={prefix}"]
    _run(["cmake", "-S", str(root), "-B", str(root / "build"), "-G", "Ninja", *args])
    _run(["cmake", "--build", str(root / "build")])
    return root / "build" / ("app" if board.is_host else "app.elf")


def build_make(root: Path, models: Sequence[Exported], board: Union[Board, Toolchain]) -> Path:
    """The user firmware built by make through each export's ``<model>.mk``."""
    chain = _toolchain(board)
    board = chain.board
    root.mkdir(parents=True, exist_ok=True)
    sources = _sources(root, models, board, False, None)
    host = board.is_host
    cc = chain.c_compiler
    cflags = " ".join(chain.c_flags())
    ldflags = "" if host else " ".join(link_flags(board)) + " -T user.ld"
    lines = [f"include {m.dir}/{m.name}.mk" for m in models]
    lines += [
        f"SRCS := $(abspath {' '.join(sources)})"
        + "".join(f" $({m.name.upper()}_SRCS)" for m in models),
        f"CFLAGS := {cflags}"
        + "".join(f" $({m.name.upper()}_INCLUDES) $({m.name.upper()}_CFLAGS)" for m in models),
        "OBJS := $(patsubst /%,obj/%.o,$(SRCS))",
        "app: $(OBJS)",
        f"\t{cc} $(CFLAGS) -o $@ $^ {ldflags} -lm",
        "obj/%.o: /%",
        "\t@mkdir -p $(dir $@)",
        f"\t{cc} $(CFLAGS) -c $< -o $@",
    ]
    (root / "Makefile").write_text("\n".join(lines) + "\n")
    jobs = str(max(1, min(2, os.cpu_count() or 1)))
    _run(["make", "-s", "-j", jobs, "-C", str(root)])
    return root / "app"


def run_firmware(
    firmware: Path, board: Board, timeout: float = 120, *, icount: bool = False
) -> str:
    """Runs the user firmware (host process, or the board's QEMU machine with semihosting;
    ``icount``: one instruction per virtual ns) and returns what it printed; fails on a
    non-zero exit status."""
    if board.is_host:
        argv = [str(firmware)]
    else:
        argv = board.qemu_command(firmware, serial="null", icount=icount)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    text = done.stdout + done.stderr
    assert done.returncode == 0, f"{firmware} exited {done.returncode}:\n{text[-3000:]}"
    return text
