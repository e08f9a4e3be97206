"""Reader and writer of TVM's binary params format (``parameters/<model>.params``).

Layout (little-endian, packed; see spec tvm-c-abi.md §6)::

    u64 list magic 0xF7E58D4F05049CB7, u64 reserved 0
    u64 N, N x {u64 len, name bytes}
    u64 N, N x tensor {u64 tensor magic 0xDD5E40F096B4A13F, u64 reserved 0,
                       i32 device_type, i32 device_id, i32 ndim, u8 code, u8 bits, u16 lanes,
                       ndim x i64 shape, i64 nbytes, nbytes of data}

``nbytes`` is ``(bits + 7) // 8 * prod(shape)``: TVM's SaveDLTensor ignores ``lanes``, so a
vector-typed tensor would lose data on TVM's own side; we refuse lanes != 1 rather than guess.

The returned dict keeps file order, and :func:`save_params` writes what it is given in order,
so ``save_params(load_params(blob)) == blob`` for any file TVM wrote. bfloat16 tensors come
back as raw uint16 words with the :data:`~project_api.read.dtypes.BFLOAT16` marker dtype.
"""

from __future__ import annotations

import math
import os
import struct
from pathlib import Path
from typing import Dict, List, Mapping, Union

import numpy as np

from ..errors import ParamsError
from .dtypes import DType, UnknownDTypeError, dtype_from_code, dtype_from_numpy

LIST_MAGIC = 0xF7E58D4F05049CB7
TENSOR_MAGIC = 0xDD5E40F096B4A13F
DEVICE_CPU = 1

# Sanity limits: real tensors have few dimensions and TVM names are short. They keep a
# corrupt count from turning into a huge allocation before truncation is noticed.
MAX_NDIM = 32
MAX_NAME_BYTES = 1 << 16


class _Cursor:
    """Reads little-endian fields from a bytes object, raising ParamsError on truncation."""

    def __init__(self, data: bytes, member: str) -> None:
        self.data = data
        self.member = member
        self.pos = 0

    def error(self, problem: str, at: int = -1) -> ParamsError:
        return ParamsError(self.member, f"offset {self.pos if at < 0 else at}", problem)

    def take(self, size: int, what: str) -> bytes:
        if size > len(self.data) - self.pos:
            left = len(self.data) - self.pos
            raise self.error(f"truncated: {what} needs {size} bytes, {left} left")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def u64(self, what: str) -> int:
        return int(self.unpack("Q", what)[0])


def load_params(
    data: Union[bytes, bytearray, memoryview, os.PathLike, str], *, member: str = "params"
) -> Dict[str, np.ndarray]:
    """Parse a params file (bytes, or a path to read) into ``{name: array}`` in file order.

    Every error is a ParamsError naming ``member`` and the byte offset of the bad field.
    """
    if isinstance(data, (str, os.PathLike)):
        data = Path(data).read_bytes()
    cursor = _Cursor(bytes(data), member)
    _read_magic(cursor, LIST_MAGIC, "params list")
    names = _read_names(cursor)
    count_at = cursor.pos
    count = cursor.u64("tensor count")
    if count != len(names):
        raise cursor.error(f"{len(names)} names but {count} tensors", count_at)
    arrays = [_read_tensor(cursor, names[i]) for i in range(count)]
    if cursor.pos != len(cursor.data):
        raise cursor.error(f"{len(cursor.data) - cursor.pos} trailing bytes after the last tensor")
    return dict(zip(names, arrays))


def _read_magic(cursor: _Cursor, expected: int, what: str) -> None:
    at = cursor.pos
    magic = cursor.u64(f"{what} magic")
    if magic != expected:
        raise cursor.error(f"bad {what} magic {magic:#018x}, expected {expected:#018x}", at)
    at = cursor.pos
    reserved = cursor.u64(f"{what} reserved word")
    if reserved != 0:
        raise cursor.error(f"{what} reserved word is {reserved}, expected 0", at)


def _read_names(cursor: _Cursor) -> List[str]:
    count_at = cursor.pos
    count = cursor.u64("name count")
    # Each name needs at least its 8-byte length: a bigger count cannot fit in the file.
    if count > (len(cursor.data) - cursor.pos) // 8:
        raise cursor.error(f"name count {count} exceeds what the file can hold", count_at)
    names: List[str] = []
    seen = set()
    for index in range(count):
        at = cursor.pos
        length = cursor.u64(f"length of name {index}")
        if length > MAX_NAME_BYTES:
            raise cursor.error(f"name {index} is {length} bytes long", at)
        raw = cursor.take(length, f"name {index}")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise cursor.error(f"name {index} is not UTF-8", at + 8) from None
        if name in seen:
            raise cursor.error(f"duplicate param name {name!r}", at)
        seen.add(name)
        names.append(name)
    return names


def _read_tensor(cursor: _Cursor, name: str) -> np.ndarray:
    _read_magic(cursor, TENSOR_MAGIC, f"tensor {name!r}")
    cursor.unpack("ii", f"device of {name!r}")  # TVM always writes CPU; loaders ignore it
    at = cursor.pos
    ndim = cursor.unpack("i", f"ndim of {name!r}")[0]
    if not 0 <= ndim <= MAX_NDIM:
        raise cursor.error(f"tensor {name!r} has ndim {ndim} (0..{MAX_NDIM} allowed)", at)
    dtype = _read_dtype(cursor, name)
    at = cursor.pos
    shape = cursor.unpack(f"{ndim}q", f"shape of {name!r}") if ndim else ()
    if any(dim < 0 for dim in shape):
        raise cursor.error(f"tensor {name!r} has a negative dimension in {list(shape)}", at)
    at = cursor.pos
    nbytes = cursor.unpack("q", f"byte size of {name!r}")[0]
    expected = (dtype.bits + 7) // 8 * math.prod(shape)
    if nbytes != expected:
        raise cursor.error(
            f"tensor {name!r} ({dtype}{list(shape)}) declares {nbytes} bytes, expected {expected}",
            at,
        )
    raw = cursor.take(nbytes, f"data of {name!r}")
    return np.frombuffer(raw, dtype=dtype.to_numpy()).reshape(shape).copy()


def _read_dtype(cursor: _Cursor, name: str) -> DType:
    at = cursor.pos
    code, bits, lanes = cursor.unpack("BBH", f"dtype of {name!r}")
    try:
        dtype = dtype_from_code(code, bits, lanes)
        if lanes != 1:
            raise UnknownDTypeError(f"vector dtype {dtype} (TVM's writer drops lanes)")
        dtype.to_numpy()
    except UnknownDTypeError as err:
        raise cursor.error(f"tensor {name!r}: {err}", at) from None
    return dtype


def save_params(params: Mapping[str, np.ndarray]) -> bytes:
    """Serialize ``{name: array}`` in mapping order, as TVM's ``save_param_dict`` does.

    Arrays are written C-contiguous little-endian; bfloat16 needs the BFLOAT16 marker dtype.
    """
    names = list(params)
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(names))]
    for name in names:
        encoded = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(encoded)) + encoded)
    parts.append(struct.pack("<Q", len(names)))
    for name in names:
        parts.append(_tensor_bytes(name, params[name]))
    return b"".join(parts)


def _tensor_bytes(name: str, value: np.ndarray) -> bytes:
    array = np.asarray(value)
    try:
        dtype = dtype_from_numpy(array.dtype)
    except UnknownDTypeError as err:
        raise ValueError(f"param {name!r}: {err}") from None
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    data = np.ascontiguousarray(little).tobytes()
    header = struct.pack(
        "<QQiiiBBH", TENSOR_MAGIC, 0, DEVICE_CPU, 0, array.ndim, dtype.code, dtype.bits, 1
    )
    shape = struct.pack(f"<{array.ndim}q", *array.shape)
    return header + shape + struct.pack("<q", len(data)) + data
