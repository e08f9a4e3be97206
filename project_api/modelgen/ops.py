"""Operators of the model factory: shape rules, C emitters and numpy references.

Each operator is one fused TVM primitive function (``fused_nn_dense_add_nn_relu``...). Its
numpy reference repeats the C code's arithmetic in the same order and precision (float32
accumulation in loop order, int8 paths in exact integer arithmetic), so host results agree
bit for bit and device results within float32 rounding.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .cgen import C_TYPES, Body, Buffer, c_type, float_literal, index

Shape = Tuple[int, ...]
F32 = np.float32
FLOAT_LOWEST = float(np.finfo(np.float32).min)


@dataclass(frozen=True)
class TensorType:
    shape: Shape
    dtype: str

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


class OperatorFailure(Exception):
    """Raised by a reference whose C operator would return -1 for these inputs.

    ``op_index`` is the failing operator's position in the network; a GeneratedModel also
    fills in ``node`` (its graph node id) and ``function`` (its func_name).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.op_index: Optional[int] = None
        self.node: Optional[int] = None
        self.function: Optional[str] = None


class Op:
    """A graph operator. ``kind`` is ``kernel`` (a C function), ``nop`` or ``copy``."""

    kind = "kernel"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        raise NotImplementedError

    def name_parts(self) -> List[str]:
        raise NotImplementedError

    def output_names(self) -> List[str]:
        raise NotImplementedError

    def graph_attrs(self) -> Dict[str, str]:
        return {}

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        raise NotImplementedError

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError


# --- helpers ------------------------------------------------------------------------------


@contextlib.contextmanager
def nest(body: Body, dims: Sequence[Tuple[str, int]]) -> Iterator[List[str]]:
    """Nested loops over ``dims``; a dimension of extent 1 gets no loop, its index is ``0``."""
    with contextlib.ExitStack() as stack:
        names = []
        for var, extent in dims:
            if extent == 1:
                names.append("0")
            else:
                stack.enter_context(body.loop(var, extent))
                names.append(var)
        yield names


def row_major_strides(shape: Shape) -> List[int]:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return strides


def flat_loop_var(ndim: int) -> str:
    return "_".join(f"ax{i}" for i in range(max(ndim, 1))) + ("_fused" if ndim > 1 else "")


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def require_dtype(t: TensorType, dtypes: Sequence[str], what: str) -> None:
    require(t.dtype in dtypes, f"{what} must be {' or '.join(dtypes)}, got {t.dtype}")


def relu_expr(value: str, zero: str = "0.000000e+00f") -> str:
    return f"(({value}) > ({zero}) ? ({value}) : ({zero}))"


def float_epilogue(body: Body, acc: str, bias: Optional[str], relu: bool) -> str:
    """Bias add and relu after an accumulation, as TVM fuses them; returns the value."""
    value = acc
    if bias is not None:
        body.line(f"float v_ = ({acc} + {bias});")
        value = "v_"
    return relu_expr(value) if relu else value


def reference_epilogue(acc: np.ndarray, bias: Optional[np.ndarray], relu: bool) -> np.ndarray:
    value = acc if bias is None else (acc + bias).astype(F32)
    return np.where(value > 0, value, F32(0)).astype(F32) if relu else value


def epilogue_parts(bias: bool, relu: bool) -> List[str]:
    return (["add"] if bias else []) + (["nn_relu"] if relu else [])


def epilogue_output(plain: str, bias: bool, relu: bool) -> str:
    return "T_relu" if relu else ("T_add" if bias else plain)


def pair(value: Union[int, Sequence[int]]) -> Tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    first, second = value
    return (int(first), int(second))


def window_out(size: int, kernel: int, stride: int, pad: int) -> int:
    out = (size + 2 * pad - kernel) // stride + 1
    require(out >= 1, f"window {kernel} (stride {stride}, pad {pad}) does not fit extent {size}")
    return out


# --- fixed-point requantization ----------------------------------------------------------


def quantize_multiplier(scale: float) -> Tuple[int, int]:
    """(multiplier, shift) with ``scale ≈ multiplier * 2**-(31 + shift)``, 0 < scale < 1."""
    require(0.0 < scale < 1.0, f"requantize scale must be in (0, 1), got {scale}")
    mantissa, exponent = math.frexp(scale)
    multiplier = round(mantissa * (1 << 31))
    if multiplier == 1 << 31:
        multiplier //= 2
        exponent += 1
    return multiplier, -exponent


def requantize(
    acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray, zero_point: int, low: int
) -> np.ndarray:
    """TVM's fixed_point_multiply with round-half-up, + zero point, clip, cast to int8."""
    acc = acc.astype(np.int64)
    total = np.asarray(shift, dtype=np.int64) + 31
    scaled = (acc * np.asarray(multiplier, dtype=np.int64) + (np.int64(1) << (total - 1))) >> total
    return np.clip(scaled + zero_point, low, 127).astype(np.int8)


def offset(value: int) -> str:
    """`` + 3`` / `` - 3`` / nothing: an integer constant added to an expression."""
    if value == 0:
        return ""
    return f" + {value}" if value > 0 else f" - {-value}"


def requantize_c(acc: str, multiplier: str, shift: str, zero_point: int) -> str:
    total = f"({shift} + 31)"
    return (
        f"((int32_t)(((((int64_t){acc}) * ((int64_t){multiplier})) + "
        f"((int64_t)1 << ((int64_t)({total} - 1)))) >> ((int64_t){total})))"
        f"{offset(zero_point)}"
    )


def emit_clip_int8(body: Body, value: str, low: int) -> str:
    body.line(f"int32_t v_ = {value};")
    body.line("int32_t v__1 = (v_) < (127) ? (v_) : (127);")
    return f"(int8_t)((v__1) > ({low}) ? (v__1) : ({low}))"


def check_requant(multiplier: Union[int, np.ndarray], shift: Union[int, np.ndarray]) -> None:
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    require(bool(np.all((m > 0) & (m < (1 << 31)))), "multiplier must be in (0, 2**31)")
    require(bool(np.all((s >= 0) & (s <= 30))), "shift must be in 0..30")


# --- dense and conv2d --------------------------------------------------------------------


def dense_accumulate(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """sum_k x[i,k] * w[j,k] in float32, k in order (the C loop's order)."""
    acc = np.zeros((x.shape[0], weight.shape[0]), F32)
    for k in range(x.shape[1]):
        acc = (acc + x[:, k : k + 1] * weight[None, :, k]).astype(F32)
    return acc


@dataclass(frozen=True)
class Dense(Op):
    """y = x · wᵀ (+ b) (relu): x [N, K], w [M, K] (Relay's layout), b [M]; float32."""

    bias: bool = False
    relu: bool = False

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x, w = types[0], types[1]
        require(len(x.shape) == 2 and len(w.shape) == 2, "dense needs x [N, K] and w [M, K]")
        require(x.shape[1] == w.shape[1], f"dense: x {x.shape} and w {w.shape} disagree on K")
        for t in types:
            require_dtype(t, ["float32"], "dense operands")
        if self.bias:
            require(types[2].shape == (w.shape[0],), f"dense bias must be [{w.shape[0]}]")
        return [TensorType((x.shape[0], w.shape[0]), "float32")]

    def name_parts(self) -> List[str]:
        return ["nn_dense", *epilogue_parts(self.bias, self.relu)]

    def output_names(self) -> List[str]:
        return [epilogue_output("T_matmul_NT", self.bias, self.relu)]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w, out = ins[0], ins[1], outs[0]
        (n, k), m = x.shape, w.shape[0]
        with nest(body, [("i", n), ("j", m)]) as (i, j):
            body.line("float acc = 0.000000e+00f;")
            with body.loop("k", k):
                body.line(
                    f"acc = (acc + ({x[index((i, k), ('k', 1))]} * {w[index((j, k), ('k', 1))]}));"
                )
            value = float_epilogue(body, "acc", ins[2][j] if self.bias else None, self.relu)
            body.line(f"{out[index((i, m), (j, 1))]} = {value};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        acc = dense_accumulate(arrays[0], arrays[1])
        return [reference_epilogue(acc, arrays[2] if self.bias else None, self.relu)]


@dataclass(frozen=True)
class Conv2D(Op):
    """2-D convolution, NCHW (weights OIHW) or NHWC (weights HWIO); bias [O]; float32."""

    layout: str = "NCHW"
    strides: Tuple[int, int] = (1, 1)
    padding: Tuple[int, int] = (0, 0)
    bias: bool = False
    relu: bool = False

    @property
    def kernel_layout(self) -> str:
        return "OIHW" if self.layout == "NCHW" else "HWIO"

    def dims(self, x: Shape, w: Shape) -> Tuple[int, int, int, int, int, int, int]:
        """(N, C, H, W, O, KH, KW) whatever the layout."""
        if self.layout == "NCHW":
            (n, c, h, wd), (o, _, kh, kw) = x, w
        else:
            (n, h, wd, c), (kh, kw, _, o) = x, w
        return n, c, h, wd, o, kh, kw

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(self.layout in ("NCHW", "NHWC"), f"conv2d layout {self.layout!r} unsupported")
        x, w = types[0], types[1]
        require(len(x.shape) == 4 and len(w.shape) == 4, "conv2d needs 4-d data and weights")
        for t in types:
            require_dtype(t, ["float32"], "conv2d operands")
        n, c, h, wd, o, kh, kw = self.dims(x.shape, w.shape)
        w_in = w.shape[1] if self.layout == "NCHW" else w.shape[2]
        require(
            w_in == c, f"conv2d: {c} input channels but weights {w.shape} ({self.kernel_layout})"
        )
        if self.bias:
            require(types[2].shape == (o,), f"conv2d bias must be [{o}]")
        oh = window_out(h, kh, self.strides[0], self.padding[0])
        ow = window_out(wd, kw, self.strides[1], self.padding[1])
        shape = (n, o, oh, ow) if self.layout == "NCHW" else (n, oh, ow, o)
        return [TensorType(shape, "float32")]

    def name_parts(self) -> List[str]:
        return ["nn_conv2d", *epilogue_parts(self.bias, self.relu)]

    def output_names(self) -> List[str]:
        return [epilogue_output(f"conv2d_{self.layout.lower()}", self.bias, self.relu)]

    def graph_attrs(self) -> Dict[str, str]:
        return {"data_layout": self.layout, "kernel_layout": self.kernel_layout, "out_layout": ""}

    def padded_shape(self, x: Shape) -> Shape:
        ph, pw = self.padding
        if self.layout == "NCHW":
            return (x[0], x[1], x[2] + 2 * ph, x[3] + 2 * pw)
        return (x[0], x[1] + 2 * ph, x[2] + 2 * pw, x[3])

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        data = ins[0]
        if self.padding != (0, 0):
            data = emit_pad(
                body, ins[0], self.layout, self.padding, self.padded_shape(ins[0].shape)
            )
        if self.layout == "NCHW":
            self.emit_nchw(body, data, ins, outs[0])
        else:
            self.emit_nhwc(body, data, ins, outs[0])

    def emit_nchw(self, body: Body, data: Buffer, ins: Sequence[Buffer], out: Buffer) -> None:
        _, c, h, wd = data.shape
        o, _, kh, kw = ins[1].shape
        sh, sw = self.strides
        oh, ow = out.shape[2], out.shape[3]
        with nest(body, [("nn", out.shape[0]), ("ff", o), ("yy", oh), ("xx", ow)]) as (n, f, y, x):
            body.line("float acc = 0.000000e+00f;")
            with nest(body, [("rc", c), ("ry", kh), ("rx", kw)]) as (rc, ry, rx):
                src = index((n, c * h * wd), (rc, h * wd), (y, sh * wd), (ry, wd), (x, sw), (rx, 1))
                wgt = index((f, c * kh * kw), (rc, kh * kw), (ry, kw), (rx, 1))
                body.line(f"acc = (acc + ({data[src]} * {ins[1][wgt]}));")
            value = float_epilogue(body, "acc", ins[2][f] if self.bias else None, self.relu)
            body.line(f"{out[index((n, o * oh * ow), (f, oh * ow), (y, ow), (x, 1))]} = {value};")

    def emit_nhwc(self, body: Body, data: Buffer, ins: Sequence[Buffer], out: Buffer) -> None:
        _, h, wd, c = data.shape
        kh, kw, _, o = ins[1].shape
        sh, sw = self.strides
        oh, ow = out.shape[1], out.shape[2]
        with nest(body, [("nn", out.shape[0]), ("yy", oh), ("xx", ow), ("ff", o)]) as (n, y, x, f):
            body.line("float acc = 0.000000e+00f;")
            with nest(body, [("ry", kh), ("rx", kw), ("rc", c)]) as (ry, rx, rc):
                src = index(
                    (n, h * wd * c), (y, sh * wd * c), (ry, wd * c), (x, sw * c), (rx, c), (rc, 1)
                )
                wgt = index((ry, kw * c * o), (rx, c * o), (rc, o), (f, 1))
                body.line(f"acc = (acc + ({data[src]} * {ins[1][wgt]}));")
            value = float_epilogue(body, "acc", ins[2][f] if self.bias else None, self.relu)
            body.line(f"{out[index((n, oh * ow * o), (y, ow * o), (x, o), (f, 1))]} = {value};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x, w = arrays[0], arrays[1]
        bias = arrays[2] if self.bias else None
        if self.layout == "NCHW":
            acc = conv_nchw_accumulate(x, w, self.strides, self.padding)
            bias = None if bias is None else bias[None, :, None, None]
        else:
            acc = conv_nhwc_accumulate(x, w, self.strides, self.padding)
        return [reference_epilogue(acc, bias, self.relu)]


def emit_pad(
    body: Body, data: Buffer, layout: str, padding: Tuple[int, int], padded: Shape
) -> Buffer:
    """Copies ``data`` into a zero-padded temporary, as TVM's ``pad_temp`` stage does."""
    ph, pw = padding
    name = "pad_temp" if layout == "NCHW" else "PaddedInput"
    temp = body.scratch(name, data.dtype, math.prod(padded))
    h_axis = 2 if layout == "NCHW" else 1
    h, w = data.shape[h_axis], data.shape[h_axis + 1]
    dims = [(f"i{axis}", extent) for axis, extent in enumerate(padded)]
    with nest(body, dims) as idx:
        y, x = idx[h_axis], idx[h_axis + 1]
        inside = f"((({ph} <= {y}) && ({y} < {ph + h})) && (({pw} <= {x}) && ({x} < {pw + w})))"
        src_strides = row_major_strides(data.shape)
        offset = ph * src_strides[h_axis] + pw * src_strides[h_axis + 1]
        src = index(*zip(idx, src_strides), offset=-offset)
        dst = index(*zip(idx, row_major_strides(padded)))
        zero = "0.000000e+00f" if data.dtype == "float32" else f"({data.dtype}_t)0"
        body.line(f"{temp[dst]} = ({inside} ? {data[src]} : {zero});")
    return Buffer(temp.var, temp.dtype, padded)


def pad_reference(x: np.ndarray, layout: str, padding: Tuple[int, int]) -> np.ndarray:
    ph, pw = padding
    spec = (
        [(0, 0), (0, 0), (ph, ph), (pw, pw)]
        if layout == "NCHW"
        else [(0, 0), (ph, ph), (pw, pw), (0, 0)]
    )
    return np.pad(x, spec)


def conv_nchw_accumulate(
    x: np.ndarray, w: np.ndarray, strides: Tuple[int, int], padding: Tuple[int, int]
) -> np.ndarray:
    xp = pad_reference(x, "NCHW", padding)
    (n, c, h, wd), (o, _, kh, kw), (sh, sw) = xp.shape, w.shape, strides
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    acc = np.zeros((n, o, oh, ow), F32)
    for rc in range(c):
        for ry in range(kh):
            for rx in range(kw):
                patch = xp[
                    :, rc, ry : ry + sh * (oh - 1) + 1 : sh, rx : rx + sw * (ow - 1) + 1 : sw
                ]
                acc = (acc + patch[:, None] * w[None, :, rc, ry, rx, None, None]).astype(F32)
    return acc


def conv_nhwc_accumulate(
    x: np.ndarray, w: np.ndarray, strides: Tuple[int, int], padding: Tuple[int, int]
) -> np.ndarray:
    """NHWC conv accumulated in (ry, rx, rc) order; int inputs accumulate exactly in int64."""
    xp = pad_reference(x, "NHWC", padding)
    (n, h, wd, c), (kh, kw, _, o), (sh, sw) = xp.shape, w.shape, strides
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    exact = xp.dtype.kind == "i"
    acc = np.zeros((n, oh, ow, o), np.int64 if exact else F32)
    for ry in range(kh):
        for rx in range(kw):
            for rc in range(c):
                patch = xp[
                    :, ry : ry + sh * (oh - 1) + 1 : sh, rx : rx + sw * (ow - 1) + 1 : sw, rc
                ]
                term = patch[..., None] * w[ry, rx, rc][None, None, None, :]
                acc = acc + term if exact else (acc + term).astype(F32)
    return acc


# --- int8 ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QDense(Op):
    """int8 dense: acc = Σ (x - zp_in)·w + b (int32), requantized per tensor to int8.

    Inputs x int8 [N, K], w int8 [M, K], b int32 [M]. ``relu`` clips at the output zero point.
    """

    multiplier: int = 1 << 30
    shift: int = 0
    input_zero_point: int = 0
    output_zero_point: int = 0
    relu: bool = False

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x, w, b = types
        require_dtype(x, ["int8"], "qdense data")
        require_dtype(w, ["int8"], "qdense weights")
        require_dtype(b, ["int32"], "qdense bias")
        require(
            len(x.shape) == 2 and len(w.shape) == 2 and x.shape[1] == w.shape[1],
            "qdense: x [N, K], w [M, K]",
        )
        require(b.shape == (w.shape[0],), f"qdense bias must be [{w.shape[0]}]")
        check_requant(self.multiplier, self.shift)
        return [TensorType((x.shape[0], w.shape[0]), "int8")]

    def name_parts(self) -> List[str]:
        return ["nn_dense", "add", "fixed_point_multiply", "add", "clip", "cast"]

    def output_names(self) -> List[str]:
        return ["T_cast"]

    @property
    def low(self) -> int:
        return self.output_zero_point if self.relu else -128

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w, b = ins
        (n, k), m = x.shape, w.shape[0]
        zp = self.input_zero_point
        with nest(body, [("i", n), ("j", m)]) as (i, j):
            body.line("int32_t acc = 0;")
            with body.loop("k", k):
                xv = f"(((int32_t){x[index((i, k), ('k', 1))]}){offset(-zp)})"
                body.line(f"acc = (acc + ({xv} * ((int32_t){w[index((j, k), ('k', 1))]})));")
            value = requantize_c(
                f"(acc + {b[j]})", str(self.multiplier), str(self.shift), self.output_zero_point
            )
            result = emit_clip_int8(body, value, self.low)
            body.line(f"{outs[0][index((i, m), (j, 1))]} = {result};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x, w, b = (a.astype(np.int64) for a in arrays)
        acc = (x - self.input_zero_point) @ w.T + b
        return [
            requantize(
                acc,
                np.int64(self.multiplier),
                np.int64(self.shift),
                self.output_zero_point,
                self.low,
            )
        ]


@dataclass(frozen=True)
class QConv2D(Op):
    """int8 NHWC conv2d (weights HWIO int8, bias int32 [O]) with int32 accumulation.

    Requantization is per tensor (``per_channel`` False: multiplier/shift are C constants)
    or per output channel (two extra int32 [O] inputs: multipliers, shifts). Takes two
    scratch buffers (the widened padded input and the accumulators), from the workspace
    when they are large — freed in LIFO order like TVM's code.
    """

    strides: Tuple[int, int] = (1, 1)
    padding: Tuple[int, int] = (0, 0)
    per_channel: bool = False
    multiplier: int = 1 << 30
    shift: int = 0
    input_zero_point: int = 0
    output_zero_point: int = 0
    relu: bool = False

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x, w, b = types[0], types[1], types[2]
        require_dtype(x, ["int8"], "qconv2d data")
        require_dtype(w, ["int8"], "qconv2d weights")
        require_dtype(b, ["int32"], "qconv2d bias")
        require(
            len(x.shape) == 4 and len(w.shape) == 4 and w.shape[2] == x.shape[3],
            "qconv2d: x NHWC, w HWIO",
        )
        o = w.shape[3]
        require(b.shape == (o,), f"qconv2d bias must be [{o}]")
        if self.per_channel:
            for t in types[3:5]:
                require(
                    t.shape == (o,) and t.dtype == "int32",
                    f"per-channel requant params must be int32 [{o}]",
                )
        else:
            check_requant(self.multiplier, self.shift)
        oh = window_out(x.shape[1], w.shape[0], self.strides[0], self.padding[0])
        ow = window_out(x.shape[2], w.shape[1], self.strides[1], self.padding[1])
        return [TensorType((x.shape[0], oh, ow, o), "int8")]

    def name_parts(self) -> List[str]:
        multiply = "fixed_point_multiply_per_axis" if self.per_channel else "fixed_point_multiply"
        return ["nn_conv2d", "add", multiply, "add", "clip", "cast"]

    def output_names(self) -> List[str]:
        return ["T_cast"]

    def graph_attrs(self) -> Dict[str, str]:
        return {"data_layout": "NHWC", "kernel_layout": "HWIO", "out_layout": ""}

    @property
    def low(self) -> int:
        return self.output_zero_point if self.relu else -128

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w, b, out = ins[0], ins[1], ins[2], outs[0]
        n, h, wd, c = x.shape
        ph, pw = self.padding
        padded = (n, h + 2 * ph, wd + 2 * pw, c)
        temp = self.emit_widen(body, x, padded)
        acc = body.scratch("conv2d_nhwc", "int32", out.size)
        self.emit_accumulate(body, temp, w, acc, out.shape)
        _, oh, ow, o = out.shape
        with nest(body, [("ax0", n), ("ax1", oh), ("ax2", ow), ("ax3", o)]) as (i0, i1, i2, i3):
            at = index((i0, oh * ow * o), (i1, ow * o), (i2, o), (i3, 1))
            mult, shift = (
                (ins[3][i3], ins[4][i3])
                if self.per_channel
                else (str(self.multiplier), str(self.shift))
            )
            value = requantize_c(f"({acc[at]} + {b[i3]})", mult, shift, self.output_zero_point)
            result = emit_clip_int8(body, value, self.low)
            body.line(f"{out[at]} = {result};")

    def emit_widen(self, body: Body, x: Buffer, padded: Shape) -> Buffer:
        """int16 copy of x minus the input zero point, zero-padded (TVM's ``pad_temp``)."""
        ph, pw = self.padding
        n, h, wd, c = x.shape
        temp = body.scratch("pad_temp", "int16", math.prod(padded))
        with nest(body, [("i0", n), ("i1", padded[1]), ("i2", padded[2]), ("i3", c)]) as (
            i0,
            i1,
            i2,
            i3,
        ):
            inside = (
                f"((({ph} <= {i1}) && ({i1} < {ph + h})) && (({pw} <= {i2}) && ({i2} < {pw + wd})))"
            )
            src = index(
                (i0, h * wd * c), (i1, wd * c), (i2, c), (i3, 1), offset=-(ph * wd + pw) * c
            )
            dst = index((i0, padded[1] * padded[2] * c), (i1, padded[2] * c), (i2, c), (i3, 1))
            value = f"(int16_t)(((int16_t){x[src]}){offset(-self.input_zero_point)})"
            body.line(f"{temp[dst]} = ({inside} ? {value} : (int16_t)0);")
        return Buffer(temp.var, "int16", padded)

    def emit_accumulate(self, body: Body, data: Buffer, w: Buffer, acc: Buffer, out: Shape) -> None:
        _, h, wd, c = data.shape
        kh, kw, _, o = w.shape
        sh, sw = self.strides
        _, oh, ow, _ = out
        with nest(body, [("nn", out[0]), ("yy", oh), ("xx", ow), ("ff", o)]) as (n, y, x, f):
            at = index((n, oh * ow * o), (y, ow * o), (x, o), (f, 1))
            body.line(f"{acc[at]} = 0;")
            with nest(body, [("ry", kh), ("rx", kw), ("rc", c)]) as (ry, rx, rc):
                src = index(
                    (n, h * wd * c), (y, sh * wd * c), (ry, wd * c), (x, sw * c), (rx, c), (rc, 1)
                )
                wgt = index((ry, kw * c * o), (rx, c * o), (rc, o), (f, 1))
                body.line(
                    f"{acc[at]} = ({acc[at]} + (((int32_t){data[src]}) * ((int32_t){w[wgt]})));"
                )

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x = arrays[0].astype(np.int64) - self.input_zero_point
        acc = conv_nhwc_accumulate(x, arrays[1].astype(np.int64), self.strides, self.padding)
        acc = acc + arrays[2].astype(np.int64)
        if self.per_channel:
            mult, shift = arrays[3].astype(np.int64), arrays[4].astype(np.int64)
        else:
            mult, shift = np.int64(self.multiplier), np.int64(self.shift)
        return [requantize(acc, mult, shift, self.output_zero_point, self.low)]


# --- element-wise and layout ---------------------------------------------------------------


@dataclass(frozen=True)
class BiasAdd(Op):
    """x + b along ``axis`` (Relay's nn.bias_add), float32."""

    axis: int = 1

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x, b = types
        require(
            0 <= self.axis < len(x.shape), f"bias_add axis {self.axis} out of range for {x.shape}"
        )
        require(b.shape == (x.shape[self.axis],), f"bias must be [{x.shape[self.axis]}]")
        require_dtype(x, ["float32"], "bias_add data")
        require_dtype(b, ["float32"], "bias")
        return [x]

    def name_parts(self) -> List[str]:
        return ["nn_bias_add"]

    def output_names(self) -> List[str]:
        return ["T_add"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, b = ins
        outer = math.prod(x.shape[: self.axis])
        channels, inner = x.shape[self.axis], math.prod(x.shape[self.axis + 1 :])
        with nest(body, [("ax0", outer), ("ax1", channels), ("ax2", inner)]) as (i0, i1, i2):
            at = index((i0, channels * inner), (i1, inner), (i2, 1))
            body.line(f"{outs[0][at]} = ({x[at]} + {b[i1]});")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x, b = arrays
        shape = [1] * x.ndim
        shape[self.axis] = b.shape[0]
        return [(x + b.reshape(shape)).astype(F32)]


@dataclass(frozen=True)
class Relu(Op):
    """max(x, 0) for float32 or int8."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require_dtype(types[0], ["float32", "int8", "int32"], "relu data")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["nn_relu"]

    def output_names(self) -> List[str]:
        return ["T_relu"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        zero = "0.000000e+00f" if ins[0].dtype == "float32" else "0"
        var = flat_loop_var(len(ins[0].shape))
        with nest(body, [(var, ins[0].size)]) as (i,):
            cast = "" if ins[0].dtype == "float32" else f"({ins[0].dtype}_t)"
            body.line(f"{outs[0][i]} = {cast}{relu_expr(ins[0][i], zero)};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x = arrays[0]
        return [np.where(x > 0, x, 0).astype(x.dtype)]


BINARY_SYMBOLS = {"add": "+", "subtract": "-", "multiply": "*"}


@dataclass(frozen=True)
class Binary(Op):
    """Element-wise add/subtract/multiply with numpy broadcasting (a ``[]`` scalar too)."""

    op: str = "add"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        a, b = types
        require(self.op in BINARY_SYMBOLS, f"unknown binary op {self.op!r}")
        require(a.dtype == b.dtype, f"{self.op}: dtypes {a.dtype} and {b.dtype} differ")
        require_dtype(a, ["float32", "int32"], f"{self.op} operands")
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(
                f"{self.op}: shapes {a.shape} and {b.shape} do not broadcast"
            ) from None
        return [TensorType(tuple(int(d) for d in shape), a.dtype)]

    def name_parts(self) -> List[str]:
        return [self.op]

    def output_names(self) -> List[str]:
        return [f"T_{self.op}"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        out, symbol = outs[0], BINARY_SYMBOLS[self.op]
        if all(buf.shape == out.shape for buf in ins):
            with nest(body, [(flat_loop_var(len(out.shape)), out.size)]) as (i,):
                body.line(f"{out[i]} = ({ins[0][i]} {symbol} {ins[1][i]});")
            return
        dims = [(f"ax{axis}", extent) for axis, extent in enumerate(out.shape)]
        with nest(body, dims) as idx:
            a, b = (broadcast_index(idx, buf.shape, out.shape) for buf in ins)
            at = index(*zip(idx, row_major_strides(out.shape)))
            body.line(f"{out[at]} = ({ins[0][a]} {symbol} {ins[1][b]});")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        a, b = arrays
        result = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}[self.op](a, b)
        return [np.asarray(result).astype(a.dtype)]


def broadcast_index(idx: Sequence[str], shape: Shape, out: Shape) -> str:
    """Index into a tensor broadcast to ``out``: size-1 and missing dimensions get stride 0."""
    lead = len(out) - len(shape)
    strides = row_major_strides(shape)
    terms = [(idx[lead + axis], strides[axis]) for axis in range(len(shape)) if shape[axis] != 1]
    return index(*terms)


@dataclass(frozen=True)
class AddN(Op):
    """a + b + c + ... of same-shaped float32 tensors, one fused function (many arguments)."""

    count: int = 2

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(len(types) == self.count >= 2, "add_n needs its count (at least 2) of tensors")
        require(all(t == types[0] for t in types), "add_n tensors must share shape and dtype")
        require_dtype(types[0], ["float32"], "add_n operands")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["add"] * (self.count - 1)

    def output_names(self) -> List[str]:
        return ["T_add"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        with nest(body, [(flat_loop_var(len(ins[0].shape)), ins[0].size)]) as (i,):
            total = ins[0][i]
            for buf in ins[1:]:
                total = f"({total} + {buf[i]})"
            body.line(f"{outs[0][i]} = {total};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        total = arrays[0]
        for array in arrays[1:]:
            total = (total + array).astype(F32)
        return [total]


ELEMENTWISE_STEPS = (
    "add",
    "subtract",
    "multiply",
    "maximum",
    "minimum",
    "nn_relu",
    "tanh",
    "sigmoid",
    "exp",
)
Step = Tuple[str, float]


@dataclass(frozen=True)
class Elementwise(Op):
    """A chain of unary steps fused into one function, e.g. add 1.5 → tanh → multiply 2."""

    steps: Tuple[Step, ...] = ()

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(bool(self.steps), "an element-wise chain needs at least one step")
        for name, _ in self.steps:
            require(name in ELEMENTWISE_STEPS, f"unknown element-wise step {name!r}")
        require_dtype(types[0], ["float32"], "element-wise data")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return [name for name, _ in self.steps]

    def output_names(self) -> List[str]:
        last = self.steps[-1][0]
        return ["T_relu" if last == "nn_relu" else f"T_{last}"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        with nest(body, [(flat_loop_var(len(ins[0].shape)), ins[0].size)]) as (i,):
            body.line(f"float v_ = {ins[0][i]};")
            for name, constant in self.steps:
                body.line(f"v_ = {step_c(name, float_literal(constant))};")
            body.line(f"{outs[0][i]} = v_;")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        value = arrays[0].astype(F32)
        for name, constant in self.steps:
            value = step_reference(name, value, F32(constant))
        return [value]


def step_c(name: str, c: str) -> str:
    return {
        "add": f"(v_ + {c})",
        "subtract": f"(v_ - {c})",
        "multiply": f"(v_ * {c})",
        "maximum": f"((v_) > ({c}) ? (v_) : ({c}))",
        "minimum": f"((v_) < ({c}) ? (v_) : ({c}))",
        "nn_relu": relu_expr("v_"),
        "tanh": "tanhf(v_)",
        "sigmoid": "(1.000000e+00f / (1.000000e+00f + expf((0.000000e+00f - v_))))",
        "exp": "expf(v_)",
    }[name]


def step_reference(name: str, v: np.ndarray, c: np.float32) -> np.ndarray:
    one = F32(1)
    result = {
        "add": lambda: v + c,
        "subtract": lambda: v - c,
        "multiply": lambda: v * c,
        "maximum": lambda: np.where(v > c, v, c),
        "minimum": lambda: np.where(v < c, v, c),
        "nn_relu": lambda: np.where(v > 0, v, F32(0)),
        "tanh": lambda: np.tanh(v),
        "sigmoid": lambda: one / (one + np.exp(F32(0) - v)),
        "exp": lambda: np.exp(v),
    }[name]()
    return np.asarray(result).astype(F32)


@dataclass(frozen=True)
class Pool2D(Op):
    """Max or average pooling without padding, NCHW or NHWC (max also for int8)."""

    mode: str = "max"
    pool: Tuple[int, int] = (2, 2)
    strides: Tuple[int, int] = (2, 2)
    layout: str = "NCHW"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(self.mode in ("max", "avg"), f"pool mode {self.mode!r} unsupported")
        require(
            self.layout in ("NCHW", "NHWC") and len(x.shape) == 4, "pool2d needs 4-d NCHW/NHWC data"
        )
        require_dtype(
            x,
            ["float32"] if self.mode == "avg" else ["float32", "int8"],
            f"{self.mode}_pool2d data",
        )
        h_axis = 2 if self.layout == "NCHW" else 1
        shape = list(x.shape)
        for axis, (k, s) in enumerate(zip(self.pool, self.strides)):
            shape[h_axis + axis] = window_out(x.shape[h_axis + axis], k, s, 0)
        return [TensorType(tuple(shape), x.dtype)]

    def name_parts(self) -> List[str]:
        return [f"nn_{self.mode}_pool2d"]

    def output_names(self) -> List[str]:
        return [f"pool_{self.mode}"]

    def graph_attrs(self) -> Dict[str, str]:
        return {"out_layout": "", "layout": self.layout}

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        h_axis = 2 if self.layout == "NCHW" else 1
        xs, out_strides = row_major_strides(x.shape), row_major_strides(out.shape)
        ctype = "float" if x.dtype == "float32" else "int8_t"
        init = {
            "max": float_literal(FLOAT_LOWEST) if x.dtype == "float32" else "(int8_t)(-128)",
            "avg": "0.000000e+00f",
        }[self.mode]
        dims = [(f"ax{axis}", extent) for axis, extent in enumerate(out.shape)]
        with nest(body, dims) as idx:
            body.line(f"{ctype} acc = {init};")
            with nest(body, [("rv0", self.pool[0]), ("rv1", self.pool[1])]) as (r0, r1):
                terms = [
                    (
                        var,
                        xs[axis]
                        * (self.strides[axis - h_axis] if axis in (h_axis, h_axis + 1) else 1),
                    )
                    for axis, var in enumerate(idx)
                ]
                src = index(*terms, (r0, xs[h_axis]), (r1, xs[h_axis + 1]))
                if self.mode == "max":
                    body.line(f"{ctype} v_ = {x[src]};")
                    body.line("acc = ((acc) > (v_) ? (acc) : (v_));")
                else:
                    body.line(f"acc = (acc + {x[src]});")
            value = (
                "acc"
                if self.mode == "max"
                else f"(acc / {float_literal(self.pool[0] * self.pool[1])})"
            )
            body.line(f"{out[index(*zip(idx, out_strides))]} = {value};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x = arrays[0]
        if self.layout == "NHWC":
            x = x.transpose(0, 3, 1, 2)
        (kh, kw), (sh, sw) = self.pool, self.strides
        oh, ow = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
        windows = [
            x[:, :, r0 : r0 + sh * (oh - 1) + 1 : sh, r1 : r1 + sw * (ow - 1) + 1 : sw]
            for r0 in range(kh)
            for r1 in range(kw)
        ]
        if self.mode == "max":
            result = windows[0]
            for window in windows[1:]:
                result = np.maximum(result, window)
        else:
            total = np.zeros_like(windows[0], dtype=F32)
            for window in windows:
                total = (total + window).astype(F32)
            result = (total / F32(kh * kw)).astype(F32)
        if self.layout == "NHWC":
            result = result.transpose(0, 2, 3, 1)
        return [np.ascontiguousarray(result)]


@dataclass(frozen=True)
class Softmax(Op):
    """Softmax over the last axis, float32 (expf, like TVM's kernel)."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(len(types[0].shape) >= 1, "softmax needs at least one dimension")
        require_dtype(types[0], ["float32"], "softmax data")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["nn_softmax"]

    def output_names(self) -> List[str]:
        return ["T_softmax_norm"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        classes = x.shape[-1]
        rows = x.size // classes
        exp = body.scratch("T_softmax_exp", "float32", classes)
        with nest(body, [("i0", rows)]) as (row,):
            body.line(f"float T_softmax_maxelem = {float_literal(FLOAT_LOWEST)};")
            with body.loop("k", classes):
                body.line(f"float v_ = {x[index((row, classes), ('k', 1))]};")
                body.line(
                    "T_softmax_maxelem = ((T_softmax_maxelem) > (v_) ? (T_softmax_maxelem) : (v_));"
                )
            with body.loop("i1", classes):
                at = index((row, classes), ("i1", 1))
                body.line(f"{exp['i1']} = expf(({x[at]} - T_softmax_maxelem));")
            body.line("float T_softmax_expsum = 0.000000e+00f;")
            with body.loop("k_1", classes):
                body.line(f"T_softmax_expsum = (T_softmax_expsum + {exp['k_1']});")
            with body.loop("i1_1", classes):
                at = index((row, classes), ("i1_1", 1))
                body.line(f"{out[at]} = ({exp['i1_1']} / T_softmax_expsum);")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x = arrays[0]
        peak = x.max(axis=-1, keepdims=True)
        exp = np.exp((x - peak).astype(F32)).astype(F32)
        total = np.zeros(x.shape[:-1] + (1,), F32)
        for k in range(x.shape[-1]):
            total = (total + exp[..., k : k + 1]).astype(F32)
        return [(exp / total).astype(F32)]


@dataclass(frozen=True)
class Sum(Op):
    """Sum of every element into a scalar (shape ``[]``), float32, in index order."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require_dtype(types[0], ["float32"], "sum data")
        return [TensorType((), "float32")]

    def name_parts(self) -> List[str]:
        return ["sum"]

    def output_names(self) -> List[str]:
        return ["x_red"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        body.line("float x_red_rf = 0.000000e+00f;")
        with nest(body, [("k0", ins[0].size)]) as (k,):
            body.line(f"x_red_rf = (x_red_rf + {ins[0][k]});")
        body.line(f"{outs[0]['0']} = x_red_rf;")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        total = F32(0)
        for value in arrays[0].reshape(-1):
            total = F32(total + value)
        return [np.array(total, dtype=F32)]


@dataclass(frozen=True)
class Split(Op):
    """Split into ``sections`` equal parts along ``axis``: one function, several outputs."""

    sections: int = 2
    axis: int = 0

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(0 <= self.axis < len(x.shape), f"split axis {self.axis} out of range for {x.shape}")
        require(
            self.sections >= 2 and x.shape[self.axis] % self.sections == 0,
            f"cannot split extent {x.shape[self.axis]} into {self.sections} equal parts",
        )
        shape = list(x.shape)
        shape[self.axis] //= self.sections
        return [TensorType(tuple(shape), x.dtype)] * self.sections

    def name_parts(self) -> List[str]:
        return ["split"]

    def output_names(self) -> List[str]:
        return [f"T_split_{i}" for i in range(self.sections)]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x = ins[0]
        outer = math.prod(x.shape[: self.axis])
        extent, inner = x.shape[self.axis], math.prod(x.shape[self.axis + 1 :])
        part = extent // self.sections
        for number, out in enumerate(outs):
            suffix = "" if number == 0 else f"_{number}"
            dims = [(f"ax0{suffix}", outer), (f"ax1{suffix}", part), (f"ax2{suffix}", inner)]
            with nest(body, dims) as (i0, i1, i2):
                src = index(
                    (i0, extent * inner), (i1, inner), (i2, 1), offset=number * part * inner
                )
                body.line(f"{out[index((i0, part * inner), (i1, inner), (i2, 1))]} = {x[src]};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return [np.ascontiguousarray(a) for a in np.split(arrays[0], self.sections, axis=self.axis)]


@dataclass(frozen=True)
class FailIf(Op):
    """Copies x, but returns -1 (operator failure) when the int32 scalar flag is non-zero."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(types[1] == TensorType((), "int32"), "fail_if flag must be an int32 scalar []")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["fail_if_flag"]

    def output_names(self) -> List[str]:
        return ["T_identity"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        with body.block(f"if ({ins[1]['0']} != 0)"):
            body.line("return -1;")
        with nest(body, [(flat_loop_var(len(ins[0].shape)), ins[0].size)]) as (i,):
            body.line(f"{outs[0][i]} = {ins[0][i]};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        if int(arrays[1]) != 0:
            raise OperatorFailure("fail_if: the flag is set, the operator returns -1")
        return [arrays[0].copy()]


@dataclass(frozen=True)
class Reshape(Op):
    """A reshape: graph op ``__nop`` (the output is a view of the input's storage)."""

    shape: Shape = ()
    kind = "nop"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        shape = list(self.shape)
        if shape.count(-1) == 1:
            known = math.prod(d for d in shape if d != -1)
            shape[shape.index(-1)] = x.size // max(known, 1)
        require(math.prod(shape) == x.size, f"cannot reshape {x.shape} to {self.shape}")
        return [TensorType(tuple(shape), x.dtype)]

    def name_parts(self) -> List[str]:
        return ["reshape"]

    def output_names(self) -> List[str]:
        return ["T_reshape"]

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return [arrays[0].reshape(self.infer([TensorType(arrays[0].shape, "")])[0].shape)]


@dataclass(frozen=True)
class Copy(Op):
    """A device copy: graph op ``__copy`` (the executor copies input to output)."""

    kind = "copy"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["device_copy"]

    def output_names(self) -> List[str]:
        return ["T_copy"]

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return [arrays[0].copy()]


@dataclass(frozen=True)
class ExternCall(Op):
    """An operator whose work is an external C function, e.g. from an external dependency.

    The function is declared (block scope, so each operator stays self-contained) and
    called as ``int32_t symbol(const T0* in0, ..., T* out, int32_t out_elements)`` on the
    tensors' data; a non-zero return makes the operator return -1. ``reference_fn(*arrays)``
    is the caller's numpy model of what the function computes.
    """

    symbol: str
    out_type: Optional[TensorType] = None  # None: the first input's shape and dtype
    reference_fn: Optional[Callable[..., np.ndarray]] = field(
        default=None, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        require(
            bool(re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", self.symbol)),
            f"extern symbol {self.symbol!r} is not a C identifier",
        )
        require(
            not self.symbol.startswith(("tvmgen_", "TVM", "__tvm")),
            f"extern symbol {self.symbol!r} would collide with TVM's generated names",
        )

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(len(types) >= 1, f"extern call {self.symbol} needs at least one input")
        out = self.out_type or types[0]
        for t in [*types, out]:
            require_dtype(t, tuple(C_TYPES), f"extern call {self.symbol} operand")
        require(out.size < 2**31, f"extern call {self.symbol}: output too large for int32_t")
        return [out]

    def name_parts(self) -> List[str]:
        return ["extern", self.symbol]

    def output_names(self) -> List[str]:
        return ["T_extern"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        out = outs[0]
        params = [f"const {c_type(b.dtype)}*" for b in ins] + [f"{c_type(out.dtype)}*", "int32_t"]
        args = [f"(const {c_type(b.dtype)}*){b.var}" for b in ins]
        args += [f"({c_type(out.dtype)}*){out.var}", str(out.size)]
        body.line(f"extern int32_t {self.symbol}({', '.join(params)});")
        with body.block(f"if ({self.symbol}({', '.join(args)}) != 0)"):
            body.line("return -1;")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        if self.reference_fn is None:
            raise ValueError(f"extern call {self.symbol} has no numpy reference")
        want = self.infer([TensorType(a.shape, str(a.dtype)) for a in arrays])[0]
        result = np.asarray(self.reference_fn(*arrays))
        require(
            result.shape == want.shape,
            f"reference of {self.symbol} gave shape {result.shape}, want {want.shape}",
        )
        return [np.ascontiguousarray(result.astype(want.dtype, copy=False))]
