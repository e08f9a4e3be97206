"""Shapes of an AOT model's inputs and outputs from the Relay text TVM exports
(``src/<mod>.relay``): metadata.json records only byte sizes.

Inputs come from ``@main``'s parameters. Outputs come from its result type, or, where TVM
wrote none (models imported from TFLite), from the result expression itself: it is followed
back through operators that keep their operand's shape (``qnn.quantize``, ``nn.softmax``...)
to one whose output shape its attributes state (``reshape`` with ``newshape``) or imply
(``nn.dense`` of a two-dimensional operand: ``[elements / units, units]``). A shape is taken
only when its elements are exactly the output's; anything else stays flat.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from ..errors import AotError
from .ctext import sanitize, strip_comments
from .dtypes import UnknownDTypeError, parse_dtype
from .model import TensorSpec

Shape = Tuple[int, ...]
_PARAM_RE = re.compile(r"%([^\s:,()%]+)\s*:\s*Tensor\[\(([^()]*)\),\s*([A-Za-z0-9_]+)\]")
_TENSOR_RE = re.compile(r"Tensor\[\(([^()]*)\),\s*([A-Za-z0-9_]+)\]")
LET_RE = re.compile(r"\s*(%[\w.]+)\s*=")
CALL_RE = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$", re.DOTALL)
# Operators whose result has their first operand's shape.
_SAME_SHAPE = frozenset(
    (
        "qnn.quantize", "qnn.dequantize", "qnn.requantize", "nn.softmax", "nn.log_softmax",
        "nn.relu", "nn.leaky_relu", "clip", "cast", "sigmoid", "tanh", "exp", "round",
        "nn.bias_add", "fixed_point_multiply", "copy", "annotation.stop_fusion",
    )
)  # fmt: skip
_DENSE = frozenset(("nn.dense", "qnn.dense"))
# The tracer reads at most this many times the text's length (the text is untrusted: deep
# nesting or long operand lists must not make it quadratic).
_WORK_PER_CHAR = 4


@dataclass(frozen=True)
class _Main:
    """``@main`` as written, read once: its parameters {name: (shape, dtype)}, its result
    tensors [(shape, dtype)] (empty when the result type is not written), its body's lines,
    and the length of the text they come from (comments stripped)."""

    params: Dict[str, Tuple[Shape, str]]
    results: List[tuple]
    body: List[str]
    length: int


def read_main(text: str) -> Optional[_Main]:
    text = strip_comments(text)
    start, close = _signature_span(text)
    if start < 0:
        return None
    brace = text.find("{", close)
    rest = text[close + 1 : brace]
    params = {
        name: (_dims(dims), dtype) for name, dims, dtype in _PARAM_RE.findall(text[start:close])
    }
    results = []
    if "->" in rest:
        results = [(_dims(d), t) for d, t in _TENSOR_RE.findall(rest.split("->", 1)[1])]
    return _Main(params, results, text[brace + 1 :].splitlines(), len(text))


def main_signature(text: str) -> Tuple[Dict[str, Tuple[Shape, str]], List[tuple]]:
    """``@main``'s parameters {name: (shape, dtype)} and its result tensors [(shape, dtype)]
    (empty when the result type is not written)."""
    main = read_main(text)
    return (main.params, main.results) if main is not None else ({}, [])


def _signature_span(text: str) -> Tuple[int, int]:
    """Where ``def @main(`` starts and the index of its closing parenthesis (-1, -1: none)."""
    start = text.find("def @main(")
    if start < 0:
        return -1, -1
    depth, index = 0, start
    for index in range(start + len("def @main"), len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                break
    return start, index


def _dims(text: str) -> Shape:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    return tuple(int(part) if _is_number(part) else -1 for part in parts)


def _is_number(text: str) -> bool:
    """ASCII digits, few enough for int() (which refuses other digits and 4,300 of them)."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def result_shapes(text: str, elements: List[int]) -> List[Optional[Shape]]:
    """The shape of each result of ``@main``'s body, followed back from its expression, given
    the element count of each (None where the text does not tell it)."""
    return _traced(read_main(text), elements)


def _traced(main: Optional[_Main], elements: List[int]) -> List[Optional[Shape]]:
    """:func:`result_shapes` of ``main``."""
    if main is None:
        return [None] * len(elements)
    params = {f"%{name}": shape for name, (shape, _) in main.params.items()}
    lets: Dict[str, str] = {}
    result = ""
    for line in main.body:
        match = LET_RE.match(line)
        value = line[match.end() :].rstrip() if match else ""
        if match and value.endswith(";"):
            lets[match.group(1)] = value[:-1].strip()
        elif line.strip() == "}":
            break
        elif line.strip():
            result = line.strip()
    parts = split_args(result[1:-1]) if result.startswith("(") and result.endswith(")") else []
    exprs = parts if len(elements) > 1 else [result]
    if len(exprs) != len(elements):
        return [None] * len(elements)
    tracer = _Tracer(lets, params, _WORK_PER_CHAR * main.length)
    return [tracer.shape(expr, count) for expr, count in zip(exprs, elements)]


class _Tracer:
    def __init__(self, lets: Dict[str, str], params: Dict[str, Shape], budget: int) -> None:
        self.lets = lets
        self.params = params
        self.budget = budget  # characters it may still read

    def shape(self, expr: str, elements: int) -> Optional[Shape]:
        """The shape of ``expr`` when its ``elements`` make one; else None."""
        shape = self._shape(expr.strip(), elements)
        return shape if shape is not None and math.prod(shape) == elements else None

    def _step(self, expr: str, seen: Set[str]) -> Tuple[str, List[str]]:
        """One step back: (op, operands) of the call ``expr`` is, ("let", [its value]) for a
        let-bound variable, ("param", []) for a parameter of @main, ("", []) otherwise (and
        when the budget is spent or a variable comes round again)."""
        self.budget -= len(expr) + 1
        if self.budget < 0:
            return "", []
        if expr in self.params:
            return "param", []
        if expr in self.lets:
            if expr in seen:
                return "", []
            seen.add(expr)
            return "let", [self.lets[expr]]
        match = CALL_RE.match(expr)
        return (match.group(1), split_args(match.group(2))) if match else ("", [])

    def _shape(self, expr: str, elements: int) -> Optional[Shape]:
        seen: Set[str] = set()
        while True:
            op, parts = self._step(expr, seen)
            if op == "param":
                return self.params[expr]
            if (op == "let" or op in _SAME_SHAPE) and parts:
                expr = parts[0].strip()
            elif op == "reshape":
                return _newshape(parts, elements)
            elif op in _DENSE and len(parts) >= 2:
                return self._dense(parts, elements)
            else:
                return None

    def _dense(self, parts: List[str], elements: int) -> Optional[Shape]:
        units = _attribute(parts, "units")
        weight = self.params.get(parts[1].strip())
        if units is None or not _is_number(units):
            units = str(weight[0]) if weight and len(weight) == 2 and weight[0] > 0 else None
        if units is None or int(units) <= 0 or elements % int(units) != 0:
            return None
        if self._rank(parts[0]) != 2:
            return None  # dense keeps every leading dimension of its operand
        return (elements // int(units), int(units))

    def _rank(self, expr: str) -> Optional[int]:
        expr = expr.strip()
        seen: Set[str] = set()
        while True:
            op, parts = self._step(expr, seen)
            if op == "param":
                return len(self.params[expr])
            if (op == "let" or op in _DENSE or op in _SAME_SHAPE) and parts:
                expr = parts[0].strip()  # dense: as many dimensions as its operand
            elif op == "reshape":
                newshape = _attribute(parts, "newshape")
                return len(split_args(newshape[1:-1])) if newshape else None
            else:
                return None


def _newshape(parts: List[str], elements: int) -> Optional[Shape]:
    """``reshape``'s ``newshape`` with at most one -1 resolved (0 and the other special
    values copy input dimensions: not followed)."""
    text = _attribute(parts, "newshape")
    if not text or not text.startswith("[") or not text.endswith("]"):
        return None
    try:
        dims = [int(d) for d in split_args(text[1:-1])]
    except ValueError:
        return None
    known = math.prod(d for d in dims if d != -1)
    if any(d == 0 or d < -1 for d in dims) or dims.count(-1) > 1 or known <= 0:
        return None
    if -1 in dims:
        if elements % known:
            return None
        dims = [elements // known if d == -1 else d for d in dims]
    return tuple(dims)


def _attribute(parts: List[str], name: str) -> Optional[str]:
    for part in parts:
        key, _, value = part.partition("=")
        if value and key.strip() == name:
            return value.strip()
    return None


def split_args(text: str) -> List[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, depth, start, quoted = [], 0, 0, False
    for index, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    tail = text[start:].strip()
    return parts + [tail] if tail else parts


def apply_relay(
    member: str, text: str, inputs: List[TensorSpec], outputs: List[TensorSpec]
) -> Tuple[List[TensorSpec], List[TensorSpec]]:
    """``inputs``/``outputs`` (flat, from metadata) with the shapes the Relay text gives."""
    main = read_main(text)
    params, results = (main.params, main.results) if main is not None else ({}, [])
    by_c_name = {sanitize(name): value for name, value in params.items()}
    shaped_in = []
    for spec in inputs:
        found = params.get(spec.name) or by_c_name.get(sanitize(spec.name))
        shaped_in.append(_relay_spec(member, spec, found, f"@main parameter %{spec.name}"))
    if len(results) == len(outputs):
        shaped_out = [
            _relay_spec(member, spec, found, f"@main result {i}")
            for i, (spec, found) in enumerate(zip(outputs, results))
        ]
    else:
        traced = _traced(main, [math.prod(spec.shape) for spec in outputs])
        shaped_out = [
            TensorSpec(spec.name, shape, spec.dtype) if shape is not None else spec
            for spec, shape in zip(outputs, traced)
        ]
    return shaped_in, shaped_out


def _relay_spec(member: str, spec: TensorSpec, found: Optional[tuple], where: str) -> TensorSpec:
    if found is None:
        return spec
    shape, dtype = found
    if any(dim < 0 for dim in shape):
        return spec  # a dynamic dimension: keep the flat size metadata gives
    try:
        itemsize = parse_dtype(dtype).itemsize
    except UnknownDTypeError as err:
        raise AotError(member, where, str(err)) from None
    if parse_dtype(dtype) != parse_dtype(spec.dtype) or itemsize * math.prod(shape) != spec.nbytes:
        raise AotError(
            member,
            where,
            f"is {dtype}{list(shape)} but metadata.json says {spec.name} is {spec.nbytes} "
            f"bytes of {spec.dtype}",
        )
    return TensorSpec(spec.name, shape, spec.dtype)
