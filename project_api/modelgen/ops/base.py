"""What every operator of the model factory shares: tensor types, the Op interface, helpers.

Each operator is one fused TVM primitive function (``fused_nn_dense_add_nn_relu``...). Its
numpy reference repeats the C code's arithmetic in the same order and precision (float32
accumulation in loop order, int8 paths in exact integer arithmetic), so host results agree
bit for bit and device results within float32 rounding.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..cgen import Body, Buffer

Shape = Tuple[int, ...]
F32 = np.float32
FLOAT_LOWEST = float(np.finfo(np.float32).min)


@dataclass(frozen=True)
class TensorType:
    shape: Shape
    dtype: str

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


class OperatorFailure(Exception):
    """Raised by a reference whose C operator would return -1 for these inputs.

    ``op_index`` is the failing operator's position in the network; a GeneratedModel also
    fills in ``node`` (its graph node id) and ``function`` (its func_name).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.op_index: Optional[int] = None
        self.node: Optional[int] = None
        self.function: Optional[str] = None


class Op:
    """A graph operator. ``kind`` is ``kernel`` (a C function), ``nop`` or ``copy``."""

    kind = "kernel"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        raise NotImplementedError

    def name_parts(self) -> List[str]:
        raise NotImplementedError

    def output_names(self) -> List[str]:
        raise NotImplementedError

    def graph_attrs(self) -> Dict[str, str]:
        return {}

    def share_key(self, types: Sequence[TensorType]) -> Optional[str]:
        """A name for C this operator could share with others of the same key (a static
        helper taking the per-operator values as parameters); None: nothing to share. The
        lowering tells the body which keys more than one operator has (``Body.shared``)."""
        return None

    def inplace_input(self, types: Sequence[TensorType]) -> Optional[int]:
        """The input (by position) whose storage the output may take when that input dies
        here: the operator's C is written so that it is right both when the output
        overwrites that input and when it does not, the output starting at the input's first
        byte (a larger output grows the storage, modelgen/plan.py). None: the output needs
        its own."""
        return None

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        raise NotImplementedError

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError


# --- helpers ------------------------------------------------------------------------------


@contextlib.contextmanager
def nest(body: Body, dims: Sequence[Tuple[str, int]]) -> Iterator[List[str]]:
    """Nested loops over ``dims``; a dimension of extent 1 gets no loop, its index is ``0``."""
    with contextlib.ExitStack() as stack:
        names = []
        for var, extent in dims:
            if extent == 1:
                names.append("0")
            else:
                stack.enter_context(body.loop(var, extent))
                names.append(var)
        yield names


def row_major_strides(shape: Shape) -> List[int]:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return strides


def flat_loop_var(ndim: int) -> str:
    return "_".join(f"ax{i}" for i in range(max(ndim, 1))) + ("_fused" if ndim > 1 else "")


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def require_dtype(t: TensorType, dtypes: Sequence[str], what: str) -> None:
    require(t.dtype in dtypes, f"{what} must be {' or '.join(dtypes)}, got {t.dtype}")


def relu_expr(value: str, zero: str = "0.000000e+00f") -> str:
    return f"(({value}) > ({zero}) ? ({value}) : ({zero}))"


def float_epilogue(body: Body, acc: str, bias: Optional[str], relu: bool) -> str:
    """Bias add and relu after an accumulation, as TVM fuses them; returns the value."""
    value = acc
    if bias is not None:
        body.line(f"float v_ = ({acc} + {bias});")
        value = "v_"
    return relu_expr(value) if relu else value


def reference_epilogue(acc: np.ndarray, bias: Optional[np.ndarray], relu: bool) -> np.ndarray:
    value = acc if bias is None else (acc + bias).astype(F32)
    return np.where(value > 0, value, F32(0)).astype(F32) if relu else value


def epilogue_parts(bias: bool, relu: bool) -> List[str]:
    return (["add"] if bias else []) + (["nn_relu"] if relu else [])


def epilogue_output(plain: str, bias: bool, relu: bool) -> str:
    return "T_relu" if relu else ("T_add" if bias else plain)


def pair(value: Union[int, Sequence[int]]) -> Tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    first, second = value
    return (int(first), int(second))


def window_out(size: int, kernel: int, stride: int, pad: int) -> int:
    out = (size + 2 * pad - kernel) // stride + 1
    require(out >= 1, f"window {kernel} (stride {stride}, pad {pad}) does not fit extent {size}")
    return out
