"""Test-model factory: MLF archives with TVM-ABI C kernels, plus numpy references; also the
emitter ``compile`` lowers a ``.tflite`` onto (ops/tflite*.py, emit_aot.py), so there is one
writer of TVM-shaped archives.

from project_api.modelgen import Network, catalog

net = Network("tiny")
x = net.input("x", (1, 64), "float32")
net.output(net.softmax(net.dense(x, w, b)))
model = net.build()
model.write("tiny.tar")                       # a TVM 0.14-shaped MLF archive (v7)
expected = model.reference(model.sample_inputs())   # {"output0": ndarray}

catalog()["cnn_int8"]().write("cnn_int8.tar", version=7)
"""

from __future__ import annotations

from ..read.model import TensorSpec
from .catalog import catalog, chain_add, failing_inputs, params_sized
from .model import (
    GeneratedModel,
    archive_members,
    compare_outputs,
    random_inputs,
    write_multi_model_archive,
)
from .network import Network, Value
from .ops import OperatorFailure, quantize_multiplier

__all__ = [
    "GeneratedModel",
    "Network",
    "OperatorFailure",
    "TensorSpec",
    "Value",
    "archive_members",
    "catalog",
    "chain_add",
    "compare_outputs",
    "failing_inputs",
    "params_sized",
    "quantize_multiplier",
    "random_inputs",
    "write_multi_model_archive",
]
