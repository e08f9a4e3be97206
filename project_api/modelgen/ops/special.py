"""Operators for the corners: one that fails on demand, one that calls external C."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import numpy as np

from ..cgen import C_TYPES, Body, Buffer, c_type
from .base import (
    Op,
    OperatorFailure,
    TensorType,
    flat_loop_var,
    nest,
    require,
    require_dtype,
)


@dataclass(frozen=True)
class FailIf(Op):
    """Copies x, but returns -1 (operator failure) when the int32 scalar flag is non-zero."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(types[1] == TensorType((), "int32"), "fail_if flag must be an int32 scalar []")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["fail_if_flag"]

    def output_names(self) -> List[str]:
        return ["T_identity"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        with body.block(f"if ({ins[1]['0']} != 0)"):
            body.line("return -1;")
        with nest(body, [(flat_loop_var(len(ins[0].shape)), ins[0].size)]) as (i,):
            body.line(f"{outs[0][i]} = {ins[0][i]};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        if int(arrays[1]) != 0:
            raise OperatorFailure("fail_if: the flag is set, the operator returns -1")
        return [arrays[0].copy()]


@dataclass(frozen=True)
class ExternCall(Op):
    """An operator whose work is an external C function, e.g. from an external dependency.

    The function is declared (block scope, so each operator stays self-contained) and
    called as ``int32_t symbol(const T0* in0, ..., T* out, int32_t out_elements)`` on the
    tensors' data; a non-zero return makes the operator return -1. ``reference_fn(*arrays)``
    is the caller's numpy model of what the function computes.
    """

    symbol: str
    out_type: Optional[TensorType] = None  # None: the first input's shape and dtype
    reference_fn: Optional[Callable[..., np.ndarray]] = field(
        default=None, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        require(
            bool(re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", self.symbol)),
            f"extern symbol {self.symbol!r} is not a C identifier",
        )
        require(
            not self.symbol.startswith(("tvmgen_", "TVM", "__tvm")),
            f"extern symbol {self.symbol!r} would collide with TVM's generated names",
        )

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(len(types) >= 1, f"extern call {self.symbol} needs at least one input")
        out = self.out_type or types[0]
        for t in [*types, out]:
            require_dtype(t, tuple(C_TYPES), f"extern call {self.symbol} operand")
        require(out.size < 2**31, f"extern call {self.symbol}: output too large for int32_t")
        return [out]

    def name_parts(self) -> List[str]:
        return ["extern", self.symbol]

    def output_names(self) -> List[str]:
        return ["T_extern"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        out = outs[0]
        params = [f"const {c_type(b.dtype)}*" for b in ins] + [f"{c_type(out.dtype)}*", "int32_t"]
        args = [f"(const {c_type(b.dtype)}*){b.var}" for b in ins]
        args += [f"({c_type(out.dtype)}*){out.var}", str(out.size)]
        body.line(f"extern int32_t {self.symbol}({', '.join(params)});")
        with body.block(f"if ({self.symbol}({', '.join(args)}) != 0)"):
            body.line("return -1;")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        if self.reference_fn is None:
            raise ValueError(f"extern call {self.symbol} has no numpy reference")
        want = self.infer([TensorType(a.shape, str(a.dtype)) for a in arrays])[0]
        result = np.asarray(self.reference_fn(*arrays))
        require(
            result.shape == want.shape,
            f"reference of {self.symbol} gave shape {result.shape}, want {want.shape}",
        )
        return [np.ascontiguousarray(result.astype(want.dtype, copy=False))]
