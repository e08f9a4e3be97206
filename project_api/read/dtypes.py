"""TVM data types (DLPack ``DLDataType``) and their spellings in graph.json and params files.

A dtype is ``(code, bits, lanes)`` with DLPack's type codes. TVM spells them
``int8``, ``uint16``, ``float32``, ``bfloat16``, ``float32x4`` (lanes), ``bool`` (``uint1``)
and ``handle`` (an opaque pointer).

numpy has no bfloat16. A bfloat16 tensor is carried as raw 16-bit words in a numpy
``uint16`` array whose dtype is :data:`BFLOAT16`: a ``uint16`` dtype with numpy dtype metadata
``{"tvm_dtype": "bfloat16"}``. :func:`dtype_from_numpy` reads that marker back, so a params
file round-trips byte for byte. ``numpy.asarray(x, dtype=BFLOAT16)`` or
``x.view(BFLOAT16)`` on raw ``uint16`` words makes such an array.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Mapping, Tuple

import numpy as np

# DLPack type codes (dlpack.h DLDataTypeCode).
CODE_INT = 0
CODE_UINT = 1
CODE_FLOAT = 2
CODE_HANDLE = 3
CODE_BFLOAT = 4

_CODE_NAMES = {CODE_INT: "int", CODE_UINT: "uint", CODE_FLOAT: "float", CODE_BFLOAT: "bfloat"}

# Marker key in numpy dtype metadata naming the TVM dtype a plain numpy dtype stands for.
TVM_DTYPE_KEY = "tvm_dtype"

BFLOAT16 = np.dtype(np.uint16, metadata={TVM_DTYPE_KEY: "bfloat16"})

# (code, bits) pairs that have a numpy representation (lanes must be 1).
_NUMPY_OF: Dict[Tuple[int, int], np.dtype] = {
    (CODE_INT, 8): np.dtype(np.int8),
    (CODE_INT, 16): np.dtype(np.int16),
    (CODE_INT, 32): np.dtype(np.int32),
    (CODE_INT, 64): np.dtype(np.int64),
    (CODE_UINT, 1): np.dtype(np.bool_),
    (CODE_UINT, 8): np.dtype(np.uint8),
    (CODE_UINT, 16): np.dtype(np.uint16),
    (CODE_UINT, 32): np.dtype(np.uint32),
    (CODE_UINT, 64): np.dtype(np.uint64),
    (CODE_FLOAT, 16): np.dtype(np.float16),
    (CODE_FLOAT, 32): np.dtype(np.float32),
    (CODE_FLOAT, 64): np.dtype(np.float64),
    (CODE_BFLOAT, 16): BFLOAT16,
}

# Bit widths TVM's runtime and codegen accept per code; anything else is refused as unknown.
_KNOWN_BITS = {
    CODE_INT: (1, 4, 8, 16, 32, 64),
    CODE_UINT: (1, 4, 8, 16, 32, 64),
    CODE_FLOAT: (16, 32, 64),
    CODE_BFLOAT: (16,),
    CODE_HANDLE: (64,),
}

_DTYPE_RE = re.compile(r"^(int|uint|float|bfloat)(\d+)(?:x(\d+))?$")
MAX_LANES = 0xFFFF  # DLDataType.lanes is a uint16


class UnknownDTypeError(ValueError):
    """A dtype string or (code, bits, lanes) triple that TVM does not produce.

    A plain ValueError (not an MlfProjectError) because it has no archive member to name:
    the graph and params readers catch it and re-raise with member and location.
    """


@dataclass(frozen=True)
class DType:
    """A DLPack data type: type ``code``, ``bits`` per lane, vector ``lanes``."""

    code: int
    bits: int
    lanes: int = 1

    @property
    def itemsize(self) -> int:
        """Bytes per element as TVM's storage planner counts them: ceil(bits * lanes / 8)."""
        return (self.bits * self.lanes + 7) // 8

    @property
    def is_bool(self) -> bool:
        return self.code == CODE_UINT and self.bits == 1 and self.lanes == 1

    def __str__(self) -> str:
        if self.code == CODE_HANDLE:
            return "handle"
        if self.is_bool:
            return "bool"
        text = f"{_CODE_NAMES[self.code]}{self.bits}"
        return text if self.lanes == 1 else f"{text}x{self.lanes}"

    def to_numpy(self) -> np.dtype:
        """The numpy dtype holding one element (bfloat16 → :data:`BFLOAT16` raw words)."""
        found = _NUMPY_OF.get((self.code, self.bits)) if self.lanes == 1 else None
        if found is None:
            raise UnknownDTypeError(f"dtype {self} has no numpy equivalent")
        return found


def _check_known(code: int, bits: int, lanes: int, spelled: str) -> DType:
    if code not in _KNOWN_BITS or bits not in _KNOWN_BITS[code]:
        raise UnknownDTypeError(f"unknown dtype {spelled!r}")
    if not 1 <= lanes <= MAX_LANES or (code == CODE_HANDLE and lanes != 1):
        raise UnknownDTypeError(f"unknown dtype {spelled!r}: bad lane count {lanes}")
    return DType(code, bits, lanes)


def parse_dtype(text: str) -> DType:
    """Parse TVM's spelling (``float32``, ``int8x4``, ``bool``, ``handle``) into a DType.

    Raises UnknownDTypeError for anything TVM does not write (``float8``, ``custom[...]``...).
    """
    if not isinstance(text, str):
        raise UnknownDTypeError(f"dtype must be a string, got {text!r}")
    if text == "bool":
        return DType(CODE_UINT, 1, 1)
    if text == "handle":
        return DType(CODE_HANDLE, 64, 1)
    match = _DTYPE_RE.match(text)
    if match is None:
        raise UnknownDTypeError(f"unknown dtype {text!r}")
    name, bits, lanes = match.group(1), int(match.group(2)), int(match.group(3) or 1)
    code = {v: k for k, v in _CODE_NAMES.items()}[name]
    return _check_known(code, bits, lanes, text)


def dtype_from_code(code: int, bits: int, lanes: int) -> DType:
    """Validate a raw DLDataType triple (as found in a params file)."""
    return _check_known(code, bits, lanes, f"code={code} bits={bits} lanes={lanes}")


def dtype_from_numpy(dtype: np.dtype) -> DType:
    """The TVM dtype of a numpy dtype; honours the ``tvm_dtype`` marker (bfloat16)."""
    dtype = np.dtype(dtype)
    metadata: Mapping[str, object] = dtype.metadata or {}
    marker = metadata.get(TVM_DTYPE_KEY)
    if isinstance(marker, str):
        return parse_dtype(marker)
    native = dtype.newbyteorder("=")  # a big-endian int32 is still int32
    for key, candidate in _NUMPY_OF.items():
        if candidate == native and candidate is not BFLOAT16:
            return DType(key[0], key[1], 1)
    raise UnknownDTypeError(f"numpy dtype {dtype} has no TVM equivalent")


def is_known_dtype(text: str) -> bool:
    try:
        parse_dtype(text)
    except UnknownDTypeError:
        return False
    return True
