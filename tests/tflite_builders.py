"""Writing small ``.tflite`` models for the tests, with the ``flatbuffers`` Builder.

    w = TfliteWriter()
    x = w.tensor((1, 8, 8, 3), "int8", name="x", scale=0.05, zero_point=3)
    ...
    w.op("CONV_2D", [x, f, b], [y], options=conv_options(...), version=3)
    data = w.finish(inputs=[x], outputs=[y])

Field slots are TFLite's schema (project_api/compile/schema.py names them). Several
independent branches in one model (each with its own input and output) let one compiled
firmware test many operators in one run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import flatbuffers
import numpy as np

from project_api.compile.schema import builtin_code

TYPES = {"float32": 0, "int32": 2, "uint8": 3, "int64": 4, "int16": 7, "int8": 9}
OPTION_TYPES = {
    "CONV_2D": 1,
    "DEPTHWISE_CONV_2D": 2,
    "AVERAGE_POOL_2D": 5,
    "MAX_POOL_2D": 5,
    "FULLY_CONNECTED": 8,
    "SOFTMAX": 9,
    "RESHAPE": 17,
    "ADD": 11,
    "MUL": 21,
    "CONCATENATION": 10,
    "SQUEEZE": 30,
    "MEAN": 27,
}
PADDING = {"SAME": 0, "VALID": 1}
ACTIVATION = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}

# An option: (slot, kind, value); kind is i8, i32, bool, f32 or [i32].
Option = Tuple[int, str, object]


def conv_options(padding="SAME", stride=(1, 1), dilation=(1, 1), act="NONE") -> List[Option]:
    return [(0, "i8", PADDING[padding]), (1, "i32", stride[1]), (2, "i32", stride[0]),
            (3, "i8", ACTIVATION[act]), (4, "i32", dilation[1]),
            (5, "i32", dilation[0])]  # fmt: skip


def depthwise_options(
    padding="SAME", stride=(1, 1), dilation=(1, 1), multiplier=1, act="NONE"
) -> List[Option]:
    return [(0, "i8", PADDING[padding]), (1, "i32", stride[1]), (2, "i32", stride[0]),
            (3, "i32", multiplier), (4, "i8", ACTIVATION[act]), (5, "i32", dilation[1]),
            (6, "i32", dilation[0])]  # fmt: skip


def pool_options(padding="VALID", stride=(2, 2), size=(2, 2), act="NONE") -> List[Option]:
    return [(0, "i8", PADDING[padding]), (1, "i32", stride[1]), (2, "i32", stride[0]),
            (3, "i32", size[1]), (4, "i32", size[0]), (5, "i8", ACTIVATION[act])]  # fmt: skip


def fc_options(act="NONE", keep_num_dims=False) -> List[Option]:
    return [(0, "i8", ACTIVATION[act]), (2, "bool", keep_num_dims)]


def softmax_options(beta=1.0) -> List[Option]:
    return [(0, "f32", beta)]


def reshape_options(shape: Sequence[int]) -> List[Option]:
    return [(0, "[i32]", list(shape))]


@dataclass
class _Tensor:
    shape: Tuple[int, ...]
    dtype: str
    name: str
    buffer: int
    scales: Optional[List[float]] = None
    zero_points: Optional[List[int]] = None
    axis: int = 0
    signature: Optional[Tuple[int, ...]] = None


@dataclass
class _Op:
    opcode: int
    inputs: List[int]
    outputs: List[int]
    options_type: int
    options: List[Option]


@dataclass
class TfliteWriter:
    tensors: List[_Tensor] = field(default_factory=list)
    buffers: List[bytes] = field(default_factory=lambda: [b""])
    ops: List[_Op] = field(default_factory=list)
    opcodes: List[Tuple[int, int, str]] = field(default_factory=list)
    subgraphs: int = 1
    # hostile: the tensors vector names every tensor table this many times
    repeat_tensors: int = 1

    def tensor(
        self,
        shape: Sequence[int],
        dtype: str,
        *,
        name: str = "",
        data: Optional[np.ndarray] = None,
        scale=None,
        zero_point=None,
        axis: int = 0,
        signature: Optional[Sequence[int]] = None,
    ) -> int:
        buffer = 0
        if data is not None:
            self.buffers.append(
                np.ascontiguousarray(data, dtype=dtype)
                .astype("<" + np.dtype(dtype).str[1:])
                .tobytes()
            )
            buffer = len(self.buffers) - 1
        scales = None if scale is None else [float(s) for s in np.atleast_1d(scale)]
        zps = None
        if scales is not None:
            zps = [int(z) for z in np.atleast_1d(zero_point if zero_point is not None else 0)]
            if len(zps) == 1 and len(scales) > 1:
                zps = zps * len(scales)
        index = len(self.tensors)
        self.tensors.append(
            _Tensor(
                tuple(int(d) for d in shape),
                dtype,
                name or f"t{index}",
                buffer,
                scales,
                zps,
                axis,
                None if signature is None else tuple(signature),
            )  # fmt: skip
        )
        return index

    def op(
        self,
        name: str,
        inputs: Sequence[int],
        outputs: Sequence[int],
        *,
        options: Sequence[Option] = (),
        version: int = 1,
        custom: str = "",
    ) -> None:
        code = builtin_code(name)
        key = (code, version, custom)
        if key not in self.opcodes:
            self.opcodes.append(key)
        options_type = OPTION_TYPES.get(name, 0) if options or name in OPTION_TYPES else 0
        self.ops.append(
            _Op(self.opcodes.index(key), list(inputs), list(outputs), options_type, list(options))
        )

    # --- serialisation -----------------------------------------------------------------------

    def finish(self, inputs: Sequence[int], outputs: Sequence[int]) -> bytes:
        b = flatbuffers.Builder(1024)
        buffers = [self._buffer(b, data) for data in self.buffers]
        tensors = [self._tensor(b, t) for t in self.tensors]
        ops = [self._op(b, op) for op in self.ops]
        subgraph_offsets = []
        for _ in range(self.subgraphs):
            t_vec = _offsets(b, tensors * self.repeat_tensors)
            o_vec = _offsets(b, ops)
            in_vec = _ints(b, inputs)
            out_vec = _ints(b, outputs)
            name = b.CreateString("main")
            b.StartObject(5)
            b.PrependUOffsetTRelativeSlot(0, t_vec, 0)
            b.PrependUOffsetTRelativeSlot(1, in_vec, 0)
            b.PrependUOffsetTRelativeSlot(2, out_vec, 0)
            b.PrependUOffsetTRelativeSlot(3, o_vec, 0)
            b.PrependUOffsetTRelativeSlot(4, name, 0)
            subgraph_offsets.append(b.EndObject())
        codes = []
        for code, version, custom in self.opcodes:
            custom_off = b.CreateString(custom) if custom else 0
            b.StartObject(4)
            b.PrependInt8Slot(0, min(code, 127), 0)
            if custom_off:
                b.PrependUOffsetTRelativeSlot(1, custom_off, 0)
            b.PrependInt32Slot(2, version, 1)
            b.PrependInt32Slot(3, code, 0)
            codes.append(b.EndObject())
        codes_vec = _offsets(b, codes)
        subgraphs_vec = _offsets(b, subgraph_offsets)
        buffers_vec = _offsets(b, buffers)
        description = b.CreateString("mlf-project test model")
        b.StartObject(5)
        b.PrependUint32Slot(0, 3, 0)
        b.PrependUOffsetTRelativeSlot(1, codes_vec, 0)
        b.PrependUOffsetTRelativeSlot(2, subgraphs_vec, 0)
        b.PrependUOffsetTRelativeSlot(3, description, 0)
        b.PrependUOffsetTRelativeSlot(4, buffers_vec, 0)
        b.Finish(b.EndObject(), file_identifier=b"TFL3")
        return bytes(b.Output())

    def _buffer(self, b: flatbuffers.Builder, data: bytes) -> int:
        data_off = 0
        if data:
            b.StartVector(1, len(data), 16)
            b.head = b.head - len(data)
            b.Bytes[b.head : b.head + len(data)] = data
            data_off = b.EndVector()
        b.StartObject(1)
        if data_off:
            b.PrependUOffsetTRelativeSlot(0, data_off, 0)
        return b.EndObject()

    def _tensor(self, b: flatbuffers.Builder, t: _Tensor) -> int:
        shape = _ints(b, t.shape)
        signature = _ints(b, t.signature) if t.signature is not None else 0
        name = b.CreateString(t.name)
        quant = 0
        if t.scales is not None:
            scales = _floats(b, t.scales)
            zps = _longs(b, t.zero_points or [0])
            b.StartObject(7)
            b.PrependUOffsetTRelativeSlot(2, scales, 0)
            b.PrependUOffsetTRelativeSlot(3, zps, 0)
            b.PrependInt32Slot(6, t.axis, 0)
            quant = b.EndObject()
        b.StartObject(8)
        b.PrependUOffsetTRelativeSlot(0, shape, 0)
        b.PrependInt8Slot(1, TYPES[t.dtype], 0)
        b.PrependUint32Slot(2, t.buffer, 0)
        b.PrependUOffsetTRelativeSlot(3, name, 0)
        if quant:
            b.PrependUOffsetTRelativeSlot(4, quant, 0)
        if signature:
            b.PrependUOffsetTRelativeSlot(7, signature, 0)
        return b.EndObject()

    def _op(self, b: flatbuffers.Builder, op: _Op) -> int:
        options = 0
        if op.options_type:
            vectors: Dict[int, int] = {}
            for slot, kind, value in op.options:
                if kind == "[i32]":
                    vectors[slot] = _ints(b, value)  # type: ignore[arg-type]
            b.StartObject(8)
            for slot, kind, value in op.options:
                if kind == "i8":
                    b.PrependInt8Slot(slot, int(value), -1)  # type: ignore[call-overload]
                elif kind == "i32":
                    b.PrependInt32Slot(slot, int(value), -1)  # type: ignore[call-overload]
                elif kind == "bool":
                    b.PrependBoolSlot(slot, bool(value), not value)
                elif kind == "f32":
                    b.PrependFloat32Slot(slot, float(value), -1.0)  # type: ignore[arg-type]
                else:
                    b.PrependUOffsetTRelativeSlot(slot, vectors[slot], 0)
            options = b.EndObject()
        inputs, outputs = _ints(b, op.inputs), _ints(b, op.outputs)
        b.StartObject(5)
        b.PrependUint32Slot(0, op.opcode, 0)
        b.PrependUOffsetTRelativeSlot(1, inputs, 0)
        b.PrependUOffsetTRelativeSlot(2, outputs, 0)
        if options:
            b.PrependUint8Slot(3, op.options_type, 0)
            b.PrependUOffsetTRelativeSlot(4, options, 0)
        return b.EndObject()


def _offsets(b: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _ints(b: flatbuffers.Builder, values: Sequence[int]) -> int:
    b.StartVector(4, len(values), 4)
    for v in reversed(list(values)):
        b.PrependInt32(int(v))
    return b.EndVector()


def _longs(b: flatbuffers.Builder, values: Sequence[int]) -> int:
    b.StartVector(8, len(values), 8)
    for v in reversed(list(values)):
        b.PrependInt64(int(v))
    return b.EndVector()


def _floats(b: flatbuffers.Builder, values: Sequence[float]) -> int:
    b.StartVector(4, len(values), 4)
    for v in reversed(list(values)):
        b.PrependFloat32(float(v))
    return b.EndVector()
