"""What ``compile`` knows of TFLite's schema (schema.fbs, version 3): names and field slots.

Operator and type names are the schema's enum names (``BuiltinOperator``, ``TensorType``),
so messages and ``info`` name things as TFLite's own tools do. Options are read by field
slot: ``OPTION_FIELDS[union type] = {name: (slot, kind, default)}``.
"""

from __future__ import annotations

from typing import Dict, Tuple

_BUILTIN_TEXT = (
    "ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEPTH_TO_SPACE DEQUANTIZE "
    "EMBEDDING_LOOKUP FLOOR FULLY_CONNECTED HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D "
    "LOCAL_RESPONSE_NORMALIZATION LOGISTIC LSH_PROJECTION LSTM MAX_POOL_2D MUL RELU RELU_N1_TO_1 "
    "RELU6 RESHAPE RESIZE_BILINEAR RNN SOFTMAX SPACE_TO_DEPTH SVDF TANH CONCAT_EMBEDDINGS "
    "SKIP_GRAM CALL CUSTOM EMBEDDING_LOOKUP_SPARSE PAD UNIDIRECTIONAL_SEQUENCE_RNN GATHER "
    "BATCH_TO_SPACE_ND SPACE_TO_BATCH_ND TRANSPOSE MEAN SUB DIV SQUEEZE "
    "UNIDIRECTIONAL_SEQUENCE_LSTM STRIDED_SLICE BIDIRECTIONAL_SEQUENCE_RNN EXP TOPK_V2 SPLIT "
    "LOG_SOFTMAX DELEGATE BIDIRECTIONAL_SEQUENCE_LSTM CAST PRELU MAXIMUM ARG_MAX MINIMUM LESS NEG "
    "PADV2 GREATER GREATER_EQUAL LESS_EQUAL SELECT SLICE SIN TRANSPOSE_CONV SPARSE_TO_DENSE TILE "
    "EXPAND_DIMS EQUAL NOT_EQUAL LOG SUM SQRT RSQRT SHAPE POW ARG_MIN FAKE_QUANT REDUCE_PROD "
    "REDUCE_MAX PACK LOGICAL_OR ONE_HOT LOGICAL_AND LOGICAL_NOT UNPACK REDUCE_MIN FLOOR_DIV "
    "REDUCE_ANY SQUARE ZEROS_LIKE FILL FLOOR_MOD RANGE RESIZE_NEAREST_NEIGHBOR LEAKY_RELU "
    "SQUARED_DIFFERENCE MIRROR_PAD ABS SPLIT_V UNIQUE CEIL REVERSE_V2 ADD_N GATHER_ND COS WHERE "
    "RANK ELU REVERSE_SEQUENCE MATRIX_DIAG QUANTIZE MATRIX_SET_DIAG ROUND HARD_SWISH IF WHILE "
    "NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5 SCATTER_ND SELECT_V2 DENSIFY SEGMENT_SUM "
    "BATCH_MATMUL PLACEHOLDER_FOR_GREATER_OP_CODES CUMSUM CALL_ONCE BROADCAST_TO RFFT2D CONV_3D "
    "IMAG REAL COMPLEX_ABS HASHTABLE HASHTABLE_FIND HASHTABLE_IMPORT HASHTABLE_SIZE REDUCE_ALL "
    "CONV_3D_TRANSPOSE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE BROADCAST_ARGS "
    "RANDOM_STANDARD_NORMAL BUCKETIZE RANDOM_UNIFORM MULTINOMIAL GELU DYNAMIC_UPDATE_SLICE "
    "RELU_0_TO_1 UNSORTED_SEGMENT_PROD UNSORTED_SEGMENT_MAX UNSORTED_SEGMENT_SUM ATAN2 "
    "UNSORTED_SEGMENT_MIN SIGN BITCAST BITWISE_XOR RIGHT_SHIFT STABLEHLO_LOGISTIC STABLEHLO_ADD "
    "STABLEHLO_DIVIDE STABLEHLO_MULTIPLY STABLEHLO_MAXIMUM STABLEHLO_RESHAPE STABLEHLO_CLAMP "
    "STABLEHLO_CONCATENATE STABLEHLO_BROADCAST_IN_DIM STABLEHLO_CONVOLUTION STABLEHLO_SLICE "
    "STABLEHLO_CUSTOM_CALL STABLEHLO_REDUCE STABLEHLO_ABS STABLEHLO_AND STABLEHLO_COSINE "
    "STABLEHLO_EXPONENTIAL STABLEHLO_FLOOR STABLEHLO_LOG STABLEHLO_MINIMUM STABLEHLO_NEGATE "
    "STABLEHLO_OR STABLEHLO_POWER STABLEHLO_REMAINDER STABLEHLO_RSQRT STABLEHLO_SELECT "
    "STABLEHLO_SUBTRACT STABLEHLO_TANH STABLEHLO_SCATTER STABLEHLO_COMPARE STABLEHLO_CONVERT "
    "STABLEHLO_DYNAMIC_SLICE STABLEHLO_DYNAMIC_UPDATE_SLICE STABLEHLO_PAD STABLEHLO_IOTA "
    "STABLEHLO_DOT_GENERAL STABLEHLO_REDUCE_WINDOW STABLEHLO_SORT STABLEHLO_WHILE "
    "STABLEHLO_GATHER STABLEHLO_TRANSPOSE DILATE STABLEHLO_RNG_BIT_GENERATOR REDUCE_WINDOW "
    "STABLEHLO_COMPOSITE STABLEHLO_SHIFT_LEFT STABLEHLO_CBRT STABLEHLO_CASE "
)
_BUILTIN_NAMES = tuple(_BUILTIN_TEXT.split())

CUSTOM = 32

TENSOR_TYPES = {
    0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool",
    7: "int16", 8: "complex64", 9: "int8", 10: "float64", 11: "complex128", 12: "uint64",
    13: "resource", 14: "variant", 15: "uint32", 16: "uint16", 17: "int4", 18: "bfloat16",
}  # fmt: skip

PADDING = {0: "SAME", 1: "VALID"}
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}

# BuiltinOptions union members compile reads.
CONV_2D_OPTIONS = 1
DEPTHWISE_CONV_2D_OPTIONS = 2
POOL_2D_OPTIONS = 5
FULLY_CONNECTED_OPTIONS = 8
SOFTMAX_OPTIONS = 9
CONCATENATION_OPTIONS = 10
ADD_OPTIONS = 11
REDUCER_OPTIONS = 27
SQUEEZE_OPTIONS = 30
MUL_OPTIONS = 21
RESHAPE_OPTIONS = 17

OptionFields = Dict[str, Tuple[int, str, object]]
OPTION_FIELDS: Dict[int, OptionFields] = {
    CONV_2D_OPTIONS: {
        "padding": (0, "i8", 0),
        "stride_w": (1, "i32", 0),
        "stride_h": (2, "i32", 0),
        "activation": (3, "i8", 0),
        "dilation_w": (4, "i32", 1),
        "dilation_h": (5, "i32", 1),
        "quantized_bias_type": (6, "i8", 0),
    },
    DEPTHWISE_CONV_2D_OPTIONS: {
        "padding": (0, "i8", 0),
        "stride_w": (1, "i32", 0),
        "stride_h": (2, "i32", 0),
        "depth_multiplier": (3, "i32", 0),
        "activation": (4, "i8", 0),
        "dilation_w": (5, "i32", 1),
        "dilation_h": (6, "i32", 1),
    },
    POOL_2D_OPTIONS: {
        "padding": (0, "i8", 0),
        "stride_w": (1, "i32", 0),
        "stride_h": (2, "i32", 0),
        "filter_w": (3, "i32", 0),
        "filter_h": (4, "i32", 0),
        "activation": (5, "i8", 0),
    },
    FULLY_CONNECTED_OPTIONS: {
        "activation": (0, "i8", 0),
        "weights_format": (1, "i8", 0),
        "keep_num_dims": (2, "bool", False),
        "asymmetric_quantize_inputs": (3, "bool", False),
        "quantized_bias_type": (4, "i8", 0),
    },
    SOFTMAX_OPTIONS: {"beta": (0, "f32", 0.0)},
    ADD_OPTIONS: {"activation": (0, "i8", 0), "pot_scale_int16": (1, "bool", True)},
    MUL_OPTIONS: {"activation": (0, "i8", 0)},
    CONCATENATION_OPTIONS: {"axis": (0, "i32", 0), "activation": (1, "i8", 0)},
    SQUEEZE_OPTIONS: {"squeeze_dims": (0, "[i32]", ())},
    REDUCER_OPTIONS: {"keep_dims": (0, "bool", False)},
    RESHAPE_OPTIONS: {"new_shape": (0, "[i32]", ())},
}


def builtin_name(code: int) -> str:
    """The schema's name of a builtin operator code (``BUILTIN_<n>`` for one it does not name)."""
    if 0 <= code < len(_BUILTIN_NAMES):
        return _BUILTIN_NAMES[code]
    return f"BUILTIN_{code}"


def builtin_code(name: str) -> int:
    return _BUILTIN_NAMES.index(name)
