"""TVM dtype spellings, sizes and numpy mapping."""

from __future__ import annotations

import numpy as np
import pytest

from project_api.read.dtypes import (
    BFLOAT16,
    DType,
    UnknownDTypeError,
    dtype_from_code,
    dtype_from_numpy,
    is_known_dtype,
    parse_dtype,
)


@pytest.mark.parametrize(
    "text, code, bits, lanes, itemsize",
    [
        ("int8", 0, 8, 1, 1),
        ("uint16", 1, 16, 1, 2),
        ("float32", 2, 32, 1, 4),
        ("float64", 2, 64, 1, 8),
        ("bfloat16", 4, 16, 1, 2),
        ("bool", 1, 1, 1, 1),
        ("handle", 3, 64, 1, 8),
        ("float32x4", 2, 32, 4, 16),
        ("int4", 0, 4, 1, 1),
        ("int4x2", 0, 4, 2, 1),
    ],
)
def test_parse_and_spell(text, code, bits, lanes, itemsize):
    dtype = parse_dtype(text)
    assert dtype == DType(code, bits, lanes)
    assert dtype.itemsize == itemsize
    assert str(dtype) == text


def test_uint1_spells_bool():
    assert str(parse_dtype("uint1")) == "bool"


@pytest.mark.parametrize("text", ["float8", "float12", "complex64", "int", "custom[x]64", "", 3])
def test_unknown(text):
    with pytest.raises(UnknownDTypeError):
        parse_dtype(text)
    assert not is_known_dtype(text) if isinstance(text, str) else True


def test_bad_lane_count():
    with pytest.raises(UnknownDTypeError, match="lane"):
        parse_dtype("int8x0")
    with pytest.raises(UnknownDTypeError):
        dtype_from_code(3, 64, 2)


def test_numpy_mapping():
    assert parse_dtype("float32").to_numpy() == np.float32
    assert parse_dtype("bool").to_numpy() == np.bool_
    assert parse_dtype("bfloat16").to_numpy().metadata == {"tvm_dtype": "bfloat16"}
    assert dtype_from_numpy(np.dtype(np.int64)) == DType(0, 64, 1)
    assert dtype_from_numpy(np.dtype(np.uint16)) == DType(1, 16, 1)
    assert dtype_from_numpy(BFLOAT16) == DType(4, 16, 1)
    assert dtype_from_numpy(np.dtype(np.bool_)) == DType(1, 1, 1)
    with pytest.raises(UnknownDTypeError):
        parse_dtype("float32x4").to_numpy()
    with pytest.raises(UnknownDTypeError):
        dtype_from_numpy(np.dtype(np.complex128))
