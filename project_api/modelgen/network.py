"""Describe a small network: inputs, constant weights, operators, outputs.

    net = Network("digits")
    x = net.input("x", (1, 64), "float32")
    h = net.dense(x, w1, b1, relu=True)
    net.output(net.softmax(net.dense(h, w2, b2)))
    model = net.build()          # a GeneratedModel: .write(path), .reference(inputs)

Operators are applied in program order, which is the graph's topological order. numpy
arrays passed as operands become constants (graph params ``p0, p1, ...``).
"""

from __future__ import annotations

import re
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    cast,
)

import numpy as np

from ..read.model import TensorSpec
from . import ops
from .cgen import C_TYPES
from .ops import Op, OperatorFailure, TensorType

if TYPE_CHECKING:
    from .model import GeneratedModel

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
IntPair = Union[int, Sequence[int]]


class InputNode:
    def __init__(self, name: str) -> None:
        self.name = name


class ConstNode:
    def __init__(self, array: np.ndarray) -> None:
        self.array = array


class OpNode:
    def __init__(self, op: Op, inputs: List[Value]) -> None:
        self.op = op
        self.inputs = inputs
        self.outputs: List[Value] = []


Producer = Union[InputNode, ConstNode, OpNode]


class Value:
    """A tensor of the network under construction (the ``index``-th output of its producer)."""

    def __init__(self, producer: Producer, index: int, type_: TensorType) -> None:
        self.producer = producer
        self.index = index
        self.type = type_

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    def __repr__(self) -> str:
        return f"Value({type(self.producer).__name__}, {self.shape}, {self.dtype})"


Operand = Union[Value, np.ndarray]


class Network:
    """A graph under construction; ``build()`` turns it into a GeneratedModel."""

    def __init__(self, name: str) -> None:
        if not IDENTIFIER.match(name):
            raise ValueError(f"model name {name!r} must be a C identifier (it prefixes tvmgen_)")
        self.name = name
        self.inputs: List[Value] = []
        self.ops: List[OpNode] = []
        self.outputs: List[Value] = []
        # metadata.json's external_dependencies (written unless write() is given others)
        self.external_dependencies: List[Dict[str, Any]] = []
        # (scale, zero point) of quantized inputs by name and outputs by index, stated in
        # the archive's Relay text (export's header says them)
        self.input_quantization: Dict[str, Tuple[float, int]] = {}
        self.output_quantization: Dict[int, Tuple[float, int]] = {}

    # --- graph construction ---------------------------------------------------------------

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> Value:
        if any(isinstance(v.producer, InputNode) and v.producer.name == name for v in self.inputs):
            raise ValueError(f"duplicate input name {name!r}")
        if not name or re.fullmatch(r"p\d+", name):
            raise ValueError(f"input name {name!r} is empty or collides with param names p<N>")
        _check_dtype(dtype)
        value = Value(InputNode(name), 0, TensorType(tuple(int(d) for d in shape), dtype))
        self.inputs.append(value)
        return value

    def const(self, array: Union[np.ndarray, Sequence[float], float]) -> Value:
        data = np.asarray(array)
        if data.dtype.kind == "f" and data.dtype != np.float32:
            data = data.astype(np.float32)
        _check_dtype(str(data.dtype))
        data = data.copy(order="C")  # (np.ascontiguousarray would turn a scalar into [1])
        return Value(ConstNode(data), 0, TensorType(tuple(data.shape), str(data.dtype)))

    def apply(self, op: Op, *operands: Operand) -> List[Value]:
        """Adds ``op`` applied to ``operands``; returns its output values."""
        inputs = [self.as_value(operand) for operand in operands]
        node = OpNode(op, inputs)
        types = op.infer([v.type for v in inputs])
        node.outputs = [Value(node, i, t) for i, t in enumerate(types)]
        self.ops.append(node)
        return node.outputs

    def as_value(self, operand: Operand) -> Value:
        return operand if isinstance(operand, Value) else self.const(operand)

    def output(self, *values: Value) -> None:
        for value in values:
            if not isinstance(value.producer, OpNode):
                raise ValueError("a model output must be computed by an operator")
            if any(value is seen for seen in self.outputs):
                raise ValueError("the same tensor cannot be two outputs")
            self.outputs.append(value)

    # --- operators --------------------------------------------------------------------------

    def dense(
        self, x: Value, weight: Operand, bias: Optional[Operand] = None, *, relu: bool = False
    ) -> Value:
        """x [N, K] · weight[M, K]ᵀ (+ bias [M]) (relu), fused into one function."""
        extra = [] if bias is None else [bias]
        return self.apply(ops.Dense(bias=bias is not None, relu=relu), x, weight, *extra)[0]

    def conv2d(
        self,
        x: Value,
        weight: Operand,
        bias: Optional[Operand] = None,
        *,
        strides: IntPair = 1,
        padding: IntPair = 0,
        layout: str = "NCHW",
        relu: bool = False,
    ) -> Value:
        """NCHW (weights OIHW) or NHWC (weights HWIO) convolution (+ bias) (relu)."""
        op = ops.Conv2D(layout, ops.pair(strides), ops.pair(padding), bias is not None, relu)
        return self.apply(op, x, weight, *([] if bias is None else [bias]))[0]

    def qdense(
        self,
        x: Value,
        weight: Operand,
        bias: Operand,
        *,
        multiplier: int,
        shift: int,
        input_zero_point: int = 0,
        output_zero_point: int = 0,
        relu: bool = False,
    ) -> Value:
        """int8 dense with int32 accumulation, requantized to int8 (see ops.QDense)."""
        op = ops.QDense(multiplier, shift, input_zero_point, output_zero_point, relu)
        return self.apply(op, x, weight, bias)[0]

    def qconv2d(
        self,
        x: Value,
        weight: Operand,
        bias: Operand,
        *,
        multiplier: Union[int, np.ndarray],
        shift: Union[int, np.ndarray],
        strides: IntPair = 1,
        padding: IntPair = 0,
        input_zero_point: int = 0,
        output_zero_point: int = 0,
        relu: bool = False,
    ) -> Value:
        """int8 NHWC conv2d; array multiplier/shift requantize per output channel."""
        per_channel = isinstance(multiplier, np.ndarray)
        if per_channel:
            ops.check_requant(multiplier, shift)
            extra: List[Operand] = [
                np.asarray(multiplier, dtype=np.int32),
                np.asarray(shift, dtype=np.int32),
            ]
            op = ops.QConv2D(ops.pair(strides), ops.pair(padding), True, 0, 0,
                             input_zero_point, output_zero_point, relu)  # fmt: skip
        else:
            extra = []
            op = ops.QConv2D(ops.pair(strides), ops.pair(padding), False, int(multiplier),
                             int(shift), input_zero_point, output_zero_point, relu)  # fmt: skip
        return self.apply(op, x, weight, bias, *extra)[0]

    def bias_add(self, x: Value, bias: Operand, axis: int = 1) -> Value:
        return self.apply(ops.BiasAdd(axis), x, bias)[0]

    def relu(self, x: Value) -> Value:
        return self.apply(ops.Relu(), x)[0]

    def add(self, a: Operand, b: Operand) -> Value:
        return self.apply(ops.Binary("add"), a, b)[0]

    def subtract(self, a: Operand, b: Operand) -> Value:
        return self.apply(ops.Binary("subtract"), a, b)[0]

    def multiply(self, a: Operand, b: Operand) -> Value:
        return self.apply(ops.Binary("multiply"), a, b)[0]

    def add_n(self, values: Sequence[Operand]) -> Value:
        """The sum of many same-shaped tensors in one function (num_args = len + 1)."""
        return self.apply(ops.AddN(len(values)), *values)[0]

    def elementwise(self, x: Value, steps: Sequence[Tuple[str, float]]) -> Value:
        """A fused chain of unary steps: ("add", c), ("multiply", c), ("tanh", 0), ..."""
        return self.apply(ops.Elementwise(tuple((s, float(c)) for s, c in steps)), x)[0]

    def max_pool2d(
        self, x: Value, pool: IntPair = 2, strides: Optional[IntPair] = None, layout: str = "NCHW"
    ) -> Value:
        size = ops.pair(pool)
        op = ops.Pool2D("max", size, ops.pair(strides) if strides else size, layout)
        return self.apply(op, x)[0]

    def avg_pool2d(
        self, x: Value, pool: IntPair = 2, strides: Optional[IntPair] = None, layout: str = "NCHW"
    ) -> Value:
        size = ops.pair(pool)
        op = ops.Pool2D("avg", size, ops.pair(strides) if strides else size, layout)
        return self.apply(op, x)[0]

    def softmax(self, x: Value) -> Value:
        return self.apply(ops.Softmax(), x)[0]

    def sum(self, x: Value) -> Value:
        """All elements summed into a scalar of shape []."""
        return self.apply(ops.Sum(), x)[0]

    def split(self, x: Value, sections: int, axis: int = 0) -> Tuple[Value, ...]:
        """One operator with ``sections`` outputs."""
        return tuple(self.apply(ops.Split(sections, axis), x))

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        """A ``__nop`` node: the output shares the input's storage."""
        return self.apply(ops.Reshape(tuple(int(d) for d in shape)), x)[0]

    def copy(self, x: Value) -> Value:
        """A ``__copy`` node: the executor copies the tensor."""
        return self.apply(ops.Copy(), x)[0]

    def extern_call(
        self,
        inputs: Union[Operand, Sequence[Operand]],
        symbol: str,
        *,
        reference: Callable[..., np.ndarray],
        shape: Optional[Sequence[int]] = None,
        dtype: Optional[str] = None,
        dependency: Optional[Mapping[str, Any]] = None,
    ) -> Value:
        """An operator that calls the external C function ``symbol`` (see ops.ExternCall):
        ``int32_t symbol(const T0* in0, ..., T* out, int32_t out_elements)``, non-zero =
        failure. ``reference(*arrays)`` is its numpy model; the output has ``shape``/``dtype``
        (default: the first input's). ``dependency`` (an external_dependencies entry, e.g.
        ``{"short_name": "mylib", "url": ..., "url_type": "git", "version_spec": "v1.0.0"}``)
        is listed in the archive's metadata."""
        operands: List[Operand] = (
            list(inputs) if isinstance(inputs, (list, tuple)) else [cast(Operand, inputs)]
        )
        if not operands:
            raise ValueError(f"extern call {symbol} needs at least one input")
        operands = [self.as_value(operand) for operand in operands]
        first = cast(Value, operands[0]).type
        out_type = None
        if shape is not None or dtype is not None:
            out_shape = tuple(int(d) for d in shape) if shape is not None else first.shape
            out_dtype = dtype or first.dtype
            _check_dtype(out_dtype)
            out_type = TensorType(out_shape, out_dtype)
        op = ops.ExternCall(symbol, out_type, reference)
        if dependency is not None and dict(dependency) not in self.external_dependencies:
            self.external_dependencies.append(dict(dependency))
        return self.apply(op, *operands)[0]

    def fail_if(self, x: Value, flag: Value) -> Value:
        """Identity on x that fails (returns -1) when the int32 scalar ``flag`` is non-zero."""
        return self.apply(ops.FailIf(), x, flag)[0]

    # --- results ----------------------------------------------------------------------------

    @property
    def input_specs(self) -> List[TensorSpec]:
        return [TensorSpec(_input_name(v), v.shape, v.dtype) for v in self.inputs]

    @property
    def output_specs(self) -> List[TensorSpec]:
        return [TensorSpec(f"output{i}", v.shape, v.dtype) for i, v in enumerate(self.outputs)]

    def reference(self, inputs: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """The expected outputs ``output0..N-1`` for ``inputs`` (numpy, same arithmetic as C).

        Raises OperatorFailure (``op_index`` set) where the C operator would return -1.
        """
        values: Dict[int, np.ndarray] = {}
        for spec, value in zip(self.input_specs, self.inputs):
            values[id(value)] = _checked_input(inputs, spec)
        for op_index, node in enumerate(self.ops):
            arrays = [_lookup(values, v) for v in node.inputs]
            try:
                results = node.op.reference(arrays)
            except OperatorFailure as failure:
                failure.op_index = op_index
                raise
            for value, result in zip(node.outputs, results):
                values[id(value)] = result
        return {f"output{i}": _lookup(values, v) for i, v in enumerate(self.outputs)}

    def build(
        self,
        *,
        default_version: int = 7,
        sample_fn: Optional[Callable[[int], Dict[str, np.ndarray]]] = None,
        description: str = "",
    ) -> GeneratedModel:
        """Lowers the description into a GeneratedModel (archive writer + reference).

        ``default_version`` is the MLF version ``write()`` uses unless told otherwise;
        ``sample_fn(seed)`` replaces the random ``sample_inputs()``.
        """
        from .model import GeneratedModel

        return GeneratedModel(
            self, default_version=default_version, sample_fn=sample_fn, description=description
        )


def _input_name(value: Value) -> str:
    assert isinstance(value.producer, InputNode)
    return value.producer.name


def _lookup(values: Dict[int, np.ndarray], value: Value) -> np.ndarray:
    if isinstance(value.producer, ConstNode):
        return value.producer.array
    return values[id(value)]


def _check_dtype(dtype: str) -> None:
    if dtype not in C_TYPES:
        raise ValueError(f"dtype {dtype!r} unsupported (use one of {', '.join(C_TYPES)})")


def _checked_input(inputs: Mapping[str, np.ndarray], spec: TensorSpec) -> np.ndarray:
    if spec.name not in inputs:
        raise KeyError(f"missing input {spec.name!r}")
    array = np.asarray(inputs[spec.name])
    if array.shape != spec.shape or str(array.dtype) != spec.dtype:
        raise ValueError(
            f"input {spec.name!r} must be {spec.dtype}{list(spec.shape)}, "
            f"got {array.dtype}{list(array.shape)}"
        )
    return array
