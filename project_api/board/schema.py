"""Reading ``boards/<name>.toml``: every rule of the schema (``boards/README.md``), each
error naming the file and the key. The ``[cpu]`` table is the architecture's to read."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ..errors import BoardError
from ..resources import boards_dir
from .architecture import ARCHITECTURES, Cpu
from .model import Board, Console, MemoryRegion, RunConfig, SerialHints, Timer

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

RUN_KINDS = ("host", "qemu", "openocd", "pyocd")

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_DEFINE_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_VID_PID_RE = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$")


def _kinds(attribute: str) -> Sequence[str]:
    """Every architecture's console or timer kinds, in a stable order."""
    return tuple(k for arch in ARCHITECTURES.values() for k in getattr(arch, attribute))


CONSOLE_KINDS = _kinds("console_kinds")
TIMER_KINDS = _kinds("timer_kinds")


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
    reader = TableReader(where, data)
    name = reader.string("name")
    if not _NAME_RE.match(name):
        reader.fail("name", "must be lower-case letters, digits, '.', '_' or '-'")
    if source is not None and source.stem != name:
        reader.fail("name", f"is {name!r} but the file is {source.name!r}")
    description = reader.string("description")
    arch = reader.choice("arch", tuple(ARCHITECTURES))
    seam = ARCHITECTURES[arch]
    family = reader.string("family")
    if not _NAME_RE.match(family):
        reader.fail("family", "must name a directory under boards/families/")
    family_shared = tuple(reader.string_list("family_shared"))
    for shared in family_shared:
        if not _NAME_RE.match(shared) or shared in (family, "cortex_m"):
            reader.fail(
                "family_shared",
                f"entry {shared!r} must name another directory under boards/families/",
            )
    is_host = seam.is_host

    cpu: Optional[Cpu] = None
    flash: Optional[MemoryRegion] = None
    ram: Optional[MemoryRegion] = None
    if is_host:
        for key in ("cpu", "memory"):
            if key in data:
                reader.fail(key, "a host board has no CPU flags or memory map")
    else:
        cpu_table = reader.table("cpu")
        cpu = seam.parse_cpu(cpu_table)
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
    if console_kind not in seam.console_kinds:
        console_table.fail("kind", f"must be one of {', '.join(seam.console_kinds)} for {arch}")
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
    if timer.kind not in seam.timer_kinds:
        timer_table.fail("kind", f"must be one of {', '.join(seam.timer_kinds)} for {arch}")

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

    definitions = _definitions(reader) if "definitions" in data else ()

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
        family_shared=family_shared,
        definitions=definitions,
    )


def _definitions(reader: TableReader) -> Tuple[Tuple[str, str], ...]:
    """``[definitions]``: constants for the family's C seam, as C macro name → C text."""
    table = reader.table("definitions")
    definitions: List[Tuple[str, str]] = []
    for key, value in table.data.items():
        table.used.add(key)
        if not _DEFINE_RE.match(str(key)) or key.startswith("MLF_BOARD_"):
            table.fail(key, "must be an upper-case C macro name not starting with MLF_BOARD_")
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            table.fail(key, f"must be an integer or a string (got {value!r})")
        if isinstance(value, int) and value < 0 or value == "":
            table.fail(key, f"must be a non-negative integer or a non-empty string (got {value!r})")
        definitions.append((key, f"0x{value:X}u" if isinstance(value, int) else value))
    return tuple(definitions)


def _region(memory: TableReader, key: str) -> MemoryRegion:
    table = memory.table(key)
    region = MemoryRegion(
        origin=table.integer("origin", minimum=0), length=table.integer("length", minimum=1)
    )
    table.no_extra()
    if region.end > 1 << 32:
        memory.fail(key, f"ends beyond the 32-bit address space ({region})")
    return region


class TableReader:
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

    def table(self, key: str) -> TableReader:
        value = self._get(key)
        if not isinstance(value, Mapping):
            self.fail(key, "must be a table")
        return TableReader(self.where, value, f"{self.prefix}{key}.")

    def no_extra(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            self.fail(unknown[0], "is not a known key" + _known_hint(self.used))


def _known_hint(keys: set) -> str:
    return f" (known here: {', '.join(sorted(keys))})"
