"""The arithmetic TFLite's int8 and hybrid kernels share: requantization in LiteRT's three
roundings (``Requant``), the output clamp (``Activation``), an operator's zero points
(``Quant``), and the hybrid kernels' on-the-fly input quantization.

Requantization (``MultiplyByQuantizedMultiplier``) comes in three roundings: ``single``
(one rounding of the 64-bit product, halves up: TFLite's ``TFLITE_SINGLE_ROUNDING``),
``away`` (one rounding, halves away from zero: what LiteRT 2.3's reference FULLY_CONNECTED
computes) and ``double`` (a rounding doubling high multiply, then a rounding right shift:
TFLite's classic rounding, LiteRT's reference convolutions, TFLM's and CMSIS-NN's default).
An operator carries its rounding, so a kernel can be swapped per operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

from ..cgen import Body, Buffer, float_literal
from .base import require

ROUNDINGS = ("single", "away", "double")


@dataclass(frozen=True)
class Requant:
    """Per-channel (or one, per-tensor) quantized multipliers and TFLite shifts (>0: left)."""

    multipliers: Tuple[int, ...]
    shifts: Tuple[int, ...]
    rounding: str = "single"

    def check(self) -> None:
        require(self.rounding in ROUNDINGS, f"rounding must be one of {ROUNDINGS}")
        require(len(self.multipliers) == len(self.shifts) >= 1, "requant: one shift a multiplier")
        for m, s in zip(self.multipliers, self.shifts):
            require(0 <= m < (1 << 31) and -31 <= s <= 30, f"requant ({m}, {s}) out of range")

    def declare(self, body: Body) -> None:
        if len(self.multipliers) > 1:
            count = len(self.multipliers)
            body.line(f"static const int32_t mult_[{count}] = {_c_ints(self.multipliers)};")
            if self.rounding == "double" and max(self.shifts) <= 0:
                # right shifts only: stored as such, in the smallest type that holds them
                rights = [-s for s in self.shifts]
                body.line(f"static const uint8_t rshift_[{count}] = {_c_ints(rights)};")
            else:
                body.line(f"static const int8_t shift_[{count}] = {_c_ints(self.shifts)};")

    def right_shifts_only(self) -> bool:
        return max(self.shifts) <= 0

    def emit(self, body: Body, acc: str, channel: str, tag: str = "") -> str:
        """Statements computing ``MultiplyByQuantizedMultiplier(acc)``; returns the variable.
        ``tag`` keeps the statements' variables apart when one scope requantizes twice."""
        if len(self.multipliers) > 1:
            mult, shift = f"mult_[{channel}]", f"shift_[{channel}]"
        else:
            mult, shift = str(self.multipliers[0]), str(self.shifts[0])
        t = tag
        if self.rounding == "single":
            body.line(f"int32_t ts{t}_ = 31 - {shift};")
            body.line(
                f"int32_t q{t}_ = (int32_t)((((int64_t){acc}) * ((int64_t){mult}) + "
                f"((int64_t)1 << (ts{t}_ - 1))) >> ts{t}_);"
            )
            return f"q{t}_"
        if self.rounding == "away":
            body.line(f"int32_t ts{t}_ = 31 - {shift};")
            body.line(f"int64_t mag{t}_ = ((int64_t){acc}) * ((int64_t){mult});")
            body.line(f"int64_t half{t}_ = (int64_t)1 << (ts{t}_ - 1);")
            body.line(
                f"int32_t q{t}_ = (int32_t)(mag{t}_ >= 0 ? (mag{t}_ + half{t}_) >> ts{t}_ "
                f": -((-mag{t}_ + half{t}_) >> ts{t}_));"
            )
            return f"q{t}_"
        return self._emit_double(body, acc, channel, t)

    def _emit_double(self, body: Body, acc: str, channel: str, t: str) -> str:
        """TFLite's SaturatingRoundingDoublingHighMul then RoundingDivideByPOT, without a
        64-bit division: with the nudge ±2^30, truncating (ab + nudge) / 2^31 towards zero
        equals flooring (ab + 2^30) / 2^31 for either sign of ab, which is an arithmetic
        shift. (The saturation case needs a multiplier of INT32_MIN: never, m < 2^31.)"""
        per_channel = len(self.multipliers) > 1
        mult = f"mult_[{channel}]" if per_channel else str(self.multipliers[0])
        if not self.right_shifts_only():
            shift = f"shift_[{channel}]" if per_channel else str(self.shifts[0])
            body.line(f"int32_t ls{t}_ = {shift} > 0 ? {shift} : 0;")
            body.line(f"int32_t rs{t}_ = {shift} > 0 ? 0 : -({shift});")
            scaled = f"(int32_t)((uint32_t){acc} << ls{t}_)"
            rs = f"rs{t}_"
        else:
            scaled = acc
            rs = f"(int32_t)rshift_[{channel}]" if per_channel else str(-self.shifts[0])
        body.line(
            f"int32_t hi{t}_ = (int32_t)((((int64_t){scaled}) * {mult} + "
            f"((int64_t)1 << 30)) >> 31);"
        )
        if rs == "0":
            return f"hi{t}_"
        body.line(f"int32_t mask{t}_ = (int32_t)(((uint32_t)1 << {rs}) - 1u);")
        body.line(f"int32_t thr{t}_ = (mask{t}_ >> 1) + (int32_t)((uint32_t)hi{t}_ >> 31);")
        body.line(f"int32_t q{t}_ = (hi{t}_ >> {rs}) + ((hi{t}_ & mask{t}_) > thr{t}_);")
        return f"q{t}_"


def _c_ints(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


@dataclass(frozen=True)
class Activation:
    """The output's clamp: int8 bounds, or float bounds (``None`` = unbounded)."""

    low: float
    high: float

    def clamp(self, body: Body, value: str, dtype: str) -> str:
        if dtype == "int8":
            lo, hi = int(self.low), int(self.high)
            body.line(f"int32_t c_ = {value} < {lo} ? {lo} : {value};")
            return f"(int8_t)(c_ > {hi} ? {hi} : c_)"
        flo, fhi = float_literal(self.low), float_literal(self.high)
        body.line(f"float c_ = {value} < {flo} ? {flo} : {value};")
        return f"(c_ > {fhi} ? {fhi} : c_)"


@dataclass(frozen=True)
class Quant:
    """Zero points of an int8 operator's input and output, and its requantization."""

    input_offset: int = 0  # -input zero point
    filter_offset: int = 0  # -filter zero point (FULLY_CONNECTED only)
    output_offset: int = 0  # output zero point
    requant: Requant = Requant((1 << 30,), (0,))


def emit_batch_range(body: Body, x: Buffer, start: str, size: int) -> None:
    """``mn_`` and ``mx_``: the smallest and largest of one batch of a float input (``size``
    values from ``start``), the range LiteRT's hybrid kernels quantize it by."""
    body.line(f"float mn_ = {x[start]};")
    body.line("float mx_ = mn_;")
    with body.loop("i", size):
        v = x[f"{start} + i"]
        body.line(f"mn_ = {v} < mn_ ? {v} : mn_;")
        body.line(f"mx_ = {v} > mx_ ? {v} : mx_;")


def emit_quantize_batch(body: Body, x: Buffer, start: str, size: int, filter_scale: float) -> None:
    """LiteRT's hybrid kernels quantize each batch of their float input symmetrically:
    range = max(|min|, |max|), q = round(x · 127 / range) clipped to ±127 (``inv_``), and
    scale the accumulator by range / 127 · filter scale (``s_``), all in float32."""
    emit_batch_range(body, x, start, size)
    body.line("float r_ = fabsf(mn_) > fabsf(mx_) ? fabsf(mn_) : fabsf(mx_);")
    body.line("float inv_ = r_ == 0.0f ? 0.0f : 127.0f / r_;")
    body.line(f"float s_ = (r_ == 0.0f ? 1.0f : r_ / 127.0f) * {float_literal(filter_scale)};")


def emit_hybrid_mac(body: Body, xv: str, wv: str) -> None:
    """One tap of a hybrid kernel: the input quantized on the fly (``inv_``), times the int8
    weight, into the int32 ``acc``."""
    body.line(f"int32_t hq_ = (int32_t)roundf({xv} * inv_);")
    body.line("hq_ = hq_ < -127 ? -127 : (hq_ > 127 ? 127 : hq_);")
    body.line(f"acc += hq_ * (int32_t){wv};")
