"""Operators of the model factory: shape rules, C emitters and numpy references.

Each operator is one fused TVM primitive function (``fused_nn_dense_add_nn_relu``...). Its
numpy reference repeats the C code's arithmetic in the same order and precision (float32
accumulation in loop order, int8 paths in exact integer arithmetic), so host results agree
bit for bit and device results within float32 rounding.
"""

from .base import (
    F32,
    FLOAT_LOWEST,
    Op,
    OperatorFailure,
    Shape,
    TensorType,
    epilogue_output,
    epilogue_parts,
    flat_loop_var,
    float_epilogue,
    nest,
    pair,
    reference_epilogue,
    relu_expr,
    require,
    require_dtype,
    row_major_strides,
    window_out,
)
from .elementwise import (
    BINARY_SYMBOLS,
    ELEMENTWISE_STEPS,
    AddN,
    BiasAdd,
    Binary,
    Elementwise,
    Relu,
    broadcast_index,
    step_c,
    step_reference,
)
from .int8 import (
    QConv2D,
    QDense,
)
from .layout import (
    Copy,
    Reshape,
    Split,
)
from .linear import (
    Conv2D,
    Dense,
    conv_nchw_accumulate,
    conv_nhwc_accumulate,
    dense_accumulate,
    emit_pad,
    pad_reference,
)
from .quant import (
    check_requant,
    emit_clip_int8,
    offset,
    quantize_multiplier,
    requantize,
    requantize_c,
)
from .reductions import (
    Pool2D,
    Softmax,
    Sum,
)
from .special import (
    ExternCall,
    FailIf,
)

__all__ = [
    "AddN",
    "BINARY_SYMBOLS",
    "BiasAdd",
    "Binary",
    "Conv2D",
    "Copy",
    "Dense",
    "ELEMENTWISE_STEPS",
    "Elementwise",
    "ExternCall",
    "F32",
    "FLOAT_LOWEST",
    "FailIf",
    "Op",
    "OperatorFailure",
    "Pool2D",
    "QConv2D",
    "QDense",
    "Relu",
    "Reshape",
    "Shape",
    "Softmax",
    "Split",
    "Sum",
    "TensorType",
    "broadcast_index",
    "check_requant",
    "conv_nchw_accumulate",
    "conv_nhwc_accumulate",
    "dense_accumulate",
    "emit_clip_int8",
    "emit_pad",
    "epilogue_output",
    "epilogue_parts",
    "flat_loop_var",
    "float_epilogue",
    "nest",
    "offset",
    "pad_reference",
    "pair",
    "quantize_multiplier",
    "reference_epilogue",
    "relu_expr",
    "requantize",
    "requantize_c",
    "require",
    "require_dtype",
    "row_major_strides",
    "step_c",
    "step_reference",
    "window_out",
]
