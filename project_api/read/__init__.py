"""Read and validate TVM Model Library Format archives (every version 1-7).

Entry point: :func:`open_archive`. Also the TVM params format (:func:`load_params`,
:func:`save_params`) and TVM dtypes (:func:`parse_dtype`, :class:`DType`).
"""

from __future__ import annotations

from .dtypes import BFLOAT16, DType, UnknownDTypeError, dtype_from_numpy, parse_dtype
from .params import load_params, save_params

__all__ = [
    "BFLOAT16",
    "DType",
    "UnknownDTypeError",
    "dtype_from_numpy",
    "load_params",
    "parse_dtype",
    "save_params",
]
