"""TVM binary params format: reader, writer, byte-identical round trip, one test per rule."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from project_api.errors import ParamsError
from project_api.read.dtypes import BFLOAT16, dtype_from_numpy
from project_api.read.params import LIST_MAGIC, TENSOR_MAGIC, load_params, save_params


def tensor_blob(
    shape=(2,),
    code=2,
    bits=32,
    lanes=1,
    nbytes=None,
    data=None,
    magic=TENSOR_MAGIC,
    reserved=0,
    ndim=None,
) -> bytes:
    ndim = len(shape) if ndim is None else ndim
    count = int(np.prod(shape)) if shape else 1
    if data is None:
        data = bytes((bits + 7) // 8 * count)
    nbytes = len(data) if nbytes is None else nbytes
    head = struct.pack("<QQiiiBBH", magic, reserved, 1, 0, ndim, code, bits, lanes)
    return head + struct.pack(f"<{len(shape)}q", *shape) + struct.pack("<q", nbytes) + data


def params_blob(names, tensors, *, magic=LIST_MAGIC, reserved=0, tensor_count=None) -> bytes:
    out = struct.pack("<QQQ", magic, reserved, len(names))
    for name in names:
        out += struct.pack("<Q", len(name)) + name.encode()
    count = len(tensors) if tensor_count is None else tensor_count
    return out + struct.pack("<Q", count) + b"".join(tensors)


# Offset of the first tensor in a file whose only name is "w".
FIRST_TENSOR = 24 + 8 + 1 + 8


def test_empty_dict_is_32_bytes():
    blob = save_params({})
    assert len(blob) == 32
    assert load_params(blob) == {}


def test_round_trip_every_dtype_keeps_order_and_bytes():
    rng = np.random.default_rng(1)
    params = {
        "z_last": rng.standard_normal((2, 3)).astype(np.float32),
        "i8": np.arange(-4, 4, dtype=np.int8).reshape(2, 4),
        "i16": np.arange(5, dtype=np.int16),
        "i32": np.array([1, -2], dtype=np.int32),
        "i64": np.array([[7]], dtype=np.int64),
        "u8": np.arange(3, dtype=np.uint8),
        "u16": np.arange(3, dtype=np.uint16),
        "u32": np.arange(3, dtype=np.uint32),
        "u64": np.arange(3, dtype=np.uint64),
        "f16": np.array([0.5, -1.0], dtype=np.float16),
        "f64": np.array([np.pi], dtype=np.float64),
        "flag": np.array([True, False, True]),
        "bf16": np.array([0x3F80, 0xC000], dtype=np.uint16).view(BFLOAT16),
        "scalar": np.array(3.0, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    blob = save_params(params)
    loaded = load_params(blob)
    assert list(loaded) == list(params)
    for name, value in params.items():
        assert loaded[name].shape == value.shape
        assert dtype_from_numpy(loaded[name].dtype) == dtype_from_numpy(value.dtype)
        assert loaded[name].tobytes() == value.tobytes()
    assert save_params(loaded) == blob


def test_bool_is_written_as_uint1_one_byte_each():
    blob = save_params({"b": np.array([True, False])})
    code, bits, lanes = struct.unpack_from("<BBH", blob, FIRST_TENSOR + 28)
    assert (code, bits, lanes) == (1, 1, 1)
    assert blob.endswith(struct.pack("<q", 2) + b"\x01\x00")


def test_bfloat16_keeps_code_4_through_a_round_trip():
    raw = params_blob(["w"], [tensor_blob((2,), code=4, bits=16, data=b"\x80\x3f\x00\xc0")])
    loaded = load_params(raw)
    assert loaded["w"].dtype.metadata == {"tvm_dtype": "bfloat16"}
    assert str(dtype_from_numpy(loaded["w"].dtype)) == "bfloat16"
    assert save_params(loaded) == raw


def test_big_endian_arrays_are_written_little_endian():
    value = np.array([1, 2], dtype=">i4")
    loaded = load_params(save_params({"w": value}))
    assert loaded["w"].tolist() == [1, 2]


def test_path_input(tmp_path):
    path = tmp_path / "m.params"
    path.write_bytes(save_params({"a": np.ones(2, np.float32)}))
    assert load_params(path)["a"].tolist() == [1.0, 1.0]


def test_real_corpus_params_round_trip(mlf_corpus, tmp_path):
    import tarfile

    count = 0
    for archive in sorted(mlf_corpus.glob("*.tar")):
        with tarfile.open(archive) as tar:
            for info in tar.getmembers():
                if info.name.endswith(".params"):
                    blob = tar.extractfile(info).read()
                    assert save_params(load_params(blob, member=info.name)) == blob
                    count += 1
    assert count > 0


# --- one bad input per rule ----------------------------------------------------------


def check_error(blob: bytes, offset: int, fragment: str) -> None:
    with pytest.raises(ParamsError) as info:
        load_params(blob, member="parameters/m.params")
    assert info.value.member == "parameters/m.params"
    assert info.value.location == f"offset {offset}"
    assert fragment in info.value.problem


def test_bad_list_magic():
    check_error(params_blob([], [], magic=0x1234), 0, "bad params list magic")


def test_list_reserved_not_zero():
    check_error(params_blob([], [], reserved=5), 8, "reserved word is 5")


def test_bad_tensor_magic():
    blob = params_blob(["w"], [tensor_blob(magic=0xBAD)])
    check_error(blob, FIRST_TENSOR, "bad tensor 'w' magic")


def test_tensor_reserved_not_zero():
    blob = params_blob(["w"], [tensor_blob(reserved=1)])
    check_error(blob, FIRST_TENSOR + 8, "reserved word is 1")


def test_name_count_larger_than_file():
    blob = struct.pack("<QQQ", LIST_MAGIC, 0, 1 << 40)
    check_error(blob, 16, "exceeds what the file can hold")


def test_name_and_tensor_counts_differ():
    blob = params_blob(["w"], [], tensor_count=0)
    check_error(blob, FIRST_TENSOR - 8, "1 names but 0 tensors")


def test_duplicate_names():
    blob = params_blob(["w", "w"], [tensor_blob(), tensor_blob()])
    check_error(blob, 24 + 9, "duplicate param name 'w'")


def test_truncated_header():
    check_error(struct.pack("<Q", LIST_MAGIC), 8, "truncated")


def test_truncated_data():
    blob = params_blob(["w"], [tensor_blob()])[:-3]
    check_error(blob, len(blob) - 5, "truncated: data of 'w' needs 8 bytes, 5 left")


def test_negative_ndim():
    blob = params_blob(["w"], [tensor_blob(shape=(), ndim=-1)])
    check_error(blob, FIRST_TENSOR + 24, "ndim -1")


def test_huge_ndim():
    blob = params_blob(["w"], [tensor_blob(shape=(), ndim=1 << 30)])
    check_error(blob, FIRST_TENSOR + 24, "ndim 1073741824")


def test_negative_dimension():
    blob = params_blob(["w"], [tensor_blob(shape=(-2,), data=b"")])
    check_error(blob, FIRST_TENSOR + 32, "negative dimension")


def test_unknown_dtype_code():
    blob = params_blob(["w"], [tensor_blob(code=9, bits=8)])
    check_error(blob, FIRST_TENSOR + 28, "unknown dtype")


def test_unknown_dtype_bits():
    blob = params_blob(["w"], [tensor_blob(code=2, bits=12)])
    check_error(blob, FIRST_TENSOR + 28, "unknown dtype")


def test_vector_lanes_refused():
    blob = params_blob(["w"], [tensor_blob(code=2, bits=32, lanes=4)])
    check_error(blob, FIRST_TENSOR + 28, "vector dtype float32x4")


def test_handle_dtype_refused():
    blob = params_blob(["w"], [tensor_blob(code=3, bits=64)])
    check_error(blob, FIRST_TENSOR + 28, "no numpy equivalent")


def test_nbytes_disagrees_with_shape():
    blob = params_blob(["w"], [tensor_blob(shape=(2,), nbytes=4, data=bytes(4))])
    check_error(blob, FIRST_TENSOR + 40, "declares 4 bytes, expected 8")


def test_trailing_bytes():
    blob = params_blob(["w"], [tensor_blob()]) + b"xx"
    check_error(blob, len(blob) - 2, "2 trailing bytes")


def test_save_refuses_unknown_numpy_dtype():
    with pytest.raises(ValueError, match="complex"):
        save_params({"c": np.zeros(2, np.complex64)})
