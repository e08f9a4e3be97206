"""ADD and MUL with TFLite's reference arithmetic (LiteRT's reference kernels), int8 and
float32, with TFLite's broadcasting (shapes aligned on the right, extents of 1 repeated).

int8 ADD rescales both inputs to a common scale first: each input plus its offset, shifted
left by 20 bits, times its multiplier; the sum times the output multiplier; every step a
``Requant`` with its own rounding. int8 MUL multiplies the offset inputs and requantizes
the product once. Shapes, strides (0 where an input is broadcast), offsets, multipliers and
shifts are constants of the C.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer, index
from .base import Op, TensorType, nest, require, row_major_strides
from .tflite_arith import Activation, Requant

LEFT_SHIFT = 20  # TFLite's headroom for int8 ADD


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> Tuple[int, ...]:
    """TFLite's (numpy's) broadcast of two shapes; ValueError when they do not broadcast."""
    rank = max(len(a), len(b))
    pa = [1] * (rank - len(a)) + list(a)
    pb = [1] * (rank - len(b)) + list(b)
    out = []
    for x, y in zip(pa, pb):
        require(x == y or x == 1 or y == 1, f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def broadcast_strides(shape: Sequence[int], rank: int) -> List[int]:
    """Row-major strides of ``shape`` seen in ``rank`` dimensions, 0 along broadcast axes."""
    padded = [1] * (rank - len(shape)) + list(shape)
    strides = row_major_strides(tuple(padded))
    return [0 if extent == 1 else stride for extent, stride in zip(padded, strides)]


@dataclass(frozen=True)
class TflBinary(Op):
    """ADD or MUL of two tensors (either may be a constant), broadcast, fused activation."""

    operation: str  # "add" | "mul"
    activation: Activation
    offsets: Tuple[int, int, int] = (0, 0, 0)  # int8: -zp1, -zp2, output zp
    requants: Tuple[Requant, ...] = ()  # int8 add: input1, input2, output; mul: output

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        a, b = types
        require(a.dtype == b.dtype, f"{self.operation}: {a.dtype} and {b.dtype}")
        if a.dtype == "int8":
            require(len(self.requants) == (3 if self.operation == "add" else 1), "requants")
            for requant in self.requants:
                requant.check()
        return [TensorType(broadcast_shape(a.shape, b.shape), a.dtype)]

    def name_parts(self) -> List[str]:
        return [f"tfl_{self.operation}"]

    def inplace_input(self, types: Sequence[TensorType]) -> Optional[int]:
        """An input of the output's shape: element i is read before element i is written."""
        out = broadcast_shape(types[0].shape, types[1].shape)
        for position, t in enumerate(types):
            if tuple(t.shape) == out and t.dtype == types[0].dtype:
                return position
        return None

    def output_names(self) -> List[str]:
        return [f"T_{self.operation}"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        a, b, out = ins[0], ins[1], outs[0]
        rank = max(len(out.shape), 1)
        shape = out.shape or (1,)
        sa, sb = broadcast_strides(a.shape, rank), broadcast_strides(b.shape, rank)
        so = row_major_strides(tuple(shape))
        dims = [(f"i{k}", extent) for k, extent in enumerate(shape)]
        with nest(body, dims) as idx:
            av = a[index(*zip(idx, sa))]
            bv = b[index(*zip(idx, sb))]
            at = index(*zip(idx, so))
            if out.dtype != "int8":
                op = "+" if self.operation == "add" else "*"
                result = self.activation.clamp(body, f"({av} {op} {bv})", out.dtype)
            elif self.operation == "add":
                off1, off2, off_out = self.offsets
                body.line(f"int32_t a_ = ({off1} + (int32_t){av}) * (1 << {LEFT_SHIFT});")
                body.line(f"int32_t b_ = ({off2} + (int32_t){bv}) * (1 << {LEFT_SHIFT});")
                qa = self.requants[0].emit(body, "a_", "0", "a")
                qb = self.requants[1].emit(body, "b_", "0", "b")
                body.line(f"int32_t sum_ = {qa} + {qb};")
                qo = self.requants[2].emit(body, "sum_", "0", "o")
                result = self.activation.clamp(body, f"({qo} + {off_out})", "int8")
            else:
                off1, off2, off_out = self.offsets
                body.line(f"int32_t p_ = ({off1} + (int32_t){av}) * ({off2} + (int32_t){bv});")
                qo = self.requants[0].emit(body, "p_", "0", "o")
                result = self.activation.clamp(body, f"({qo} + {off_out})", "int8")
            body.line(f"{out[at]} = {result};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError("LiteRT's reference kernels are this operator's reference")
