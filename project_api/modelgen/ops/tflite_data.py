"""TFLite operators that move, pad, (de)quantize or map values one by one, with LiteRT's
reference arithmetic: PAD, CONCATENATION, QUANTIZE, DEQUANTIZE, and LOGISTIC / TANH (int8
through a 256-entry table worked out at compile time, float32 through the C library).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer, c_type, float_literal, index
from .base import Op, TensorType, nest, require, row_major_strides
from .tflite_arith import Requant


def _reference_is_litert(arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
    raise NotImplementedError("LiteRT's reference kernels are this operator's reference")


@dataclass(frozen=True)
class TflPad(Op):
    """PAD: ``pads[axis] = (before, after)``; the padding holds ``value`` (int8: the output's
    zero point; float32: 0)."""

    pads: Tuple[Tuple[int, int], ...]
    value: float = 0.0

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(len(self.pads) == len(x.shape), "pad: one (before, after) per axis")
        require(all(b >= 0 and a >= 0 for b, a in self.pads), "pad: negative padding")
        shape = tuple(d + b + a for d, (b, a) in zip(x.shape, self.pads))
        return [TensorType(shape, x.dtype)]

    def name_parts(self) -> List[str]:
        return ["tfl_pad"]

    def output_names(self) -> List[str]:
        return ["T_pad"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        shape = out.shape or (1,)
        src_strides = row_major_strides(x.shape or (1,))
        dst_strides = row_major_strides(shape)
        dims = [(f"i{k}", extent) for k, extent in enumerate(shape)]
        fill = str(int(self.value)) if x.dtype == "int8" else float_literal(self.value)
        with nest(body, dims) as idx:
            inside = " && ".join(
                f"({v} >= {b} && {v} < {b + d})"
                for v, (b, _), d in zip(idx, self.pads, x.shape)
                if b or _
            )
            offset = -sum(b * s for (b, _), s in zip(self.pads, src_strides))
            src = x[index(*zip(idx, src_strides), offset=offset)]
            dst = out[index(*zip(idx, dst_strides))]
            if inside:
                body.line(f"{dst} = ({inside}) ? {src} : ({c_type(x.dtype)}){fill};")
            else:
                body.line(f"{dst} = {src};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return _reference_is_litert(arrays)


@dataclass(frozen=True)
class TflConcat(Op):
    """CONCATENATION along ``axis`` of tensors with one quantization: copies."""

    axis: int

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        first = types[0]
        rank = len(first.shape)
        require(0 <= self.axis < rank, "concatenation: axis out of range")
        for t in types[1:]:
            require(
                t.dtype == first.dtype
                and len(t.shape) == rank
                and all(
                    a == b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != self.axis
                ),
                "concatenation: shapes differ off the axis",
            )
        shape = list(first.shape)
        shape[self.axis] = sum(t.shape[self.axis] for t in types)
        return [TensorType(tuple(shape), first.dtype)]

    def name_parts(self) -> List[str]:
        return ["tfl_concatenation"]

    def output_names(self) -> List[str]:
        return ["T_concat"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        out = outs[0]
        outer = math.prod(out.shape[: self.axis])
        row = math.prod(out.shape[self.axis :])
        start = 0
        for number, x in enumerate(ins):
            inner = math.prod(x.shape[self.axis :])
            with nest(body, [(f"o{number}", outer), (f"j{number}", inner)]) as (o, j):
                src = x[index((o, inner), (j, 1))]
                body.line(f"{out[index((o, row), (j, 1), offset=start)]} = {src};")
            start += inner

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return _reference_is_litert(arrays)


@dataclass(frozen=True)
class TflQuantize(Op):
    """QUANTIZE: float32 → int8 (``round(x / scale) + zero_point`` in float32, clamped), or
    int8 → int8 (``(x - zp_in)`` requantized to the output's scale)."""

    scale: float
    zero_point: int
    input_zero_point: int = 0
    requant: Requant = Requant((1 << 30,), (0,))

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        if types[0].dtype == "int8":
            self.requant.check()
        return [TensorType(types[0].shape, "int8")]

    def name_parts(self) -> List[str]:
        return ["tfl_quantize"]

    def output_names(self) -> List[str]:
        return ["T_quantize"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        with nest(body, [("i", x.size)]) as (i,):
            if x.dtype == "int8":
                body.line(f"int32_t v_ = (int32_t){x[i]} - ({self.input_zero_point});")
                value = self.requant.emit(body, "v_", "0")
                body.line(f"int32_t u_ = {value} + ({self.zero_point});")
            else:
                body.line(f"float r_ = roundf({x[i]} / {float_literal(self.scale)});")
                # clamped as a float first: a value beyond int32 saturates (no undefined cast)
                body.line("r_ = r_ < -2147483520.0f ? -2147483520.0f : r_;")
                body.line("r_ = r_ > 2147483520.0f ? 2147483520.0f : r_;")
                body.line(f"int32_t u_ = (int32_t)r_ + ({self.zero_point});")
            body.line(f"{out[i]} = (int8_t)(u_ < -128 ? -128 : (u_ > 127 ? 127 : u_));")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return _reference_is_litert(arrays)


@dataclass(frozen=True)
class TflDequantize(Op):
    """DEQUANTIZE int8 → float32: ``(float)(scale · (x - zero_point))`` with the scale in
    double, as LiteRT's reference kernel computes it."""

    scale: float
    zero_point: int

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(types[0].dtype == "int8", "dequantize: int8 input")
        return [TensorType(types[0].shape, "float32")]

    def name_parts(self) -> List[str]:
        return ["tfl_dequantize"]

    def output_names(self) -> List[str]:
        return ["T_dequantize"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        scale = f"{float(self.scale)!r}"
        with nest(body, [("i", x.size)]) as (i,):
            body.line(
                f"{out[i]} = (float)({scale} * (double)((int32_t){x[i]} - ({self.zero_point})));"
            )

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return _reference_is_litert(arrays)


@dataclass(frozen=True)
class TflUnary(Op):
    """LOGISTIC or TANH: int8 through ``table`` (256 int8 values, indexed by x + 128, worked
    out at compile time), float32 through ``expf`` / ``tanhf``."""

    function: str  # "logistic" | "tanh"
    table: Tuple[int, ...] = ()

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        if types[0].dtype == "int8":
            require(len(self.table) == 256, "int8 LOGISTIC/TANH: a table of 256 values")
        return [TensorType(types[0].shape, types[0].dtype)]

    def name_parts(self) -> List[str]:
        return [f"tfl_{self.function}"]

    def output_names(self) -> List[str]:
        return [f"T_{self.function}"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        if x.dtype == "int8":
            values = ", ".join(str(int(v)) for v in self.table)
            body.line(f"static const int8_t lut_[256] = {{{values}}};")
        with nest(body, [("i", x.size)]) as (i,):
            if x.dtype == "int8":
                body.line(f"{out[i]} = lut_[(int32_t){x[i]} + 128];")
            elif self.function == "tanh":
                body.line(f"{out[i]} = tanhf({x[i]});")
            else:
                body.line(f"float v_ = {x[i]};")
                body.line(
                    "float r_ = v_ > 1.66190472e+01f ? 1.0f : (v_ < -9.0f ? expf(v_) "
                    ": 1.0f / (1.0f + expf(-v_)));"
                )
                body.line(f"{out[i]} = r_;")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return _reference_is_litert(arrays)


@dataclass(frozen=True)
class TflMean(Op):
    """MEAN over ``axes``. float32: the float sum in row-major order over the count. int8:
    the sum of ``x - input_zero_point`` requantized with the multiplier already divided by
    the count (LiteRT's int8 mean over the two spatial axes), plus the output zero point."""

    axes: Tuple[int, ...]
    out_shape: Tuple[int, ...]
    input_zero_point: int = 0
    output_zero_point: int = 0
    requant: Requant = Requant((1 << 30,), (0,))

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(all(0 <= a < len(x.shape) for a in self.axes), "mean: axis out of range")
        kept = [d for k, d in enumerate(x.shape) if k not in self.axes]
        require(math.prod(kept) == math.prod(self.out_shape), "mean: output shape")
        if x.dtype == "int8":
            self.requant.check()
        return [TensorType(self.out_shape, x.dtype)]

    def name_parts(self) -> List[str]:
        return ["tfl_mean"]

    def output_names(self) -> List[str]:
        return ["T_mean"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        strides = row_major_strides(x.shape)
        kept = [k for k in range(len(x.shape)) if k not in self.axes]
        count = math.prod(x.shape[k] for k in self.axes)
        outer = [(f"o{k}", x.shape[k]) for k in kept]
        inner = [(f"r{k}", x.shape[k]) for k in self.axes]
        quantized = x.dtype == "int8"
        with nest(body, outer) as o_idx:
            body.line("int32_t acc = 0;" if quantized else "float acc = 0.000000e+00f;")
            with nest(body, inner) as r_idx:
                terms = [(v, strides[k]) for v, k in zip(o_idx, kept)]
                terms += [(v, strides[k]) for v, k in zip(r_idx, self.axes)]
                value = x[index(*terms)]
                if quantized:
                    body.line(f"acc += (int32_t){value} - ({self.input_zero_point});")
                else:
                    body.line(f"acc += {value};")
            out_strides = row_major_strides(tuple(x.shape[k] for k in kept))
            at = index(*zip(o_idx, out_strides))
            if quantized:
                q = self.requant.emit(body, "acc", "0")
                body.line(f"int32_t u_ = {q} + ({self.output_zero_point});")
                body.line(f"{out[at]} = (int8_t)(u_ < -128 ? -128 : (u_ > 127 ? 127 : u_));")
            else:
                body.line(f"{out[at]} = acc / {float_literal(float(count))};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return _reference_is_litert(arrays)
