"""Reading a ``.tflite`` (TFLite's FlatBuffer schema, version 3) into plain Python values.

Only the tables ``compile`` needs are read: the model's operator codes, its first subgraph
(tensors, operators, inputs, outputs, how many subgraphs there are) and the buffers its
tensors use, with the builtin options of the operators it knows. Everything goes through
:mod:`.flatbuf`'s bounded reads, and the caps below keep a file far beyond any
microcontroller from costing time or memory: the file is refused by its size before it is
read, and counts, ranks and element counts are checked before anything is allocated.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import numpy as np

from ..errors import CompileError
from .flatbuf import Budget, Buffer, Table
from .schema import (
    OPTION_FIELDS,
    TENSOR_TYPES,
    builtin_name,
)

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

# Caps: far beyond what a microcontroller holds, far below what costs us time or memory.
MAX_FILE_BYTES = 64 << 20
MAX_SUBGRAPHS = 1024
MAX_OPCODES = 4096
MAX_TENSORS = 65536
MAX_OPERATORS = 65536
MAX_BUFFERS = 65536
MAX_OPERANDS = 1024
MAX_RANK = 8
MAX_TENSOR_ELEMENTS = 1 << 24
MAX_ACTIVATION_BYTES = 256 << 20  # every computed tensor at once: far beyond any MCU's RAM
MAX_NAME = 4096
MAX_QUANT_CHANNELS = 1 << 16
NUMERIC_ITEMSIZE = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "float32": 4}
READ_BUDGET = 4_000_000  # elements of tables and vectors one file may make us read

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Quantization:
    """A tensor's affine quantization: per tensor (one scale) or per channel on ``axis``."""

    scales: Tuple[float, ...]  # float32 values, exactly (checked where they are used)
    zero_points: Tuple[int, ...]
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scales) > 1


@dataclass
class Tensor:
    index: int
    name: str
    shape: Tuple[int, ...]
    dtype: str  # "int8", "float32", ... or the schema's name of a type we do not use
    buffer: int
    quantization: Optional[Quantization] = None
    data: Optional[bytes] = None  # a constant's bytes (None: computed or fed)
    dynamic: bool = False  # shape_signature has a -1 past the batch axis
    variable: bool = False
    sparse: bool = False

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    def array(self) -> np.ndarray:
        """A constant's data as a numpy array of its shape."""
        if self.data is None:
            raise CompileError(f"tensor {self.index} ({self.name!r}) holds no constant data")
        return (
            np.frombuffer(self.data, dtype=np.dtype(self.dtype).newbyteorder("<"))
            .reshape(self.shape)
            .astype(self.dtype)
        )


@dataclass
class Operator:
    index: int
    opcode: int  # the builtin code (32 = CUSTOM)
    version: int
    custom_code: str
    inputs: Tuple[int, ...]  # tensor indices, -1 for an omitted optional input
    outputs: Tuple[int, ...]
    options_type: int
    options: Dict[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return builtin_name(self.opcode)


@dataclass
class TfliteModel:
    path: Path
    size: int
    version: int
    description: str
    subgraphs: int
    tensors: List[Tensor]
    operators: List[Operator]
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]


def read_tflite(path: PathLike) -> TfliteModel:
    """Reads and checks a ``.tflite``; any problem is a one-line CompileError."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as err:
        raise CompileError(f"{path}: {err.strerror or err}") from None
    if not path.is_file():
        raise CompileError(f"{path}: not a file")
    if size > MAX_FILE_BYTES:
        raise CompileError(
            f"{path}: {size} bytes is beyond any microcontroller "
            f"(compile reads .tflite files up to {MAX_FILE_BYTES >> 20} MiB)"
        )
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CompileError(f"{path}: {err.strerror or err}") from None
    try:
        return parse_tflite(data, path)
    except CompileError as err:
        raise CompileError(f"{path}: {err}") from None
    except RecursionError:  # pragma: no cover - the reader does not recurse
        raise CompileError(f"{path}: corrupt .tflite") from None


def parse_tflite(data: bytes, path: Path = Path("model.tflite")) -> TfliteModel:
    if len(data) > MAX_FILE_BYTES:
        raise CompileError(f"{len(data)} bytes is beyond any microcontroller")
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise CompileError("not a .tflite file (no TFL3 identifier at byte 4)")
    buf = Buffer(data, Budget(READ_BUDGET, len(data)))
    model = buf.root()
    version = model.integer(0, "u32")
    if version != SCHEMA_VERSION:
        raise CompileError(f"schema version {version} (compile reads version {SCHEMA_VERSION})")
    if model.has(8) or model.has(9):
        raise CompileError("external buffer groups are not supported (the weights must be inside)")
    opcodes = [_opcode(t) for t in model.tables(1, "operator_codes", MAX_OPCODES)]
    subgraphs = model.tables(2, "subgraphs", MAX_SUBGRAPHS)
    if not subgraphs:
        raise CompileError("the model has no subgraph")
    buffers = model.tables(4, "buffers", MAX_BUFFERS)
    graph = subgraphs[0]
    cache: Dict[int, Optional[bytes]] = {}
    tensors = [
        _tensor(i, t, buffers, buf, cache)
        for i, t in enumerate(graph.tables(0, "tensors", MAX_TENSORS))
    ]
    computed = sum(t.elements * NUMERIC_ITEMSIZE.get(t.dtype, 8) for t in tensors if t.data is None)
    if computed > MAX_ACTIVATION_BYTES:
        raise CompileError(
            f"its tensors take {computed} bytes of RAM, beyond any microcontroller "
            f"(compile takes up to {MAX_ACTIVATION_BYTES >> 20} MiB)"
        )
    count = len(tensors)
    inputs = _indices(graph, 1, "subgraph inputs", count, optional=False)
    outputs = _indices(graph, 2, "subgraph outputs", count, optional=False)
    operators = [
        _operator(i, t, opcodes, count)
        for i, t in enumerate(graph.tables(3, "operators", MAX_OPERATORS))
    ]
    return TfliteModel(
        path=path,
        size=len(data),
        version=version,
        description=model.string(3, "description", MAX_NAME),
        subgraphs=len(subgraphs),
        tensors=tensors,
        operators=operators,
        inputs=inputs,
        outputs=outputs,
    )


def _opcode(table: Table) -> Tuple[int, int, str]:
    deprecated = table.integer(0, "i8")
    builtin = table.integer(3, "i32")
    code = max(deprecated, builtin)
    return code, table.integer(2, "i32", 1), table.string(1, "custom_code", MAX_NAME)


def _indices(table: Table, slot: int, what: str, count: int, *, optional: bool) -> Tuple[int, ...]:
    values = table.numbers(slot, "i32", what, MAX_OPERANDS)
    for value in values:
        if value >= count or value < (-1 if optional else 0):
            raise CompileError(f"{what}: tensor index {value} of {count} tensors")
    return tuple(values)


def _tensor(
    index: int,
    table: Table,
    buffers: List[Table],
    buf: Buffer,
    cache: Dict[int, Optional[bytes]],
) -> Tensor:
    what = f"tensor {index}"
    dims = table.numbers(0, "i32", f"{what} shape", MAX_RANK)
    if any(d < 0 for d in dims):
        raise CompileError(f"{what}: negative dimension in shape {list(dims)}")
    shape = tuple(dims)
    elements = math.prod(shape)  # Python integers: no overflow
    if elements > MAX_TENSOR_ELEMENTS:
        raise CompileError(
            f"{what}: shape {list(shape)} holds {elements} elements, beyond any microcontroller"
        )
    type_code = table.integer(1, "i8")
    dtype = TENSOR_TYPES.get(type_code, f"type {type_code}")
    signature = table.numbers(7, "i32", f"{what} shape_signature", MAX_RANK)
    tensor = Tensor(
        index=index,
        name=table.string(3, f"{what} name", MAX_NAME),
        shape=shape,
        dtype=dtype,
        buffer=table.integer(2, "u32"),
        # A -1 in the batch axis is what every Keras export has; LiteRT runs the shape given.
        dynamic=any(d < 0 for d in signature[1:]) or len(signature) not in (0, len(shape)),
        variable=bool(table.scalar(5, "bool", False)),
        sparse=table.has(6) or table.has(10),
    )
    quant = table.table(4, f"{what} quantization")
    if quant is not None:
        tensor.quantization = _quantization(quant, what)
    if tensor.buffer >= len(buffers):
        if tensor.buffer != 0:
            raise CompileError(f"{what}: buffer {tensor.buffer} of {len(buffers)} buffers")
        return tensor
    if tensor.buffer not in cache:
        cache[tensor.buffer] = _buffer_data(buffers[tensor.buffer], buf, tensor)
    tensor.data = cache[tensor.buffer]
    _check_data(tensor)
    return tensor


def _quantization(table: Table, what: str) -> Optional[Quantization]:
    scales = table.numbers(2, "f32", f"{what} scales", MAX_QUANT_CHANNELS)
    zero_points = table.numbers(3, "i64", f"{what} zero points", MAX_QUANT_CHANNELS)
    if table.has(5):
        raise CompileError(f"{what}: custom quantization details are not supported")
    if not scales:
        return None  # min/max only: not quantized for inference
    if len(zero_points) != len(scales):
        raise CompileError(f"{what}: {len(scales)} scales but {len(zero_points)} zero points")
    if any(abs(z) > 1 << 16 for z in zero_points):
        raise CompileError(f"{what}: zero point out of range")
    return Quantization(
        tuple(float(s) for s in scales),
        tuple(int(z) for z in zero_points),
        table.integer(6, "i32"),
    )


def _buffer_data(table: Table, buf: Buffer, tensor: Tensor) -> Optional[bytes]:
    what = f"tensor {tensor.index} buffer {tensor.buffer}"
    offset = table.integer(1, "u64")
    size = table.integer(2, "u64")
    if offset > 1:
        # The weights lie after the FlatBuffer, at a file offset (large models).
        buf.need(offset, size, what)
        buf.budget.charge_bytes(size, what)
        raw = bytes(buf.data[offset : offset + size])
    else:
        view = table.bytes_view(0, what, MAX_FILE_BYTES)
        if len(view) == 0:
            return None
        raw = bytes(view)
    return raw or None


def _check_data(tensor: Tensor) -> None:
    if tensor.data is None or tensor.dtype not in NUMERIC_ITEMSIZE:
        return
    want = tensor.elements * NUMERIC_ITEMSIZE[tensor.dtype]
    if len(tensor.data) != want:
        raise CompileError(
            f"tensor {tensor.index}: buffer {tensor.buffer} holds {len(tensor.data)} bytes for a "
            f"{tensor.dtype}{list(tensor.shape)} tensor of {want} bytes"
        )


def _operator(
    index: int, table: Table, opcodes: List[Tuple[int, int, str]], count: int
) -> Operator:
    what = f"operator {index}"
    opcode_index = table.integer(0, "u32")
    if opcode_index >= len(opcodes):
        raise CompileError(f"{what}: opcode index {opcode_index} of {len(opcodes)} operator codes")
    code, version, custom = opcodes[opcode_index]
    options_type = table.integer(3, "u8")
    op = Operator(
        index=index,
        opcode=code,
        version=version,
        custom_code=custom,
        inputs=_indices(table, 1, f"{what} inputs", count, optional=True),
        outputs=_indices(table, 2, f"{what} outputs", count, optional=False),
        options_type=options_type,
    )
    fields = OPTION_FIELDS.get(options_type)
    if fields is not None:
        options = table.table(4, f"{what} options")
        if options is not None:
            op.options = _options(options, fields, what)
        else:
            op.options = {name: default for name, (_, _, default) in fields.items()}
    return op


def _options(
    table: Table, fields: Dict[str, Tuple[int, str, object]], what: str
) -> Dict[str, object]:
    values: Dict[str, object] = {}
    for name, (slot, kind, default) in fields.items():
        if kind == "[i32]":
            values[name] = table.numbers(slot, "i32", f"{what} {name}", MAX_RANK)
        elif kind == "f32":
            values[name] = table.real(slot, float(default))  # type: ignore[arg-type]
        else:
            values[name] = table.integer(slot, kind, int(default))  # type: ignore[call-overload]
    return values
