"""The ``fast`` form of the float32 and hybrid convolutions and FULLY_CONNECTED: the same
floats as the ``reference`` form (tflite.py), in C specialized to the shape.

float32 addition is not associative, so every output keeps LiteRT's reference order: a sum
from 0.0f over the filter's rows, columns and input channels in that order (the taps inside
the input only), then the bias, then the activation's clamp. What changes is around it:

- CONV_2D: the window's interior has no bound checks; a filter row is one contiguous span
  of input and filter (dilation 1), unrolled at the constant length; two pixels × two output
  channels share each load (four sums, each in its own order). The border runs over the taps
  inside only.
- DEPTHWISE_CONV_2D: channel by channel, the channel's taps in locals, the interior
  unrolled over the taps without checks.
- FULLY_CONNECTED: four output channels share each input load.
- hybrid (an int8 filter on float32 data): LiteRT quantizes the batch's input once, the
  reference form at every tap. Here each input value is quantized once into an int8 copy
  (the whole batch with its padding at 0 when it fits the stack, else each output pixel's
  window), and the int32 sums (exact in any order) run over the copy.

The arithmetic must not be contracted either: GCC fuses ``a * b + c`` into one rounding
where the core has a fused multiply-add (``-ffp-contract=fast``, its default: Cortex-M4F,
M55), which LiteRT's kernels do not. :data:`FP_CONTRACT_OFF` turns that off for the file.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ..cgen import STACK_LIMIT_BYTES, Body, Buffer
from .base import nest
from .tflite_arith import emit_quantize_batch
from .tflite_fast import border_pixels, clipped_taps, interior
from .tflite_soft_float import FDOT, FMAC, SOFT, SOFT_FMAC_C

# Preprocessor text before a float kernel: no fused multiply-add in this file's functions
# (GCC's pragma; clang contracts only within one expression, which these kernels never ask).
# A build that defines MLF_FP_CONTRACT lets GCC fuse them: faster on an FPU, not LiteRT's.
FP_CONTRACT_OFF = "\n".join(
    [
        "#if defined(__GNUC__) && !defined(__clang__) && !defined(MLF_FP_CONTRACT)",
        '#pragma GCC optimize("fp-contract=off")',
        "#endif",
    ]
)
FULL_UNROLL = 16  # sums up to this length are unrolled completely
UNROLL = 4  # longer ones by this factor
MAX_LOCAL_TAPS = 25  # a depthwise filter with up to this many taps is held in locals
GROUP = 4  # output channels sharing each input load (FULLY_CONNECTED, hybrid)


def emit_fast_conv(op: Any, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> bool:
    """A float32 or hybrid CONV_2D / DEPTHWISE_CONV_2D in the fast form; False where this
    form has nothing for it (the caller emits the reference form)."""
    if op.hybrid_scale:
        return not op.depthwise and _hybrid_conv(op, body, ins, outs)
    (_depthwise if op.depthwise else _conv)(op, body, ins, outs)
    return True


def emit_fast_fully_connected(
    op: Any, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]
) -> bool:
    """A float32 or hybrid FULLY_CONNECTED in the fast form (False: none here)."""
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if op.bias else None
    o, d = w.shape
    batches = x.size // d
    hybrid = bool(op.hybrid_scale)
    if hybrid and d >= STACK_LIMIT_BYTES:
        return False
    ctype = "int8_t" if hybrid else "float"
    if not hybrid:
        body.helper(FMAC, SOFT_FMAC_C)
    body.line(f"const {ctype}* w_ = (const {ctype}*){w.var};")
    body.line(f"float* y_ = (float*){out.var};")
    with nest(body, [("r", batches)]) as (r,):
        if hybrid:
            emit_quantize_batch(body, x, f"{r} * {d}", d, op.hybrid_scale)
            body.line(f"int8_t q_[{d}];")
            body.line(f"const float* s_x_ = (const float*){x.var} + {r} * {d};")
            with body.loop("t", d):
                _quantize(body, "s_x_[t]", "q_[t]")
            body.line("const int8_t* x_ = q_;")
        else:
            body.line(f"const float* x_ = (const float*){x.var} + {r} * {d};")
        body.line("int32_t o = 0;")
        _channel_groups(body, op, o, d, "x_", f"{r} * {o}", bias, hybrid, d)
    return True


def _channel_groups(
    body: Body,
    op: Any,
    channels: int,
    length: int,
    xs: str,
    at: str,
    bias: Optional[Buffer],
    hybrid: bool,
    stride: int,
    rows: Sequence[Tuple[str, str]] = (("0", "0"),),
) -> None:
    """Output channels ``o`` in groups of four (then one at a time): each sum runs over
    ``rows`` (offsets into the input and into a channel's filter) of ``length`` values,
    every input value loaded once for the group; stored at ``y_[at + o + j]``. ``stride``:
    one channel's filter length."""
    groups = [(GROUP, f"o + {GROUP - 1} < {channels}")] if channels >= GROUP else []
    if channels % GROUP:
        groups.append((1, f"o < {channels}"))
    acc_type, x_type = ("int32_t", "int32_t") if hybrid else ("float", "float")
    zero = "0" if hybrid else "0.0f"
    for group, cond in groups:
        with body.block(f"for (; {cond}; o += {group})"):
            ctype = "int8_t" if hybrid else "float"
            body.line(f"const {ctype}* f_ = w_ + o * {stride};")
            accs = [f"a{j}_" for j in range(group)]
            body.line(f"{acc_type} " + ", ".join(f"{a} = {zero}" for a in accs) + ";")
            if not hybrid:  # soft float: each sum in one call (tflite_soft_float.py)
                body.lines.append(f"#if {SOFT}")
                for xo, fo in rows:
                    for j, a in enumerate(accs):
                        wp = f"f_ + {j * stride} + {fo}"
                        body.line(f"{a} = {FDOT}({a}, {xs} + {xo}, {wp}, {length});")
                body.lines.append("#else")
            for xo, fo in rows:
                with body.block(f"for (int32_t t = 0; t < {length}; ++t)"):
                    body.line(f"{x_type} xv_ = {xs}[{xo} + t];")
                    for j, a in enumerate(accs):
                        wv = f"f_[{j * stride} + {fo} + t]"
                        if hybrid:
                            body.line(f"{a} += xv_ * (int32_t){wv};")
                        else:
                            body.line(f"{a} = {FMAC}({a}, xv_, {wv});")
            if not hybrid:
                body.lines.append("#endif")
            for j, a in enumerate(accs):
                _store(body, op, f"{at} + o + {j}", a, f"o + {j}", bias, hybrid)


def _store(
    body: Body, op: Any, at: str, acc: str, channel: str, bias: Optional[Buffer], hybrid: bool
) -> None:
    """The reference's finish of one output: (hybrid: the int32 sum times ``s_``), plus the
    bias, clamped, stored at ``y_[at]``."""
    with body.block(""):
        if hybrid:
            body.line(f"float v_ = (float){acc} * s_;")
        else:
            body.line(f"float v_ = {acc};")
        if bias is not None:
            body.line(f"v_ += {bias[channel]};")
        body.line(f"y_[{at}] = {op.activation.clamp(body, 'v_', 'float32')};")


def _fdot(body: Body, xs: Sequence[str], ws: Sequence[str], accs: List[List[str]], n: int) -> None:
    """acc[i][j] += xs[i][t] · ws[j][t] for t < n in order (pointers to float)."""

    def step(offset: str) -> None:
        for i, xp in enumerate(xs):
            body.line(f"float x{i}_ = {xp}[{offset}];")
        for j, wp in enumerate(ws):
            body.line(f"float w{j}_ = {wp}[{offset}];")
        for i in range(len(xs)):
            for j in range(len(ws)):
                body.line(f"{accs[i][j]} = {FMAC}({accs[i][j]}, x{i}_, w{j}_);")

    # soft float: each sum in one call of the integer dot product (tflite_soft_float.py)
    body.lines.append(f"#if {SOFT}")
    for i, xp in enumerate(xs):
        for j, wp in enumerate(ws):
            body.line(f"{accs[i][j]} = {FDOT}({accs[i][j]}, {xp}, {wp}, {n});")
    body.lines.append("#else")
    if n <= FULL_UNROLL:
        for t in range(n):
            with body.block(""):
                step(str(t))
    else:
        body.line("int32_t t_ = 0;")
        with body.block(f"for (; t_ + {UNROLL - 1} < {n}; t_ += {UNROLL})"):
            for u in range(UNROLL):
                with body.block(""):
                    step(f"t_ + {u}")
        if n % UNROLL:
            with body.block(f"for (; t_ < {n}; ++t_)"):
                step("t_")
    body.lines.append("#endif")


def _pointers(body: Body, x: Buffer, w: Buffer, out: Buffer) -> None:
    body.helper(FMAC, SOFT_FMAC_C)
    body.line(f"const float* x_ = (const float*){x.var};")
    body.line(f"const float* w_ = (const float*){w.var};")
    body.line(f"float* y_ = (float*){out.var};")


def _conv(op: Any, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
    """float32 CONV_2D (filter OHWI), NHWC."""
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if op.bias else None
    n, h, wd, c = x.shape
    _, kh, kw, _ = w.shape
    oh, ow = op.out_hw
    oc = out.shape[3]
    sh, sw = op.strides
    dh, dw = op.dilations
    pt, pl = op.pads
    ks = kh * kw * c
    _pointers(body, x, w, out)
    y0, y1 = interior(h, oh, kh, sh, dh, pt)
    x0, x1 = interior(wd, ow, kw, sw, dw, pl)
    if (y0, y1, x0, x1) != (0, oh, 0, ow):
        _conv_border(op, body, x, w, out, bias, (y0, y1, x0, x1))
    if y0 == y1 or x0 == x1:
        return
    with nest(body, [("b", n)]) as (b,), body.block(f"for (int32_t o = 0; o < {oc}; o += 2)"):
        body.line(f"int32_t two_ = o + 1 < {oc};")
        body.line(f"const float* q0_ = w_ + o * {ks};")
        body.line(f"const float* q1_ = two_ ? q0_ + {ks} : q0_;")
        # the interior's pixels in pairs, row after row; an odd last one computed twice
        bw, count = x1 - x0, (y1 - y0) * (x1 - x0)
        with body.block(f"for (int32_t p = 0; p < {count}; p += 2)"):
            body.line(f"int32_t more_ = p + 1 < {count};")
            body.line("int32_t p1_ = more_ ? p + 1 : p;")
            for i, pv in enumerate(("p", "p1_")):
                body.line(f"int32_t oy{i}_ = {y0} + {pv} / {bw}, ox{i}_ = {x0} + {pv} % {bw};")
                row = f"({b} * {h} + oy{i}_ * {sh} - {pt}) * {wd} + ox{i}_ * {sw} - {pl}"
                body.line(f"const float* s{i}_ = x_ + ({row}) * {c};")
            names = [["a00_", "a01_"], ["a10_", "a11_"]]
            body.line("float a00_ = 0.0f, a01_ = 0.0f, a10_ = 0.0f, a11_ = 0.0f;")
            with body.block(f"for (int32_t ky = 0; ky < {kh}; ++ky)"):
                body.line(f"const float* r0_ = s0_ + ky * {dh * wd * c};")
                body.line(f"const float* r1_ = s1_ + ky * {dh * wd * c};")
                body.line(f"const float* f0_ = q0_ + ky * {kw * c};")
                body.line(f"const float* f1_ = q1_ + ky * {kw * c};")
                if dw == 1:
                    _fdot(body, ["r0_", "r1_"], ["f0_", "f1_"], names, kw * c)
                else:
                    with body.block(f"for (int32_t kx = 0; kx < {kw}; ++kx)"):
                        body.line(f"const float* t0_ = r0_ + kx * {dw * c};")
                        body.line(f"const float* t1_ = r1_ + kx * {dw * c};")
                        body.line(f"const float* g0_ = f0_ + kx * {c};")
                        body.line(f"const float* g1_ = f1_ + kx * {c};")
                        _fdot(body, ["t0_", "t1_"], ["g0_", "g1_"], names, c)
            for i in range(2):
                at = f"(({b} * {oh} + oy{i}_) * {ow} + ox{i}_) * {oc} + o"
                with body.block("" if i == 0 else "if (more_)"):
                    _pair_store(body, op, at, names[i], bias)


def _pair_store(body: Body, op: Any, at: str, accs: Sequence[str], bias: Optional[Buffer]) -> None:
    _store(body, op, at, accs[0], "o", bias, False)
    with body.block("if (two_)"):
        _store(body, op, f"{at} + 1", accs[1], "(o + 1)", bias, False)


def _conv_border(
    op: Any,
    body: Body,
    x: Buffer,
    w: Buffer,
    out: Buffer,
    bias: Optional[Buffer],
    box: Tuple[int, int, int, int],
) -> None:
    """Every output outside the interior: the taps inside only, in the reference's order."""
    n, h, wd, c = x.shape
    _, kh, kw, _ = w.shape
    oh, ow = op.out_hw
    oc = out.shape[3]
    dh, dw = op.dilations
    with (
        nest(body, [("b", n)]) as (b,),
        border_pixels(body, op, (h, wd), (kh, kw), box) as (oy, ox),
        body.loop("o", oc),
    ):
        body.line("float a_ = 0.0f;")
        with clipped_taps(body):
            row = f"({b} * {h} + iy_ + ky * {dh}) * {wd}"
            body.line(f"const float* r_ = x_ + ({row} + ix_ + kx * {dw}) * {c};")
            body.line(f"const float* f_ = w_ + ((o * {kh} + ky) * {kw} + kx) * {c};")
            with body.loop("i", c):
                body.line(f"a_ = {FMAC}(a_, r_[i], f_[i]);")
        at = f"(({b} * {oh} + {oy}) * {ow} + {ox}) * {oc} + o"
        _store(body, op, at, "a_", "o", bias, False)


def _depthwise(op: Any, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
    """float32 DEPTHWISE_CONV_2D (filter 1HWO), NHWC: channel by channel."""
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if op.bias else None
    n, h, wd, c = x.shape
    _, kh, kw, oc = w.shape
    oh, ow = op.out_hw
    sh, sw = op.strides
    dh, dw = op.dilations
    pt, pl = op.pads
    dm = op.depth_multiplier
    _pointers(body, x, w, out)
    y0, y1 = interior(h, oh, kh, sh, dh, pt)
    x0, x1 = interior(wd, ow, kw, sw, dw, pl)
    local = kh * kw <= MAX_LOCAL_TAPS
    with nest(body, [("b", n), ("ic", c), ("m", dm)]) as (b, ic, m):
        body.line(f"int32_t o = {ic} * {dm} + {m};")
        if local:
            taps = ", ".join(f"k{t}_ = w_[{t * oc} + o]" for t in range(kh * kw))
            body.line(f"const float {taps};")
        if (y0, y1, x0, x1) != (0, oh, 0, ow):
            box = (y0, y1, x0, x1)
            with border_pixels(body, op, (h, wd), (kh, kw), box) as (oy, ox):
                body.line("float a_ = 0.0f;")
                with clipped_taps(body):
                    row = f"({b} * {h} + iy_ + ky * {dh}) * {wd} + ix_ + kx * {dw}"
                    tap = f"w_[(ky * {kw} + kx) * {oc} + o]"
                    body.line(f"a_ = {FMAC}(a_, x_[({row}) * {c} + {ic}], {tap});")
                at = f"(({b} * {oh} + {oy}) * {ow} + {ox}) * {oc} + o"
                _store(body, op, at, "a_", "o", bias, False)
        if y0 < y1 and x0 < x1:
            with body.block(f"for (int32_t oy = {y0}; oy < {y1}; ++oy)"):
                origin = f"(({b} * {h} + oy * {sh} - {pt}) * {wd} - {pl}) * {c} + {ic}"
                body.line(f"const float* row_ = x_ + {origin};")
                with body.block(f"for (int32_t ox = {x0}; ox < {x1}; ++ox)"):
                    body.line(f"const float* s_ = row_ + ox * {sw * c};")
                    body.line("float a_ = 0.0f;")
                    for ky in range(kh):
                        for kx in range(kw):
                            t = ky * kw + kx
                            tap = f"k{t}_" if local else f"w_[{t * oc} + o]"
                            at = (ky * dh * wd + kx * dw) * c
                            body.line(f"a_ = {FMAC}(a_, s_[{at}], {tap});")
                    at = f"(({b} * {oh} + oy) * {ow} + ox) * {oc} + o"
                    _store(body, op, at, "a_", "o", bias, False)


def _quantize(body: Body, value: str, dest: str) -> None:
    """One value quantized as the hybrid reference kernels do it (``inv_``: 127 / range)."""
    with body.block(""):
        body.line(f"int32_t hq_ = (int32_t)roundf({value} * inv_);")
        body.line(f"{dest} = (int8_t)(hq_ < -127 ? -127 : (hq_ > 127 ? 127 : hq_));")


def _hybrid_conv(op: Any, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> bool:
    """Hybrid CONV_2D: the batch's input quantized once into an int8 copy (padding 0, whose
    products add nothing to the int32 sums), whole when it fits the stack, else each output
    pixel's window; then four output channels a load over each filter row."""
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if op.bias else None
    n, h, wd, c = x.shape
    _, kh, kw, _ = w.shape
    oh, ow = op.out_hw
    oc = out.shape[3]
    sh, sw = op.strides
    dh, dw = op.dilations
    pt, pl = op.pads
    ph = (oh - 1) * sh + (kh - 1) * dh + 1
    pw = (ow - 1) * sw + (kw - 1) * dw + 1
    whole = ph * pw * c < STACK_LIMIT_BYTES
    if not whole and kh * kw * c >= STACK_LIMIT_BYTES:
        return False
    body.line(f"const int8_t* w_ = (const int8_t*){w.var};")
    body.line(f"float* y_ = (float*){out.var};")
    size = h * wd * c
    # the taps of one output pixel as (offset into its window, offset into a filter) rows
    if whole:
        body.line(f"int8_t pad_[{ph * pw * c}];")
        rows = _window_rows(kh, kw, c, dh, dw, pw * c)
        length = kw * c if dw == 1 else c
    else:  # the window packed: one run of every tap's values
        body.line(f"int8_t win_[{kh * kw * c}];")
        rows, length = [("0", "0")], kh * kw * c
    with nest(body, [("b", n)]) as (b,):
        emit_quantize_batch(body, x, f"{b} * {size}", size, op.hybrid_scale)
        body.line(f"const float* s_x_ = (const float*){x.var} + {b} * {size};")
        if whole:
            with body.loop("i", ph * pw * c):
                body.line("pad_[i] = 0;")
            with body.loop("iy", h), body.loop("ix", wd), body.loop("i", c):
                at = f"((iy + {pt}) * {pw} + ix + {pl}) * {c} + i"
                _quantize(body, f"s_x_[(iy * {wd} + ix) * {c} + i]", f"pad_[{at}]")
        with nest(body, [("oy", oh), ("ox", ow)]) as (oy, ox):
            if whole:
                body.line(f"const int8_t* win_ = pad_ + ({oy} * {sh * pw} + {ox} * {sw}) * {c};")
            else:
                body.line(f"int32_t iy_ = {oy} * {sh} - {pt};")
                body.line(f"int32_t ix_ = {ox} * {sw} - {pl};")
                with body.loop("ky", kh), body.loop("kx", kw):
                    body.line(f"int32_t y_in_ = iy_ + ky * {dh}, x_in_ = ix_ + kx * {dw};")
                    body.line(f"int8_t* d_ = win_ + (ky * {kw} + kx) * {c};")
                    cond = f"y_in_ < 0 || y_in_ >= {h} || x_in_ < 0 || x_in_ >= {wd}"
                    with body.block(f"if ({cond})"), body.loop("i", c):
                        body.line("d_[i] = 0;")
                    with body.block("else"), body.loop("i", c):
                        _quantize(body, f"s_x_[(y_in_ * {wd} + x_in_) * {c} + i]", "d_[i]")
            body.line("int32_t o = 0;")
            at = f"(({b} * {oh} + {oy}) * {ow} + {ox}) * {oc}"
            _channel_groups(body, op, oc, length, "win_", at, bias, True, kh * kw * c, rows)
    return True


def _window_rows(
    kh: int, kw: int, c: int, dh: int, dw: int, row_stride: int
) -> List[Tuple[str, str]]:
    """(input offset, filter offset) of each contiguous run of a pixel's taps: a filter row
    (kw · c values) with dilation 1 along the width, else each tap's c values."""
    if dw == 1:
        return [(str(ky * dh * row_stride), str(ky * kw * c)) for ky in range(kh)]
    return [
        (str(ky * dh * row_stride + kx * dw * c), str((ky * kw + kx) * c))
        for ky in range(kh)
        for kx in range(kw)
    ]
