"""A board as data: :class:`Board` and the parts of ``boards/<name>.toml`` it is made of.

A board says what a target is (CPU, memory map, console UART, timer), how firmware for it is
built (the C seam of its family, the toolchain file, a linker script rendered from its memory
regions) and how it is run (a host process, a QEMU machine, or a real board flashed with
openocd/pyOCD and found by its USB serial port). What depends on the architecture is asked of
:mod:`.architecture`; nothing here knows a particular board or core.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import BoardError
from .architecture import Architecture, Cpu, architecture


@dataclass(frozen=True)
class MemoryRegion:
    """A contiguous address range (bytes)."""

    origin: int
    length: int

    @property
    def end(self) -> int:
        """One past the last byte."""
        return self.origin + self.length

    def __str__(self) -> str:
        return f"{human_bytes(self.length)} @0x{self.origin:08x}"


@dataclass(frozen=True)
class Console:
    """The byte link the device protocol runs over."""

    kind: str
    address: Optional[int] = None
    baud: int = 115200
    clock_hz: Optional[int] = None
    irq: Optional[int] = None  # the receive interrupt the idle firmware sleeps on (NVIC number)


@dataclass(frozen=True)
class Timer:
    """The source of ``mlf_platform_ticks()``."""

    kind: str
    clock_hz: int


@dataclass(frozen=True)
class RunConfig:
    """How built firmware is started: ``host`` process, ``qemu`` machine, or flashed to a real
    board with ``openocd`` / ``pyocd`` (the kind names the preferred tool; the other is used
    when only it is installed and configured)."""

    kind: str
    qemu_machine: Optional[str] = None
    qemu_args: Tuple[str, ...] = ()
    openocd_args: Tuple[str, ...] = ()
    pyocd_target: Optional[str] = None


@dataclass(frozen=True)
class SerialHints:
    """How to find a real board's console among the host's serial ports."""

    vid_pid: Tuple[Tuple[int, int], ...] = ()
    serial_number: Optional[str] = None


@dataclass(frozen=True)
class Board:
    """One target, as described by ``boards/<name>.toml``."""

    name: str
    description: str
    family: str
    arch: str
    stack_bytes: int
    console: Console
    timer: Timer
    run: RunConfig
    max_payload: int
    cpu: Optional[Cpu] = None
    flash: Optional[MemoryRegion] = None
    ram: Optional[MemoryRegion] = None
    serial: SerialHints = field(default_factory=SerialHints)
    source: Optional[Path] = None
    # Seam directories under families/ that the family builds on (code shared by sibling
    # families, e.g. the STM32 series), compiled after the architecture's and before the family.
    family_shared: Tuple[str, ...] = ()
    # Further board constants for the family's C seam ([definitions]: name -> value), e.g.
    # which pins and clock enable an STM32 console uses.
    definitions: Tuple[Tuple[str, str], ...] = ()

    # --- kinds --------------------------------------------------------------------------

    @property
    def architecture(self) -> Architecture:
        """The seam of this board's ``arch`` (:mod:`.architecture`)."""
        return architecture(self.arch)

    @property
    def is_host(self) -> bool:
        return self.architecture.is_host

    @property
    def is_qemu(self) -> bool:
        return self.run.kind == "qemu"

    @property
    def is_real(self) -> bool:
        """A physical board (flashed, reached over a USB serial port)."""
        return self.run.kind in ("openocd", "pyocd")

    @property
    def semihosting(self) -> bool:
        """Whether the firmware may use semihosting (only QEMU answers it; on a real board
        without a debugger a semihosting call faults)."""
        return self.is_qemu

    # --- building -----------------------------------------------------------------------

    def compiler_command(self) -> Optional[List[str]]:
        """The C compiler for this board's CPU outside a project's build, with the flags that
        select the CPU and its C library: the host's ``$CC`` (else ``cc``, ``gcc``,
        ``clang``), else the architecture's cross compiler; None when it is not on PATH."""
        if self.is_host:
            for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
                if name and shutil.which(name):
                    return [name]
            return None
        found = shutil.which(self.architecture.compiler)
        if found is None:
            return None
        return [found, *self.cpu_flags(), *self.architecture.library_flags]

    def model_opt_flags(self) -> List[str]:
        """Optimisation of the model's C: TVM's code is the hot path."""
        return ["-O2"] if self.is_host else ["-O2", "-g"]

    def runtime_opt_flags(self) -> List[str]:
        """Optimisation of our C (runtime, firmware loop, board seam). On a microcontroller
        flash is what runs short and our code is not the hot path (dispatch is a few
        instructions per operator), so it is built for size there."""
        return ["-O2"] if self.is_host else ["-Os", "-g", *self.architecture.size_flags]

    def runtime_lto(self) -> bool:
        """Whether our C is linked with link-time optimisation: on a microcontroller it
        inlines the one-caller helpers across files and drops what no path reaches (about
        1.3 KB of flash on KWS). The model's C stays ordinary objects either way; the host
        keeps plain objects for its sanitizer builds."""
        return not self.is_host

    def cpu_flags(self) -> List[str]:
        """Compiler/linker flags selecting the core, e.g. ``['-mcpu=cortex-m4', '-mthumb',
        '-mfloat-abi=hard', '-mfpu=fpv4-sp-d16']``; empty for the host."""
        return [] if self.cpu is None else self.cpu.flags()

    @property
    def family_dir(self) -> Path:
        """The directory of this board's C seam (``mlf_platform.h`` implementation)."""
        return self.architecture.family_dir(self.family)

    def seam_dirs(self) -> List[Path]:
        """Directories whose ``*.c`` files make up the seam, most generic first (for Cortex-M:
        ``common`` (board constants, reports), the shared ``cortex_m`` start-up/timer/fault
        code, what the family builds on, then the family's drivers)."""
        return self.architecture.seam_dirs(self.family, self.family_shared)

    def seam_sources(self) -> List[Path]:
        """The C files implementing ``mlf_platform.h`` for this board."""
        sources: List[Path] = []
        for directory in self.seam_dirs():
            sources.extend(sorted(directory.glob("*.c")))
        return sources

    def seam_include_dirs(self) -> List[Path]:
        """Include directories the seam sources need besides ``crt/include``."""
        return self.seam_dirs()

    def compile_definitions(self) -> Dict[str, str]:
        """Preprocessor definitions (name → value) the seam needs: the board constants that
        must agree with this file (console address/baud/clock, tick rate, semihosting)."""
        definitions = {
            "MLF_BOARD_NAME": f'"{self.name}"',
            "MLF_BOARD_TICK_HZ": str(self.timer.clock_hz),
            "MLF_BOARD_SEMIHOSTING": "1" if self.semihosting else "0",
            "MLF_BOARD_MAX_PAYLOAD": str(self.max_payload),
            # Selects the timer's C file (e.g. MLF_BOARD_TIMER_SYSTICK for kind "systick").
            "MLF_BOARD_TIMER_" + re.sub(r"\W", "_", self.timer.kind).upper(): "1",
        }
        definitions.update(self.definitions)
        if not self.is_host:
            assert self.console.address is not None and self.console.clock_hz is not None
            definitions.update(
                {
                    "MLF_BOARD_CONSOLE_BASE": f"0x{self.console.address:08X}u",
                    "MLF_BOARD_CONSOLE_BAUD": f"{self.console.baud}u",
                    "MLF_BOARD_CONSOLE_CLOCK_HZ": f"{self.console.clock_hz}u",
                }
            )
        if self.console.irq is not None:
            definitions["MLF_BOARD_CONSOLE_IRQ"] = f"{self.console.irq}u"
        return definitions

    @property
    def toolchain_file(self) -> Optional[Path]:
        """The CMake toolchain file for cross builds (None: the host compiler)."""
        return self.architecture.toolchain_file()

    def cmake_args(self) -> List[str]:
        """``-D`` arguments selecting this board's toolchain and CPU for ``cmake -S ... -B``."""
        if self.toolchain_file is None:
            return []
        return [
            f"-DCMAKE_TOOLCHAIN_FILE={self.toolchain_file}",
            "-DMLF_CPU_FLAGS=" + ";".join(self.cpu_flags()),
        ]

    @property
    def linker_template(self) -> Optional[Path]:
        return self.architecture.linker_template()

    def render_linker_script(self, stack_bytes: Optional[int] = None, heap_bytes: int = 0) -> str:
        """The GNU ld script for this board's memory map. ``stack_bytes`` defaults to the
        board's ``stack_bytes``; ``heap_bytes`` (0: malloc always fails) bounds newlib's heap.
        The linker then refuses an image that does not fit (``region `RAM' overflowed``)."""
        if self.linker_template is None or self.flash is None or self.ram is None:
            raise BoardError(f"board {self.name!r} has no memory map: it needs no linker script")
        stack = self.stack_bytes if stack_bytes is None else stack_bytes
        if stack <= 0 or stack % 8 or heap_bytes < 0:
            raise BoardError(
                f"stack_bytes must be a positive multiple of 8 and heap_bytes >= 0 "
                f"(got {stack}, {heap_bytes})"
            )
        if stack + heap_bytes > self.ram.length:
            raise BoardError(
                f"stack ({stack} B) + heap ({heap_bytes} B) exceed {self.name}'s RAM "
                f"({self.ram.length} B)"
            )
        import jinja2  # deferred: only cross builds need it

        template = jinja2.Template(
            self.linker_template.read_text(),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
        )
        return template.render(board=self, stack_bytes=stack, heap_bytes=heap_bytes)

    # --- running ------------------------------------------------------------------------

    def qemu_command(
        self,
        firmware: Path,
        *,
        icount: bool = False,
        serial: str = "pty",
        extra_args: Sequence[str] = (),
    ) -> List[str]:
        """The QEMU command line running ``firmware`` with the console UART on
        ``serial`` (a QEMU ``-serial`` backend), semihosting on for the exit status, and with
        ``icount`` one instruction per virtual nanosecond (deterministic tick counts)."""
        binary = self.qemu_binary
        if not self.is_qemu or self.run.qemu_machine is None or binary is None:
            raise BoardError(f"board {self.name!r} does not run under QEMU")
        command = [
            binary,
            "-machine",
            self.run.qemu_machine,
            "-nographic",
            "-monitor",
            "none",
            "-serial",
            serial,
            "-semihosting-config",
            "enable=on,target=native",
        ]
        if icount:
            command += ["-icount", "shift=0,align=off,sleep=on"]
        command += list(self.run.qemu_args)
        command += list(extra_args)
        command += ["-kernel", str(firmware)]
        return command

    @property
    def qemu_binary(self) -> Optional[str]:
        """The QEMU system emulator of this board's architecture (``qemu-system-arm``,
        ``qemu-system-riscv32``)."""
        return self.architecture.qemu_binary if self.is_qemu else None

    def instructions_per_tick(self, icount_shift: int = 0) -> float:
        """Under ``-icount shift=N`` one instruction takes 2**N ns of virtual time, so one tick
        of a ``clock_hz`` timer is ``1e9 / (clock_hz * 2**N)`` instructions (40 for SysTick at
        25 MHz with shift=0). instructions = ticks * 1e9 / (tick_hz * 2**N)."""
        return 1e9 / (self.timer.clock_hz * (1 << icount_shift))

    def summary(self) -> Dict[str, Any]:
        """A JSON-friendly description (what ``mlf-project boards --json`` prints)."""
        return {
            "name": self.name,
            "description": self.description,
            "arch": self.arch,
            "family": self.family,
            "family_shared": list(self.family_shared),
            "definitions": dict(self.definitions),
            "cpu": None if self.cpu is None else self.cpu.summary(),
            "flash": None
            if self.flash is None
            else {"origin": self.flash.origin, "length": self.flash.length},
            "ram": None
            if self.ram is None
            else {"origin": self.ram.origin, "length": self.ram.length},
            "stack_bytes": self.stack_bytes,
            "console": {
                "kind": self.console.kind,
                "address": self.console.address,
                "baud": self.console.baud,
                "clock_hz": self.console.clock_hz,
            },
            "timer": {"kind": self.timer.kind, "clock_hz": self.timer.clock_hz},
            "run": {
                "kind": self.run.kind,
                "qemu_machine": self.run.qemu_machine,
                "qemu_args": list(self.run.qemu_args),
                "openocd_args": list(self.run.openocd_args),
                "pyocd_target": self.run.pyocd_target,
            },
            "serial": {
                "vid_pid": [f"{vid:04x}:{pid:04x}" for vid, pid in self.serial.vid_pid],
                "serial_number": self.serial.serial_number,
            },
            "max_payload": self.max_payload,
        }


def human_bytes(count: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} B"
