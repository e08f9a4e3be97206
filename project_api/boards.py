"""Boards as data: ``boards/<name>.toml`` → :class:`Board`.

A board file says what a target is (CPU, memory map, console UART, timer), how firmware for it
is built (the C seam of its family, the toolchain file, a linker script rendered from its
memory regions) and how it is run (a host process, a QEMU machine, or a real board flashed with
openocd/pyOCD and found by its USB serial port). Nothing here knows about a particular board:
adding one is adding a TOML file. The schema is documented in ``boards/README.md``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import BoardError
from .resources import boards_dir, crt_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

ARCHES = ("host", "cortex-m")
FLOAT_ABIS = ("soft", "softfp", "hard")
CONSOLE_KINDS = ("stdio", "cmsdk-uart", "pl011", "stm32-usart", "stm32-lpuart")
TIMER_KINDS = ("host-monotonic", "systick")
RUN_KINDS = ("host", "qemu", "openocd", "pyocd")

QEMU_BINARY = "qemu-system-arm"

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_VID_PID_RE = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$")


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
        return f"{_human_bytes(self.length)} @0x{self.origin:08x}"


@dataclass(frozen=True)
class Cpu:
    """What the compiler needs to know about the core."""

    mcpu: str
    thumb: bool = True
    float_abi: str = "soft"
    fpu: Optional[str] = None
    dsp: bool = False
    mve: bool = False

    @property
    def has_fpu(self) -> bool:
        return self.fpu is not None and self.float_abi != "soft"


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

    # --- kinds --------------------------------------------------------------------------

    @property
    def is_host(self) -> bool:
        return self.arch == "host"

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

    def model_opt_flags(self) -> List[str]:
        """Optimisation of the model's C: TVM's code is the hot path."""
        return ["-O2"] if self.is_host else ["-O2", "-g"]

    def runtime_opt_flags(self) -> List[str]:
        """Optimisation of our C (runtime, firmware loop, board seam). On a microcontroller
        flash is what runs short and our code is not the hot path (dispatch is a few
        instructions per operator), so it is built for size there."""
        return ["-O2"] if self.is_host else ["-Os", "-g"]

    def runtime_lto(self) -> bool:
        """Whether our C is linked with link-time optimisation: on a microcontroller it
        inlines the one-caller helpers across files and drops what no path reaches (about
        1.3 KB of flash on KWS). The model's C stays ordinary objects either way; the host
        keeps plain objects for its sanitizer builds."""
        return not self.is_host

    def cpu_flags(self) -> List[str]:
        """Compiler/linker flags selecting the core, e.g. ``['-mcpu=cortex-m4', '-mthumb',
        '-mfloat-abi=hard', '-mfpu=fpv4-sp-d16']``; empty for the host."""
        if self.cpu is None:
            return []
        flags = [f"-mcpu={self.cpu.mcpu}"]
        if self.cpu.thumb:
            flags.append("-mthumb")
        flags.append(f"-mfloat-abi={self.cpu.float_abi}")
        if self.cpu.fpu is not None and self.cpu.float_abi != "soft":
            flags.append(f"-mfpu={self.cpu.fpu}")
        return flags

    @property
    def family_dir(self) -> Path:
        """The directory of this board's C seam (``mlf_platform.h`` implementation)."""
        if self.is_host:
            return crt_dir() / "platform" / "host"
        return boards_dir() / "families" / self.family

    def seam_dirs(self) -> List[Path]:
        """Directories whose ``*.c`` files make up the seam, most generic first (for Cortex-M:
        the shared ``cortex_m`` start-up/timer/fault code, then the family's drivers)."""
        if self.is_host:
            return [self.family_dir]
        return [boards_dir() / "families" / "cortex_m", self.family_dir]

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
        }
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
        if self.is_host:
            return None
        return boards_dir() / "cmake" / "arm-none-eabi.cmake"

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
        if self.is_host:
            return None
        return boards_dir() / "families" / "cortex_m" / "linker.ld.j2"

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
        """The ``qemu-system-arm`` command line running ``firmware`` with the console UART on
        ``serial`` (a QEMU ``-serial`` backend), semihosting on for the exit status, and with
        ``icount`` one instruction per virtual nanosecond (deterministic tick counts)."""
        if not self.is_qemu or self.run.qemu_machine is None:
            raise BoardError(f"board {self.name!r} does not run under QEMU")
        command = [
            QEMU_BINARY,
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
            "cpu": None
            if self.cpu is None
            else {
                "mcpu": self.cpu.mcpu,
                "thumb": self.cpu.thumb,
                "float_abi": self.cpu.float_abi,
                "fpu": self.cpu.fpu,
                "dsp": self.cpu.dsp,
                "mve": self.cpu.mve,
                "flags": self.cpu_flags(),
            },
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


# --- loading ----------------------------------------------------------------------------


def board_names() -> List[str]:
    """Names of every board description, sorted."""
    return sorted(path.stem for path in boards_dir().glob("*.toml"))


def list_boards() -> List[Board]:
    """Every board, sorted by name."""
    return [load_board(name) for name in board_names()]


def load_board(name: str) -> Board:
    """The board called ``name`` (``boards/<name>.toml``); :class:`BoardError` listing the
    available names when there is none."""
    if not _NAME_RE.match(name or ""):
        raise BoardError(
            f"unknown board {name!r}", hint=f"available boards: {', '.join(board_names())}"
        )
    path = boards_dir() / f"{name}.toml"
    if not path.is_file():
        raise BoardError(
            f"unknown board {name!r}", hint=f"available boards: {', '.join(board_names())}"
        )
    return load_board_file(path)


def load_board_file(path: Path) -> Board:
    """Reads and validates one board description."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise BoardError(f"{path}: cannot read board description: {err}") from err
    except tomllib.TOMLDecodeError as err:
        raise BoardError(f"{path}: not valid TOML: {err}") from err
    return parse_board(data, source=Path(path))


def parse_board(data: Mapping[str, Any], *, source: Optional[Path] = None) -> Board:
    """Builds a :class:`Board` from the parsed TOML, checking every rule of the schema."""
    where = str(source) if source is not None else "<board>"
    reader = _Reader(where, data)
    name = reader.string("name")
    if not _NAME_RE.match(name):
        reader.fail("name", "must be lower-case letters, digits, '.', '_' or '-'")
    if source is not None and source.stem != name:
        reader.fail("name", f"is {name!r} but the file is {source.name!r}")
    description = reader.string("description")
    arch = reader.choice("arch", ARCHES)
    family = reader.string("family")
    if not _NAME_RE.match(family):
        reader.fail("family", "must name a directory under boards/families/")
    is_host = arch == "host"

    cpu: Optional[Cpu] = None
    flash: Optional[MemoryRegion] = None
    ram: Optional[MemoryRegion] = None
    if is_host:
        for key in ("cpu", "memory"):
            if key in data:
                reader.fail(key, "a host board has no CPU flags or memory map")
    else:
        cpu_table = reader.table("cpu")
        float_abi = cpu_table.choice("float_abi", FLOAT_ABIS, default="soft")
        fpu = cpu_table.optional_string("fpu")
        if float_abi != "soft" and fpu is None:
            cpu_table.fail("fpu", f"is required with float_abi = {float_abi!r}")
        cpu = Cpu(
            mcpu=cpu_table.string("mcpu"),
            thumb=cpu_table.boolean("thumb", default=True),
            float_abi=float_abi,
            fpu=fpu,
            dsp=cpu_table.boolean("dsp", default=False),
            mve=cpu_table.boolean("mve", default=False),
        )
        cpu_table.no_extra()
        memory = reader.table("memory")
        flash = _region(memory, "flash")
        ram = _region(memory, "ram")
        memory.no_extra()
        if flash.origin < ram.end and ram.origin < flash.end:
            memory.fail("ram", f"overlaps memory.flash ({flash} vs {ram})")

    stack_bytes = reader.integer("stack_bytes", minimum=0)
    if not is_host and (stack_bytes < 256 or stack_bytes % 8):
        reader.fail("stack_bytes", "must be a multiple of 8, at least 256")
    if ram is not None and stack_bytes >= ram.length:
        reader.fail("stack_bytes", f"({stack_bytes}) leaves no RAM ({ram.length} bytes)")

    console_table = reader.table("console")
    console_kind = console_table.choice("kind", CONSOLE_KINDS)
    if is_host != (console_kind == "stdio"):
        console_table.fail("kind", "is 'stdio' exactly for a host board")
    console = Console(
        kind=console_kind,
        address=None if is_host else console_table.integer("address", minimum=0),
        baud=console_table.integer("baud", minimum=1, default=115200),
        clock_hz=None if is_host else console_table.integer("clock_hz", minimum=1),
        irq=None
        if is_host or "irq" not in console_table.data
        else console_table.integer("irq", minimum=0),
    )
    console_table.no_extra()

    timer_table = reader.table("timer")
    timer = Timer(
        kind=timer_table.choice("kind", TIMER_KINDS),
        clock_hz=timer_table.integer("clock_hz", minimum=1),
    )
    timer_table.no_extra()
    if is_host != (timer.kind == "host-monotonic"):
        timer_table.fail("kind", "is 'host-monotonic' exactly for a host board")

    run_table = reader.table("run")
    run_kind = run_table.choice("kind", RUN_KINDS)
    if is_host != (run_kind == "host"):
        run_table.fail("kind", "is 'host' exactly for a host board")
    run = RunConfig(
        kind=run_kind,
        qemu_machine=run_table.string("machine") if run_kind == "qemu" else None,
        qemu_args=tuple(run_table.string_list("args")) if run_kind == "qemu" else (),
        openocd_args=tuple(run_table.string_list("openocd_args")),
        pyocd_target=run_table.optional_string("pyocd_target"),
    )
    run_table.no_extra()
    if run_kind == "openocd" and not run.openocd_args:
        run_table.fail("openocd_args", "is required when kind = 'openocd'")
    if run_kind == "pyocd" and run.pyocd_target is None:
        run_table.fail("pyocd_target", "is required when kind = 'pyocd'")

    serial = SerialHints()
    if "serial" in data:
        serial_table = reader.table("serial")
        pairs = []
        for text in serial_table.string_list("vid_pid"):
            match = _VID_PID_RE.match(text)
            if match is None:
                serial_table.fail("vid_pid", f"entry {text!r} is not 'vvvv:pppp' (hex)")
            assert match is not None
            pairs.append((int(match.group(1), 16), int(match.group(2), 16)))
        serial = SerialHints(
            vid_pid=tuple(pairs), serial_number=serial_table.optional_string("serial_number")
        )
        serial_table.no_extra()

    link = reader.table("link")
    max_payload = link.integer("max_payload", minimum=64)
    link.no_extra()
    if ram is not None and max_payload > ram.length // 4:
        link.fail("max_payload", f"({max_payload}) is more than a quarter of RAM ({ram.length})")

    reader.no_extra()
    return Board(
        name=name,
        description=description,
        family=family,
        arch=arch,
        stack_bytes=stack_bytes,
        console=console,
        timer=timer,
        run=run,
        max_payload=max_payload,
        cpu=cpu,
        flash=flash,
        ram=ram,
        serial=serial,
        source=source,
    )


def _region(memory: _Reader, key: str) -> MemoryRegion:
    table = memory.table(key)
    region = MemoryRegion(
        origin=table.integer("origin", minimum=0), length=table.integer("length", minimum=1)
    )
    table.no_extra()
    if region.end > 1 << 32:
        memory.fail(key, f"ends beyond the 32-bit address space ({region})")
    return region


class _Reader:
    """Typed access to one TOML table; every error names the file and the key path."""

    def __init__(self, where: str, data: Mapping[str, Any], prefix: str = "") -> None:
        if not isinstance(data, Mapping):
            raise BoardError(f"{where}: {prefix.rstrip('.') or 'document'} must be a table")
        self.where = where
        self.data = data
        self.prefix = prefix
        self.used: set = set()

    def fail(self, key: str, problem: str) -> None:
        raise BoardError(f"{self.where}: {self.prefix}{key} {problem}")

    def _get(self, key: str, default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                self.fail(key, "is missing")
            return default
        return self.data[key]

    def string(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str) or not value:
            self.fail(key, f"must be a non-empty string (got {value!r})")
        return value

    def optional_string(self, key: str) -> Optional[str]:
        value = self._get(key, None)
        if value is not None and (not isinstance(value, str) or not value):
            self.fail(key, f"must be a non-empty string (got {value!r})")
        return value

    def string_list(self, key: str) -> List[str]:
        value = self._get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, f"must be a list of strings (got {value!r})")
        return list(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false (got {value!r})")
        return value

    def integer(self, key: str, *, minimum: int, default: Any = ...) -> int:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be an integer (got {value!r})")
        if value < minimum:
            self.fail(key, f"must be at least {minimum} (got {value})")
        return value

    def choice(self, key: str, choices: Sequence[str], default: Any = ...) -> str:
        value = self._get(key, default)
        if value not in choices:
            self.fail(key, f"must be one of {', '.join(choices)} (got {value!r})")
        return value

    def table(self, key: str) -> _Reader:
        value = self._get(key)
        if not isinstance(value, Mapping):
            self.fail(key, "must be a table")
        return _Reader(self.where, value, f"{self.prefix}{key}.")

    def no_extra(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            self.fail(unknown[0], "is not a known key" + _known_hint(self.used))


def _known_hint(keys: set) -> str:
    return f" (known here: {', '.join(sorted(keys))})"


def _human_bytes(count: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} B"
