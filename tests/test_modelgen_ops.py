"""Each operator's numpy reference against an independent formula (loop nests, float64,
exact rationals) — never against itself."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from project_api.modelgen import ops
from project_api.modelgen.emit import c_string_escape, names_blob
from project_api.modelgen.ops import OperatorFailure, TensorType

RNG = np.random.default_rng(42)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def conv_loop_nchw(x, w, b, stride, pad):  # type: ignore[no-untyped-def]
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i, f, y, z in itertools.product(range(n), range(o), range(oh), range(ow)):
        total = float(b[f])
        for ch, dy, dx in itertools.product(range(c), range(kh), range(kw)):
            row, col = y * stride + dy - pad, z * stride + dx - pad
            if 0 <= row < h and 0 <= col < wd:
                total += float(x[i, ch, row, col]) * float(w[f, ch, dy, dx])
        out[i, f, y, z] = total
    return out


def test_dense_matches_float64_matmul() -> None:
    x, w, b = rand(2, 24), rand(5, 24), rand(5)
    (got,) = ops.Dense(bias=True, relu=True).reference([x, w, b])
    want = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (plain,) = ops.Dense().reference([x, w])
    np.testing.assert_allclose(
        plain, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("stride,pad", [(1, 0), (1, 1), (2, 1), (2, 2)])
def test_conv2d_nchw_matches_loop_nest(stride: int, pad: int) -> None:
    x, w, b = rand(1, 3, 7, 6), rand(4, 3, 3, 3), rand(4)
    (got,) = ops.Conv2D("NCHW", (stride, stride), (pad, pad), bias=True).reference([x, w, b])
    np.testing.assert_allclose(got, conv_loop_nchw(x, w, b, stride, pad), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stride,pad", [(1, 0), (2, 1)])
def test_conv2d_nhwc_matches_loop_nest(stride: int, pad: int) -> None:
    x, w, b = rand(1, 7, 6, 3), rand(3, 3, 3, 4), rand(4)
    op = ops.Conv2D("NHWC", (stride, stride), (pad, pad), bias=True, relu=True)
    (got,) = op.reference([x, w, b])
    # the NCHW loop nest on transposed data and OIHW weights is an independent formula
    want = conv_loop_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), b, stride, pad)
    np.testing.assert_allclose(got, np.maximum(want, 0).transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)
    assert (
        op.infer(
            [
                TensorType(x.shape, "float32"),
                TensorType(w.shape, "float32"),
                TensorType((4,), "float32"),
            ]
        )[0].shape
        == got.shape
    )


def test_bias_add_and_relu() -> None:
    x, b = rand(2, 3, 4, 5), rand(3)
    (got,) = ops.BiasAdd(1).reference([x, b])
    want = np.empty_like(x, dtype=np.float64)
    for idx in np.ndindex(*x.shape):
        want[idx] = float(x[idx]) + float(b[idx[1]])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    (relu,) = ops.Relu().reference([x])
    assert all(relu[i] == (x[i] if x[i] > 0 else 0) for i in np.ndindex(*x.shape))
    (qrelu,) = ops.Relu().reference([np.array([-5, 0, 7], np.int8)])
    assert qrelu.tolist() == [0, 0, 7] and qrelu.dtype == np.int8


def test_broadcast_binary_ops_elementwise_definition() -> None:
    a, b = rand(2, 1, 4), rand(3, 1)
    for name, fn in (
        ("add", float.__add__),
        ("subtract", float.__sub__),
        ("multiply", float.__mul__),
    ):
        (got,) = ops.Binary(name).reference([a, b])
        assert got.shape == (2, 3, 4)
        for i, j, k in np.ndindex(2, 3, 4):
            assert got[i, j, k] == pytest.approx(fn(float(a[i, 0, k]), float(b[j, 0])), rel=1e-6)
    (scalar,) = ops.Binary("multiply").reference(
        [np.float32(3.0) * np.ones((), np.float32), rand(4)[:1]]
    )
    assert scalar.shape == (1,)


def test_add_n_and_sum() -> None:
    values = [rand(1, 5) for _ in range(11)]
    (got,) = ops.AddN(11).reference(values)
    np.testing.assert_allclose(got, np.sum(np.stack(values).astype(np.float64), axis=0), rtol=1e-5)
    x = rand(3, 7)
    (total,) = ops.Sum().reference([x])
    assert total.shape == () and float(total) == pytest.approx(
        math.fsum(x.ravel().tolist()), rel=1e-5
    )


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pools_match_window_loops(layout: str) -> None:
    x = rand(1, 2, 6, 5) if layout == "NCHW" else rand(1, 6, 5, 2)
    nchw = x if layout == "NCHW" else x.transpose(0, 3, 1, 2)
    for mode in ("max", "avg"):
        (got,) = ops.Pool2D(mode, (2, 2), (2, 1), layout).reference([x])
        got = got if layout == "NCHW" else got.transpose(0, 3, 1, 2)
        assert got.shape == (1, 2, 3, 4)
        for c, y, z in np.ndindex(2, 3, 4):
            window = [float(nchw[0, c, 2 * y + dy, z + dx]) for dy in range(2) for dx in range(2)]
            want = max(window) if mode == "max" else sum(window) / 4
            assert got[0, c, y, z] == pytest.approx(want, rel=1e-6)


def test_softmax_is_exp_over_sum() -> None:
    x = rand(3, 10) * 5
    (got,) = ops.Softmax().reference([x])
    e = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_elementwise_chain_against_math() -> None:
    steps = (("add", 0.5), ("tanh", 0), ("multiply", 3.0), ("sigmoid", 0), ("maximum", 0.6),
             ("minimum", 0.9), ("subtract", 0.1), ("exp", 0), ("nn_relu", 0))  # fmt: skip
    x = rand(20)
    (got,) = ops.Elementwise(steps).reference([x])
    for value, result in zip(x.tolist(), got.tolist()):
        v = math.exp(min(max(1 / (1 + math.exp(-3 * math.tanh(value + 0.5))), 0.6), 0.9) - 0.1)
        assert result == pytest.approx(max(v, 0.0), rel=1e-5)


def test_split_reshape_copy() -> None:
    x = rand(2, 6, 3)
    parts = ops.Split(3, axis=1).reference([x])
    for k, part in enumerate(parts):
        np.testing.assert_array_equal(part, x[:, 2 * k : 2 * k + 2, :])
    (flat,) = ops.Reshape((2, -1)).reference([x])
    assert flat.shape == (2, 18) and flat.ravel().tolist() == x.ravel().tolist()
    assert ops.Reshape((2, -1)).infer([TensorType((2, 6, 3), "float32")])[0].shape == (2, 18)
    (copied,) = ops.Copy().reference([x])
    assert copied is not x and np.array_equal(copied, x)


def test_fail_if() -> None:
    x = rand(4)
    (same,) = ops.FailIf().reference([x, np.array(0, np.int32)])
    np.testing.assert_array_equal(same, x)
    with pytest.raises(OperatorFailure):
        ops.FailIf().reference([x, np.array(2, np.int32)])


# --- int8 ------------------------------------------------------------------------------------


def requantize_exact(acc: int, multiplier: int, shift: int, zero_point: int, low: int) -> int:
    """round-half-up(acc * m / 2**(31 + shift)) + zp, clipped: exact rational arithmetic."""
    scaled = Fraction(acc * multiplier, 2 ** (31 + shift))
    rounded = math.floor(scaled + Fraction(1, 2))
    return max(low, min(127, rounded + zero_point))


def test_requantize_hand_computed_cases() -> None:
    half = 1 << 30  # multiplier 0.5
    cases = [(100, 1, 25), (102, 1, 26), (-102, 1, -25), (-103, 1, -26), (7, 0, 4), (-7, 0, -3)]
    for acc, shift, want in cases:
        got = ops.requantize(np.array([acc]), np.int64(half), np.int64(shift), 0, -128)
        assert int(got[0]) == want == requantize_exact(acc, half, shift, 0, -128)
    assert ops.requantize(np.array([10**6]), np.int64(half), np.int64(0), 0, -128)[0] == 127
    assert ops.requantize(np.array([-300]), np.int64(half), np.int64(0), -100, -100)[0] == -100


def test_requantize_random_against_rationals() -> None:
    accs = RNG.integers(-(2**24), 2**24, 300)
    for acc in accs.tolist():
        multiplier = int(RNG.integers(1 << 30, 1 << 31))
        shift = int(RNG.integers(0, 12))
        zp = int(RNG.integers(-128, 128))
        got = int(
            ops.requantize(np.array([acc]), np.int64(multiplier), np.int64(shift), zp, -128)[0]
        )
        assert got == requantize_exact(acc, multiplier, shift, zp, -128)


def test_quantize_multiplier() -> None:
    for scale in (0.5, 0.25, 0.0123, 0.999999, 3e-5):
        multiplier, shift = ops.quantize_multiplier(scale)
        assert (1 << 30) <= multiplier < (1 << 31) and shift >= 0
        assert multiplier * 2.0 ** -(31 + shift) == pytest.approx(scale, rel=2**-30)
    with pytest.raises(ValueError):
        ops.quantize_multiplier(1.5)


def test_qdense_matches_integer_loops() -> None:
    x = RNG.integers(-128, 128, (2, 12)).astype(np.int8)
    w = RNG.integers(-128, 128, (3, 12)).astype(np.int8)
    b = RNG.integers(-1000, 1000, 3).astype(np.int32)
    m, s = ops.quantize_multiplier(0.002)
    op = ops.QDense(m, s, input_zero_point=-5, output_zero_point=3, relu=True)
    (got,) = op.reference([x, w, b])
    for i, j in np.ndindex(2, 3):
        acc = sum((int(x[i, k]) + 5) * int(w[j, k]) for k in range(12)) + int(b[j])
        assert int(got[i, j]) == requantize_exact(acc, m, s, 3, 3)


def test_qconv2d_matches_integer_loops() -> None:
    x = RNG.integers(-128, 128, (1, 5, 4, 2)).astype(np.int8)
    w = RNG.integers(-128, 128, (3, 3, 2, 3)).astype(np.int8)
    b = RNG.integers(-1000, 1000, 3).astype(np.int32)
    mult = np.array([ops.quantize_multiplier(s)[0] for s in (0.001, 0.003, 0.0007)], np.int32)
    shift = np.array([ops.quantize_multiplier(s)[1] for s in (0.001, 0.003, 0.0007)], np.int32)
    op = ops.QConv2D((2, 2), (1, 1), True, 0, 0, input_zero_point=7, output_zero_point=-20)
    (got,) = op.reference([x, w, b, mult, shift])
    assert got.shape == (1, 3, 2, 3)
    for y, z, f in np.ndindex(3, 2, 3):
        acc = int(b[f])
        for dy, dx, c in itertools.product(range(3), range(3), range(2)):
            row, col = 2 * y + dy - 1, 2 * z + dx - 1
            if 0 <= row < 5 and 0 <= col < 4:  # padding holds the zero point: contributes 0
                acc += (int(x[0, row, col, c]) - 7) * int(w[dy, dx, c, f])
        assert int(got[0, y, z, f]) == requantize_exact(acc, int(mult[f]), int(shift[f]), -20, -128)


# --- C text helpers -----------------------------------------------------------------------------


def test_names_blob_escapes_like_tvm() -> None:
    assert names_blob(["f"] * 3).startswith("\\003\\000f\\000")
    assert names_blob(["f"] * 9).startswith("\\t\\000")  # StrEscape writes a tab as \t
    assert names_blob(["f"] * 34).startswith('\\"\\000')
    assert names_blob(["f"] * 40).startswith("(\\000")  # printable bytes stay as they are
    assert names_blob(["f"] * 256).startswith("\\000\\001")
    assert c_string_escape(b"a\\b\n\x7f") == "a\\\\b\\n\\177"
