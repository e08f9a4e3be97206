"""Operators with TFLite's reference arithmetic (LiteRT's reference kernels), int8 and float32.

``compile`` lowers a ``.tflite`` onto these. Everything a kernel needs that the model fixes
is a C constant: shapes, strides, paddings, zero points, activation bounds, and the
requantization's multipliers and shifts (worked out at compile time, per channel). The
accumulation is exact int32 (int8) or float32 in the reference kernels' loop order.

Requantization in LiteRT's three roundings, the clamp and the hybrid kernels' input
quantization are in :mod:`.tflite_arith`; an operator carries its rounding, so a kernel can
be swapped per operator.

These operators have no numpy reference: LiteRT is their oracle (tests/test_compile_ops.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from ..cgen import Body, Buffer, c_type, float_literal
from .base import Op, TensorType, nest, require
from .tflite_arith import Activation, Quant, emit_hybrid_mac, emit_quantize_batch
from .tflite_fast import (
    FORMS,
    emit_conv,
    emit_fully_connected,
    pointwise_in_place,
    pointwise_key,
)
from .tflite_fast_depthwise import depthwise_in_place, depthwise_key, emit_depthwise
from .tflite_fast_float import FP_CONTRACT_OFF, emit_fast_conv, emit_fast_fully_connected


@dataclass(frozen=True)
class TflConv(Op):
    """CONV_2D (filter OHWI) or DEPTHWISE_CONV_2D (filter 1HWO), NHWC, optional bias; int8,
    float32, or hybrid (an int8 filter on float32 data, the input quantized per batch)."""

    depthwise: bool
    out_hw: Tuple[int, int]
    strides: Tuple[int, int]
    dilations: Tuple[int, int]
    pads: Tuple[int, int]  # top, left
    depth_multiplier: int
    bias: bool
    activation: Activation
    quant: Quant = Quant()
    hybrid_scale: float = 0.0  # an int8 filter's scale on float32 data (0: not hybrid)
    form: str = "fast"  # "fast" (tflite_fast*.py) or "reference" (the plain loops)

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x, w = types[0], types[1]
        require(self.form in FORMS, f"conv: form must be one of {FORMS}")
        require(len(x.shape) == 4 and len(w.shape) == 4, "conv: input NHWC and a 4-D filter")
        hybrid = x.dtype == "float32" and w.dtype == "int8"
        require(hybrid == bool(self.hybrid_scale), "conv: an int8 filter on float32 data is hybrid")
        out_c = w.shape[3] if self.depthwise else w.shape[0]
        if self.depthwise:
            require(out_c == x.shape[3] * self.depth_multiplier, "depthwise: channels mismatch")
        else:
            require(w.shape[3] == x.shape[3], "conv: filter input channels mismatch")
        if x.dtype == "int8":
            self.quant.requant.check()
        return [TensorType((x.shape[0], *self.out_hw, out_c), x.dtype)]

    def name_parts(self) -> List[str]:
        return ["tfl_depthwise_conv_2d" if self.depthwise else "tfl_conv_2d"]

    def share_key(self, types: Sequence[TensorType]) -> Optional[str]:
        x, w = types[0], types[1]
        if x.dtype != "int8" or self.form != "fast" or self.inplace_input(types) is None:
            return None
        if self.depthwise:
            return depthwise_key(self, x.shape, w.shape)
        return pointwise_key(self, x.shape, w.shape[0])

    def inplace_input(self, types: Sequence[TensorType]) -> Optional[int]:
        x, w = types[0], types[1]
        if x.dtype != "int8" or self.form != "fast":
            return None
        _, kh, kw, _ = w.shape
        if self.depthwise:
            return 0 if depthwise_in_place(self, x.shape, (kh, kw)) else None
        pointwise = kh == kw == 1 and self.strides == (1, 1) and self.out_hw == x.shape[1:3]
        return 0 if pointwise and pointwise_in_place(x.shape[3], w.shape[0]) else None

    def output_names(self) -> List[str]:
        return ["T_conv"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w, out = ins[0], ins[1], outs[0]
        n, h, wd, c = x.shape
        _, kh, kw, _ = w.shape
        oh, ow = self.out_hw
        oc = out.shape[3]
        sh, sw = self.strides
        dh, dw = self.dilations
        pt, pl = self.pads
        mode = self.mode(x.dtype)
        if mode == "int8" and self.form == "fast":
            (emit_depthwise if self.depthwise else emit_conv)(self, body, ins, outs)
            return
        if mode != "int8":
            body.include(FP_CONTRACT_OFF)
            if self.form == "fast" and emit_fast_conv(self, body, ins, outs):
                return
        if mode == "int8":
            self.quant.requant.declare(body)
        with nest(body, [("b", n)]) as (b,):
            if mode == "hybrid":
                size = x.size // x.shape[0]
                emit_quantize_batch(body, x, f"{b} * {size}", size, self.hybrid_scale)
            with nest(body, [("oy", oh), ("ox", ow), ("oc", oc)]) as (oy, ox, o):
                body.line("float acc = 0.000000e+00f;" if mode == "float" else "int32_t acc = 0;")
                with body.loop("ky", kh):
                    body.line(f"int32_t iy = {oy} * {sh} - {pt} + ky * {dh};")
                    body.line(f"if (iy < 0 || iy >= {h}) continue;")
                    with body.loop("kx", kw):
                        body.line(f"int32_t ix = {ox} * {sw} - {pl} + kx * {dw};")
                        body.line(f"if (ix < 0 || ix >= {wd}) continue;")
                        row = f"((({b} * {h} + iy) * {wd} + ix) * {c})"
                        if self.depthwise:
                            ic = f"({o} / {self.depth_multiplier})"
                            wv = w[f"(ky * {kw} + kx) * {oc} + {o}"]
                            self._mac(body, x[f"{row} + {ic}"], wv, mode)
                        else:
                            with body.loop("ic", c):
                                wi = f"(({o} * {kh} + ky) * {kw} + kx) * {c} + ic"
                                self._mac(body, x[f"{row} + ic"], w[wi], mode)
                if mode == "hybrid":
                    body.line("float accf_ = (float)acc * s_;")
                    if self.bias:
                        body.line(f"accf_ += {ins[2][o]};")
                    result = self.activation.clamp(body, "accf_", "float32")
                else:
                    result = _finish(body, self, ins, o, "acc")
                at = f"(({b} * {oh} + {oy}) * {ow} + {ox}) * {oc} + {o}"
                body.line(f"{out[at]} = {result};")

    def mode(self, dtype: str) -> str:
        """``int8``, ``float`` or ``hybrid`` (an int8 filter on float32 data)."""
        if dtype == "int8":
            return "int8"
        return "hybrid" if self.hybrid_scale else "float"

    def _mac(self, body: Body, xv: str, wv: str, mode: str) -> None:
        if mode == "int8":
            body.line(f"acc += ((int32_t){xv} + {self.quant.input_offset}) * (int32_t){wv};")
        elif mode == "hybrid":
            emit_hybrid_mac(body, xv, wv)
        else:
            body.line(f"acc += {xv} * {wv};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError("LiteRT's reference kernels are this operator's reference")


def _finish(
    body: Body, op: Union[TflConv, TflFullyConnected], ins: Sequence[Buffer], channel: str, acc: str
) -> str:
    """Bias, requantization (int8) and the activation clamp of a conv or dense output."""
    quant, activation, dtype = op.quant, op.activation, ins[0].dtype
    if op.bias:
        body.line(f"{acc} += {ins[2][channel]};")
    if dtype == "int8":
        q = quant.requant.emit(body, acc, channel)
        return activation.clamp(body, f"({q} + {quant.output_offset})", dtype)
    return activation.clamp(body, acc, dtype)


@dataclass(frozen=True)
class TflFullyConnected(Op):
    """FULLY_CONNECTED: filter [O, D], input flattened to [batches, D], optional bias; int8,
    float32, or hybrid (an int8 filter on float32 data, each batch row quantized)."""

    out_shape: Tuple[int, ...]
    bias: bool
    activation: Activation
    quant: Quant = Quant()
    hybrid_scale: float = 0.0  # an int8 filter's scale on float32 data (0: not hybrid)
    form: str = "fast"  # "fast" (tflite_fast*.py) or "reference" (the plain loops)

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x, w = types[0], types[1]
        require(self.form in FORMS, f"fully connected: form must be one of {FORMS}")
        require(len(w.shape) == 2, "fully connected: a 2-D filter")
        hybrid = x.dtype == "float32" and w.dtype == "int8"
        require(hybrid == bool(self.hybrid_scale), "fully connected: hybrid needs its scale")
        require(x.size % w.shape[1] == 0, "fully connected: input size not a multiple of depth")
        batches = x.size // w.shape[1]
        require(
            int(np.prod(self.out_shape)) == batches * w.shape[0], "fully connected: output shape"
        )
        if x.dtype == "int8":
            self.quant.requant.check()
        return [TensorType(self.out_shape, x.dtype)]

    def name_parts(self) -> List[str]:
        return ["tfl_fully_connected"]

    def output_names(self) -> List[str]:
        return ["T_dense"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w, out = ins[0], ins[1], outs[0]
        o, d = w.shape
        batches = x.size // d
        quantized = x.dtype == "int8"
        if quantized and self.form == "fast":
            emit_fully_connected(self, body, ins, outs)
            return
        if not quantized:
            body.include(FP_CONTRACT_OFF)
            if self.form == "fast" and emit_fast_fully_connected(self, body, ins, outs):
                return
        if quantized:
            self.quant.requant.declare(body)
        if self.hybrid_scale:
            with nest(body, [("b", batches)]) as (b,):
                emit_quantize_batch(body, x, f"{b} * {d}", d, self.hybrid_scale)
                with nest(body, [("oc", o)]) as (oc,):
                    body.line("int32_t acc = 0;")
                    with body.loop("d", d):
                        emit_hybrid_mac(body, x[f"{b} * {d} + d"], w[f"{oc} * {d} + d"])
                    body.line("float accf_ = (float)acc * s_;")
                    if self.bias:
                        body.line(f"accf_ += {ins[2][oc]};")
                    result = self.activation.clamp(body, "accf_", "float32")
                    body.line(f"{out[f'{b} * {o} + {oc}']} = {result};")
            return
        with nest(body, [("b", batches), ("oc", o)]) as (b, oc):
            if quantized:
                body.line("int32_t acc = 0;")
                with body.loop("d", d):
                    xv, wv = x[f"{b} * {d} + d"], w[f"{oc} * {d} + d"]
                    body.line(
                        f"acc += ((int32_t){wv} + {self.quant.filter_offset}) * "
                        f"((int32_t){xv} + {self.quant.input_offset});"
                    )
            else:
                body.line("float acc = 0.000000e+00f;")
                with body.loop("d", d):
                    body.line(f"acc += {x[f'{b} * {d} + d']} * {w[f'{oc} * {d} + d']};")
            result = _finish(body, self, ins, oc, "acc")
            body.line(f"{out[f'{b} * {o} + {oc}']} = {result};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError("LiteRT's reference kernels are this operator's reference")


@dataclass(frozen=True)
class TflPool(Op):
    """AVERAGE_POOL_2D or MAX_POOL_2D, NHWC; the window counts only what lies inside."""

    mode: str  # "avg" | "max"
    out_hw: Tuple[int, int]
    filter_hw: Tuple[int, int]
    strides: Tuple[int, int]
    pads: Tuple[int, int]
    activation: Activation

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(len(x.shape) == 4, "pool: input NHWC")
        return [TensorType((x.shape[0], *self.out_hw, x.shape[3]), x.dtype)]

    def name_parts(self) -> List[str]:
        return ["tfl_average_pool_2d" if self.mode == "avg" else "tfl_max_pool_2d"]

    def output_names(self) -> List[str]:
        return ["T_pool"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        n, h, wd, c = x.shape
        oh, ow = self.out_hw
        fh, fw = self.filter_hw
        sh, sw = self.strides
        pt, pl = self.pads
        quantized = x.dtype == "int8"
        with nest(body, [("b", n), ("oy", oh), ("ox", ow), ("ch", c)]) as (b, oy, ox, ch):
            body.line(f"int32_t y0 = {oy} * {sh} - {pt};")
            body.line(f"int32_t x0 = {ox} * {sw} - {pl};")
            body.line("int32_t fy0 = y0 < 0 ? -y0 : 0;")
            body.line("int32_t fx0 = x0 < 0 ? -x0 : 0;")
            body.line(f"int32_t fy1 = {h} - y0 < {fh} ? {h} - y0 : {fh};")
            body.line(f"int32_t fx1 = {wd} - x0 < {fw} ? {wd} - x0 : {fw};")
            if self.mode == "avg":
                body.line(f"{'int32_t' if quantized else 'float'} acc = 0;")
                body.line("int32_t count = 0;")
            else:
                low = "-128" if quantized else "-3.40282347e+38f"
                body.line(f"{'int32_t' if quantized else 'float'} acc = {low};")
            with (
                body.block("for (int32_t fy = fy0; fy < fy1; ++fy)"),
                body.block("for (int32_t fx = fx0; fx < fx1; ++fx)"),
            ):
                v = x[f"((({b} * {h} + y0 + fy) * {wd} + x0 + fx) * {c}) + {ch}"]
                if self.mode == "avg":
                    body.line(f"acc += {v};")
                    body.line("++count;")
                else:
                    body.line(f"acc = {v} > acc ? {v} : acc;")
            if self.mode == "avg":
                body.line("if (count == 0) return -1;")
                if quantized:
                    body.line(
                        "acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;"
                    )
                else:
                    body.line("acc = acc / (float)count;")
            result = self.activation.clamp(body, "acc", x.dtype)
            body.line(f"{out[f'(({b} * {oh} + {oy}) * {ow} + {ox}) * {c} + {ch}']} = {result};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError("LiteRT's reference kernels are this operator's reference")


@dataclass(frozen=True)
class TflSoftmax(Op):
    """SOFTMAX over the last axis. int8: LiteRT's table of expf (built at compile time,
    256 float constants), a float sum, one reciprocal, round half away from zero; float32:
    expf of (x - max) * beta over their sum."""

    beta: float
    table: Tuple[float, ...] = ()  # int8: exp(-input_scale * beta * (255 - i)), as float32
    output_zero_point: int = 0
    output_scale: float = 1.0

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(len(x.shape) >= 1, "softmax: at least one axis")
        if x.dtype == "int8":
            require(len(self.table) == 256, "softmax int8: a table of 256 floats")
        return [TensorType(x.shape, x.dtype)]

    def name_parts(self) -> List[str]:
        return ["tfl_softmax"]

    def output_names(self) -> List[str]:
        return ["T_softmax"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        depth = x.shape[-1]
        rows = x.size // depth
        if x.dtype == "int8":
            values = ", ".join(float_literal(v) for v in self.table)
            body.line(f"static const float table_[256] = {{{values}}};")
        with nest(body, [("r", rows)]) as (r,):
            at = f"{r} * {depth}"
            ctype = c_type(x.dtype)
            body.line(f"{ctype} mx = {x[at]};")
            with body.loop("j", depth):
                body.line(f"mx = {x[f'{at} + j']} > mx ? {x[f'{at} + j']} : mx;")
            body.line("float sum = 0.000000e+00f;")
            if x.dtype == "int8":
                body.line("const float* t_ = &table_[255 - mx];")
                with body.loop("j", depth):
                    body.line(f"sum += t_[{x[f'{at} + j']}];")
                body.line(f"float inv = 1.0f / (sum * {float_literal(self.output_scale)});")
                with body.loop("j", depth):
                    body.line(f"float p_ = t_[{x[f'{at} + j']}] * inv;")
                    body.line(f"int32_t q_ = (int32_t)roundf(p_) + {self.output_zero_point};")
                    body.line("q_ = q_ < -128 ? -128 : (q_ > 127 ? 127 : q_);")
                    body.line(f"{out[f'{at} + j']} = (int8_t)q_;")
            else:
                beta = float_literal(self.beta)
                with body.loop("j", depth):
                    body.line(f"float e_ = expf(({x[f'{at} + j']} - mx) * {beta});")
                    body.line(f"{out[f'{at} + j']} = e_;")
                    body.line("sum += e_;")
                with body.loop("j", depth):
                    body.line(f"{out[f'{at} + j']} = {out[f'{at} + j']} / sum;")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError("LiteRT's reference kernels are this operator's reference")
