"""Element-wise operators: bias_add, relu, binary ops with broadcasting, add_n, chains of steps."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer, float_literal, index
from .base import (
    F32,
    Op,
    Shape,
    TensorType,
    flat_loop_var,
    nest,
    relu_expr,
    require,
    require_dtype,
    row_major_strides,
)


@dataclass(frozen=True)
class BiasAdd(Op):
    """x + b along ``axis`` (Relay's nn.bias_add), float32."""

    axis: int = 1

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x, b = types
        require(
            0 <= self.axis < len(x.shape), f"bias_add axis {self.axis} out of range for {x.shape}"
        )
        require(b.shape == (x.shape[self.axis],), f"bias must be [{x.shape[self.axis]}]")
        require_dtype(x, ["float32"], "bias_add data")
        require_dtype(b, ["float32"], "bias")
        return [x]

    def name_parts(self) -> List[str]:
        return ["nn_bias_add"]

    def output_names(self) -> List[str]:
        return ["T_add"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, b = ins
        outer = math.prod(x.shape[: self.axis])
        channels, inner = x.shape[self.axis], math.prod(x.shape[self.axis + 1 :])
        with nest(body, [("ax0", outer), ("ax1", channels), ("ax2", inner)]) as (i0, i1, i2):
            at = index((i0, channels * inner), (i1, inner), (i2, 1))
            body.line(f"{outs[0][at]} = ({x[at]} + {b[i1]});")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x, b = arrays
        shape = [1] * x.ndim
        shape[self.axis] = b.shape[0]
        return [(x + b.reshape(shape)).astype(F32)]


@dataclass(frozen=True)
class Relu(Op):
    """max(x, 0) for float32 or int8."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require_dtype(types[0], ["float32", "int8", "int32"], "relu data")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["nn_relu"]

    def output_names(self) -> List[str]:
        return ["T_relu"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        zero = "0.000000e+00f" if ins[0].dtype == "float32" else "0"
        var = flat_loop_var(len(ins[0].shape))
        with nest(body, [(var, ins[0].size)]) as (i,):
            cast = "" if ins[0].dtype == "float32" else f"({ins[0].dtype}_t)"
            body.line(f"{outs[0][i]} = {cast}{relu_expr(ins[0][i], zero)};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x = arrays[0]
        return [np.where(x > 0, x, 0).astype(x.dtype)]


BINARY_SYMBOLS = {"add": "+", "subtract": "-", "multiply": "*"}


@dataclass(frozen=True)
class Binary(Op):
    """Element-wise add/subtract/multiply with numpy broadcasting (a ``[]`` scalar too)."""

    op: str = "add"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        a, b = types
        require(self.op in BINARY_SYMBOLS, f"unknown binary op {self.op!r}")
        require(a.dtype == b.dtype, f"{self.op}: dtypes {a.dtype} and {b.dtype} differ")
        require_dtype(a, ["float32", "int32"], f"{self.op} operands")
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(
                f"{self.op}: shapes {a.shape} and {b.shape} do not broadcast"
            ) from None
        return [TensorType(tuple(int(d) for d in shape), a.dtype)]

    def name_parts(self) -> List[str]:
        return [self.op]

    def output_names(self) -> List[str]:
        return [f"T_{self.op}"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        out, symbol = outs[0], BINARY_SYMBOLS[self.op]
        if all(buf.shape == out.shape for buf in ins):
            with nest(body, [(flat_loop_var(len(out.shape)), out.size)]) as (i,):
                body.line(f"{out[i]} = ({ins[0][i]} {symbol} {ins[1][i]});")
            return
        dims = [(f"ax{axis}", extent) for axis, extent in enumerate(out.shape)]
        with nest(body, dims) as idx:
            a, b = (broadcast_index(idx, buf.shape, out.shape) for buf in ins)
            at = index(*zip(idx, row_major_strides(out.shape)))
            body.line(f"{out[at]} = ({ins[0][a]} {symbol} {ins[1][b]});")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        a, b = arrays
        result = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}[self.op](a, b)
        return [np.asarray(result).astype(a.dtype)]


def broadcast_index(idx: Sequence[str], shape: Shape, out: Shape) -> str:
    """Index into a tensor broadcast to ``out``: size-1 and missing dimensions get stride 0."""
    lead = len(out) - len(shape)
    strides = row_major_strides(shape)
    terms = [(idx[lead + axis], strides[axis]) for axis in range(len(shape)) if shape[axis] != 1]
    return index(*terms)


@dataclass(frozen=True)
class AddN(Op):
    """a + b + c + ... of same-shaped float32 tensors, one fused function (many arguments)."""

    count: int = 2

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(len(types) == self.count >= 2, "add_n needs its count (at least 2) of tensors")
        require(all(t == types[0] for t in types), "add_n tensors must share shape and dtype")
        require_dtype(types[0], ["float32"], "add_n operands")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["add"] * (self.count - 1)

    def output_names(self) -> List[str]:
        return ["T_add"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        with nest(body, [(flat_loop_var(len(ins[0].shape)), ins[0].size)]) as (i,):
            total = ins[0][i]
            for buf in ins[1:]:
                total = f"({total} + {buf[i]})"
            body.line(f"{outs[0][i]} = {total};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        total = arrays[0]
        for array in arrays[1:]:
            total = (total + array).astype(F32)
        return [total]


ELEMENTWISE_STEPS = (
    "add",
    "subtract",
    "multiply",
    "maximum",
    "minimum",
    "nn_relu",
    "tanh",
    "sigmoid",
    "exp",
)
Step = Tuple[str, float]


@dataclass(frozen=True)
class Elementwise(Op):
    """A chain of unary steps fused into one function, e.g. add 1.5 → tanh → multiply 2."""

    steps: Tuple[Step, ...] = ()

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(bool(self.steps), "an element-wise chain needs at least one step")
        for name, _ in self.steps:
            require(name in ELEMENTWISE_STEPS, f"unknown element-wise step {name!r}")
        require_dtype(types[0], ["float32"], "element-wise data")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return [name for name, _ in self.steps]

    def output_names(self) -> List[str]:
        last = self.steps[-1][0]
        return ["T_relu" if last == "nn_relu" else f"T_{last}"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        with nest(body, [(flat_loop_var(len(ins[0].shape)), ins[0].size)]) as (i,):
            body.line(f"float v_ = {ins[0][i]};")
            for name, constant in self.steps:
                body.line(f"v_ = {step_c(name, float_literal(constant))};")
            body.line(f"{outs[0][i]} = v_;")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        value = arrays[0].astype(F32)
        for name, constant in self.steps:
            value = step_reference(name, value, F32(constant))
        return [value]


def step_c(name: str, c: str) -> str:
    return {
        "add": f"(v_ + {c})",
        "subtract": f"(v_ - {c})",
        "multiply": f"(v_ * {c})",
        "maximum": f"((v_) > ({c}) ? (v_) : ({c}))",
        "minimum": f"((v_) < ({c}) ? (v_) : ({c}))",
        "nn_relu": relu_expr("v_"),
        "tanh": "tanhf(v_)",
        "sigmoid": "(1.000000e+00f / (1.000000e+00f + expf((0.000000e+00f - v_))))",
        "exp": "expf(v_)",
    }[name]


def step_reference(name: str, v: np.ndarray, c: np.float32) -> np.ndarray:
    one = F32(1)
    result = {
        "add": lambda: v + c,
        "subtract": lambda: v - c,
        "multiply": lambda: v * c,
        "maximum": lambda: np.where(v > c, v, c),
        "minimum": lambda: np.where(v < c, v, c),
        "nn_relu": lambda: np.where(v > 0, v, F32(0)),
        "tanh": lambda: np.tanh(v),
        "sigmoid": lambda: one / (one + np.exp(F32(0) - v)),
        "exp": lambda: np.exp(v),
    }[name]()
    return np.asarray(result).astype(F32)
