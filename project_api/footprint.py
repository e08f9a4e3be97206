"""Where a firmware's RAM and flash go: planned before building, linked after.

    report = footprint("model.tar", board="qemu-mps2-an385")          # planned only
    report = footprint("proj/", build=True)                            # + linked sizes
    print(report.text()); json.dumps(report.to_json())

**Planned** figures come from the generator (``project.json``): arena, workspace, executor
state, graph tables parsed into RAM (graph_format=json), the console buffer of the project
type (host_driven: the protocol's receive buffer; mlperftiny: the input ``db`` loads) and the
stack; params, graph tables / graph.json and samples in flash. The code of the model and
of the runtime is estimated by compiling their C to objects with the board's compiler and
flags (no linking: functions the linker would drop are counted, so it is an upper bound).

**Linked** figures come from the built firmware: the sizes of its ``.text``, ``.rodata``,
``.data`` and ``.bss`` (and ``.stack``/``.heap`` on Cortex-M), each split by where the bytes
come from. Cortex-M builds are read from the linker map (``firmware.map``, written with
``-Wl,-Map``: exact after ``--gc-sections``); host builds from the section headers of every
object file in the build tree (the host link keeps whole objects).

Categories (``CATEGORIES``): ``runtime`` (crt/src objects), ``model`` (the model's generated
C, its object files and external dependencies), ``params``, ``graph`` (const graph tables or
graph.json, and the RAM graph.json is parsed into), ``samples``, ``firmware`` (main.c, the
model's glue in model_<mod>.c, the device-protocol, standalone or mlperftiny loop), ``board`` (the
board's C seam), ``libc`` (newlib / libgcc / libm), and RAM buffers: ``arena``,
``workspace``, ``state`` (executor state arrays and the mlf_executor / mlf_workspace
structs), ``rx_buffer``, ``stack``, ``heap``; ``other`` for anything unrecognised.

``runtime_ram_bytes`` — RAM beyond tensors (arena) and operator workspace — counts the
executor state, graph tables in RAM (graph_format=json), the receive buffer of the device
protocol and, once linked, the runtime's own globals (the last-error text, the bound
workspace pointer). The stack, libc's and the board's globals are not in it (they are in
``ram_total_bytes``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from .errors import BoardError, FitError, GenerateError
from .read.elf import ElfFile

PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[str], None]

CATEGORIES = (
    "runtime",
    "model",
    "params",
    "graph",
    "samples",
    "firmware",
    "board",
    "libc",
    "arena",
    "workspace",
    "state",
    "rx_buffer",
    "stack",
    "heap",
    "other",
)
SECTIONS = (".text", ".rodata", ".data", ".bss")
# Files of template_project/firmware/ (compiled into the runtime library of a project).
LOOP_SOURCES = (
    "mlf_device",
    "mlf_frame",
    "mlf_standalone",
    "mlf_profile",
    "mlf_mlperftiny",
    "mlf_text",
)
# Statics of the generated model_<mod>.c and main.c that are buffers the report names.
_MODEL_STATICS = {
    "arena": "arena",
    "workspace_memory": "workspace",
    "state": "state",
    "executor": "state",
    "workspace": "state",
    "graph_tables": "graph",
}
_MAIN_STATICS = {"rx_buffer": "rx_buffer", "db_buffer": "rx_buffer"}
_LIBC_RE = re.compile(r"lib(c|c_nano|g|g_nano|m|gcc|nosys|rdimon|rdimon_nano)\.a\b")


# --- ELF section headers --------------------------------------------------------------------

SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHT_NOBITS = 8


@dataclass(frozen=True)
class ElfSection:
    name: str
    type: int
    flags: int
    size: int

    @property
    def alloc(self) -> bool:
        return bool(self.flags & SHF_ALLOC)


def elf_sections(path: PathLike) -> List[ElfSection]:
    """The section headers of an ELF file (object, executable): name, type, flags, size."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or len(data) < 52:
        raise GenerateError(f"{path} is not an ELF file")
    is64 = data[4] == 2
    endian = "<" if data[5] == 1 else ">"
    try:
        if is64:
            shoff = struct.unpack_from(endian + "Q", data, 0x28)[0]
            entsize, count, strndx = struct.unpack_from(endian + "HHH", data, 0x3A)
            fmt = endian + "IIQQQQIIQQ"
        else:
            shoff = struct.unpack_from(endian + "I", data, 0x20)[0]
            entsize, count, strndx = struct.unpack_from(endian + "HHH", data, 0x2E)
            fmt = endian + "IIIIIIIIII"
        headers = [struct.unpack_from(fmt, data, shoff + i * entsize) for i in range(count)]
    except struct.error as err:
        raise GenerateError(f"{path}: truncated ELF section headers") from err
    if not headers or strndx >= len(headers):
        return []
    names_at = headers[strndx][4]

    def name_of(offset: int) -> str:
        start = names_at + offset
        end = data.find(b"\0", start)
        return data[start : end if end >= 0 else len(data)].decode("utf-8", "replace")

    return [ElfSection(name_of(h[0]), h[1], h[2], h[5]) for h in headers[1:]]


def section_bucket(name: str, flags: int) -> Optional[str]:
    """Which of .text/.rodata/.data/.bss an allocated section counts in (None: not memory
    the firmware occupies, e.g. debug info)."""
    if not flags & SHF_ALLOC:
        return None
    if name in (".stack", ".heap"):
        return name
    if flags & SHF_EXECINSTR or name == ".vectors":
        return ".text"
    if name.startswith((".bss", ".tbss", ".noinit")) or name == "COMMON":
        return ".bss"
    # TVM's constants are non-const arrays placed in .rodata.tvm (so "aw"): the linker
    # script puts them in flash with the other .rodata.
    if flags & SHF_WRITE and not name.startswith(".rodata"):
        return ".data"
    return ".rodata"


# --- classification -----------------------------------------------------------------------


def classify(obj: str, section: str) -> str:
    """The category of an input section ``section`` of object ``obj`` (a path as the linker
    map or the build tree names it)."""
    path = obj.replace("\\", "/")
    member = re.search(r"\(([^)]*)\)$", path)
    if member is not None and "libmlf_runtime" in path:
        stem = member.group(1).split(".", 1)[0]
        return "firmware" if stem in LOOP_SOURCES else "runtime"
    if _LIBC_RE.search(path):
        return "libc"
    base = path.rsplit("/", 1)[-1]
    stem = base.split(".", 1)[0]
    if "/mlf_runtime.dir/" in path or "/runtime/src/" in path:
        return "firmware" if stem in LOOP_SOURCES else "runtime"
    if "/runtime/firmware/" in path:
        return "firmware"
    if "/mlf_model_" in path or "/model/" in path or path.startswith("model/"):
        return _model_category(section)
    if "/deps/" in path or path.startswith("deps/") or "/_deps/" in path:
        return "model"
    if "/src/" in path or path.startswith("src/"):
        if base.startswith("params_") and ".S." in base:
            return "params"
        if base.startswith("graph_") and ".S." in base:
            return "graph"
        if base.startswith("samples_") and ".S." in base:
            return "samples"
        if base.startswith("model_"):
            if section.startswith(".rodata"):
                return "graph"
            return _static_category(section, _MODEL_STATICS)
        if base.startswith("main."):
            return _static_category(section, _MAIN_STATICS)
        return "firmware"
    if "/board/" in path or path.startswith("board/"):
        return "board"
    return "other"


def _model_category(section: str) -> str:
    # USMP's static pools: the model's own RAM, placed in .noinit so start-up skips them.
    return "pools" if section.startswith(".bss.noinit") else "model"


def _static_category(section: str, statics: Mapping[str, str]) -> str:
    for prefix in (".bss.", ".data.", ".sbss.", ".sdata."):
        if section.startswith(prefix):
            return statics.get(section[len(prefix) :], "firmware")
    return "firmware"


# --- linked sizes -------------------------------------------------------------------------


@dataclass
class LinkedSizes:
    """A built firmware's memory: ``split[bucket][category]`` bytes for the buckets .text,
    .rodata, .data, .bss (and .stack, .heap), and the image's own totals per bucket."""

    firmware: Path
    method: str  # "linker map" or "objects"
    split: Dict[str, Dict[str, int]] = field(default_factory=dict)
    totals: Dict[str, int] = field(default_factory=dict)

    def add(self, bucket: str, category: str, size: int) -> None:
        if size:
            row = self.split.setdefault(bucket, {})
            row[category] = row.get(category, 0) + size

    def category_bytes(self, category: str, buckets: Iterable[str]) -> int:
        return sum(self.split.get(b, {}).get(category, 0) for b in buckets)

    def bucket_total(self, bucket: str) -> int:
        return self.totals.get(bucket, sum(self.split.get(bucket, {}).values()))

    @property
    def flash_bytes(self) -> int:
        return sum(self.bucket_total(b) for b in (".text", ".rodata", ".data"))

    @property
    def ram_bytes(self) -> int:
        return sum(self.bucket_total(b) for b in (".data", ".bss", ".stack", ".heap"))

    def to_json(self) -> Dict[str, Any]:
        return {
            "firmware": str(self.firmware),
            "method": self.method,
            "sections": {
                bucket: {"total": self.bucket_total(bucket), **dict(sorted(row.items()))}
                for bucket, row in self.split.items()
            },
        }


_MAP_OUT = re.compile(r"^(\.[^\s]+|COMMON)(?:\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+).*)?$")
_MAP_IN = re.compile(r"^ (\S+)(?:\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*))?$")
_MAP_REST = re.compile(r"^\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)(?:\s+(\S.*))?$")
_MAP_FILL = re.compile(r"^ \*fill\*\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)")


def _map_bucket(output: str) -> Optional[str]:
    if output in (".stack", ".heap"):
        return output
    if output in (".data",):
        return ".data"
    if output in (".bss", ".noinit"):
        return ".bss"
    if output == ".rodata":
        return ".rodata"
    if output in (".vectors", ".text", ".ARM.extab", ".ARM.exidx", ".init_array", ".fini_array"):
        return ".text"
    if output.startswith((".text", ".vectors")):
        return ".text"
    if output.startswith(".rodata"):
        return ".rodata"
    if output.startswith(".data"):
        return ".data"
    if output.startswith(".bss"):
        return ".bss"
    return None


@dataclass(frozen=True)
class MapPiece:
    """Bytes the linker placed: ``size`` bytes of input ``section`` of object ``obj`` in the
    output section counted as ``bucket`` (alignment fill goes with the piece before it)."""

    bucket: str
    obj: str
    section: str
    size: int


def walk_linker_map(text: str) -> Tuple[List[MapPiece], Dict[str, int]]:
    """GNU ld's map file: every input section placed in memory (``pieces``) and the sizes of
    the output sections per bucket (``totals``)."""
    start = text.find("Linker script and memory map")
    lines = text[start:].splitlines() if start >= 0 else []
    pieces: List[MapPiece] = []
    totals: Dict[str, int] = {}
    bucket: Optional[str] = None
    pending_out: Optional[str] = None
    pending_in: Optional[str] = None
    last = ("", "")

    def add(obj: str, section: str, size: int) -> None:
        if bucket is not None and size:
            pieces.append(MapPiece(bucket, obj, section, size))

    for line in lines:
        if not line.strip():
            continue
        if pending_out is not None:
            rest = _MAP_REST.match(line)
            pending, pending_out = pending_out, None
            if rest is not None:
                bucket = _map_bucket(pending)
                if bucket is not None:
                    totals[bucket] = totals.get(bucket, 0) + int(rest.group(2), 16)
                continue
        if pending_in is not None:
            rest = _MAP_REST.match(line)
            section, pending_in = pending_in, None
            if rest is not None and rest.group(3):
                last = (rest.group(3).strip(), section)
                add(*last, int(rest.group(2), 16))
                continue
        if not line.startswith(" "):
            out = _MAP_OUT.match(line)
            if out is None:
                bucket = None
                continue
            if out.group(2) is None:
                pending_out = out.group(1)
                continue
            bucket = _map_bucket(out.group(1))
            if bucket is not None:
                totals[bucket] = totals.get(bucket, 0) + int(out.group(3), 16)
            if bucket in (".stack", ".heap"):
                add("", bucket, int(out.group(3), 16))
            continue
        if bucket is None or bucket in (".stack", ".heap"):
            continue
        fill = _MAP_FILL.match(line)
        if fill is not None:
            add(*last, int(fill.group(2), 16))
            continue
        found = _MAP_IN.match(line)
        if found is None or found.group(1).startswith("*") or found.group(1).startswith("0x"):
            continue
        if found.group(2) is None:
            pending_in = found.group(1)
            continue
        last = (found.group(4).strip(), found.group(1))
        add(*last, int(found.group(3), 16))
    return pieces, totals


def parse_linker_map(text: str) -> Tuple[Dict[str, Dict[str, int]], Dict[str, int]]:
    """GNU ld's map: ``(split, totals)`` where split[bucket][category] sums the input
    sections placed in each output section and totals[bucket] the output sections' sizes."""
    pieces, totals = walk_linker_map(text)
    split: Dict[str, Dict[str, int]] = {}
    for piece in pieces:
        if piece.bucket in (".stack", ".heap"):
            category = piece.bucket[1:]
        else:
            category = classify(piece.obj, piece.section)
        row = split.setdefault(piece.bucket, {})
        row[category] = row.get(category, 0) + piece.size
    return split, totals


def map_objects(text: str) -> Dict[str, Dict[str, int]]:
    """Bytes per object (as the map names it, e.g. ``libmlf_runtime.a(mlf_executor.c.obj)``)
    and bucket."""
    objects: Dict[str, Dict[str, int]] = {}
    for piece in walk_linker_map(text)[0]:
        row = objects.setdefault(piece.obj, {})
        row[piece.bucket] = row.get(piece.bucket, 0) + piece.size
    return objects


def linked_sizes(build_dir: Path, firmware: Path) -> LinkedSizes:
    """The split of a built firmware: from ``firmware.map`` when the link wrote one, else
    from the object files of the build tree."""
    map_file = build_dir / "firmware.map"
    result = LinkedSizes(firmware=firmware, method="linker map")
    if map_file.is_file() and map_file.stat().st_mtime >= firmware.stat().st_mtime - 1:
        split, totals = parse_linker_map(map_file.read_text(errors="replace"))
        result.split, result.totals = split, totals
        return result
    result.method = "objects"
    for section in elf_sections(firmware):
        bucket = section_bucket(section.name, section.flags)
        if bucket is not None:
            result.totals[bucket] = result.totals.get(bucket, 0) + section.size
    linked_symbols = {s.name for s in ElfFile(firmware.read_bytes()).symbols() if s.name}
    for obj in sorted(build_dir.rglob("*")):
        if obj.suffix not in (".o", ".obj") or not obj.is_file():
            continue
        rel = obj.relative_to(build_dir).as_posix()
        if not _TARGET_OBJECT.search(rel):
            continue  # e.g. CMake's compiler-identification objects
        if "/mlf_runtime.dir/" in f"/{rel}" and not _was_linked(obj, linked_symbols):
            continue  # a library member the link did not need
        _add_object(result, obj, rel)
    # Whatever the objects do not explain (libc, start files, the linker's own sections).
    for bucket, total in list(result.totals.items()):
        explained = sum(result.split.get(bucket, {}).values())
        if total > explained:
            result.add(bucket, "libc", total - explained)
    return result


_TARGET_OBJECT = re.compile(r"(^|/)CMakeFiles/[^/]+\.dir/")


def _was_linked(obj: Path, linked_symbols: set) -> bool:
    defined = {
        s.name for s in ElfFile(obj.read_bytes()).symbols() if s.name and s.size and s.section
    }
    return bool(defined & linked_symbols)


def _add_object(result: LinkedSizes, obj: Path, rel: str) -> None:
    statics: Mapping[str, str] = {}
    base = obj.name
    if "/src/" in f"/{rel}" and base.startswith("model_"):
        statics = _MODEL_STATICS
    elif "/src/" in f"/{rel}" and base.startswith("main."):
        statics = _MAIN_STATICS
    sections = elf_sections(obj)
    carved: Dict[int, Dict[str, int]] = {}
    if statics:
        for symbol in ElfFile(obj.read_bytes()).symbols():
            target = statics.get(symbol.name)
            if target is not None and symbol.size and 0 < symbol.section <= len(sections):
                per = carved.setdefault(symbol.section - 1, {})
                per[target] = per.get(target, 0) + symbol.size
    for index, section in enumerate(sections):
        bucket = section_bucket(section.name, section.flags)
        if bucket is None or bucket in (".stack", ".heap"):
            continue
        if statics is _MODEL_STATICS and (
            bucket == ".rodata" or section.name.startswith(".data.rel.ro")
        ):
            result.add(bucket, "graph", section.size)  # the const graph tables
            continue
        named = carved.get(index, {})
        for target, size in named.items():
            result.add(bucket, target, size)
        category = classify(rel, section.name)
        result.add(bucket, category, max(0, section.size - sum(named.values())))


# --- planned sizes --------------------------------------------------------------------------


@dataclass
class CodeEstimate:
    """Code + read-only data of objects compiled without linking (an upper bound)."""

    bytes: Optional[int]
    files: int = 0
    note: str = ""


def _compiler_for(board: Any) -> Tuple[Optional[str], List[str]]:
    if board.is_host:
        for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
            if name and shutil.which(name):
                return name, []
        return None, []
    found = shutil.which("arm-none-eabi-gcc")
    return found, list(board.cpu_flags())


def estimate_code(
    board: Any,
    sources: List[Path],
    include_dirs: List[Path],
    *,
    opt_flags: Optional[List[str]] = None,
    definitions: Optional[List[str]] = None,
) -> CodeEstimate:
    """Compiles ``sources`` to objects in a scratch directory with the board's compiler and
    sums their code and read-only data (.text + .rodata, as ``size`` counts them)."""
    if not sources:
        return CodeEstimate(0, 0)
    compiler, cpu_flags = _compiler_for(board)
    if compiler is None:
        return CodeEstimate(None, 0, "no compiler for the board on PATH")
    flags = list(opt_flags or (["-O2"]))
    argv0 = [compiler, *cpu_flags, *flags, "-ffunction-sections", "-fdata-sections", "-w"]
    argv0 += [f"-I{d}" for d in include_dirs]
    argv0 += [f"-D{d}" for d in (definitions or [])]
    with tempfile.TemporaryDirectory(prefix="mlf-footprint-") as scratch:

        def compile_one(item: Tuple[int, Path]) -> Optional[int]:
            index, source = item
            obj = Path(scratch) / f"{index}.o"
            done = subprocess.run(
                [*argv0, "-c", str(source), "-o", str(obj)],
                capture_output=True,
                check=False,
                timeout=600,
            )
            if done.returncode != 0:
                return None
            return sum(
                s.size
                for s in elf_sections(obj)
                if section_bucket(s.name, s.flags) in (".text", ".rodata")
            )

        workers = max(1, min(8, os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            sizes = list(pool.map(compile_one, enumerate(sources)))
    failed = sum(1 for s in sizes if s is None)
    total = sum(s for s in sizes if s is not None)
    if failed == len(sizes):
        return CodeEstimate(None, 0, f"{failed} file(s) did not compile outside the build")
    note = f"{failed} of {len(sizes)} files did not compile outside the build" if failed else ""
    return CodeEstimate(total, len(sizes) - failed, note)


def _header_dirs(root: Path) -> List[Path]:
    return sorted({p.parent for p in root.rglob("*.h")} | {root})


# --- the report -----------------------------------------------------------------------------


@dataclass
class Footprint:
    """RAM and flash of one firmware, planned and (when built) linked."""

    project_dir: Path
    board: Any
    info: Dict[str, Any]
    planned_ram: Dict[str, int]
    planned_flash: Dict[str, Optional[int]]
    params_ram_bytes: int
    params_in_place: int
    params_total: int

    @property
    def params_padding_bytes(self) -> int:
        """Flash the params take beyond their tensors' bytes (project.json's figure)."""
        models = self.info.get("models") or []
        return sum(int(m.get("sizes", {}).get("params_padding_bytes", 0)) for m in models)

    notes: List[str] = field(default_factory=list)
    linked: Optional[LinkedSizes] = None

    # --- headline figures ------------------------------------------------------------

    @property
    def models(self) -> List[Dict[str, Any]]:
        return list(self.info.get("models", []))

    def _sum_sizes(self, key: str) -> int:
        return sum(int(m["sizes"].get(key) or 0) for m in self.models)

    @property
    def arena_bytes(self) -> int:
        return self._sum_sizes("arena_bytes")

    @property
    def workspace_bytes(self) -> int:
        return self._sum_sizes("workspace_bytes")

    @property
    def model_pools_bytes(self) -> int:
        """RAM the model's C reserves itself (USMP's static pools)."""
        if self.linked is not None:
            return self.linked.category_bytes("pools", (".bss", ".data"))
        return self.planned_ram.get("model pools", 0)

    @property
    def params_flash_bytes(self) -> int:
        if self.linked is not None:
            return self.linked.category_bytes("params", (".rodata", ".text"))
        return self._sum_sizes("params_blob_bytes")

    @property
    def runtime_text_bytes(self) -> Optional[int]:
        if self.linked is not None:
            return self.linked.category_bytes("runtime", (".text", ".rodata"))
        return self.planned_flash.get("runtime")

    @property
    def model_code_bytes(self) -> Optional[int]:
        if self.linked is not None:
            return self.linked.category_bytes("model", (".text", ".rodata"))
        return self.planned_flash.get("model code")

    @property
    def runtime_ram_bytes(self) -> int:
        if self.linked is not None:
            ram = (".data", ".bss")
            return sum(
                self.linked.category_bytes(c, ram) for c in ("runtime", "state", "rx_buffer")
            ) + self.linked.category_bytes("graph", (".bss",))
        return sum(
            self.planned_ram.get(k, 0) for k in ("executor state", "graph tables", "rx buffer")
        )

    @property
    def ram_total_bytes(self) -> int:
        if self.linked is not None:
            return self.linked.ram_bytes
        return sum(self.planned_ram.values())

    @property
    def flash_total_bytes(self) -> int:
        if self.linked is not None:
            return self.linked.flash_bytes
        return sum(v for v in self.planned_flash.values() if v)

    @property
    def ram_available(self) -> Optional[int]:
        ram = getattr(self.board, "ram", None)
        return None if ram is None else int(ram.length)

    @property
    def flash_available(self) -> Optional[int]:
        flash = getattr(self.board, "flash", None)
        return None if flash is None else int(flash.length)

    @property
    def fits(self) -> bool:
        ram, flash = self.ram_available, self.flash_available
        return (ram is None or self.ram_total_bytes <= ram) and (
            flash is None or self.flash_total_bytes <= flash
        )

    @property
    def stage(self) -> str:
        return "linked" if self.linked is not None else "planned"

    def verdict(self) -> str:
        what = ", ".join(m["name"] for m in self.models) or "firmware"
        ram, flash = self.ram_available, self.flash_available
        if ram is None and flash is None:
            return (
                f"{what} on {self.board.name}: RAM {self.ram_total_bytes:,} B, flash "
                f"{self.flash_total_bytes:,} B ({self.stage}; the host has no memory limit)"
            )
        parts = []
        if ram is not None:
            parts.append(
                f"RAM {self.ram_total_bytes:,} of {ram:,} B ({_pct(self.ram_total_bytes, ram)})"
            )
        if flash is not None:
            parts.append(
                f"flash {self.flash_total_bytes:,} of {flash:,} B "
                f"({_pct(self.flash_total_bytes, flash)})"
            )
        verb = "fits" if self.fits else "DOES NOT FIT"
        return f"{what} {verb} {self.board.name}: {', '.join(parts)} ({self.stage})"

    # --- output ---------------------------------------------------------------------

    def to_json(self) -> Dict[str, Any]:
        return {
            "project_dir": str(self.project_dir),
            "board": self.board.name,
            "project_type": self.info.get("project_type"),
            "models": [m["name"] for m in self.models],
            "graph_format": sorted({str(m.get("graph_format")) for m in self.models}),
            "stage": self.stage,
            "runtime_text_bytes": self.runtime_text_bytes,
            "runtime_ram_bytes": self.runtime_ram_bytes,
            "arena_bytes": self.arena_bytes,
            "workspace_bytes": self.workspace_bytes,
            "model_pools_bytes": self.model_pools_bytes,
            "params_flash_bytes": self.params_flash_bytes,
            "params_ram_bytes": self.params_ram_bytes,
            "params_in_place": self.params_in_place,
            "params_total": self.params_total,
            "params_padding_bytes": self.params_padding_bytes,
            "model_code_bytes": self.model_code_bytes,
            "flash_total_bytes": self.flash_total_bytes,
            "ram_total_bytes": self.ram_total_bytes,
            "flash_available_bytes": self.flash_available,
            "ram_available_bytes": self.ram_available,
            "fits": self.fits,
            "verdict": self.verdict(),
            "planned": {"ram": dict(self.planned_ram), "flash": dict(self.planned_flash)},
            "linked": None if self.linked is None else self.linked.to_json(),
            "notes": list(self.notes),
            "counted": {
                "runtime_text_bytes": ".text + .rodata of the runtime's objects (crt/src)",
                "runtime_ram_bytes": "executor state + graph tables in RAM + receive buffer "
                "(+ the runtime's globals once linked); not tensors, workspace, stack",
                "params_ram_bytes": "bytes of params copied into the arena (0: all bound in "
                "place in flash)",
                "params_padding_bytes": "params flash beyond the tensors' bytes: alignment "
                "padding (const tables), or TVM's headers and padding entries (JSON graph)",
            },
        }

    def _kinds(self) -> str:
        kinds = sorted(
            {f"{m.get('executor', 'graph')} executor" for m in self.models}
            | {f"{m.get('graph_format')} graph" for m in self.models}
        )
        return ", ".join(kinds)

    def ram_rows(self) -> List[Tuple[str, Optional[int], Optional[int]]]:
        """(what, planned, linked) RAM figures, total left out."""
        linked = self.linked
        ram = (".data", ".bss")

        def got(category: str, buckets: Iterable[str] = ram) -> Optional[int]:
            return None if linked is None else linked.category_bytes(category, buckets)

        rows: List[Tuple[str, Optional[int], Optional[int]]] = [
            ("arena (tensors)", self.planned_ram.get("arena"), got("arena")),
            ("workspace", self.planned_ram.get("workspace"), got("workspace")),
            ("model pools (USMP)", self.planned_ram.get("model pools", 0), got("pools")),
            ("executor state", self.planned_ram.get("executor state"), got("state")),
            ("graph tables", self.planned_ram.get("graph tables", 0), got("graph", (".bss",))),
            ("receive buffer", self.planned_ram.get("rx buffer", 0), got("rx_buffer")),
            ("stack", self.planned_ram.get("stack", 0), got("stack", (".stack",))),
        ]
        if linked is not None:
            rows.append(("runtime globals", None, got("runtime")))
            other = sum(
                linked.category_bytes(c, ram)
                for c in ("firmware", "board", "libc", "model", "other")
            ) + linked.category_bytes("heap", (".heap",))
            rows.append(("glue, board, libc", None, other))
        return rows

    def flash_rows(self) -> List[Tuple[str, Optional[int], Optional[int]]]:
        """(what, planned, linked) flash figures, total left out."""
        linked = self.linked
        code = (".text", ".rodata")

        def got(category: str) -> Optional[int]:
            return None if linked is None else linked.category_bytes(category, code)

        rows: List[Tuple[str, Optional[int], Optional[int]]] = [
            ("params", self.planned_flash.get("params"), got("params")),
            ("graph tables / json", self.planned_flash.get("graph"), got("graph")),
        ]
        if self.planned_flash.get("samples") or got("samples"):
            rows.append(("samples", self.planned_flash.get("samples"), got("samples")))
        rows += [
            ("model code", self.planned_flash.get("model code"), got("model")),
            ("runtime", self.planned_flash.get("runtime"), got("runtime")),
        ]
        if linked is not None:
            rows += [
                ("firmware loop + glue", None, got("firmware")),
                ("board seam", None, got("board")),
                ("libc", None, got("libc")),
                (".data initialisers", None, linked.bucket_total(".data")),
            ]
            if got("other"):
                rows.append(("other", None, got("other")))
        return rows

    def headline(self) -> str:
        return (
            f"{', '.join(m['name'] for m in self.models)} on {self.board.name} "
            f"({self.info.get('project_type')}, {self._kinds()}) — "
            + (
                f"linked {self.linked.firmware} ({self.linked.method})"
                if self.linked is not None
                else "planned (not built)"
            )
        )

    def text(self) -> str:
        linked = self.linked
        lines = [self.headline()]
        ram_rows = self.ram_rows()
        ram_rows.append(
            (
                "total",
                sum(self.planned_ram.values()),
                linked.ram_bytes if linked is not None else None,
            )
        )
        lines.append(_table("RAM", ram_rows, self.ram_available))
        flash_rows = self.flash_rows()
        flash_rows.append(
            (
                "total",
                sum(v for v in self.planned_flash.values() if v),
                linked.flash_bytes if linked is not None else None,
            )
        )
        lines.append(_table("flash", flash_rows, self.flash_available))
        lines.append(
            f"params: {self.params_in_place} of {self.params_total} bound in place in flash, "
            f"{self.params_ram_bytes:,} B copied into RAM; {self.params_padding_bytes:,} B of "
            "the params' flash is alignment padding (or TVM's headers, with a JSON graph)"
        )
        lines.append(
            f"runtime: {_num(self.runtime_text_bytes)} B code+rodata, "
            f"{self.runtime_ram_bytes:,} B RAM beyond tensors and workspace"
        )
        lines += [f"note: {note}" for note in self.notes]
        lines.append(f"verdict: {self.verdict()}")
        return "\n".join(lines)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "-"


def _num(value: Optional[int]) -> str:
    return "?" if value is None else f"{value:,}"


def _table(
    title: str, rows: List[Tuple[str, Optional[int], Optional[int]]], available: Optional[int]
) -> str:
    out = [f"{title:<24}{'planned':>12}{'linked':>12}"]
    for name, planned, linked in rows:
        out.append(
            f"  {name:<22}{'-' if planned is None else f'{planned:,}':>12}"
            f"{'-' if linked is None else f'{linked:,}':>12}"
        )
    if available is not None:
        out.append(f"  {'available':<22}{available:>12,}")
    return "\n".join(out)


# --- entry points ----------------------------------------------------------------------------


def _planned(info: Mapping[str, Any]) -> Tuple[Dict[str, int], Dict[str, Optional[int]]]:
    """Planned RAM and flash items from what the generator computed (project.json)."""
    models = info.get("models", [])
    ram_items = dict(info.get("fit", {}).get("ram", {}).get("items", {}))
    planned_ram: Dict[str, int] = {
        "arena": sum(int(m["sizes"]["arena_bytes"]) for m in models),
        "workspace": sum(int(m["sizes"]["workspace_bytes"]) for m in models),
        "executor state": sum(int(m["sizes"]["state_bytes"]) for m in models),
        "graph tables": sum(int(m["sizes"].get("graph_parse_bytes") or 0) for m in models),
        "rx buffer": int(ram_items.get(_link_buffer_item(info), 0)),
        "stack": int(info.get("stack_bytes") or 0),
        "model pools": sum(
            int(pool["bytes"]) for m in models for pool in m.get("static_pools") or ()
        ),
    }
    planned_flash: Dict[str, Optional[int]] = {
        "params": sum(int(m["sizes"]["params_blob_bytes"]) for m in models),
        "graph": sum(
            int(m["sizes"].get("graph_tables_bytes") or 0)
            + int(m["sizes"].get("graph_json_bytes") or 0)
            for m in models
        ),
        "samples": sum(int(m["sizes"].get("samples_bytes") or 0) for m in models),
    }
    return planned_ram, planned_flash


def _link_buffer_item(info: Mapping[str, Any]) -> str:
    """The fit item that is the project type's console buffer (host_driven's frame receive
    buffer, mlperftiny's input buffer; standalone has none)."""
    from .generate.project_types import KINDS

    kind = KINDS.get(str(info.get("project_type")))
    return (kind.link_buffer_item if kind is not None else None) or ""


def project_footprint(project: Any, *, estimate: bool = True) -> Footprint:
    """The footprint of a generated :class:`project_api.driver.Project`: planned figures
    always, linked figures when its firmware has been built."""
    board = project.board
    planned_ram, planned_flash = _planned(project.info)
    notes: List[str] = []
    if estimate:
        planned_flash.update(_code_estimates(project, notes))
    params_ram, in_place, total = _project_params_ram(project)
    result = Footprint(
        project_dir=Path(project.dir),
        board=board,
        info=project.info,
        planned_ram=planned_ram,
        planned_flash=planned_flash,
        params_ram_bytes=params_ram,
        params_in_place=in_place,
        params_total=total,
        notes=notes,
    )
    firmware = Path(project.firmware)
    if firmware.is_file():
        result.linked = linked_sizes(Path(project.build_dir), firmware)
        if board.is_host:
            notes.append("host: the stack is the OS's; .bss/.data are the process's statics")
    return result


def refused_footprint(
    archive: PathLike,
    board_name: str,
    *,
    model: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    project_type: str = "host_driven",
) -> Footprint:
    """The planned footprint of a model the generator refuses for ``board`` because it does
    not fit (its fit check runs before anything is written): the same planning, no
    project."""
    from .boards import load_board
    from .generate import normalize_options
    from .generate.project import _plan_models, memory_fit
    from .read import open_archive

    board = load_board(board_name)
    opts = normalize_options(options)
    stack = int(opts["stack_bytes"]) if opts["stack_bytes"] is not None else board.stack_bytes
    with open_archive(Path(archive)) as opened:
        plans = _plan_models(opened, model, board, project_type, opts)
        fit = memory_fit(plans, board, stack if not board.is_host else 0, project_type)
        info: Dict[str, Any] = {
            "project_type": project_type,
            "models": [plan.describe() for plan in plans],
            "fit": fit.to_json(),
            "stack_bytes": stack if not board.is_host else None,
        }
        params_ram, in_place, total = _params_ram(
            (plan.tables, plan.model.params or {}) for plan in plans
        )
    planned_ram, planned_flash = _planned(info)
    return Footprint(
        project_dir=Path(archive),
        board=board,
        info=info,
        planned_ram=planned_ram,
        planned_flash=planned_flash,
        params_ram_bytes=params_ram,
        params_in_place=in_place,
        params_total=total,
        notes=["the generator refuses this model for this board: " + "; ".join(fit.problems())],
    )


def _code_estimates(project: Any, notes: List[str]) -> Dict[str, Optional[int]]:
    root = Path(project.dir)
    board = project.board
    runtime_include = root / "runtime" / "include"
    runtime_sources = sorted(
        p
        for p in (root / "runtime" / "src").glob("*.c")
        if p.name.split(".", 1)[0] not in LOOP_SOURCES
    )
    runtime = estimate_code(
        board,
        runtime_sources,
        [runtime_include, root / "runtime" / "src"],
        opt_flags=board.runtime_opt_flags(),
    )
    model_sources: List[Path] = []
    model_dirs: List[Path] = [runtime_include]
    objects_bytes = 0
    for model in project.models:
        base = root / "model" / str(model.get("c_name", model["name"]))
        if not base.is_dir():
            continue
        model_sources += sorted(base.rglob("*.c")) + sorted(base.rglob("*.cc"))
        model_dirs += _header_dirs(base)
        for obj in sorted(base.rglob("*.o")):
            objects_bytes += sum(
                s.size
                for s in elf_sections(obj)
                if section_bucket(s.name, s.flags) in (".text", ".rodata")
            )
    deps = root / "deps"
    if deps.is_dir():
        notes.append("model code estimate leaves out external dependencies (deps/)")
    model = estimate_code(board, model_sources, model_dirs, opt_flags=board.model_opt_flags())
    for what, found in (("runtime", runtime), ("model code", model)):
        if found.note:
            notes.append(f"{what} estimate: {found.note}")
    if runtime.bytes is not None or model.bytes is not None:
        notes.append(
            "planned code sizes are compiled objects before linking (an upper bound: the "
            "linker drops unused functions)"
        )
    return {
        "model code": None if model.bytes is None else model.bytes + objects_bytes,
        "runtime": runtime.bytes,
    }


def _project_params_ram(project: Any) -> Tuple[int, int, int]:
    from .generate import MODEL_TAR
    from .generate.executors import executor_for
    from .generate.tables import compile_graph
    from .read import open_archive

    names = {str(m["name"]) for m in project.models}
    with open_archive(Path(project.dir) / MODEL_TAR) as archive:
        return _params_ram(
            (compile_graph(executor_for(model).graph(model)), model.params or {})
            for model in archive.models
            if model.name in names
        )


def _params_ram(models: Iterable[Tuple[Any, Mapping[str, Any]]]) -> Tuple[int, int, int]:
    """(bytes of params copied into the arena, param pools bound in place, param pools) over
    (GraphTables, params) pairs: the runtime's binding rule, as the generator applies it."""
    copied = in_place = total = 0
    for tables, params in models:
        bound = tables.bound_in_place(params) if params else set()
        pools = {tables.views[a.view].storage for a in tables.args if a.name in params}
        total += len(pools)
        in_place += len(pools & bound)
        copied += sum(tables.storage_bytes[sid] for sid in pools - bound)
    return copied, in_place, total


def footprint(
    target: PathLike,
    *,
    board: Optional[str] = None,
    model: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    build: bool = False,
    estimate: bool = True,
    progress: Optional[Progress] = None,
    project_type: str = "host_driven",
) -> Footprint:
    """The footprint of an MLF archive on ``board`` (generated in a scratch directory,
    built there with ``build=True``) or of a generated project directory (built first with
    ``build=True``; its linked sizes are reported whenever its firmware exists)."""
    from .driver import Project
    from .generate import is_generated_project

    path = Path(target)
    if path.is_dir() and is_generated_project(path):
        project = Project.open(path)
        if board and board != project.board.name:
            raise BoardError(
                f"{path} was generated for board {project.board.name}, not {board}",
                hint="omit --board, or generate the project again for that board",
            )
        if model and model not in {m["name"] for m in project.models}:
            raise GenerateError(f"{path} holds no model {model!r}")
        if build:
            project.build(progress=progress)
        return project_footprint(project, estimate=estimate)
    if not board:
        raise BoardError(
            f"{path} is an archive: say which board it is for",
            hint="--board NAME (see `mlf-project boards`)",
        )
    with tempfile.TemporaryDirectory(prefix="mlf-footprint-") as scratch:
        try:
            project = Project.generate(
                path,
                Path(scratch) / "project",
                board=board,
                project_type=project_type,
                model=model,
                options=options,
                progress=progress,
            )
        except FitError:
            return refused_footprint(
                path, board, model=model, options=options, project_type=project_type
            )
        if build:
            project.build(progress=progress)
        result = project_footprint(project, estimate=estimate)
        result.notes.append("generated in a scratch directory (deleted afterwards)")
        return result


def footprint_json(report: Footprint) -> str:
    return json.dumps(report.to_json(), indent=2)
