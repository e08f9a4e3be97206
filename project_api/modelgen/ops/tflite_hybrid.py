"""Hybrid DEPTHWISE_CONV_2D: an int8 filter with a scale per output channel on float32 data,
with the arithmetic of LiteRT's reference kernel (``DepthwiseConvHybridPerChannel``).

Each batch of the input is quantized asymmetrically (``AsymmetricQuantizeFloats``):

- ``rmin = min(0, min x)``, ``rmax = max(0, max x)`` in float32; all zero: every value 0,
  scale 1, zero point 0;
- ``scale = (rmax - rmin) / 255``: the difference in float32, the quotient in double;
- the zero point from whichever end errs less, in double: ``-128 - rmin / scale`` when
  ``128 + |rmin / scale| < 127 + |rmax / scale|``, else ``127 - rmax / scale``; clamped to
  −128..127, else rounded half away from zero;
- ``q = round(zero_point + x · (1 / (float)scale))`` in float32, clamped to int8.

Then for every output the int32 sum of ``w · (q − zero_point)`` over the taps inside the
image (padding adds nothing), times ``channel_scale · (float)scale`` in float32, plus the
bias, clamped by the activation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer, float_literal
from .base import Op, TensorType, nest, require
from .tflite_arith import Activation, emit_batch_range
from .tflite_fast_float import FP_CONTRACT_OFF


def emit_asymmetric_batch(body: Body, x: Buffer, start: str, size: int) -> None:
    """LiteRT's asymmetric quantization of one batch: ``zp_`` (int32), ``inv_`` (the float32
    reciprocal of the scale) and ``sf_`` (the float32 scale)."""
    emit_batch_range(body, x, start, size)
    body.line("float rmin_ = mn_ < 0.0f ? mn_ : 0.0f;")
    body.line("float rmax_ = mx_ > 0.0f ? mx_ : 0.0f;")
    body.line("float sf_ = 1.0f;")
    body.line("float inv_ = 0.0f;")
    body.line("int32_t zp_ = 0;")
    with body.block("if (rmin_ != rmax_)"):
        body.line("float span_ = rmax_ - rmin_;")
        body.line("double sd_ = (double)span_ / 255.0;")
        body.line("double lo_ = (double)rmin_ / sd_;")
        body.line("double hi_ = (double)rmax_ / sd_;")
        body.line(
            "double zd_ = (128.0 + fabs(lo_) < 127.0 + fabs(hi_)) ? -128.0 - lo_ : 127.0 - hi_;"
        )
        body.line("zp_ = zd_ <= -128.0 ? -128 : (zd_ >= 127.0 ? 127 : (int32_t)round(zd_));")
        body.line("sf_ = (float)sd_;")
        body.line("inv_ = 1.0f / sf_;")


@dataclass(frozen=True)
class TflHybridDepthwise(Op):
    """DEPTHWISE_CONV_2D (filter 1HWO, NHWC) of float32 data with an int8 filter quantized per
    output channel (``channel_scales``), optional float32 bias."""

    out_hw: Tuple[int, int]
    strides: Tuple[int, int]
    dilations: Tuple[int, int]
    pads: Tuple[int, int]  # top, left
    depth_multiplier: int
    bias: bool
    activation: Activation
    channel_scales: Tuple[float, ...]

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x, w = types[0], types[1]
        require(len(x.shape) == 4 and len(w.shape) == 4, "depthwise: input NHWC, 4-D filter")
        require(x.dtype == "float32" and w.dtype == "int8", "hybrid: int8 filter, float32 data")
        out_c = w.shape[3]
        require(out_c == x.shape[3] * self.depth_multiplier, "depthwise: channels mismatch")
        require(len(self.channel_scales) == out_c, "hybrid depthwise: one scale a channel")
        return [TensorType((x.shape[0], *self.out_hw, out_c), "float32")]

    def name_parts(self) -> List[str]:
        return ["tfl_depthwise_conv_2d"]

    def output_names(self) -> List[str]:
        return ["T_conv"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w, out = ins[0], ins[1], outs[0]
        body.include(FP_CONTRACT_OFF)  # no fused multiply-add: LiteRT rounds each step
        n, h, wd, c = x.shape
        _, kh, kw, oc = w.shape
        oh, ow = self.out_hw
        sh, sw = self.strides
        dh, dw = self.dilations
        pt, pl = self.pads
        scales = ", ".join(float_literal(s) for s in self.channel_scales)
        body.line(f"static const float cs_[{oc}] = {{{scales}}};")
        size = x.size // n
        with nest(body, [("b", n)]) as (b,):
            emit_asymmetric_batch(body, x, f"{b} * {size}", size)
            with nest(body, [("oy", oh), ("ox", ow), ("oc", oc)]) as (oy, ox, o):
                body.line("int32_t acc = 0;")
                with body.loop("ky", kh):
                    body.line(f"int32_t iy = {oy} * {sh} - {pt} + ky * {dh};")
                    body.line(f"if (iy < 0 || iy >= {h}) continue;")
                    with body.loop("kx", kw):
                        body.line(f"int32_t ix = {ox} * {sw} - {pl} + kx * {dw};")
                        body.line(f"if (ix < 0 || ix >= {wd}) continue;")
                        row = f"((({b} * {h} + iy) * {wd} + ix) * {c})"
                        xv = x[f"{row} + ({o} / {self.depth_multiplier})"]
                        body.line(f"float t_ = (float)zp_ + {xv} * inv_;")
                        body.line("int32_t q_ = (int32_t)roundf(t_);")
                        body.line("q_ = q_ < -128 ? -128 : (q_ > 127 ? 127 : q_);")
                        wv = w[f"(ky * {kw} + kx) * {oc} + {o}"]
                        body.line(f"acc += (int32_t){wv} * (q_ - zp_);")
                body.line(f"float scale_ = cs_[{o}] * sf_;")
                body.line("float accf_ = (float)acc * scale_;")
                if self.bias:
                    body.line(f"accf_ += {ins[2][o]};")
                result = self.activation.clamp(body, "accf_", "float32")
                at = f"(({b} * {oh} + {oy}) * {ow} + {ox}) * {oc} + {o}"
                body.line(f"{out[at]} = {result};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError("LiteRT's reference kernels are this operator's reference")
