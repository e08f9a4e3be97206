"""The ``fast`` form of the int8 convolutions and FULLY_CONNECTED: the same integers as the
``reference`` form (tflite.py), in C specialized to the shape.

- The window's interior (every tap inside the input) is split from its border. The
  interior has no bound checks, and its input offset is hoisted: sum((x + io) · w) =
  sum(x · w) + io · sum(w), with io · sum(w) + bias worked out once per output channel.
  The border iterates over the taps that lie inside only (clipped ranges, no check per tap).
- A CONV_2D's taps along a filter row are one contiguous span of the input and of the
  filter (dilation 1): its dot product runs over kw · c bytes, unrolled at the constant
  length. Two pixels × two output channels share each load (four accumulators).
- A 1×1 CONV_2D with stride 1 and FULLY_CONNECTED are one matrix product over pixels
  (batches): pairs of rows × pairs of output channels.
- DEPTHWISE_CONV_2D runs channel by channel with the channel's taps in locals.

Integer addition is exact, so only the order of the terms changes; the requantization and
clamp are the reference form's (``Requant.emit``, ``Activation.clamp``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from typing import TYPE_CHECKING, Any, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from ..cgen import STACK_LIMIT_BYTES, Body, Buffer
from .base import nest

if TYPE_CHECKING:
    from ..network import Network

FORMS = ("fast", "reference")
FULL_UNROLL = 16  # dot products up to this length are unrolled completely
UNROLL = 4  # longer ones by this factor


def force_form(network: Network, form: str) -> int:
    """Every operator of ``network`` that has C forms gets ``form`` (the tests run each
    form); returns how many did."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}")
    count = 0
    for node in network.ops:
        op: Any = node.op
        if isinstance(getattr(op, "form", None), str):
            node.op = dataclasses.replace(op, form=form)
            count += 1
    return count


def interior(
    size: int, out: int, kernel: int, stride: int, dilation: int, pad: int
) -> Tuple[int, int]:
    """[first, last) outputs along one axis whose every tap lies inside ``size``."""
    first = -(-pad // stride)
    last = (size - 1 - (kernel - 1) * dilation + pad) // stride + 1
    first, last = min(first, out), min(max(last, 0), out)
    return first, max(first, last)


def tap_range(body: Body, var: str, origin: str, size: int, kernel: int, dilation: int) -> None:
    """``var``0/``var``1: the taps k with 0 <= origin + k · dilation < size."""
    if dilation == 1:
        body.line(f"int32_t {var}0 = {origin} < 0 ? -{origin} : 0;")
        body.line(f"int32_t {var}1 = {size} - {origin} < {kernel} ? {size} - {origin} : {kernel};")
    else:
        d = dilation
        body.line(f"int32_t {var}0 = {origin} < 0 ? (-{origin} + {d - 1}) / {d} : 0;")
        body.line(f"int32_t {var}e = ({size} - {origin} + {d - 1}) / {d};")
        body.line(f"int32_t {var}1 = {var}e < {kernel} ? {var}e : {kernel};")


@contextlib.contextmanager
def border_pixels(
    body: Body,
    op: Any,
    size: Tuple[int, int],
    kernel: Tuple[int, int],
    box: Tuple[int, int, int, int],
) -> Iterator[List[str]]:
    """Loops over the output pixels outside ``box`` (the interior ``y0, y1, x0, x1``), each
    with its window's origin ``iy_``/``ix_`` and the taps inside the input (``ky0``..``ky1``,
    ``kx0``..``kx1``: :func:`clipped_taps`); yields the names of ``oy`` and ``ox``."""
    (h, wd), (kh, kw) = size, kernel
    oh, ow = op.out_hw
    sh, sw = op.strides
    dh, dw = op.dilations
    pt, pl = op.pads
    y0, y1, x0, x1 = box
    with nest(body, [("oy", oh), ("ox", ow)]) as (oy, ox):
        inside = f"{oy} >= {y0} && {oy} < {y1} && {ox} >= {x0} && {ox} < {x1}"
        with body.block(f"if (!({inside}))"):
            body.line(f"int32_t iy_ = {oy} * {sh} - {pt};")
            body.line(f"int32_t ix_ = {ox} * {sw} - {pl};")
            tap_range(body, "ky", "iy_", h, kh, dh)
            tap_range(body, "kx", "ix_", wd, kw, dw)
            yield [oy, ox]


@contextlib.contextmanager
def clipped_taps(body: Body) -> Iterator[None]:
    """The taps ky0..ky1 × kx0..kx1 that :func:`tap_range` found inside."""
    with (
        body.block("for (int32_t ky = ky0; ky < ky1; ++ky)"),
        body.block("for (int32_t kx = kx0; kx < kx1; ++kx)"),
    ):
        yield


def _dot(
    body: Body, xs: Sequence[str], ws: Sequence[str], accs: List[List[str]], length: int
) -> None:
    """acc[i][j] += sum over t < length of xs[i][t] · ws[j][t] (pointers to int8)."""

    def step(offset: str) -> None:
        for i, xp in enumerate(xs):
            body.line(f"int32_t x{i}_ = {xp}[{offset}];")
        for j, wp in enumerate(ws):
            body.line(f"int32_t w{j}_ = {wp}[{offset}];")
        for i in range(len(xs)):
            for j in range(len(ws)):
                body.line(f"{accs[i][j]} += x{i}_ * w{j}_;")

    if length <= FULL_UNROLL:
        for t in range(length):
            with body.block(""):
                step(str(t))
        return
    body.line("int32_t t_ = 0;")
    with body.block(f"for (; t_ + {UNROLL - 1} < {length}; t_ += {UNROLL})"):
        for u in range(UNROLL):
            with body.block(""):
                step(f"t_ + {u}")
    if length % UNROLL:
        with body.block(f"for (; t_ < {length}; ++t_)"):
            step("t_")


def store(body: Body, op, out: Buffer, at: str, acc: str, channel: str, tag: str) -> None:
    """Requantize, offset, clamp and store one int8 output."""
    q = op.quant.requant.emit(body, acc, channel, tag)
    low, high = int(op.activation.low), int(op.activation.high)
    body.line(f"int32_t c{tag}_ = {q} + {op.quant.output_offset};")
    body.line(f"c{tag}_ = c{tag}_ < {low} ? {low} : c{tag}_;")
    body.line(f"{out[at]} = (int8_t)(c{tag}_ > {high} ? {high} : c{tag}_);")


# The output may overwrite the input (x_, y_: in place); nothing writes the filter, bias or
# tables, which ``__restrict`` lets the compiler keep in registers across the stores to y_.
HELPER_PARAMS = (
    "const int8_t* x_, const int8_t* __restrict w_, const int32_t* __restrict bias_, "
    "int8_t* y_, const int32_t* __restrict mult_, const uint8_t* __restrict rshift_"
)


def constants_key(op: Any) -> str:
    """The constants a helper bakes besides the shape: offsets and bounds (the tables and
    the tensors are its parameters)."""
    q, act = op.quant, op.activation
    values = (q.input_offset, q.output_offset, int(act.low), int(act.high))
    return "_".join(str(v).replace("-", "m") for v in values)


def shareable(op: Any) -> bool:
    """Whether an operator's kernel can be a helper shared by every operator of its shape:
    per-channel multipliers with right shifts only, TFLite's classic rounding (the tables
    the helper takes)."""
    requant = op.quant.requant
    return (
        len(requant.multipliers) > 1
        and requant.rounding == "double"
        and (requant.right_shifts_only())
    )


def call_helper(
    body: Body, op: Any, name: str, helper: Body, out: Buffer, bias: Optional[Buffer]
) -> None:
    """Declares ``helper``'s lines as the static function ``name`` and calls it with this
    operator's tensors, tables, offsets and bounds."""
    # the text's hash in the name: helpers of one name are one text, or they are not shared
    lines = "\n".join(helper.lines)
    name = f"{name}_{hashlib.sha256(lines.encode()).hexdigest()[:8]}"
    body.helper(name, f"static void {name}({HELPER_PARAMS}) {{\n{lines}\n}}\n")
    args = ["x_", "w_", f"(const int32_t*){bias.var}" if bias is not None else "0"]
    args += [f"(int8_t*){out.var}", "mult_", "rshift_"]
    body.line(f"{name}({', '.join(args)});")


def pointwise_key(op: Any, x_shape: Sequence[int], oc: int) -> Optional[str]:
    """The helper name of an in-place 1×1 convolution's kernel (see :func:`shareable`)."""
    if not shareable(op):
        return None
    n, h, w, c = x_shape
    bias = "" if op.bias else "_nobias"
    return f"mlf_tfl_pointwise_{c}_{oc}_{n * h * w}_{constants_key(op)}{bias}"


def channel_base(
    body: Body,
    name: str,
    bias: Optional[Buffer],
    channel: str,
    w: str,
    count: int,
    stride: int,
    io: int,
) -> None:
    """``name`` = bias[channel] + io · sum of ``count`` filter values at ``w`` (stride apart)."""
    body.line(f"int32_t {name} = {bias[channel] if bias is not None else '0'};")
    if io:
        body.line(f"int32_t {name}s_ = 0;")
        with body.block(f"for (int32_t t_ = 0; t_ < {count}; ++t_)"):
            body.line(f"{name}s_ += {w}[t_ * {stride}];")
        body.line(f"{name} += {name}s_ * {io};")


def emit_conv(op, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
    """int8 CONV_2D (filter OHWI), NHWC."""
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if op.bias else None
    n, h, wd, c = x.shape
    _, kh, kw, _ = w.shape
    oh, ow = op.out_hw
    oc = out.shape[3]
    sh, sw = op.strides
    dh, dw = op.dilations
    pt, pl = op.pads
    io = op.quant.input_offset
    ks = kh * kw * c
    op.quant.requant.declare(body)
    body.line(f"const int8_t* x_ = (const int8_t*){x.var};")
    body.line(f"const int8_t* w_ = (const int8_t*){w.var};")
    y0, y1 = interior(h, oh, kh, sh, dh, pt)
    x0, x1 = interior(wd, ow, kw, sw, dw, pl)
    padded = padded_input(op, x.shape, (kh, kw)) if (y0, y1, x0, x1) != (0, oh, 0, ow) else None
    if padded is None and (y0, y1, x0, x1) != (0, oh, 0, ow):
        _conv_border(op, body, x, w, out, bias, (y0, y1, x0, x1))
    if padded is None and (y0 == y1 or x0 == x1):
        return
    pointwise = kh == kw == 1 and sh == sw == 1 and (y0, y1, x0, x1) == (0, oh, 0, ow)
    if pointwise and pointwise_in_place(c, oc):
        name = pointwise_key(op, x.shape, oc)
        if name is None or name not in body.shared:
            _pointwise_in_place(op, body, out, bias, c, n * oh * ow)
            return
        # one helper for the 1×1 convolutions of this shape
        helper = Body()
        y = Buffer("y_", "int8", out.shape)
        bias_ = Buffer("bias_", "int32", (oc,)) if bias is not None else None
        _pointwise_in_place(op, helper, y, bias_, c, n * oh * ow)
        call_helper(body, op, name, helper, out, bias)
        return
    span = kw * c if dw == 1 else 0
    if padded is not None:
        ph, pw = padded
        body.line(f"int8_t pad_[{ph * pw * c}];")
    with nest(body, [("b", n if not pointwise else 1)]) as (b,):
        if padded is not None:
            _copy_padded(body, x, b, (ph, pw), (pt, pl), -io)
        with body.block(f"for (int32_t o = 0; o < {oc}; o += 2)"):
            body.line(f"int32_t two_ = o + 1 < {oc};")
            body.line(f"const int8_t* q0_ = w_ + o * {ks};")
            body.line(f"const int8_t* q1_ = two_ ? q0_ + {ks} : q0_;")
            channel_base(body, "base0_", bias, "o", "q0_", ks, 1, io)
            channel_base(body, "base1_", bias, "(o + two_)", "q1_", ks, 1, io)
            if pointwise:
                _pointwise(op, body, out, c, n * oh * ow)
            elif padded is not None:
                source = Source("pad_", "0", (ph, pw, c), (0, 0))
                _conv_interior(op, body, source, out, b, (kh, kw), (0, oh, 0, ow), span)
            else:
                source = Source("x_", b, (h, wd, c), (pt, pl))
                _conv_interior(op, body, source, out, b, (kh, kw), (y0, y1, x0, x1), span)


class Source(NamedTuple):
    """What a convolution's interior reads: a pointer, its batch index, (rows, columns,
    channels) and its (top, left) padding."""

    var: str
    batch: str
    shape: Tuple[int, int, int]
    pads: Tuple[int, int]


def padded_input(op, x_shape: Sequence[int], kernel: Tuple[int, int]) -> Optional[Tuple[int, int]]:
    """(rows, columns) of one batch of a padded CONV_2D's input copied with its padding,
    when that copy fits the stack: the window then has no border. None otherwise."""
    c = x_shape[3]
    oh, ow = op.out_hw
    ph = (oh - 1) * op.strides[0] + (kernel[0] - 1) * op.dilations[0] + 1
    pw = (ow - 1) * op.strides[1] + (kernel[1] - 1) * op.dilations[1] + 1
    return (ph, pw) if ph * pw * c < STACK_LIMIT_BYTES else None


def _copy_padded(
    body: Body, x: Buffer, b: str, size: Tuple[int, int], pads: Tuple[int, int], zp: int
) -> None:
    """Batch ``b`` of ``x`` into ``pad_`` (rows × columns of c bytes), the padding filled with
    the input's zero point: a padded tap then adds (zp + io) · w = 0, as a skipped one."""
    _, h, wd, c = x.shape
    ph, pw = size
    pt, pl = pads
    cols = max(0, min(wd, pw - pl))
    with body.loop("r", ph):
        body.line(f"int8_t* d_ = pad_ + r * {pw * c};")
        body.line(f"int32_t iy_ = r - {pt};")
        with body.block(f"if (iy_ < 0 || iy_ >= {h})"), body.loop("q", pw * c):
            body.line(f"d_[q] = {zp};")
        with body.block("else"):
            if pl:
                with body.loop("q", pl * c):
                    body.line(f"d_[q] = {zp};")
            body.line(f"const int8_t* s_ = x_ + ({b} * {h} + iy_) * {wd * c};")
            with body.loop("q", cols * c):
                body.line(f"d_[{pl * c} + q] = s_[q];")
            if pl + cols < pw:
                with body.block(f"for (int32_t q = {(pl + cols) * c}; q < {pw * c}; ++q)"):
                    body.line(f"d_[q] = {zp};")


def _pair_store(op, body: Body, out: Buffer, at: str, accs: Sequence[str], tag: str) -> None:
    store(body, op, out, at, accs[0], "o", f"{tag}0")
    with body.block("if (two_)"):
        store(body, op, out, f"{at} + 1", accs[1], "(o + 1)", f"{tag}1")


def _pointwise(op, body: Body, out: Buffer, c: int, pixels: int) -> None:
    """Pixels in pairs; an odd last pixel is computed as its own pair (stored once)."""
    oc = out.shape[-1]
    with body.block(f"for (int32_t p = 0; p < {pixels}; p += 2)"):
        body.line(f"int32_t more_ = p + 1 < {pixels};")
        body.line(f"const int8_t* r0_ = x_ + p * {c};")
        body.line(f"const int8_t* r1_ = more_ ? r0_ + {c} : r0_;")
        accs = [["a00_", "a01_"], ["a10_", "a11_"]]
        body.line("int32_t a00_ = base0_, a01_ = base1_, a10_ = base0_, a11_ = base1_;")
        _dot(body, ["r0_", "r1_"], ["q0_", "q1_"], accs, c)
        _pair_store(op, body, out, f"p * {oc} + o", accs[0], "a")
        with body.block("if (more_)"):
            _pair_store(op, body, out, f"(p + 1) * {oc} + o", accs[1], "b")


def pointwise_in_place(c: int, oc: int) -> bool:
    """Whether a 1×1 stride-1 CONV_2D runs pixel by pixel, its output able to overwrite its
    input: the per-channel sums (int32) and two pixels of output fit the stack. An output
    pixel no wider than an input pixel (oc <= c) lies at or before that input pixel's bytes:
    the pixels run from the first. A wider one (the storage grows to hold the output) lies
    at or after them: the pixels run from the last to the first, every input pixel after
    the pair being read already."""
    return oc * 4 + 2 * oc < STACK_LIMIT_BYTES


def _pointwise_in_place(
    op, body: Body, out: Buffer, bias: Optional[Buffer], c: int, pixels: int
) -> None:
    """Two pixels at a time into ``tmp_``, copied out once both are done: the output may
    overwrite the input (:func:`pointwise_in_place`: from the last pair when oc > c)."""
    oc = out.shape[-1]
    io = op.quant.input_offset
    body.line(f"int32_t basev_[{oc}];")
    body.line(f"int8_t tmp_[{2 * oc}];")
    with body.loop("o", oc):
        channel_base(body, "bo_", bias, "o", f"(w_ + o * {c})", c, 1, io)
        body.line("basev_[o] = bo_;")
    tmp = Buffer("tmp_", "int8", (2 * oc,))
    if oc > c:  # the same pairs, the last (maybe one pixel) first
        pairs = f"for (int32_t p = {(pixels - 1) // 2 * 2}; p >= 0; p -= 2)"
    else:
        pairs = f"for (int32_t p = 0; p < {pixels}; p += 2)"
    with body.block(pairs):
        body.line(f"int32_t more_ = p + 1 < {pixels};")
        body.line(f"const int8_t* r0_ = x_ + p * {c};")
        body.line(f"const int8_t* r1_ = more_ ? r0_ + {c} : r0_;")
        with body.block(f"for (int32_t o = 0; o < {oc}; o += 2)"):
            body.line(f"int32_t two_ = o + 1 < {oc};")
            body.line(f"const int8_t* q0_ = w_ + o * {c};")
            body.line(f"const int8_t* q1_ = two_ ? q0_ + {c} : q0_;")
            body.line("int32_t base0_ = basev_[o], base1_ = basev_[o + two_];")
            accs = [["a00_", "a01_"], ["a10_", "a11_"]]
            body.line("int32_t a00_ = base0_, a01_ = base1_, a10_ = base0_, a11_ = base1_;")
            _dot(body, ["r0_", "r1_"], ["q0_", "q1_"], accs, c)
            for i in range(2):
                _pair_store(op, body, tmp, f"{i * oc} + o", accs[i], "ab"[i])
        # both pixels' outputs (one when the last is odd) over the input they were made of
        with body.block(f"for (int32_t t = 0; t < (1 + more_) * {oc}; ++t)"):
            body.line(f"{out[f'p * {oc} + t']} = tmp_[t];")


def _conv_interior(
    op,
    body: Body,
    src: Source,
    out: Buffer,
    b: str,
    kernel: Tuple[int, int],
    box: Tuple[int, int, int, int],
    span: int,
) -> None:
    """The interior's pixels in pairs along a row; ``span``: the contiguous length of a
    filter row (kw · c), 0 with a dilated width (then each tap's c values)."""
    h, wd, c = src.shape
    _, oh, ow, oc = out.shape
    kh, kw = kernel
    sh, sw = op.strides
    dh, dw = op.dilations
    pt, pl = src.pads
    y0, y1, x0, x1 = box
    with body.block(f"for (int32_t oy = {y0}; oy < {y1}; ++oy)"):
        origin = f"({src.batch} * {h} + oy * {sh} - {pt}) * {wd * c}"
        body.line(f"const int8_t* row_ = {src.var} + {origin};")
        with body.block(f"for (int32_t ox = {x0}; ox < {x1}; ox += 2)"):
            # pixels in pairs; an odd last pixel is computed as its own pair (stored once)
            body.line(f"int32_t more_ = ox + 1 < {x1};")
            body.line(f"int32_t step_ = more_ ? {sw * c} : 0;")
            names = [["a00_", "a01_"], ["a10_", "a11_"]]
            body.line("int32_t a00_ = base0_, a01_ = base1_, a10_ = base0_, a11_ = base1_;")
            with body.block(f"for (int32_t ky = 0; ky < {kh}; ++ky)"):
                body.line(f"const int8_t* r0_ = row_ + (ky * {dh * wd} + ox * {sw} - {pl}) * {c};")
                body.line("const int8_t* r1_ = r0_ + step_;")
                body.line(f"const int8_t* f0_ = q0_ + ky * {kw * c};")
                body.line(f"const int8_t* f1_ = q1_ + ky * {kw * c};")
                if span:
                    _dot(body, ["r0_", "r1_"], ["f0_", "f1_"], names, span)
                else:
                    with body.block(f"for (int32_t kx = 0; kx < {kw}; ++kx)"):
                        body.line(f"const int8_t* s0_ = r0_ + kx * {dw * c};")
                        body.line(f"const int8_t* s1_ = r1_ + kx * {dw * c};")
                        body.line(f"const int8_t* g0_ = f0_ + kx * {c};")
                        body.line(f"const int8_t* g1_ = f1_ + kx * {c};")
                        _dot(body, ["s0_", "s1_"], ["g0_", "g1_"], names, c)
            at = f"(({b} * {oh} + oy) * {ow} + ox) * {oc} + o"
            _pair_store(op, body, out, at, names[0], "a")
            with body.block("if (more_)"):
                _pair_store(op, body, out, f"{at} + {oc}", names[1], "b")


def _conv_border(
    op,
    body: Body,
    x: Buffer,
    w: Buffer,
    out: Buffer,
    bias: Optional[Buffer],
    box: Tuple[int, int, int, int],
) -> None:
    """Every output outside the interior: the taps inside only, (x + io) · w per tap."""
    n, h, wd, c = x.shape
    _, kh, kw, _ = w.shape
    oh, ow = op.out_hw
    oc = out.shape[3]
    dh, dw = op.dilations
    io = op.quant.input_offset
    with (
        nest(body, [("b", n)]) as (b,),
        border_pixels(body, op, (h, wd), (kh, kw), box) as (oy, ox),
    ):
        ks = kh * kw * c
        with body.block(f"for (int32_t o = 0; o < {oc}; o += 2)"):
            # two output channels share each input load and its offset
            body.line(f"int32_t two_ = o + 1 < {oc};")
            first = bias["o"] if bias is not None else "0"
            second = bias["(o + two_)"] if bias is not None else "0"
            body.line(f"int32_t a0_ = {first}, a1_ = {second};")
            with clipped_taps(body):
                row = f"({b} * {h} + iy_ + ky * {dh}) * {wd}"
                body.line(f"const int8_t* r_ = x_ + ({row} + ix_ + kx * {dw}) * {c};")
                body.line(f"const int8_t* f0_ = w_ + ((o * {kh} + ky) * {kw} + kx) * {c};")
                body.line(f"const int8_t* f1_ = two_ ? f0_ + {ks} : f0_;")
                with body.block(f"for (int32_t i = 0; i < {c}; ++i)"):
                    body.line(f"int32_t xv_ = (int32_t)r_[i] + {io};")
                    body.line("a0_ += xv_ * (int32_t)f0_[i];")
                    body.line("a1_ += xv_ * (int32_t)f1_[i];")
            at = f"(({b} * {oh} + {oy}) * {ow} + {ox}) * {oc} + o"
            _pair_store(op, body, out, at, ["a0_", "a1_"], "e")


def emit_fully_connected(op, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
    """int8 FULLY_CONNECTED, row by row (a batch row is used once: summing the filter to
    hoist the offsets would cost as much as the product): four output channels share each
    input load and its offset, (x + io) · (w + fo) per term as the reference form."""
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if op.bias else None
    o, d = w.shape
    batches = x.size // d
    io, fo = op.quant.input_offset, op.quant.filter_offset
    op.quant.requant.declare(body)
    body.line(f"const int8_t* w_ = (const int8_t*){w.var};")
    with nest(body, [("r", batches)]) as (r,):
        body.line(f"const int8_t* x_ = (const int8_t*){x.var} + {r} * {d};")
        body.line("int32_t o = 0;")
        groups = [(4, f"o + 3 < {o}")] if o >= 4 else []
        if o % 4:
            groups.append((1, f"o < {o}"))
        for group, cond in groups:
            with body.block(f"for (; {cond}; o += {group})"):
                body.line(f"const int8_t* q_ = w_ + o * {d};")
                accs = [f"a{j}_" for j in range(group)]
                inits = (
                    f"{a} = {bias[f'o + {j}'] if bias is not None else '0'}"
                    for j, a in enumerate(accs)
                )
                body.line("int32_t " + ", ".join(inits) + ";")
                with body.block(f"for (int32_t t = 0; t < {d}; ++t)"):
                    body.line(f"int32_t xv_ = (int32_t)x_[t] + {io};")
                    for j, a in enumerate(accs):
                        wv = f"(int32_t)q_[{j * d} + t]"
                        body.line(f"{a} += xv_ * ({wv} + {fo});" if fo else f"{a} += xv_ * {wv};")
                for j, a in enumerate(accs):
                    store(body, op, out, f"{r} * {o} + o + {j}", a, f"(o + {j})", f"{j}")
