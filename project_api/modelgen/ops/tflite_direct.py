"""The ``direct`` kernel form: an int8 CONV_2D from a single input channel, computed directly
(no im2col buffer, no library call) by C specialized to the layer's shape.

Such a layer (KWS's first: a 10x4 window over a 49x10 spectrogram into 64 channels) runs in
CMSIS-NN's generic im2col loops, which copy the window of every output position and then
multiply it as a matrix of one row. Here each output position's window is gathered once
(``KH * KW`` values, constant bounds) and every output channel's filter is applied to it:

- **Helium** (``__ARM_FEATURE_MVE``, Cortex-M55): the window raw, padding filled with the input
  zero point, in 16-lane vectors; each channel is ``VMLADAVA`` over the filter's bytes, the
  input offset folded into the bias (``bias + offset * sum(filter)``, worked out per call);
  four channels requantized at a time in vectors.
- **DSP** (``__ARM_FEATURE_DSP``, Cortex-M4/M7/M33): the window offset and packed in int16
  pairs in the order ``SXTB16`` unpacks four filter bytes, so each four taps cost one load
  of the filter and two ``SMLAD``; two output positions share each filter load.
- **portable** (anything else, the host): the same pairing in plain C.

The requantization is TFLite's classic double rounding (a rounding doubling high multiply,
then a rounding right shift with ties away from zero), as CMSIS-NN's ``arm_nn_requantize``
and LiteRT's reference convolution compute it, so every path's output equals theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer
from .base import Op, TensorType, require
from .tflite import TflConv

# Headers of the intrinsics, included only where the compiler targets them.
INTRINSICS = (
    "#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)\n"
    "#include <arm_mve.h>\n"
    "#elif defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP\n"
    "#include <arm_acle.h>\n"
    "#endif"
)
MVE = "#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)"
DSP = "#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP"
# Output positions that share each load of the filter on the DSP and portable paths.
BLOCK = 4
# Quads of taps (8 multiply-accumulates a position) unrolled a loop step on the DSP path.
UNROLL = 4
# Output positions that share each load of the filter on Helium.
MVE_BLOCK = 2


def _ints(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


@dataclass(frozen=True)
class DirectConv(Op):
    """A single-input-channel int8 CONV_2D (``base``) computed directly (module docstring)."""

    base: TflConv
    # output positions from the last to the first (a 1x1 convolution that widens its input
    # and may overwrite it: .tflite_simd.py)
    backward: bool = False

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(not self.base.depthwise, "direct: a CONV_2D")
        require(x.dtype == "int8" and not self.base.hybrid_scale, "direct: int8 only")
        require(len(x.shape) == 4, "direct: an NHWC input")
        require(
            x.shape[3] == 1 or (types[1].shape[1:3] == (1, 1) and self.base.pads == (0, 0)),
            "direct: a single input channel, or a 1x1 filter without padding",
        )
        require(self.base.quant.requant.rounding == "double", "direct: double rounding")
        return self.base.infer(types)

    def name_parts(self) -> List[str]:
        return self.base.name_parts() + ["direct"]

    def output_names(self) -> List[str]:
        return self.base.output_names()

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return self.base.reference(arrays)

    def emit(
        self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer],
        portable: Optional[Callable[[], None]] = None,
    ) -> None:  # fmt: skip
        """The Helium, DSP and portable paths; ``portable`` (if given) emits the code for
        cores with neither instead of ours."""
        op = self.base
        x, w, out = ins[0], ins[1], outs[0]
        n, h, wd, c = x.shape
        oc, kh, kw, _ = w.shape
        oh, ow = op.out_hw
        taps = kh * kw * c
        q = op.quant
        requant = q.requant
        mults = list(requant.multipliers) * (oc if len(requant.multipliers) == 1 else 1)
        shifts = list(requant.shifts) * (oc if len(requant.shifts) == 1 else 1)
        lo, hi = int(op.activation.low), int(op.activation.high)
        body.include(INTRINSICS)
        body.line("const int8_t* x_ = (const int8_t*)" + x.var + ";")
        body.line("const int8_t* w_ = (const int8_t*)" + w.var + ";")
        body.line("int8_t* y_ = (int8_t*)" + out.var + ";")
        bias = f"((const int32_t*){ins[2].var})[o]" if op.bias else "0"
        positions = n * oh * ow
        geometry = _Geometry(h, wd, oh, ow, kh, kw, op.strides, op.dilations, op.pads, c)
        if c == 1:
            geometry.pad_input(body, n, q.input_offset)
        body.line(MVE)
        self._mve(body, geometry, positions, oc, taps, bias, lo, hi)
        body.line("#else" if portable is None else DSP.replace("#if", "#elif"))
        body.line(f"static const int32_t mult_[{oc}] = {_ints(mults)};")
        body.line(f"static const int32_t shift_[{oc}] = {_ints(shifts)};")
        self._pairs(body, geometry, positions, oc, taps, bias, lo, hi)
        if portable is not None:
            body.line("#else")
            portable()
        body.line("#endif")

    # -- Helium -------------------------------------------------------------------------------

    def _mve(
        self, body: Body, g: _Geometry, positions: int, oc: int, taps: int, bias: str,
        lo: int, hi: int,
    ) -> None:  # fmt: skip
        q = self.base.quant
        vectors = -(-taps // 16)
        last = taps - 16 * (vectors - 1)
        padded = -(-oc // 4) * 4
        block = MVE_BLOCK if vectors <= 3 else 1
        requant = q.requant
        shifts = list(requant.shifts) * (oc if len(requant.shifts) == 1 else 1)
        mults = list(requant.multipliers) * (oc if len(requant.multipliers) == 1 else 1)
        fill = [0] * (padded - oc)
        body.line(f"static const int32_t vm_[{padded}] = {_ints(mults + fill)};")
        body.line(
            f"static const int32_t vl_[{padded}] = {_ints([max(v, 0) for v in shifts] + fill)};"
        )
        body.line(
            f"static const int32_t vr_[{padded}] = {_ints([min(v, 0) for v in shifts] + fill)};"
        )
        body.line(f"int32_t bq_[{padded}];")
        body.line(f"int32_t acc_[{block}][{padded}] __attribute__((aligned(16)));")
        body.line(f"const mve_pred16_t tail_ = vctp8q({last});")
        with body.loop("o", oc):
            body.line(f"const int8_t* wr_ = w_ + o * {taps};")
            body.line("int32_t s_ = 0;")
            for j in range(vectors):
                body.line(f"s_ = vaddvaq_s8(s_, {_mve_load(j, vectors)});")
            body.line(f"bq_[o] = {bias} + {q.input_offset} * s_;")
        span = 16 * vectors
        body.line(f"int8_t win_[{block}][{span}] __attribute__((aligned(16)));")
        with body.block(block_loop(positions, block, self.backward)):
            for k in range(block):
                with body.block(""):
                    body.line(f"const int32_t pos_ = p + {k} < {positions} ? p + {k} : p;")
                    g.gather(body, "pos_", f"win_[{k}]", taps, span, raw=True)
            for k in range(block):
                for j in range(vectors):
                    body.line(f"const int8x16_t v{k}{j}_ = vld1q_s8(&win_[{k}][{16 * j}]);")
            with body.loop("o", oc):
                body.line(f"const int8_t* wr_ = w_ + o * {taps};")
                for j in range(vectors):
                    body.line(f"const int8x16_t w{j}_ = {_mve_load(j, vectors)};")
                for k in range(block):
                    body.line(f"acc_[{k}][o] = {_mve_dot(vectors, k)};")
            body.line(f"const int32x4_t lo_ = vdupq_n_s32({lo});")
            body.line(f"const int32x4_t hi_ = vdupq_n_s32({hi});")
            for k in range(block):
                guard = f"if (p + {k} < {positions})" if k else "if (1)"
                with body.block(guard):
                    body.line(f"int8_t* yr_ = y_ + (p + {k}) * {oc};")
                    with body.block(f"for (int32_t o = 0; o < {oc}; o += 4)"):
                        body.line(f"int32x4_t a_ = vldrwq_s32(&acc_[{k}][o]);")
                        body.line("const int32x4_t ls_ = vldrwq_s32(vl_ + o);")
                        body.line("const int32x4_t rs_ = vldrwq_s32(vr_ + o);")
                        body.line("const int32x4_t m_ = vldrwq_s32(vm_ + o);")
                        body.line("a_ = vaddq_s32(a_, vldrwq_s32(bq_ + o));")
                        _mve_requant(body, "a_", q.output_offset)
                        if oc % 4:
                            body.line(f"vstrbq_p_s32(yr_ + o, a_, vctp32q({oc} - o));")
                        else:
                            body.line("vstrbq_s32(yr_ + o, a_);")

    # -- DSP and portable ----------------------------------------------------------------------

    def _pairs(
        self, body: Body, g: _Geometry, positions: int, oc: int, taps: int, bias: str,
        lo: int, hi: int,
    ) -> None:  # fmt: skip
        q = self.base.quant
        left = any(s > 0 for s in self.base.quant.requant.shifts)
        quads = taps // 4
        words = 2 * quads + (taps % 4)  # packed pairs, then the tail taps one a word
        block = BLOCK
        body.line(DSP)
        body.line("#define SXTB16_(v) ((int32_t)__sxtb16((int8x4_t)(v)))")
        body.line("#define SMLAD_(a, b, c) __smlad((int16x2_t)(a), (int16x2_t)(b), (c))")
        body.line("#define SAT8_(v) __ssat((v), 8)")
        body.line("#else")
        body.line(
            "#define SXTB16_(v) ((int32_t)(((uint32_t)(uint16_t)(int16_t)(int8_t)(v)) | "
            "((uint32_t)(int32_t)(int8_t)((uint32_t)(v) >> 16) << 16)))"
        )
        body.line(
            "#define SMLAD_(a, b, c) ((c) + (int32_t)(int16_t)(a) * (int16_t)(b) + "
            "((int32_t)(a) >> 16) * ((int32_t)(b) >> 16))"
        )
        body.line("#define SAT8_(v) ((v) < -128 ? -128 : ((v) > 127 ? 127 : (v)))")
        body.line("#endif")
        body.line(f"int16_t win_[{taps}];")
        body.line(f"int32_t pk_[{block}][{words}];")
        with body.block(block_loop(positions, block, self.backward)):
            with body.loop("k", block):
                body.line(f"const int32_t pos_ = p + k < {positions} ? p + k : p;")
                g.gather(body, "pos_", "win_", taps, taps, raw=False, offset=q.input_offset)
                _pack(body, "win_", "pk_[k]", taps)
            with body.loop("o", oc):
                body.line(f"const int8_t* wr_ = w_ + o * {taps};")
                body.line(f"const int32_t a0_ = {bias};")
                for k in range(1, block):
                    body.line(f"int32_t a{k}_ = a0_;")
                body.line("int32_t c0_ = a0_;")
                # UNROLL quads a loop step (a loop over them all would cost its overhead, all
                # of them unrolled the flash), then the quads left over
                steps, left_over = divmod(quads, UNROLL)

                def quad(j: str) -> None:
                    with body.block(""):
                        body.line("uint32_t w4_;")
                        body.line(f"__builtin_memcpy(&w4_, wr_ + 4 * ({j}), 4);")
                        body.line("const int32_t we_ = SXTB16_(w4_);")
                        body.line("const int32_t wo_ = SXTB16_((w4_ >> 8) | (w4_ << 24));")
                        for k in range(block):
                            acc = f"a{k}_" if k else "c0_"
                            body.line(f"{acc} = SMLAD_(we_, pk_[{k}][2 * ({j})], {acc});")
                            body.line(f"{acc} = SMLAD_(wo_, pk_[{k}][2 * ({j}) + 1], {acc});")

                if steps > 1:
                    with body.loop("js", steps):
                        for u in range(UNROLL):
                            quad(f"js * {UNROLL} + {u}")
                else:
                    left_over += UNROLL * steps
                for j in range(quads - left_over, quads):
                    quad(str(j))
                for t in range(4 * quads, taps):
                    at = 2 * quads + t - 4 * quads
                    for k in range(block):
                        acc = f"a{k}_" if k else "c0_"
                        body.line(f"{acc} += (int32_t)wr_[{t}] * pk_[{k}][{at}];")
                _requant_setup(body, "o", left)
                for k in range(block):
                    acc = f"a{k}_" if k else "c0_"
                    dest = f"y_[(p + {k}) * {oc} + o]"
                    args = (body, acc, q.output_offset, lo, hi, dest, f"{k}", left)
                    if k == 0:
                        _requant(*args)
                    else:
                        with body.block(f"if (p + {k} < {positions})"):
                            _requant(*args)
        body.line("#undef SXTB16_")
        body.line("#undef SMLAD_")
        body.line("#undef SAT8_")


def block_loop(positions: int, block: int, backward: bool) -> str:
    """The loop over blocks of ``block`` output positions ``p``: from the first, or from the
    last block (the same blocks, a short one last) back to the first."""
    if not backward:
        return f"for (int32_t p = 0; p < {positions}; p += {block})"
    last = (positions - 1) // block * block
    return f"for (int32_t p = {last}; p >= 0; p -= {block})"


def _mve_requant(body: Body, acc: str, out_offset: int) -> None:
    """CMSIS-NN's double rounding on four lanes (``arm_requantize_mve_32x4``'s arithmetic)
    with the vectors ``ls_``, ``rs_`` (left shift, minus right shift), ``m_`` (multipliers),
    ``lo_`` and ``hi_`` (bounds) in scope: left shift, rounding doubling high multiply, a
    rounding right shift whose ties go away from zero (the fixup), offset and clamp."""
    body.line(f"{acc} = vqrdmulhq_s32(vshlq_s32({acc}, ls_), m_);")
    body.line(f"{acc} = vqaddq_s32({acc}, vshrq_n_s32(vandq_s32({acc}, rs_), 31));")
    body.line(f"{acc} = vrshlq_s32({acc}, rs_);")
    body.line(f"{acc} = vaddq_n_s32({acc}, {out_offset});")
    body.line(f"{acc} = vminq_s32(vmaxq_s32({acc}, lo_), hi_);")


def _mve_load(j: int, vectors: int) -> str:
    if j == vectors - 1:
        return f"vldrbq_z_s8(wr_ + {16 * j}, tail_)"
    return f"vldrbq_s8(wr_ + {16 * j})"


def _mve_dot(vectors: int, k: int) -> str:
    """The dot product of window ``k``'s vectors with the loaded filter ``w<j>_``."""
    text = f"vmladavq_s8(v{k}0_, w0_)"
    for j in range(1, vectors):
        text = f"vmladavaq_s8({text}, v{k}{j}_, w{j}_)"
    return text


def _pack(body: Body, win: str, packed: str, taps: int) -> None:
    """The window's int16 values as pairs in ``SXTB16``'s order: taps (0, 2), (1, 3) of each
    four, then the tail taps one a word."""
    quads = taps // 4
    with body.loop("j", quads):
        for half in (0, 1):
            a, b = f"{win}[4 * j + {half}]", f"{win}[4 * j + {half + 2}]"
            body.line(
                f"{packed}[2 * j + {half}] = (int32_t)((uint32_t)(uint16_t){a} | "
                f"((uint32_t)(uint16_t){b} << 16));"
            )
    for t in range(4 * quads, taps):
        body.line(f"{packed}[{2 * quads + t - 4 * quads}] = {win}[{t}];")


def _requant_setup(body: Body, channel: str, left: bool) -> None:
    """The channel's requantization constants, once for all the positions that use them."""
    body.line(f"const int32_t m_ = mult_[{channel}];")
    if left:
        body.line(f"const int32_t ls_ = shift_[{channel}] > 0 ? shift_[{channel}] : 0;")
        body.line(f"const int32_t rs_ = shift_[{channel}] > 0 ? 0 : -shift_[{channel}];")
    else:
        body.line(f"const int32_t rs_ = -shift_[{channel}];")
    body.line("const int32_t mask_ = (int32_t)(((uint32_t)1 << rs_) - 1u);")
    body.line("const int32_t half_ = mask_ >> 1;")


def _requant(
    body: Body, acc: str, out_offset: int, lo: int, hi: int, dest: str, tag: str, left: bool
) -> None:
    """CMSIS-NN's ``arm_nn_requantize`` (double rounding) of ``acc`` with the constants of
    :func:`_requant_setup`, offset, clamped (``SAT8_`` for the whole int8 range) and stored:
    a rounding doubling high multiply, then a rounding right shift, ties away from zero."""
    t = tag
    value = f"(int32_t)((uint32_t){acc} << ls_)" if left else acc
    body.line(
        f"const int32_t hi{t}_ = (int32_t)(((int64_t)({value}) * m_ + ((int64_t)1 << 30)) >> 31);"
    )
    body.line(
        f"int32_t r{t}_ = (hi{t}_ >> rs_) + ((hi{t}_ & mask_) > half_ + "
        f"(int32_t)((uint32_t)hi{t}_ >> 31) ? 1 : 0) + {out_offset};"
    )
    if (lo, hi) == (-128, 127):
        body.line(f"{dest} = (int8_t)SAT8_(r{t}_);")
    else:
        body.line(f"r{t}_ = r{t}_ < {lo} ? {lo} : (r{t}_ > {hi} ? {hi} : r{t}_);")
        body.line(f"{dest} = (int8_t)r{t}_;")


@dataclass(frozen=True)
class _Geometry:
    h: int
    w: int
    oh: int
    ow: int
    kh: int
    kw: int
    strides: Sequence[int]
    dilations: Sequence[int]
    pads: Sequence[int]
    channels: int = 1  # > 1: a 1x1 filter, the window is one pixel's channels

    @property
    def padded(self) -> Tuple[int, int]:
        """Rows and columns of the input with the padding the windows reach."""
        (sh, sw), (dh, dw), (pt, pl) = self.strides, self.dilations, self.pads
        bottom = max(0, (self.oh - 1) * sh - pt + (self.kh - 1) * dh - (self.h - 1))
        right = max(0, (self.ow - 1) * sw - pl + (self.kw - 1) * dw - (self.w - 1))
        return self.h + pt + bottom, self.w + pl + right

    def pad_input(self, body: Body, n: int, input_offset: int) -> None:
        """``xp_``: the input with its padding made real (the input zero point, which the
        offset makes 0), so that every window is read without bounds checks: TFLite's
        padding folded into the convolution."""
        hp, wp = self.padded
        pt, pl = self.pads
        xp = body.scratch("xpad_", "int8", n * hp * wp)
        body.line(f"int8_t* xp_ = (int8_t*){xp.var};")
        body.line(f"__builtin_memset(xp_, (int8_t){-input_offset}, {n * hp * wp});")
        with body.block(f"for (int32_t r = 0; r < {n * self.h}; ++r)"):
            body.line(f"const int32_t b_ = r / {self.h};")
            body.line(
                f"__builtin_memcpy(xp_ + (b_ * {hp} + r % {self.h} + {pt}) * {wp} + {pl}, "
                f"x_ + r * {self.w}, {self.w});"
            )

    def gather(
        self, body: Body, pos: str, win: str, taps: int, size: int, *, raw: bool,
        offset: int = 0,
    ) -> None:  # fmt: skip
        """``win[t]`` = the padded input (``xp_``) under tap ``t`` of output position ``pos``
        (flat over batch, rows, columns): raw, or plus ``offset``; zeros from ``taps`` to
        ``size``."""
        (sh, sw), (dh, dw) = self.strides, self.dilations
        hp, wp = self.padded
        body.line(f"const int32_t b_ = {pos} / {self.oh * self.ow};")
        body.line(f"const int32_t oy_ = ({pos} / {self.ow}) % {self.oh};")
        body.line(f"const int32_t ox_ = {pos} % {self.ow};")
        if self.channels > 1:  # a 1x1 filter: the pixel's channels, contiguous
            c = self.channels
            body.line(
                f"const int8_t* xw_ = x_ + ((b_ * {self.h} + oy_ * {sh}) * {self.w} + "
                f"ox_ * {sw}) * {c};"
            )
            if raw:
                body.line(f"__builtin_memcpy({win}, xw_, {c});")
            else:
                with body.loop("t", c):
                    body.line(f"{win}[t] = (int16_t)(xw_[t] + {offset});")
            if size > taps:
                with body.block(f"for (int32_t t = {taps}; t < {size}; ++t)"):
                    body.line(f"{win}[t] = 0;")
            return
        body.line(f"const int8_t* xw_ = xp_ + (b_ * {hp} + oy_ * {sh}) * {wp} + ox_ * {sw};")
        for ky in range(self.kh):
            row = f"xw_ + {ky * dh * wp}"
            if raw and dw == 1:
                body.line(f"__builtin_memcpy({win} + {ky * self.kw}, {row}, {self.kw});")
                continue
            for kx in range(self.kw):
                value = f"({row})[{kx * dw}]"
                if not raw:
                    value = f"(int16_t)({value} + {offset})"
                body.line(f"{win}[{ky * self.kw + kx}] = {value};")
        if size > taps:
            with body.block(f"for (int32_t t = {taps}; t < {size}; ++t)"):
                body.line(f"{win}[t] = 0;")
