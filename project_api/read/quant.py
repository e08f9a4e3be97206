"""Quantization parameters of a model's inputs and outputs, from the Relay text TVM exports
(``src/<mod>.relay``), where the text states them as constants.

An input's scale and zero point are the ones the first quantized operator reading it is
given for it (``qnn.conv2d``/``qnn.dense``: ``input_zero_point``, ``input_scale``;
``qnn.dequantize``; ``qnn.requantize``'s input side; ``qnn.add``/``qnn.mul``'s side of that
operand). An output's are the ones the operator producing it writes with (``qnn.quantize``,
``qnn.requantize``'s output side), followed back through operators that move values without
changing them (``reshape``...). Per-channel parameters (constant tensors) and anything else
leave the tensor without quantization, with a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .model import Model
from .relay import CALL_RE, LET_RE, read_main, split_args


@dataclass(frozen=True)
class Quantization:
    """real = scale * (q - zero_point)"""

    scale: float
    zero_point: int


@dataclass
class TensorQuantization:
    inputs: List[Optional[Quantization]] = field(default_factory=list)
    outputs: List[Optional[Quantization]] = field(default_factory=list)
    why: str = ""  # why a tensor has none


# operator -> (scale argument, zero point argument) of the value it reads in each position
_READS: Dict[str, Dict[int, Tuple[int, int]]] = {
    "qnn.conv2d": {0: (4, 2)},
    "qnn.dense": {0: (4, 2)},
    "qnn.conv2d_transpose": {0: (4, 2)},
    "qnn.dequantize": {0: (1, 2)},
    "qnn.requantize": {0: (1, 2)},
    "qnn.add": {0: (2, 3), 1: (4, 5)},
    "qnn.mul": {0: (2, 3), 1: (4, 5)},
    "qnn.subtract": {0: (2, 3), 1: (4, 5)},
}
# operator -> (scale argument, zero point argument) of the value it writes
_WRITES: Dict[str, Tuple[int, int]] = {
    "qnn.quantize": (1, 2),
    "qnn.requantize": (3, 4),
    "qnn.add": (6, 7),
    "qnn.mul": (6, 7),
    "qnn.subtract": (6, 7),
}
_VALUE_KEEPING = frozenset(
    ("reshape", "squeeze", "expand_dims", "copy", "transpose", "layout_transform",
     "nn.batch_flatten", "nn.max_pool2d", "annotation.stop_fusion")
)  # fmt: skip
_FLOAT = re.compile(r"^(-?\d+(?:\.\d*)?(?:e[-+]?\d+)?)f?$")
_INT = re.compile(r"^(-?\d+)(?:i32|i64)?$")


def _constant(scale: str, zero_point: str) -> Optional[Quantization]:
    s, z = _FLOAT.match(scale.strip()), _INT.match(zero_point.strip())
    if s is None or z is None:
        return None
    return Quantization(float(s.group(1)), int(z.group(1)))


def _call(expr: str) -> Tuple[str, List[str]]:
    match = CALL_RE.match(expr.strip())
    return (match.group(1), split_args(match.group(2))) if match else ("", [])


def tensor_quantization(model: Model) -> TensorQuantization:
    n_in, n_out = len(model.inputs), len(model.outputs)
    relay = model.root / "src" / f"{model.name}.relay"
    try:
        text = relay.read_text(encoding="utf-8", errors="replace")
    except OSError:
        why = f"the archive has no src/{model.name}.relay to read them from"
        return TensorQuantization([None] * n_in, [None] * n_out, why)
    main = read_main(text)
    if main is None:
        why = "the archive's Relay text has no @main"
        return TensorQuantization([None] * n_in, [None] * n_out, why)
    lets: Dict[str, str] = {}
    order: List[str] = []
    result = ""
    for line in main.body:
        line = line.strip().rstrip(";").strip()
        match = LET_RE.match(line)
        if match:
            lets[match.group(1)] = line[match.end() :].strip()
            order.append(match.group(1))
        elif line and line != "}":
            result = line
    why = "the Relay text gives no constant scale and zero point for it"
    params = list(main.params)
    inputs = [_input(f"%{p}", lets, order) for p in params[:n_in]]
    inputs += [None] * (n_in - len(inputs))
    outs = split_args(result[1:-1]) if result.startswith("(") and n_out > 1 else [result]
    outputs = [_output(expr, lets) for expr in outs[:n_out]]
    outputs += [None] * (n_out - len(outputs))
    return TensorQuantization(inputs, outputs, why)


def _input(param: str, lets: Dict[str, str], order: List[str]) -> Optional[Quantization]:
    for var in order:
        op, args = _call(lets[var])
        positions = [i for i, arg in enumerate(args) if arg.strip() == param]
        if not positions:
            continue
        reads = _READS.get(op, {}).get(positions[0])
        if reads is None or max(reads) >= len(args):
            return None
        return _constant(args[reads[0]], args[reads[1]])
    return None


def _output(expr: str, lets: Dict[str, str]) -> Optional[Quantization]:
    for _ in range(64):  # a bounded walk back (the text is untrusted)
        expr = lets.get(expr.strip(), expr).strip()
        op, args = _call(expr)
        if op in _WRITES:
            at = _WRITES[op]
            return _constant(args[at[0]], args[at[1]]) if max(at) < len(args) else None
        if op not in _VALUE_KEEPING or not args:
            return None
        expr = args[0]
    return None
