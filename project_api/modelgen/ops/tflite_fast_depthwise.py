"""The ``fast`` form of int8 DEPTHWISE_CONV_2D (see tflite_fast.py): channel by channel with
the channel's taps in locals, its input offset hoisted in the interior and the border over
the taps inside only; with depth multiplier 1 each channel is first copied with its padding
into a stack buffer, which lets the output overwrite the input channel by channel.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from ..cgen import STACK_LIMIT_BYTES, Body, Buffer
from .base import nest
from .tflite_fast import (
    border_pixels,
    call_helper,
    channel_base,
    clipped_taps,
    constants_key,
    interior,
    shareable,
    store,
)


def emit_depthwise(op, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
    """int8 DEPTHWISE_CONV_2D (filter 1HWO), NHWC, channel by channel."""
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if op.bias else None
    _, kh, kw, oc = w.shape
    oh, ow = op.out_hw
    op.quant.requant.declare(body)
    body.line(f"const int8_t* x_ = (const int8_t*){x.var};")
    body.line(f"const int8_t* w_ = (const int8_t*){w.var};")
    padded = depthwise_in_place(op, x.shape, (kh, kw))
    name = depthwise_key(op, x.shape, w.shape)
    if padded and name is not None and name in body.shared:
        # one helper for the depthwise convolutions of this shape
        helper = Body()
        y = Buffer("y_", "int8", out.shape)
        bias_ = Buffer("bias_", "int32", (oc,)) if bias is not None else None
        _channels(op, helper, x, w, y, bias_, padded)
        call_helper(body, op, name, helper, out, bias)
        return
    _channels(op, body, x, w, out, bias, padded)


def depthwise_key(op: Any, x_shape: Sequence[int], w_shape: Sequence[int]) -> Optional[str]:
    """The helper name of an in-place depthwise convolution's kernel (see ``shareable``)."""
    if not shareable(op) or depthwise_in_place(op, x_shape, (w_shape[1], w_shape[2])) is None:
        return None
    values = (*x_shape, *w_shape[1:3], *op.strides, *op.dilations, *op.pads, *op.out_hw)
    shape = "_".join(str(v) for v in values)
    return f"mlf_tfl_depthwise_{shape}_{constants_key(op)}" + ("" if op.bias else "_nobias")


def _channels(
    op: Any,
    body: Body,
    x: Buffer,
    w: Buffer,
    out: Buffer,
    bias: Optional[Buffer],
    padded: Optional[Tuple[int, int]],
) -> None:
    """The channel loop, in the operator's function or in a helper."""
    n, h, wd, c = x.shape
    _, kh, kw, oc = w.shape
    oh, ow = op.out_hw
    sh, sw = op.strides
    dh, dw = op.dilations
    pt, pl = op.pads
    io = op.quant.input_offset
    mult = op.depth_multiplier
    taps = kh * kw
    y0, y1 = interior(h, oh, kh, sh, dh, pt)
    xa, xb = interior(wd, ow, kw, sw, dw, pl)
    in_regs = taps <= 16
    if padded:
        ph, pw = padded
        body.line(f"int8_t buf_[{ph * pw}];")
    with nest(body, [("b", n)]) as (b,), body.loop("o", oc):
        body.line(f"int32_t ic_ = o / {mult};" if mult > 1 else "int32_t ic_ = o;")
        body.line(f"const int8_t* xc_ = x_ + {b} * {h * wd * c} + ic_;")
        if in_regs:
            for t in range(taps):
                body.line(f"int32_t k{t}_ = w_[{t * oc} + o];")
        body.line(f"int32_t base_ = {bias['o'] if bias is not None else '0'};")
        if io:
            if in_regs:
                total = " + ".join(f"k{t}_" for t in range(taps))
                body.line(f"base_ += ({total}) * {io};")
            else:
                channel_base(body, "sum_", None, "o", "(w_ + o)", taps, oc, io)
                body.line("base_ += sum_;")
        if padded:
            _depthwise_padded(op, body, x, out, b, padded, (kh, kw), in_regs)
        else:
            # the border: taps inside only
            if (y0, y1, xa, xb) != (0, oh, 0, ow):
                with border_pixels(body, op, (h, wd), (kh, kw), (y0, y1, xa, xb)) as (oy, ox):
                    body.line(f"int32_t acc = {bias['o'] if bias is not None else '0'};")
                    with clipped_taps(body):
                        tap = f"((iy_ + ky * {dh}) * {wd} + ix_ + kx * {dw}) * {c}"
                        body.line(f"int32_t v_ = xc_[{tap}];")
                        body.line(f"acc += (v_ + {io}) * (int32_t)w_[(ky * {kw} + kx) * {oc} + o];")
                    at = f"(({b} * {oh} + {oy}) * {ow} + {ox}) * {oc} + o"
                    store(body, op, out, at, "acc", "o", "")
            if y0 < y1 and xa < xb:
                with (
                    body.block(f"for (int32_t oy = {y0}; oy < {y1}; ++oy)"),
                    body.block(f"for (int32_t ox = {xa}; ox < {xb}; ++ox)"),
                ):
                    origin = f"(oy * {sh} - {pt}) * {wd} + ox * {sw} - {pl}"
                    body.line(f"const int8_t* r_ = xc_ + ({origin}) * {c};")
                    body.line("int32_t acc = base_;")
                    for ky in range(kh):
                        for kx in range(kw):
                            off = (ky * dh * wd + kx * dw) * c
                            wv = (
                                f"k{ky * kw + kx}_"
                                if in_regs
                                else f"(int32_t)w_[{(ky * kw + kx) * oc} + o]"
                            )
                            body.line(f"acc += (int32_t)r_[{off}] * {wv};")
                    at = f"(({b} * {oh} + oy) * {ow} + ox) * {oc} + o"
                    store(body, op, out, at, "acc", "o", "")


def depthwise_in_place(
    op, x_shape: Sequence[int], kernel: Tuple[int, int]
) -> Optional[Tuple[int, int]]:
    """(rows, columns) of the padded copy of one channel that a DEPTHWISE_CONV_2D with depth
    multiplier 1 works from when it fits the stack, else None (no copy). Working from the
    copy, the output can overwrite the input channel by channel: output channel o lies on
    input channel o's bytes (no more pixels out than in)."""
    _, h, wd, _ = x_shape
    oh, ow = op.out_hw
    ph = (oh - 1) * op.strides[0] + (kernel[0] - 1) * op.dilations[0] + 1
    pw = (ow - 1) * op.strides[1] + (kernel[1] - 1) * op.dilations[1] + 1
    if op.depth_multiplier != 1 or oh * ow > h * wd or ph * pw >= STACK_LIMIT_BYTES:
        return None
    return (ph, pw)


def _depthwise_padded(
    op,
    body: Body,
    x: Buffer,
    out: Buffer,
    b: str,
    padded: Tuple[int, int],
    kernel: Tuple[int, int],
    in_regs: bool,
) -> None:
    """One channel copied into ``buf_`` with its padding (the input's zero point, so a
    padded tap adds (zp + io) · w = 0, as the reference form's skipped tap), then the
    window over the copy with no border at all."""
    _, h, wd, c = x.shape
    _, oh, ow, oc = out.shape
    ph, pw = padded
    kh, kw = kernel
    sh, sw = op.strides
    dh, dw = op.dilations
    pt, pl = op.pads
    io = op.quant.input_offset
    zp = f"-{io}" if isinstance(io, str) else str(-io)
    cols = max(0, min(wd, pw - pl))
    with body.loop("r", ph):
        body.line(f"int8_t* d_ = buf_ + r * {pw};")
        body.line(f"int32_t iy_ = r - {pt};")
        with body.block(f"if (iy_ < 0 || iy_ >= {h})"), body.loop("q", pw):
            body.line(f"d_[q] = {zp};")
        with body.block("else"):
            if pl:
                with body.loop("q", pl):
                    body.line(f"d_[q] = {zp};")
            body.line(f"const int8_t* s_ = xc_ + iy_ * {wd * c};")
            with body.loop("q", cols):
                body.line(f"d_[{pl} + q] = s_[q * {c}];")
            if pl + cols < pw:
                with body.block(f"for (int32_t q = {pl + cols}; q < {pw}; ++q)"):
                    body.line(f"d_[q] = {zp};")
    with body.loop("oy", oh), body.loop("ox", ow):
        body.line(f"const int8_t* r_ = buf_ + oy * {sh * pw} + ox * {sw};")
        body.line("int32_t acc = base_;")
        for ky in range(kh):
            for kx in range(kw):
                off = ky * dh * pw + kx * dw
                t = ky * kw + kx
                wv = f"k{t}_" if in_regs else f"(int32_t)w_[{t * oc} + o]"
                body.line(f"acc += (int32_t)r_[{off}] * {wv};")
        store(body, op, out, f"(({b} * {oh} + oy) * {ow} + ox) * {oc} + o", "acc", "o", "")
