"""A bounded reader of FlatBuffers: every offset, count and length checked against the file.

The ``flatbuffers`` runtime trusts its input (an offset outside the buffer raises an
IndexError at best, reads a neighbouring field at worst), so the untrusted ``.tflite`` is
read here instead, through the few primitives the schema needs: tables (their vtable),
scalars, strings, vectors of scalars and vectors of tables. Every read is checked against
the buffer's end, and every element read is charged to a budget shared by the whole file, so
a file whose vectors point many times at the same large table cannot make the reader work
for longer than its budget allows. uoffsets only ever point forward and the reader follows
the schema's fixed depth, so an offset "loop" can make it read the same bytes again but
never recurse without end.
"""

from __future__ import annotations

import struct
from typing import Any, List, Optional, Tuple

from ..errors import CompileError

_U8 = struct.Struct("<B")
_I8 = struct.Struct("<b")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")

SCALARS = {"u8": _U8, "i8": _I8, "u16": _U16, "i32": _I32, "u32": _U32, "i64": _I64,
           "u64": _U64, "f32": _F32, "bool": _U8}  # fmt: skip
VECTOR_CODES = {"u8": "B", "i8": "b", "i32": "i", "i64": "q", "f32": "f"}


class Budget:
    """Elements the whole read may touch; exhausted → a one-line refusal."""

    def __init__(self, elements: int, data_bytes: int) -> None:
        self.left = elements
        self.bytes_left = data_bytes

    def charge_bytes(self, count: int, what: str) -> None:
        """Constant data copied out of the file: a well-formed file copies each byte once."""
        self.bytes_left -= count
        if self.bytes_left < 0:
            raise CompileError(f"{what}: buffers overlap more than a model's weights could")

    def charge(self, count: int, what: str) -> None:
        self.left -= count
        if self.left < 0:
            raise CompileError(f"{what}: the file asks for more reading than any model needs")


class Buffer:
    """The file's bytes, with checked access."""

    def __init__(self, data: bytes, budget: Budget) -> None:
        self.data = data
        self.size = len(data)
        self.budget = budget

    def need(self, pos: int, length: int, what: str) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            raise CompileError(
                f"{what}: offset {pos} (+{length} bytes) lies outside the file "
                f"({self.size} bytes): truncated or corrupt"
            )

    def scalar(self, kind: str, pos: int, what: str) -> object:
        fmt = SCALARS[kind]
        if pos < 0 or pos + fmt.size > self.size:
            self.need(pos, fmt.size, what)
        value = fmt.unpack_from(self.data, pos)[0]
        return bool(value) if kind == "bool" else value

    def u16(self, pos: int, what: str) -> int:
        if pos < 0 or pos + 2 > self.size:
            self.need(pos, 2, what)
        return int(_U16.unpack_from(self.data, pos)[0])

    def follow(self, pos: int, what: str) -> int:
        """The position a uoffset at ``pos`` points to."""
        target = pos + int(self.scalar("u32", pos, what))  # type: ignore[call-overload]
        self.need(target, 4, what)
        return target

    def root(self) -> Table:
        if self.size < 8:
            raise CompileError(f"file of {self.size} bytes is too short for a .tflite")
        return Table(self, self.follow(0, "root table"), "model")


class Table:
    """One table: its position and vtable, read lazily field by field."""

    def __init__(self, buf: Buffer, pos: int, what: str) -> None:
        self.buf = buf
        self.pos = pos
        self.what = what
        buf.budget.charge(1, what)
        soffset = int(buf.scalar("i32", pos, f"{what} vtable offset"))  # type: ignore[call-overload]
        self.vtable = pos - soffset
        self.vsize = int(buf.scalar("u16", self.vtable, f"{what} vtable"))  # type: ignore[call-overload]
        tsize = int(buf.scalar("u16", self.vtable + 2, f"{what} vtable"))  # type: ignore[call-overload]
        if self.vsize < 4 or self.vsize % 2:
            raise CompileError(f"{what}: vtable of {self.vsize} bytes is corrupt")
        buf.need(self.vtable, self.vsize, f"{what} vtable")
        buf.need(pos, max(tsize, 4), f"{what} table")
        self.tsize = tsize

    def field(self, slot: int) -> int:
        """The field's position in the file, or 0 when it is absent."""
        entry = 4 + 2 * slot
        if entry + 2 > self.vsize:
            return 0
        offset = self.buf.u16(self.vtable + entry, "vtable")
        if offset == 0:
            return 0
        if offset < 4 or offset >= max(self.tsize, 4):
            raise CompileError(f"{self.what}: field {slot} lies outside its table")
        return self.pos + offset

    def has(self, slot: int) -> bool:
        return self.field(slot) != 0

    def scalar(self, slot: int, kind: str, default: object = 0) -> object:
        pos = self.field(slot)
        if not pos:
            return default
        return self.buf.scalar(kind, pos, f"{self.what} field {slot}")

    def integer(self, slot: int, kind: str = "i32", default: int = 0) -> int:
        return int(self.scalar(slot, kind, default))  # type: ignore[call-overload]

    def real(self, slot: int, default: float = 0.0) -> float:
        return float(self.scalar(slot, "f32", default))  # type: ignore[arg-type]

    def table(self, slot: int, what: str) -> Optional[Table]:
        pos = self.field(slot)
        if not pos:
            return None
        return Table(self.buf, self.buf.follow(pos, what), what)

    def _vector(
        self, slot: int, width: int, what: str, limit: int, charge: bool = True
    ) -> Tuple[int, int]:
        """(count, first element's position) of a vector field; (0, 0) when absent."""
        pos = self.field(slot)
        if not pos:
            return 0, 0
        start = self.buf.follow(pos, what)
        count = int(self.buf.scalar("u32", start, what))  # type: ignore[call-overload]
        if count > limit:
            raise CompileError(f"{what}: {count} entries, more than the {limit} allowed")
        self.buf.need(start + 4, count * width, what)
        self.buf.budget.charge(count if charge else 1, what)
        return count, start + 4

    def string(self, slot: int, what: str, limit: int = 4096) -> str:
        count, first = self._vector(slot, 1, what, limit)
        raw = self.buf.data[first : first + count]
        return raw.decode("utf-8", errors="replace")

    def numbers(self, slot: int, kind: str, what: str, limit: int) -> Tuple[Any, ...]:
        """A vector of scalars (ints, or floats for ``f32``) as a tuple."""
        code = VECTOR_CODES[kind]
        count, first = self._vector(slot, struct.calcsize("<" + code), what, limit)
        if not count:
            return ()
        return struct.unpack_from(f"<{count}{code}", self.buf.data, first)

    def bytes_view(self, slot: int, what: str, limit: int) -> memoryview:
        """A vector of bytes, without copying."""
        count, first = self._vector(slot, 1, what, limit, charge=False)
        self.buf.budget.charge_bytes(count, what)
        return memoryview(self.buf.data)[first : first + count]

    def tables(self, slot: int, what: str, limit: int) -> List[Table]:
        count, first = self._vector(slot, 4, what, limit)
        return [
            Table(self.buf, self.buf.follow(first + 4 * i, f"{what}[{i}]"), f"{what}[{i}]")
            for i in range(count)
        ]
