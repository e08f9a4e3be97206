"""What ``compile`` supports, and the one-line refusal of everything else.

Checked before any lowering starts (``check_model``) or while an operator is lowered
(``Unsupported``): operators and their versions, data types, quantization, subgraphs,
dynamic shapes. A refusal names the operator and its index and lists what is supported.
"""

from __future__ import annotations

import math
import re
from typing import List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import CompileError
from .schema import CUSTOM, PADDING
from .tflite import Operator, Tensor, TfliteModel

# Operator → the highest version whose semantics compile implements (LiteRT's versioning).
SUPPORTED = {
    "ADD": 2,
    "AVERAGE_POOL_2D": 2,
    "CONCATENATION": 2,
    "CONV_2D": 3,
    "DEPTHWISE_CONV_2D": 6,  # 4 and 6: hybrid; 5 (int16) is refused by its data type
    "DEQUANTIZE": 2,
    "FULLY_CONNECTED": 5,
    "LOGISTIC": 2,
    "MAX_POOL_2D": 2,
    "MEAN": 2,
    "MUL": 2,
    "PAD": 2,
    "QUANTIZE": 2,
    "RESHAPE": 1,
    "SOFTMAX": 2,
    "SQUEEZE": 1,
    "TANH": 2,
}
DTYPES = ("int8", "float32")
# Operators whose output type differs from their input's: (input, output) pairs supported.
CONVERSIONS = {
    "QUANTIZE": (("float32", "int8"), ("int8", "int8")),
    "DEQUANTIZE": (("int8", "float32"),),
}
# The requantization rounding LiteRT's reference kernels use, per operator (measured against
# LiteRT 2.3 with tests/compile_cases.py's tie cases: CONV_2D and DEPTHWISE_CONV_2D round
# twice, as TFLM does; FULLY_CONNECTED rounds once, halves away from zero).
# docs/compile.md has the numbers.
LITERT_ROUNDING = {
    "ADD": "double",
    "CONV_2D": "double",
    "DEPTHWISE_CONV_2D": "double",
    "FULLY_CONNECTED": "away",
    "MUL": "double",
    "MEAN": "double",
    "QUANTIZE": "double",
}
# ``rounding`` of lower_model: one for every operator, {operator index: rounding}, or None
Rounding = Union[None, str, Mapping[int, str]]
MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# Hybrid DEPTHWISE_CONV_2D (an int8 filter on float32 data) as LiteRT's kernel takes it (its
# Prepare refuses a filter with one scale).
HYBRID_DEPTHWISE = (
    "hybrid DEPTHWISE_CONV_2D (an int8 filter on float32 data) needs one filter scale per "
    "output channel (axis 3), finite and positive, and zero points 0, as LiteRT's kernel does"
)


def supported_text() -> str:
    return ", ".join(f"{name} (v1-{v})" for name, v in sorted(SUPPORTED.items()))


class Unsupported(CompileError):
    def __init__(self, op: Operator, problem: str) -> None:
        super().__init__(
            f"operator {op.index} ({op_label(op)}): {problem}; compile supports "
            f"{supported_text()} in int8 and float32"
        )


def op_label(op: Operator) -> str:
    if op.opcode == CUSTOM:
        return f"custom {op.custom_code!r}"
    return f"{op.name} v{op.version}"


def check_model(model: TfliteModel) -> None:
    """Refuses what compile cannot lower, in one line, before any lowering starts."""
    if model.subgraphs != 1:
        raise CompileError(
            f"{model.subgraphs} subgraphs (control flow or several signatures): compile "
            "lowers models of one subgraph"
        )
    if not model.operators:
        raise CompileError("the model has no operators")
    if not model.outputs:
        raise CompileError("the model has no outputs")
    for tensor in model.tensors:
        if tensor.sparse or tensor.variable:
            kind = "sparse" if tensor.sparse else "a variable (state)"
            raise CompileError(
                f"tensor {tensor.index} ({tensor.name!r}) is {kind}: compile takes dense "
                "constant weights and computed tensors"
            )
        if tensor.dynamic:
            raise CompileError(
                f"tensor {tensor.index} ({tensor.name!r}) has a dynamic shape: compile needs "
                "every shape fixed"
            )
    used = {i for op in model.operators for i in (*op.inputs, *op.outputs) if i >= 0}
    for index in sorted(used | set(model.inputs) | set(model.outputs)):
        if 0 in model.tensors[index].shape:
            raise CompileError(
                f"tensor {index} ({model.tensors[index].name!r}) has no elements "
                f"(shape {list(model.tensors[index].shape)})"
            )
    for op in model.operators:
        if op.opcode == CUSTOM:
            raise Unsupported(op, "custom operators are not supported")
        if op.name not in SUPPORTED:
            raise Unsupported(op, "not supported")
        if op.version > SUPPORTED[op.name]:
            raise Unsupported(op, f"version {op.version} is newer than compile implements")


def scale_zp(t: Tensor, op: Optional[Operator] = None) -> Tuple[float, int]:
    q = t.quantization
    if (
        q is None
        or q.per_channel
        or not good_scales(q.scales)
        or not -128 <= q.zero_points[0] < 128
    ):
        message = f"tensor {t.index} ({t.name!r}) needs per-tensor int8 quantization"
        if op is not None:
            raise Unsupported(op, message)
        raise CompileError(message)
    return q.scales[0], q.zero_points[0]


def good_scales(scales: Sequence[float]) -> bool:
    return all(math.isfinite(s) and s > 0 for s in scales)


def conv_window(
    op: Operator,
    size: Sequence[int],
    kernel: Tuple[int, int],
    strides: Tuple[int, int],
    dilations: Tuple[int, int],
) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    """TFLite's output extent and leading padding for SAME or VALID, per axis."""
    padding = PADDING.get(int(op.options.get("padding", 0)))  # type: ignore[call-overload]
    if padding is None:
        raise Unsupported(op, "unknown padding")
    out: List[int] = []
    pads: List[int] = []
    for extent, k, s, d in zip(size, kernel, strides, dilations):
        effective = (k - 1) * d + 1
        o = (extent + s - 1) // s if padding == "SAME" else (extent + s - effective) // s
        if o < 1:
            raise Unsupported(op, f"a window of {effective} does not fit extent {extent}")
        total = max((o - 1) * s + effective - extent, 0)
        out.append(o)
        pads.append(total // 2)
    return (out[0], out[1]), (pads[0], pads[1])
