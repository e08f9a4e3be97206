"""A built firmware's memory: ELF section headers, the linker map, and which part of the
project every byte comes from (see the package docstring for the categories)."""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ..errors import GenerateError
from ..read.elf import ElfFile
from ..sandbox import outputs

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
    "lto",
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
_MAIN_STATICS = {"rx_buffer": "rx_buffer", "db_buffer": "rx_buffer", "mlf_arena": "arena"}
# What is read of a file the build wrote, at most: an ELF file, the linker's map.
MAX_ELF_BYTES = 1 << 30
MAX_MAP_BYTES = 256 << 20
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


def read_built(path: PathLike, limit: int = MAX_ELF_BYTES) -> bytes:
    """A file the confined build wrote: a regular file of at most ``limit`` bytes, not
    reached through a link (:mod:`project_api.sandbox.outputs`); GenerateError otherwise."""
    try:
        return outputs.read_path(Path(path), limit)
    except (OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise GenerateError(f"cannot read {path}: {reason}") from None


def elf_sections(path: PathLike) -> List[ElfSection]:
    """The section headers of an ELF file (object, executable): name, type, flags, size."""
    data = read_built(path)
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
    member = _archive_member(path)
    if member is not None and "libmlf_runtime" in path:
        stem = member.split(".", 1)[0]
        return "firmware" if stem in LOOP_SOURCES else "runtime"
    if _LIBC_RE.search(path):
        return "libc"
    base = path.rsplit("/", 1)[-1]
    if ".ltrans" in base:
        return "lto"  # compiled at link time: no longer says which of our sources it was
    stem = base.split(".", 1)[0]
    if "/mlf_runtime.dir/" in path or "/runtime/src/" in path:
        return "firmware" if stem in LOOP_SOURCES else "runtime"
    if "/runtime/firmware/" in path:
        return "firmware"
    if "/mlf_model_" in path or "/model/" in path or path.startswith("model/"):
        return _model_category(section)
    if "/deps/" in path or path.startswith("deps/") or "/_deps/" in path:
        return "model"
    if base.startswith("libmlf_dep_") or "/libmlf_dep_" in path:
        return "model"  # a dependency's library as the map names its members: lib(x.c.obj)
    if "/src/" in path or path.startswith("src/"):
        if base.startswith("params_") and ".S." in base:
            return "params"
        if base.startswith("graph_") and ".S." in base:
            return "graph"
        if base.startswith("samples_") and ".S." in base:
            return "samples"
        if base.startswith("model_"):
            if section.startswith(".bss.noinit"):
                return "pools"  # workspace pools the model takes from its caller
            if section.startswith(".rodata"):
                return "model" if "_aot_pool_" in section else "graph"  # constant pools
            return _static_category(section, _MODEL_STATICS)
        if base.startswith("main."):
            return _static_category(section, _MAIN_STATICS)
        return "firmware"
    if "/board/" in path or path.startswith("board/"):
        return "board"
    return "other"


def _archive_member(path: str) -> Optional[str]:
    """``member.o`` of ``lib.a(member.o)``; None for a plain object. (A pattern would start a
    scan to the end at each "(" of a path of many.)"""
    if not path.endswith(")"):
        return None
    opening = path.rfind("(", 0, len(path) - 1)
    if opening < 0 or ")" in path[opening + 1 : -1]:
        return None
    return path[opening + 1 : -1]


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

    @property
    def link_time_optimised(self) -> bool:
        """Whether the map shows our C compiled at link time (GCC's ``*.ltrans.o``): its
        bytes then no longer say which source they came from."""
        return any(row.get("lto", 0) > 0 for row in self.split.values())

    def attributed_by(self, plain: LinkedSizes) -> LinkedSizes:
        """This firmware's totals, split as ``plain`` (the same project linked without
        link-time optimisation) splits its bytes, plus what the optimisation changed per
        section as category ``lto`` (negative: saved)."""
        result = LinkedSizes(firmware=self.firmware, method=f"{self.method}, attributed")
        result.totals = dict(self.totals)
        result.split = {bucket: dict(row) for bucket, row in plain.split.items()}
        for bucket in set(self.totals) | set(plain.totals):
            change = self.bucket_total(bucket) - plain.bucket_total(bucket)
            if change:
                result.split.setdefault(bucket, {})["lto"] = change
        return result

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
    starts: List[int] = []
    last = ("", "")

    def add(obj: str, section: str, size: int, address: str = "0") -> None:
        if bucket is not None and size:
            pieces.append(MapPiece(bucket, obj, section, size))
            starts.append(int(address, 16))

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
                add(*last, int(rest.group(2), 16), rest.group(1))
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
            add(*last, int(fill.group(2), 16), fill.group(1))
            continue
        found = _MAP_IN.match(line)
        if found is None or found.group(1).startswith("*") or found.group(1).startswith("0x"):
            continue
        if found.group(2) is None:
            pending_in = found.group(1)
            continue
        last = (found.group(4).strip(), found.group(1))
        add(*last, int(found.group(3), 16), found.group(2))
    return _clipped(pieces, starts), totals


def _clipped(pieces: List[MapPiece], starts: List[int]) -> List[MapPiece]:
    """Pieces cut where the next one starts: ld shows a merged string section (``.str1.1``)
    with the merged size where its own bytes are a few, so sizes alone overcount."""
    out = list(pieces)
    for i in range(len(out) - 1):
        here, there = starts[i], starts[i + 1]
        if out[i].bucket == out[i + 1].bucket and here <= there < here + out[i].size:
            out[i] = replace(out[i], size=there - here)
    return [piece for piece in out if piece.size]


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
        text = read_built(map_file, MAX_MAP_BYTES).decode("utf-8", "replace")
        split, totals = parse_linker_map(text)
        result.split, result.totals = split, totals
        return result
    result.method = "objects"
    for section in elf_sections(firmware):
        bucket = section_bucket(section.name, section.flags)
        if bucket is not None:
            result.totals[bucket] = result.totals.get(bucket, 0) + section.size
    linked_symbols = {s.name for s in ElfFile(read_built(firmware)).symbols() if s.name}
    for obj in sorted(build_dir.rglob("*")):
        if obj.suffix not in (".o", ".obj") or obj.is_symlink() or not obj.is_file():
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
        s.name for s in ElfFile(read_built(obj)).symbols() if s.name and s.size and s.section
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
        for symbol in ElfFile(read_built(obj)).symbols():
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
