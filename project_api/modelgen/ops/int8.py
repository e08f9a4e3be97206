"""int8 dense and conv2d with per-channel requantization."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer, index
from .base import (
    Op,
    Shape,
    TensorType,
    nest,
    require,
    require_dtype,
    window_out,
)
from .linear import conv_nhwc_accumulate
from .quant import (
    check_requant,
    emit_clip_int8,
    offset,
    requantize,
    requantize_c,
)


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
