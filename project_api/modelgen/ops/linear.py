"""Float dense and conv2d (with padding), their C and their references."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer, index
from .base import (
    F32,
    Op,
    Shape,
    TensorType,
    epilogue_output,
    epilogue_parts,
    float_epilogue,
    nest,
    reference_epilogue,
    require,
    require_dtype,
    row_major_strides,
    window_out,
)


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
