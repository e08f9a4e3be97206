"""float32 twins of int8 ``.tflite`` models, for the tests: the same graph with every weight
and bias dequantized to float32, every computed tensor float32 and unquantized, and a
QUANTIZE or DEQUANTIZE at either end of the graph dropped (the model then takes and gives
float32). The maintainers keep float32 versions of the MLPerf Tiny models back; these stand
in for them.

    data = float_twin(Path("../shared/models/ad01_int8.tflite"))
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
from tflite_builders import Option, TfliteWriter

from project_api.compile import read_tflite
from project_api.compile.schema import OPTION_FIELDS
from project_api.compile.tflite import Tensor

ENDS = ("QUANTIZE", "DEQUANTIZE")


def dequantized(tensor: Tensor) -> np.ndarray:
    """A constant's values as float32: ``scale · (q − zero_point)`` per channel of its
    quantized axis (in double, then rounded once); unquantized data as it is, in float32."""
    values = tensor.array().astype(np.float64)
    q = tensor.quantization
    if q is None:
        return values.astype(np.float32)
    shape = [1] * values.ndim
    if len(q.scales) > 1:
        shape[q.axis] = len(q.scales)
    scales = np.asarray(q.scales, np.float64).reshape(shape)
    zero_points = np.asarray(q.zero_points, np.float64).reshape(shape)
    return ((values - zero_points) * scales).astype(np.float32)


def float_twin(path: Path) -> bytes:
    """The float32 twin of the int8 model at ``path`` (see the module's docstring)."""
    model = read_tflite(path)
    # a QUANTIZE that takes a model input, or a DEQUANTIZE that gives a model output, goes:
    # its output is its input from then on
    alias: Dict[int, int] = {}
    dropped = set()
    for op in model.operators:
        src, dst = op.inputs[0], op.outputs[0]
        if op.name == ENDS[0] and src in model.inputs:
            alias[dst] = src
            dropped.add(op.index)
        elif op.name == ENDS[1] and dst in model.outputs:
            alias[src] = dst
            dropped.add(op.index)
    writer = TfliteWriter()
    index: Dict[int, int] = {}

    def new(old: int) -> int:
        old = alias.get(old, old)
        if old not in index:
            t = model.tensors[old]
            data: Optional[np.ndarray] = None
            dtype = "float32"
            if t.data is not None:  # weights and biases dequantized, shapes as they are
                quantized = t.quantization is not None or t.dtype == "float32"
                data = dequantized(t) if quantized else t.array()
                dtype = str(data.dtype)
            elif t.dtype not in ("int8", "float32"):
                dtype = t.dtype
            index[old] = writer.tensor(t.shape, dtype, name=t.name, data=data)
        return index[old]

    inputs = [new(i) for i in model.inputs]
    for op in model.operators:
        if op.index in dropped:
            continue
        ins = [new(i) if i >= 0 else -1 for i in op.inputs]
        outs = [new(o) for o in op.outputs]
        writer.op(op.name, ins, outs, options=_options(op.options_type, op.options), version=1)
    outputs = [new(o) for o in model.outputs]
    return writer.finish(inputs, outputs)


def _options(options_type: int, values: Dict[str, object]) -> List[Option]:
    fields = OPTION_FIELDS.get(options_type, {})
    return [(fields[name][0], fields[name][1], value) for name, value in values.items()]
