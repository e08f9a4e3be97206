"""A minimal ELF reader: enough to find a data symbol's bytes in a .so or .o file.

Handles 32- and 64-bit, little- and big-endian files; reads ``.symtab`` and ``.dynsym``.
Only used to look inside TVM ``export_library`` artifacts, so it never executes or maps code.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional

ELF_MAGIC = b"\x7fELF"
ET_REL = 1
SHT_SYMTAB = 2
SHT_NOBITS = 8
SHT_DYNSYM = 11
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
ELF_TYPES = {1: "relocatable object", 2: "executable", 3: "shared object", 4: "core file"}


class ElfFormatError(ValueError):
    """The bytes start like an ELF file but their headers are inconsistent."""


@dataclass(frozen=True)
class Section:
    name_offset: int
    type: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    section: int


class ElfFile:
    def __init__(self, data: bytes) -> None:
        if data[:4] != ELF_MAGIC or len(data) < 52:
            raise ElfFormatError("not an ELF file")
        self.data = data
        self.is64 = data[4] == 2
        if data[4] not in (1, 2) or data[5] not in (1, 2):
            raise ElfFormatError("unknown ELF class or byte order")
        self.endian = "<" if data[5] == 1 else ">"
        self.type = self._unpack("H", 16)[0]
        self.sections = self._read_sections()

    @property
    def kind(self) -> str:
        bits = 64 if self.is64 else 32
        return f"{bits}-bit ELF {ELF_TYPES.get(self.type, 'file')}"

    def _unpack(self, fmt: str, offset: int) -> tuple:
        fmt = self.endian + fmt
        end = offset + struct.calcsize(fmt)
        if offset < 0 or end > len(self.data):
            raise ElfFormatError(f"header at offset {offset} runs past the end of the file")
        return struct.unpack_from(fmt, self.data, offset)

    def _read_sections(self) -> List[Section]:
        if self.is64:
            shoff = self._unpack("Q", 0x28)[0]
            entsize, count = self._unpack("HH", 0x3A)
            fmt = "IIQQQQIIQQ"
        else:
            shoff = self._unpack("I", 0x20)[0]
            entsize, count = self._unpack("HH", 0x2E)
            fmt = "IIIIIIIIII"
        if count and entsize < struct.calcsize(fmt):
            raise ElfFormatError(f"section header size {entsize} is too small")
        sections = []
        for index in range(count):
            name, kind, _flags, addr, offset, size, link, _info, _align, ent = self._unpack(
                fmt, shoff + index * entsize
            )
            sections.append(Section(name, kind, addr, offset, size, link, ent))
        return sections

    def _string(self, table: Section, offset: int) -> str:
        start = table.offset + offset
        end = self.data.find(b"\0", start, table.offset + table.size)
        if start >= len(self.data) or end < 0:
            raise ElfFormatError("symbol name outside its string table")
        return self.data[start:end].decode("utf-8", "replace")

    def symbols(self) -> Iterator[Symbol]:
        for section in self.sections:
            if section.type in (SHT_SYMTAB, SHT_DYNSYM):
                yield from self._symbols_of(section)

    def _symbols_of(self, table: Section) -> Iterator[Symbol]:
        if not table.entsize or table.link >= len(self.sections):
            return
        strings = self.sections[table.link]
        for index in range(table.size // table.entsize):
            at = table.offset + index * table.entsize
            if self.is64:
                name, _info, _other, shndx, value, size = self._unpack("IBBHQQ", at)
            else:
                name, value, size, _info, _other, shndx = self._unpack("IIIBBH", at)
            yield Symbol(self._string(strings, name), value, size, shndx)

    def symbol_names(self) -> List[str]:
        return sorted({symbol.name for symbol in self.symbols() if symbol.name})

    def symbol_bytes(self, symbol: Symbol) -> Optional[bytes]:
        """The bytes a defined data symbol occupies in the file (None if it has none there)."""
        if symbol.section == SHN_UNDEF or symbol.section >= min(SHN_LORESERVE, len(self.sections)):
            return None
        section = self.sections[symbol.section]
        if section.type == SHT_NOBITS:
            return None
        # In objects a symbol's value is an offset into its section; elsewhere an address.
        relative = symbol.value if self.type == ET_REL else symbol.value - section.addr
        if relative < 0 or relative + symbol.size > section.size:
            raise ElfFormatError(f"symbol {symbol.name} lies outside its section")
        start = section.offset + relative
        return self.data[start : start + symbol.size]

    def find_symbols(self, suffix: str) -> Dict[str, Symbol]:
        return {s.name: s for s in self.symbols() if s.name.endswith(suffix) and s.size}
