"""Fixed-point requantization as TVM's int8 operators do it: the C and its exact reference."""

from __future__ import annotations

import math
from typing import Tuple, Union

import numpy as np

from ..cgen import Body
from .base import (
    require,
)


def quantize_multiplier(scale: float) -> Tuple[int, int]:
    """(multiplier, shift) with ``scale ≈ multiplier * 2**-(31 + shift)``, 0 < scale < 1."""
    require(0.0 < scale < 1.0, f"requantize scale must be in (0, 1), got {scale}")
    mantissa, exponent = math.frexp(scale)
    multiplier = round(mantissa * (1 << 31))
    if multiplier == 1 << 31:
        multiplier //= 2
        exponent += 1
    return multiplier, -exponent


def requantize(
    acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray, zero_point: int, low: int
) -> np.ndarray:
    """TVM's fixed_point_multiply with round-half-up, + zero point, clip, cast to int8."""
    acc = acc.astype(np.int64)
    total = np.asarray(shift, dtype=np.int64) + 31
    scaled = (acc * np.asarray(multiplier, dtype=np.int64) + (np.int64(1) << (total - 1))) >> total
    return np.clip(scaled + zero_point, low, 127).astype(np.int8)


def offset(value: int) -> str:
    """`` + 3`` / `` - 3`` / nothing: an integer constant added to an expression."""
    if value == 0:
        return ""
    return f" + {value}" if value > 0 else f" - {-value}"


def requantize_c(acc: str, multiplier: str, shift: str, zero_point: int) -> str:
    total = f"({shift} + 31)"
    return (
        f"((int32_t)(((((int64_t){acc}) * ((int64_t){multiplier})) + "
        f"((int64_t)1 << ((int64_t)({total} - 1)))) >> ((int64_t){total})))"
        f"{offset(zero_point)}"
    )


def emit_clip_int8(body: Body, value: str, low: int) -> str:
    body.line(f"int32_t v_ = {value};")
    body.line("int32_t v__1 = (v_) < (127) ? (v_) : (127);")
    return f"(int8_t)((v__1) > ({low}) ? (v__1) : ({low}))"


def check_requant(multiplier: Union[int, np.ndarray], shift: Union[int, np.ndarray]) -> None:
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    require(bool(np.all((m > 0) & (m < (1 << 31)))), "multiplier must be in (0, 2**31)")
    require(bool(np.all((s >= 0) & (s <= 30))), "shift must be in 0..30")
