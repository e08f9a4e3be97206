"""The ``dot`` kernel form: an int8 FULLY_CONNECTED as exact int32 dot products, requantized
with the operator's own rounding (LiteRT's: one rounding, halves away from zero), so its output
is LiteRT's on every core.

CMSIS-NN's ``arm_fully_connected_s8`` rounds twice and cannot be used where LiteRT rounds once;
its dot products can, and so can ours: an int32 sum is exact whatever instructions compute it.

- The input offset is folded into the bias at compile time (the filter is constant):
  ``bias + io * sum(w) + D * io * fo`` per row (:func:`folded_bias`), so the products are of
  the raw int8 bytes; a filter offset ``fo`` (if any) adds ``fo * sum(x)`` once per batch row.
- **Helium** (``__ARM_FEATURE_MVE``, Cortex-M55): :data:`MVE_ROWS` rows at a time share each
  16-lane input vector, each row ``VMLADAVA`` over its 16 filter bytes through a pointer of
  its own (post-incremented loads); a depth not a multiple of 16 ends in one tail-predicated
  (zeroing) load.
- **DSP** (``__ARM_FEATURE_DSP``, Cortex-M4/M7/M33): :data:`DSP_ROWS` rows at a time share
  each input word unpacked once by ``SXTB16`` (bytes 0, 2, and with ``ROR #8`` bytes 1, 3),
  the filter word likewise, two ``SMLAD`` a row for four taps; a depth not a multiple of 4
  ends in scalar taps.
- **portable** (anything else, the host): four rows sharing each input load, in plain C.

The rows left over past the groups run one at a time. The requantization is
:class:`.tflite_arith.Requant`'s, per tensor or per channel, then offset and clamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

import numpy as np

from ..cgen import Body, Buffer
from .base import Op, TensorType, require
from .tflite import TflFullyConnected
from .tflite_direct import DSP, INTRINSICS, MVE


def _ints(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


MVE_ROWS = 4  # rows sharing each input vector on Helium
DSP_ROWS = 4  # rows sharing each unpacked input word on DSP
PLAIN_ROWS = 4  # rows sharing each input load in plain C


def folded_bias(
    weights: np.ndarray, bias: Optional[np.ndarray], input_offset: int, filter_offset: int
) -> np.ndarray:
    """The int32 bias with the input offset folded in: ``bias + io * (sum(w) + D * fo)`` a
    row, wrapped to int32 as the kernel's int32 sums wrap."""
    w = weights.astype(np.int64)
    rows, depth = w.shape
    base = np.zeros(rows, np.int64) if bias is None else bias.astype(np.int64)
    total = base + input_offset * (w.sum(axis=1) + depth * filter_offset)
    return ((total + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


@dataclass(frozen=True)
class DotFullyConnected(Op):
    """An int8 FULLY_CONNECTED whose third operand is :func:`folded_bias` (module docstring)."""

    base: TflFullyConnected

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(types[0].dtype == "int8" and types[1].dtype == "int8", "dot: int8 only")
        require(len(types) == 3 and types[2].dtype == "int32", "dot: a folded int32 bias")
        return self.base.infer(types)

    def name_parts(self) -> List[str]:
        return self.base.name_parts() + ["dot"]

    def output_names(self) -> List[str]:
        return self.base.output_names()

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return self.base.reference(arrays)

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w, out = ins[0], ins[1], outs[0]
        rows, depth = w.shape
        batches = x.size // depth
        op = self.base
        op.quant.requant.declare(body)
        body.include(INTRINSICS)
        body.line(f"const int8_t* w_ = (const int8_t*){w.var};")
        body.line(f"const int32_t* bq_ = (const int32_t*){ins[2].var};")
        with body.loop("b", batches):
            body.line(f"const int8_t* xr_ = (const int8_t*){x.var} + b * {depth};")
            body.line(f"int8_t* yr_ = (int8_t*){out.var} + b * {rows};")
            fo = op.quant.filter_offset
            if fo:
                body.line("int32_t sx_ = 0;")
                with body.loop("t", depth):
                    body.line("sx_ += xr_[t];")
                body.line(f"const int32_t fx_ = {fo} * sx_;")
            init = " + fx_" if fo else ""
            body.line("int32_t o = 0;")
            body.line(MVE)
            self._rows(body, rows, depth, MVE_ROWS, init, _mve_steps, self._mve_store(body, rows))
            body.line(DSP.replace("#if", "#elif"))
            self._rows(body, rows, depth, DSP_ROWS, init, _dsp_steps)
            body.line("#else")
            self._rows(body, rows, depth, PLAIN_ROWS, init, _plain_steps)
            body.line("#endif")

    def _rows(
        self, body: Body, rows: int, depth: int, group: int, init: str,
        steps: Callable[[Body, int, int], None],
        store4: Optional[Callable[[Body], None]] = None,
    ) -> None:  # fmt: skip
        """Groups of ``group`` rows, then the rows left one at a time; ``steps`` emits the
        dot products of ``n`` rows (accumulators ``a<j>_``, filter rows at ``q_``);
        ``store4`` (if given) requantizes and stores a group of four."""
        sizes = [(group, f"o + {group - 1} < {rows}")] if rows >= group and group > 1 else []
        if rows % group or group == 1:
            sizes.append((1, f"o < {rows}"))
        for n, cond in sizes:
            with body.block(f"for (; {cond}; o += {n})"):
                body.line(f"const int8_t* q_ = w_ + o * {depth};")
                accs = ", ".join(f"a{j}_ = bq_[o + {j}]{init}" for j in range(n))
                body.line(f"int32_t {accs};")
                steps(body, n, depth)
                if n == 4 and store4 is not None:
                    store4(body)
                    continue
                for j in range(n):
                    self._store(body, f"a{j}_", f"o + {j}", str(j))

    def _mve_store(self, body: Body, rows: int) -> Optional[Callable[[Body], None]]:
        """Four outputs requantized in one vector, where the rounding is ``away`` and every
        right shift is past 32 bits (``31 - shift >= 33``; None: elsewhere, scalar). Then
        ``|acc| * m`` rounded at bit ``31 - shift`` is its high word ``hi`` (``VMULH``)
        rounding-shifted right by ``R = -1 - shift`` (``VRSHL``): the low word cannot carry
        into the result, since adding ``2^(30 - shift)`` only adds ``2^(R - 1)`` to ``hi``;
        the sign is put back after (halves away from zero)."""
        op = self.base
        requant = op.quant.requant
        if requant.rounding != "away" or max(requant.shifts) > -2:
            return None
        mults = list(requant.multipliers) * (rows if len(requant.multipliers) == 1 else 1)
        shifts = list(requant.shifts) * (rows if len(requant.shifts) == 1 else 1)
        per_channel = len(requant.multipliers) > 1
        if per_channel:  # the tables, declared where the Helium path is compiled
            body.line(f"static const int32_t vm_[{rows}] = {_ints(mults)};")
            body.line(f"static const int32_t vs_[{rows}] = {_ints([1 + v for v in shifts])};")
        low, high = int(op.activation.low), int(op.activation.high)

        def store4(body: Body) -> None:
            body.line("int32_t acc_[4] __attribute__((aligned(16))) = {a0_, a1_, a2_, a3_};")
            body.line("const int32x4_t av_ = vldrwq_s32(acc_);")
            if per_channel:
                m, sh = "vreinterpretq_u32_s32(vldrwq_s32(vm_ + o))", "vldrwq_s32(vs_ + o)"
            else:
                m, sh = f"vdupq_n_u32({mults[0]}u)", f"vdupq_n_s32({1 + shifts[0]})"
            body.line("const uint32x4_t u_ = vreinterpretq_u32_s32(vabsq_s32(av_));")
            body.line(f"const uint32x4_t r_ = vrshlq_u32(vmulhq_u32(u_, {m}), {sh});")
            body.line("int32x4_t v_ = vreinterpretq_s32_u32(r_);")
            body.line("v_ = vpselq_s32(vnegq_s32(v_), v_, vcmpltq_n_s32(av_, 0));")
            body.line(f"v_ = vaddq_n_s32(v_, {op.quant.output_offset});")
            body.line(f"v_ = vminq_s32(vmaxq_s32(v_, vdupq_n_s32({low})), vdupq_n_s32({high}));")
            body.line("vstrbq_s32(yr_ + o, v_);")

        return store4

    def _store(self, body: Body, acc: str, channel: str, tag: str) -> None:
        op = self.base
        q = op.quant.requant.emit(body, acc, channel, tag)
        low, high = int(op.activation.low), int(op.activation.high)
        body.line(f"int32_t c{tag}_ = {q} + {op.quant.output_offset};")
        body.line(f"c{tag}_ = c{tag}_ < {low} ? {low} : c{tag}_;")
        body.line(f"yr_[{channel}] = (int8_t)(c{tag}_ > {high} ? {high} : c{tag}_);")


def _mve_steps(body: Body, n: int, depth: int) -> None:
    full, tail = depth - depth % 16, depth % 16
    rows = [f"r{j}_" for j in range(n)]
    body.line("const int8_t* xp_ = xr_;")
    pointers = ", * ".join(f"{r} = q_ + {j * depth}" for j, r in enumerate(rows))
    body.line(f"const int8_t* {pointers};")
    if n > 1:  # one pointer a row, post-incremented: else GCC rebuilds them from one base
        # with an add each (VLDRB's offset reaches 127 only)
        body.line('__asm__("" : ' + ", ".join(f'"+r"({r})' for r in rows[1:]) + ");")
    if full:
        with body.loop("t", full // 16):
            body.line("const int8x16_t xv_ = vld1q_s8(xp_);")
            body.line("xp_ += 16;")
            for j, r in enumerate(rows):
                body.line(f"a{j}_ = vmladavaq_s8(a{j}_, xv_, vld1q_s8({r}));")
                body.line(f"{r} += 16;")
    if tail:
        with body.block(""):
            body.line(f"const mve_pred16_t p_ = vctp8q({tail});")
            body.line("const int8x16_t xv_ = vldrbq_z_s8(xp_, p_);")
            for j, r in enumerate(rows):
                body.line(f"a{j}_ = vmladavaq_s8(a{j}_, xv_, vldrbq_z_s8({r}, p_));")


# SXTB16 of a word rotated by 8 (bytes 1 and 3) in one instruction: GCC 12 does not fold
# the rotation of __sxtb16's operand into it.
SXTB16_ROR8 = (
    '#define SXR8_(v) ({ int32_t r_; __asm__("sxtb16 %0, %1, ror #8" : "=r"(r_) : "r"(v)); r_; })'
)


def _dsp_steps(body: Body, n: int, depth: int) -> None:
    full = depth - depth % 4
    sx = "(int32_t)__sxtb16((int8x4_t)({}))"
    body.line(SXTB16_ROR8)
    if full:
        with body.block(f"for (int32_t t = 0; t < {full}; t += 4)"):
            body.line("uint32_t x4_;")
            body.line("__builtin_memcpy(&x4_, xr_ + t, 4);")
            body.line(f"const int32_t xe_ = {sx.format('x4_')};")
            body.line("const int32_t xo_ = SXR8_(x4_);")
            for j in range(n):
                body.line(f"uint32_t w{j}_;")
                body.line(f"__builtin_memcpy(&w{j}_, q_ + {j * depth} + t, 4);")
                we, wo = sx.format(f"w{j}_"), f"SXR8_(w{j}_)"
                body.line(f"a{j}_ = __smlad((int16x2_t){we}, (int16x2_t)xe_, a{j}_);")
                body.line(f"a{j}_ = __smlad((int16x2_t){wo}, (int16x2_t)xo_, a{j}_);")
    for t in range(full, depth):
        for j in range(n):
            body.line(f"a{j}_ += (int32_t)xr_[{t}] * q_[{j * depth + t}];")
    body.line("#undef SXR8_")


def _plain_steps(body: Body, n: int, depth: int) -> None:
    with body.loop("t", depth):
        body.line("const int32_t xv_ = xr_[t];")
        for j in range(n):
            body.line(f"a{j}_ += xv_ * q_[{j * depth} + t];")
