"""TFLite's quantization arithmetic, worked out at compile time (in double and float32 as
LiteRT's kernels work it out when they are prepared).

- ``quantize_multiplier``: a real multiplier as a Q31 mantissa and a power-of-two shift
  (``frexp``, round half away from zero; a mantissa that rounds up to 2**31 is halved).
- ``conv_multipliers``: per output channel, input_scale · filter_scale / output_scale in
  double (the filter's one scale repeated when it is per tensor).
- ``activation_range``: the fused activation's bounds, quantized in float32.
- ``softmax_table``: ``expf(-input_scale · beta · i)`` for i in 0..255, in float32, from the
  C library's own ``expf`` when it can be called (the value LiteRT's kernel computes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from functools import lru_cache
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import CompileError

F32 = np.float32
FLOAT_MAX = float(np.finfo(np.float32).max)


def round_half_away(value: float) -> int:
    """std::round: halves away from zero."""
    floor = math.floor(abs(value))
    rounded = floor + 1 if abs(value) - floor >= 0.5 else floor
    return int(rounded if value >= 0 else -rounded)


def quantize_multiplier(real: float, *, single_rounding: bool = True) -> Tuple[int, int]:
    """(multiplier, shift) with real ≈ multiplier · 2**(shift - 31); shift > 0 shifts left."""
    if real == 0.0:
        return 0, 0
    if not math.isfinite(real) or real < 0:
        raise CompileError(f"requantization multiplier {real} is not finite and positive")
    mantissa, shift = math.frexp(real)
    fixed = round_half_away(mantissa * (1 << 31))
    if fixed == 1 << 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if single_rounding and shift > 30:
        return (1 << 31) - 1, 30
    if shift > 30:
        raise CompileError(f"requantization multiplier {real} is too large")
    return fixed, shift


def conv_multipliers(
    input_scale: float,
    filter_scales: Sequence[float],
    output_scale: float,
    channels: int,
    *,
    single_rounding: bool = True,
) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """Per output channel (multiplier, shift); one pair when everything is per tensor."""
    scales = list(filter_scales)
    count = channels if len(scales) > 1 else 1
    multipliers: List[int] = []
    shifts: List[int] = []
    for i in range(count):
        real = float(input_scale) * float(scales[i]) / float(output_scale)
        m, s = quantize_multiplier(real, single_rounding=single_rounding)
        multipliers.append(m)
        shifts.append(s)
    return tuple(multipliers), tuple(shifts)


def add_multipliers(
    scale1: float, scale2: float, output_scale: float, left_shift: int, *, single_rounding: bool
) -> List[Tuple[int, int]]:
    """int8 ADD's (multiplier, shift) for input 1, input 2 and the output: both inputs to
    twice the larger input scale, the sum from there (and the left shift) to the output."""
    twice_max = float(F32(2) * max(F32(scale1), F32(scale2)))
    reals = [
        float(scale1) / twice_max,
        float(scale2) / twice_max,
        twice_max / float(F32(1 << left_shift) * F32(output_scale)),
    ]
    pairs = [quantize_multiplier(r, single_rounding=single_rounding) for r in reals]
    if any(shift > 0 for _, shift in pairs):
        raise CompileError(f"ADD: scales {scale1}, {scale2} -> {output_scale} need a gain")
    return pairs


def mul_multiplier(
    scale1: float, scale2: float, output_scale: float, *, single_rounding: bool
) -> Tuple[int, int]:
    """int8 MUL's (multiplier, shift): scale1 · scale2 / output_scale, in float32 as LiteRT
    works it out."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        real = float(F32(F32(scale1) * F32(scale2)) / F32(output_scale))
    return quantize_multiplier(real, single_rounding=single_rounding)


def mean_multiplier(input_scale: float, output_scale: float, count: int) -> Tuple[int, int]:
    """int8 MEAN's (multiplier, shift): input_scale / output_scale in double, then the
    multiplier divided by the count with up to 32 bits of headroom, as LiteRT prepares it."""
    multiplier, shift = quantize_multiplier(float(input_scale) / float(output_scale))
    headroom = min(count.bit_length() - 1, 32, 31 + shift)
    if headroom < 0:
        raise CompileError(f"MEAN: scales {input_scale} -> {output_scale} are out of range")
    return (multiplier << headroom) // count, shift - headroom


def activation_range(activation: str, scale: float, zero_point: int) -> Tuple[int, int]:
    """int8 bounds of a fused activation (``NONE``, ``RELU``, ``RELU6``, ``RELU_N1_TO_1``)."""

    def quantize(value: float) -> int:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            quotient = float(F32(value) / F32(scale))
        if not math.isfinite(quotient):  # a scale too small for float32: beyond int8 anyway
            return -(1 << 31) if quotient < 0 else (1 << 31)
        return zero_point + round_half_away(quotient)

    low, high = -128, 127
    if activation == "RELU":
        low = max(low, quantize(0.0))
    elif activation == "RELU6":
        low, high = max(low, quantize(0.0)), min(high, quantize(6.0))
    elif activation == "RELU_N1_TO_1":
        low, high = max(low, quantize(-1.0)), min(high, quantize(1.0))
    return low, high


def float_activation_range(activation: str) -> Tuple[float, float]:
    return {
        "NONE": (-FLOAT_MAX, FLOAT_MAX),
        "RELU": (0.0, FLOAT_MAX),
        "RELU6": (0.0, 6.0),
        "RELU_N1_TO_1": (-1.0, 1.0),
    }[activation]


@lru_cache(maxsize=4)
def _libm(name: str) -> Optional[Callable[[float], float]]:
    library = ctypes.util.find_library("m")
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_float
    function.argtypes = [ctypes.c_float]
    return function


def lookup_table(
    function: str, input_scale: float, input_zp: int, output_scale: float, output_zp: int
) -> Tuple[int, ...]:
    """int8 LOGISTIC / TANH as LiteRT tabulates them: for x in -128..127, the function of
    ``input_scale · (x - zp)`` in float32 (the C library's ``expf`` / ``tanhf``), times
    ``1 / output_scale``, rounded half away from zero, plus the zero point, clamped."""
    expf, tanhf = _libm("expf"), _libm("tanhf")
    inverse = F32(F32(1.0) / F32(output_scale))
    table = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for value in range(-128, 128):
            x = F32(F32(input_scale) * F32(value - input_zp))
            if function == "tanh":
                y = F32(tanhf(float(x)) if tanhf else np.tanh(x))
            else:
                e = F32(expf(float(-x)) if expf else np.exp(-x))
                y = F32(F32(1.0) / F32(F32(1.0) + e))
            scaled = float(F32(y * inverse))
            if not math.isfinite(scaled):
                raise CompileError(f"{function}: output scale {output_scale} is out of range")
            rounded = float(F32(round_half_away(scaled)))
            quantized = int(F32(rounded + output_zp))
            table.append(max(-128, min(127, quantized)))
    return tuple(table)


@lru_cache(maxsize=1)
def _libm_expf() -> Optional[Callable[[float], float]]:
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).expf
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_float
    function.argtypes = [ctypes.c_float]
    return function


def softmax_table(input_scale: float, beta: float) -> Tuple[float, ...]:
    """table[255 - i] = expf(-input_scale · beta · i) in float32, i = 0..255."""
    with np.errstate(over="ignore"):
        scale = F32(-F32(input_scale) * F32(beta))
    if not math.isfinite(float(scale)):
        raise CompileError(f"softmax: input scale {input_scale} times beta {beta} overflows")
    expf = _libm_expf()
    table = [0.0] * 256
    for i in range(256):
        with np.errstate(over="ignore"):
            argument = F32(scale * F32(i))
        value = expf(float(argument)) if expf else float(np.exp(argument, dtype=np.float32))
        table[255 - i] = float(F32(value))
    return tuple(table)
