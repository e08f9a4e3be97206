"""Operator cases for ``compile``: one ``.tflite`` of many independent branches.

Each case is one operator with its options, fed by an input of its own and writing an output
of its own, so one compiled firmware (and one LiteRT interpreter) covers every case at once.
Quantization parameters are chosen so that outputs spread over the int8 range rather than
saturate (a saturated output would hide a wrong requantization).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np
from tflite_builders import (
    ACTIVATION,
    TfliteWriter,
    conv_options,
    depthwise_options,
    fc_options,
    pool_options,
    reshape_options,
    softmax_options,
)

CONTROL = "fc_ties_double_rounding"


@dataclass
class Case:
    name: str
    add: Callable[[TfliteWriter, np.random.Generator, str], Tuple[int, int]]


def _act_scale(in_scale: float, filter_scales: np.ndarray, depth: int) -> float:
    """An output scale that spreads the accumulators over about ±2.5 sigma of int8."""
    acc_std = 74.0 * 74.0 * np.sqrt(depth)
    return float(in_scale * float(np.mean(filter_scales)) * acc_std / 50.0)


def conv_case(
    x_shape: Sequence[int],
    filter_shape: Sequence[int],
    options: Dict[str, object],
    *,
    depthwise: bool = False,
    per_channel: bool = True,
    bias: bool = True,
    ties: bool = False,
    hybrid: bool = False,
) -> Callable[[TfliteWriter, np.random.Generator, str], Tuple[int, int]]:
    """``ties``: powers of two for every scale and weights in -1..1, so that one in eight
    requantizations is a tie, where single and double rounding differ (on negative ties)."""

    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        channels = filter_shape[3] if depthwise else filter_shape[0]
        depth = int(np.prod(filter_shape[1:3])) * (1 if depthwise else filter_shape[3])
        in_scale, in_zp = (2.0**-4 if ties else 0.05), int(rng.integers(-20, 20))
        x = w.tensor(x_shape, dtype, scale=in_scale if dtype == "int8" else None, zero_point=in_zp)
        axis = 3 if depthwise else 0
        out_shape = _conv_out(x_shape, filter_shape, options, depthwise)
        if dtype == "int8":
            count = channels if per_channel else 1
            f_scales = rng.uniform(0.002, 0.02, count).astype(np.float32)
            weights = rng.integers(-127, 128, filter_shape).astype(np.int8)
            if ties:
                f_scales = np.full(count, 2.0**-6, dtype=np.float32)
                weights = rng.integers(-1, 2, filter_shape).astype(np.int8)
            f = w.tensor(
                filter_shape, "int8", data=weights, scale=f_scales, zero_point=0, axis=axis
            )
            operands = [x, f]
            if bias:
                b_scales = (np.float32(in_scale) * f_scales).astype(np.float32)
                acc_std = int(74 * (1 if ties else 74) * np.sqrt(depth))
                b_data = rng.integers(-acc_std, acc_std, channels).astype(np.int32)
                operands.append(w.tensor((channels,), "int32", data=b_data, scale=b_scales,
                                         zero_point=0))  # fmt: skip
            out_scale = 2.0**-7 if ties else _act_scale(in_scale, f_scales, depth)
            y = w.tensor(out_shape, "int8", scale=out_scale, zero_point=int(rng.integers(-10, 10)))
        elif hybrid:  # float32 data, an int8 filter: one scale (conv), one a channel (depthwise)
            weights = rng.integers(-127, 128, filter_shape).astype(np.int8)
            scale = rng.uniform(0.005, 0.02, channels).astype(np.float32) if depthwise else 0.01
            operands = [x, w.tensor(filter_shape, "int8", data=weights, scale=scale,
                                    zero_point=0, axis=axis)]  # fmt: skip
            if bias:
                b_data = rng.uniform(-1, 1, channels).astype(np.float32)
                operands.append(w.tensor((channels,), "float32", data=b_data))
            y = w.tensor(out_shape, "float32")
        else:
            weights = rng.uniform(-1, 1, filter_shape).astype(np.float32)
            operands = [x, w.tensor(filter_shape, "float32", data=weights)]
            if bias:
                b_data = rng.uniform(-1, 1, channels).astype(np.float32)
                operands.append(w.tensor((channels,), "float32", data=b_data))
            y = w.tensor(out_shape, "float32")
        name = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
        make = depthwise_options if depthwise else conv_options
        version = 3 if dtype == "int8" else (2 if depthwise or hybrid else 1)
        if hybrid and depthwise and dtype == "float32":
            version = 6  # LiteRT's converter: hybrid depthwise, per-channel
        w.op(name, operands, [y], options=make(**options), version=version)  # type: ignore[arg-type]
        return x, y

    return add


def _conv_out(x_shape, filter_shape, options, depthwise) -> Tuple[int, ...]:
    stride = options.get("stride", (1, 1))
    dilation = options.get("dilation", (1, 1))
    same = options.get("padding", "SAME") == "SAME"
    out = []
    for axis in (0, 1):
        k = (filter_shape[1 + axis] - 1) * dilation[axis] + 1
        n = x_shape[1 + axis]
        s = stride[axis]
        out.append((n + s - 1) // s if same else (n + s - k) // s)
    channels = filter_shape[3] if depthwise else filter_shape[0]
    return (x_shape[0], out[0], out[1], channels)


def pool_case(kind: str, x_shape: Sequence[int], options: Dict[str, object]):
    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        scale, zp = 0.1, int(rng.integers(-20, 20))
        q = {"scale": scale, "zero_point": zp} if dtype == "int8" else {}
        x = w.tensor(x_shape, dtype, **q)
        size, stride = options.get("size", (2, 2)), options.get("stride", (2, 2))
        same = options.get("padding", "VALID") == "SAME"
        out = [
            (x_shape[1 + a] + stride[a] - 1) // stride[a]
            if same
            else (x_shape[1 + a] + stride[a] - size[a]) // stride[a]
            for a in (0, 1)
        ]
        y = w.tensor((x_shape[0], out[0], out[1], x_shape[3]), dtype, **q)
        w.op(kind, [x], [y], options=pool_options(**options), version=2 if dtype == "int8" else 1)  # type: ignore[arg-type]
        return x, y

    return add


def fc_case(
    x_shape: Sequence[int],
    units: int,
    act: str,
    bias: bool = True,
    ties: bool = False,
    in_scale: float = 0.05,
    hybrid: bool = False,
    per_channel: bool = False,
    filter_zp: int = 0,
):
    """``per_channel``: an int8 filter with a scale per output unit (ties: 2^-6 and 2^-5 in
    turn)."""

    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        depth = x_shape[-1] if len(x_shape) == 2 else int(np.prod(x_shape[1:]))
        batches = int(np.prod(x_shape)) // depth
        in_scale_, in_zp = (2.0**-4 if ties else in_scale), int(rng.integers(-20, 20))
        x = w.tensor(x_shape, dtype, scale=in_scale_ if dtype == "int8" else None, zero_point=in_zp)
        if dtype == "int8":
            f_scale = np.float32(2.0**-6 if ties else rng.uniform(0.002, 0.02))
            if per_channel:
                f_scale = (
                    np.where(np.arange(units) % 2, 2.0**-5, 2.0**-6)
                    if ties
                    else rng.uniform(0.002, 0.02, units)
                ).astype(np.float32)
            weights = rng.integers(-1 if ties else -127, 2 if ties else 128, (units, depth))
            weights = weights.astype(np.int8)
            operands = [x, w.tensor((units, depth), "int8", data=weights, scale=f_scale,
                                    zero_point=filter_zp, axis=0)]  # fmt: skip
            if bias:
                acc_std = int(74 * (1 if ties else 74) * np.sqrt(depth))
                b_data = rng.integers(-acc_std, acc_std, units).astype(np.int32)
                operands.append(w.tensor((units,), "int32", data=b_data,
                                         scale=np.float32(in_scale_) * f_scale))  # fmt: skip
            out_scale = 2.0**-7 if ties else _act_scale(in_scale_, np.ravel(f_scale), depth)
            y = w.tensor((batches, units), "int8", scale=out_scale,
                         zero_point=int(rng.integers(-10, 10)))  # fmt: skip
        elif hybrid:  # float32 data, an int8 filter with one scale (LiteRT's hybrid dense)
            weights = rng.integers(-127, 128, (units, depth)).astype(np.int8)
            operands = [x, w.tensor((units, depth), "int8", data=weights, scale=0.02)]
            if bias:
                b_data = rng.uniform(-1, 1, units).astype(np.float32)
                operands.append(w.tensor((units,), "float32", data=b_data))
            y = w.tensor((batches, units), "float32")
        else:
            weights = rng.uniform(-1, 1, (units, depth)).astype(np.float32)
            operands = [x, w.tensor((units, depth), "float32", data=weights)]
            if bias:
                b_data = rng.uniform(-1, 1, units).astype(np.float32)
                operands.append(w.tensor((units,), "float32", data=b_data))
            y = w.tensor((batches, units), "float32")
        if not bias:
            operands.append(-1)
        w.op("FULLY_CONNECTED", operands, [y], options=fc_options(act),
             version=4 if dtype == "int8" else 1)  # fmt: skip
        return x, y

    return add


def softmax_case(x_shape: Sequence[int], beta: float, in_scale: float):
    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        if dtype == "int8":
            x = w.tensor(x_shape, "int8", scale=in_scale, zero_point=int(rng.integers(-20, 20)))
            y = w.tensor(x_shape, "int8", scale=1 / 256, zero_point=-128)
        else:
            x, y = w.tensor(x_shape, "float32"), w.tensor(x_shape, "float32")
        w.op("SOFTMAX", [x], [y], options=softmax_options(beta),
             version=2 if dtype == "int8" else 1)  # fmt: skip
        return x, y

    return add


def binary_case(
    name: str, a_shape: Sequence[int], b_shape: Sequence[int], act: str = "NONE",
    const_b: bool = False, ties: bool = False,
):  # fmt: skip
    """ADD or MUL, broadcast; ``const_b``: the second operand a constant (a graph param);
    ``ties``: scales 2**-4, 2**-4 -> 2**-3, so that half of ADD's sums end on a tie."""

    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        out_shape = tuple(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
        s1, s2 = 0.05, float(rng.uniform(0.01, 0.1))
        so = float(rng.uniform(0.05, 0.12)) if name == "ADD" else s1 * s2 * 74 * 74 / 50
        if ties:
            s1, s2, so = 2.0**-4, 2.0**-4, 2.0**-3

        def q(scale: float) -> Dict[str, object]:
            if dtype != "int8":
                return {}
            return {"scale": scale, "zero_point": int(rng.integers(-20, 20))}

        x = w.tensor(a_shape, dtype, **q(s1))
        if const_b:
            data = (rng.integers(-128, 128, b_shape) if dtype == "int8"
                    else rng.uniform(-2, 2, b_shape)).astype(dtype)  # fmt: skip
            y = w.tensor(b_shape, dtype, data=data, **q(s2))
        else:
            y = w.tensor(b_shape, dtype, **q(s2))
        z = w.tensor(out_shape, dtype, **q(so))
        w.op(name, [x, y], [z], options=[(0, "i8", ACTIVATION[act])],
             version=2 if dtype == "int8" else 1)  # fmt: skip
        return (x, z) if const_b else ((x, y), z)  # type: ignore[return-value]

    return add


def _q(rng: np.random.Generator, dtype: str, scale: float) -> Dict[str, object]:
    return {"scale": scale, "zero_point": int(rng.integers(-20, 20))} if dtype == "int8" else {}


def pad_case(x_shape: Sequence[int], pads: Sequence[Tuple[int, int]]):
    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        q = _q(rng, dtype, 0.1)
        x = w.tensor(x_shape, dtype, **q)
        p = w.tensor((len(x_shape), 2), "int32", data=np.array(pads, dtype=np.int32))
        out = tuple(d + b + a for d, (b, a) in zip(x_shape, pads))
        y = w.tensor(out, dtype, **q)
        w.op("PAD", [x, p], [y], version=2 if dtype == "int8" else 1)
        return x, y

    return add


def concat_case(shapes: Sequence[Sequence[int]], axis: int):
    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str):
        q = _q(rng, dtype, 0.1)
        xs = tuple(w.tensor(s, dtype, **q) for s in shapes)
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        y = w.tensor(out, dtype, **q)
        w.op("CONCATENATION", list(xs), [y], options=[(0, "i32", axis), (1, "i8", 0)],
             version=2 if dtype == "int8" else 1)  # fmt: skip
        return xs, y

    return add


def quantize_case(shape: Sequence[int], ties: bool = False):
    """float32 model: QUANTIZE float → int8; int8 model: int8 → int8 (a requantization;
    ``ties``: scale 2**-4 → 2**-3, half the values on a tie)."""

    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        x = w.tensor(shape, dtype, **_q(rng, dtype, 2.0**-4 if ties else 0.07))
        out_scale = 2.0**-3 if ties else 0.013
        y = w.tensor(shape, "int8", scale=out_scale, zero_point=int(rng.integers(-20, 20)))
        w.op("QUANTIZE", [x], [y], version=2)
        return x, y

    return add


def dequantize_case(shape: Sequence[int]):
    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        x = w.tensor(shape, "int8", **_q(rng, "int8", 0.0371))
        y = w.tensor(shape, "float32")
        w.op("DEQUANTIZE", [x], [y], version=2)
        return x, y

    return add


def unary_case(name: str, shape: Sequence[int], in_scale: float):
    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        x = w.tensor(shape, dtype, **_q(rng, dtype, in_scale))
        if dtype == "int8":
            scale, zp = (1 / 256, -128) if name == "LOGISTIC" else (1 / 128, 0)
            y = w.tensor(shape, "int8", scale=scale, zero_point=zp)
        else:
            y = w.tensor(shape, "float32")
        w.op(name, [x], [y], version=2 if dtype == "int8" else 1)
        return x, y

    return add


def mean_case(
    shape: Sequence[int],
    ties: bool = False,
    axes: Sequence[int] = (1, 2),
    keep_dims: bool = True,
    same_quantization: bool = False,
):
    """MEAN over ``axes`` (by default 1 and 2, kept: a global average pool); ``ties``: equal
    power-of-two scales, so that sums land on halves of the count; ``same_quantization``:
    the output quantized as the input."""

    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        in_scale = 2.0**-4 if ties else 0.05
        out_scale = 2.0**-4 if ties else float(rng.uniform(0.02, 0.08))
        rank = len(shape)
        reduced = {a % rank for a in axes}
        out_shape = tuple(
            (1 if k in reduced else d) for k, d in enumerate(shape) if keep_dims or k not in reduced
        )
        x = w.tensor(shape, dtype, **_q(rng, dtype, in_scale))
        axes_t = w.tensor((len(axes),), "int32", data=np.array(axes, dtype=np.int32))
        y = w.tensor(out_shape, dtype, **_q(rng, dtype, out_scale))
        if same_quantization and dtype == "int8":
            w.tensors[y].scales = w.tensors[x].scales
            w.tensors[y].zero_points = w.tensors[x].zero_points
        w.op("MEAN", [x, axes_t], [y], options=[(0, "bool", keep_dims)],
             version=2 if dtype == "int8" else 1)  # fmt: skip
        return x, y

    return add


def squeeze_then_fc_case():
    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        x, y = fc_case((1, 6), 4, "RELU")(w, rng, dtype)
        z = w.tensor((4,), dtype)
        w.tensors[z].scales = w.tensors[y].scales
        w.tensors[z].zero_points = w.tensors[y].zero_points
        w.op("SQUEEZE", [y], [z], options=[(0, "[i32]", [0])])
        return x, z

    return add


def reshape_then_fc_case():
    """RESHAPE (a __nop) between an input and a FULLY_CONNECTED, and as a model output."""

    def add(w: TfliteWriter, rng: np.random.Generator, dtype: str) -> Tuple[int, int]:
        x, y = fc_case((1, 2, 3, 4), 5, "RELU")(w, rng, dtype)
        q = {"scale": 0.1, "zero_point": 0} if dtype == "int8" else {}
        shape = w.tensor((2,), "int32", data=np.array([5, 1], dtype=np.int32))
        z = w.tensor((5, 1), dtype, **q)
        # the FC output's quantization must carry over: copy it
        w.tensors[z].scales = w.tensors[y].scales
        w.tensors[z].zero_points = w.tensors[y].zero_points
        w.op("RESHAPE", [y, shape], [z], options=reshape_options((5, 1)))
        return x, z

    return add


CASES: List[Case] = [
    Case("conv_same_relu_pc", conv_case((1, 7, 9, 3), (5, 3, 3, 3), {"act": "RELU"})),
    Case("conv_valid_s2_dil_relu6_pt",
         conv_case((1, 9, 11, 5), (6, 3, 2, 5),
                   {"padding": "VALID", "stride": (2, 1), "dilation": (1, 2), "act": "RELU6"},
                   per_channel=False)),
    Case("conv_1x1_batch2_n1to1",
         conv_case((2, 4, 5, 3), (7, 1, 1, 3), {"act": "RELU_N1_TO_1"})),
    Case("conv_same_s2_even", conv_case((1, 8, 6, 4), (3, 4, 3, 4), {"stride": (2, 2)})),
    Case("dw_m2_same_s2_relu",
         conv_case((1, 8, 7, 3), (1, 3, 3, 6),
                   {"stride": (2, 2), "multiplier": 2, "act": "RELU"}, depthwise=True)),
    Case("dw_dil2_valid",
         conv_case((1, 9, 9, 5), (1, 3, 3, 5), {"padding": "VALID", "dilation": (2, 2)},
                   depthwise=True)),
    Case("dw_m3_pt_relu6",
         conv_case((1, 5, 6, 2), (1, 2, 3, 6), {"multiplier": 3, "act": "RELU6"},
                   depthwise=True, per_channel=False)),
    Case("conv_ties", conv_case((1, 5, 6, 4), (6, 3, 3, 4), {}, ties=True)),
    Case("conv_hybrid_in_float",  # int8: a plain conv; float32: an int8 filter (hybrid)
         conv_case((2, 6, 5, 3), (4, 3, 2, 3), {"stride": (2, 1), "act": "RELU"}, hybrid=True)),
    Case("dw_ties", conv_case((1, 6, 5, 8), (1, 3, 3, 8), {}, depthwise=True, ties=True)),
    Case("avg_same_3x3_s2_relu",
         pool_case("AVERAGE_POOL_2D", (1, 7, 9, 5),
                   {"padding": "SAME", "size": (3, 3), "stride": (2, 2), "act": "RELU"})),
    Case("avg_valid_2x2_s12", pool_case("AVERAGE_POOL_2D", (1, 6, 7, 3), {"stride": (1, 2)})),
    Case("max_same_3x3_s2_relu6",
         pool_case("MAX_POOL_2D", (1, 7, 8, 3),
                   {"padding": "SAME", "size": (3, 3), "stride": (2, 2), "act": "RELU6"})),
    Case("max_valid_2x2", pool_case("MAX_POOL_2D", (2, 4, 6, 5), {})),
    Case("fc_batch2_relu", fc_case((2, 13), 7, "RELU")),
    Case("fc_4d_input_nobias", fc_case((1, 2, 2, 5), 6, "NONE", bias=False)),
    Case("fc_relu6", fc_case((1, 33), 9, "RELU6", in_scale=0.005)),
    Case("fc_hybrid_in_float", fc_case((3, 21), 5, "RELU", hybrid=True)),  # int8: plain
    Case("fc_ties", fc_case((3, 40), 16, "NONE", ties=True)),
    # the control: compiled with TFLM's double rounding, it must differ from LiteRT
    Case(CONTROL, fc_case((3, 40), 16, "NONE", ties=True)),
    Case("softmax_beta1", softmax_case((2, 10), 1.0, 0.1)),
    Case("softmax_beta05_4d", softmax_case((1, 1, 3, 7), 0.5, 0.25)),
    Case("reshape_fc", reshape_then_fc_case()),
    Case("pad_4d", pad_case((1, 3, 4, 2), ((0, 0), (1, 2), (2, 0), (0, 1)))),
    Case("pad_2d", pad_case((3, 5), ((1, 1), (0, 3)))),
    Case("concat_axis3", concat_case([(1, 2, 3, 2), (1, 2, 3, 5)], 3)),
    Case("concat_axis1_three", concat_case([(2, 1, 4), (2, 3, 4), (2, 2, 4)], 1)),
    Case("quantize", quantize_case((2, 11))),
    Case("quantize_ties", quantize_case((4, 16), ties=True)),
    Case("dequantize", dequantize_case((3, 7))),
    Case("logistic", unary_case("LOGISTIC", (4, 64), 0.05)),
    Case("tanh", unary_case("TANH", (4, 64), 0.03)),
    Case("squeeze_fc", squeeze_then_fc_case()),
    Case("mean_spatial", mean_case((2, 5, 6, 7))),
    Case("mean_ties", mean_case((1, 4, 2, 9), ties=True)),
    Case("mean_axis3_dropped", mean_case((2, 3, 4, 5), axes=(3,), keep_dims=False)),
    Case("mean_axes12_dropped", mean_case((1, 5, 6, 7), keep_dims=False)),
    Case("mean_3d_axis1_kept", mean_case((3, 6, 4), axes=(1,))),
    Case("mean_axes_0_2_neg", mean_case((2, 5, 3, 4), axes=(0, -2), keep_dims=False)),
    Case("mean_all_same_q", mean_case((4, 9), axes=(0, 1), same_quantization=True)),
    Case("mean_axis2_ties", mean_case((2, 3, 6), axes=(2,), ties=True, keep_dims=False)),
    Case("fc_pc_relu", fc_case((2, 19), 6, "RELU", per_channel=True)),
    Case("fc_pc_ties", fc_case((3, 40), 10, "NONE", ties=True, per_channel=True)),
    Case("dw_hybrid_in_float",  # int8: a plain depthwise; float32: an int8 filter (hybrid)
         conv_case((2, 6, 5, 3), (1, 3, 3, 6), {"multiplier": 2, "stride": (2, 1), "act": "RELU"},
                   depthwise=True, hybrid=True)),
    Case("dw_hybrid_valid_dil",
         conv_case((1, 7, 7, 4), (1, 3, 2, 4), {"padding": "VALID", "dilation": (2, 1)},
                   depthwise=True, hybrid=True)),
    Case("add_same_shape_relu", binary_case("ADD", (1, 4, 5, 3), (1, 4, 5, 3), "RELU")),
    Case("add_broadcast_const", binary_case("ADD", (2, 3, 4), (4,), const_b=True)),
    Case("add_broadcast_both", binary_case("ADD", (3, 1, 5), (1, 4, 1), "RELU6")),
    Case("add_ties", binary_case("ADD", (2, 9), (2, 9), ties=True)),
    Case("mul_same_shape", binary_case("MUL", (2, 7), (2, 7))),
    Case("mul_broadcast_const_relu", binary_case("MUL", (1, 3, 3, 4), (1, 1, 1, 4), "RELU",
                                                 const_b=True)),
    # shapes the fast form specializes (modelgen/ops/tflite_fast.py): one input channel with a
    # tall window (KWS's first layer), 1×1 over an odd pixel count into odd channels with a
    # depth past the full unroll, a depthwise 5×5 (taps not in locals) with an interior
    Case("conv_1ch_10x4_s2", conv_case((1, 15, 9, 1), (5, 10, 4, 1), {"stride": (2, 2)})),
    Case("conv_1x1_odd", conv_case((1, 3, 5, 19), (5, 1, 1, 19), {"act": "RELU"})),
    Case("dw_5x5_interior", conv_case((1, 9, 8, 3), (1, 5, 5, 3), {}, depthwise=True)),
    # FULLY_CONNECTED with a filter zero point, an odd channel count past groups of four
    Case("fc_zp_filter_odd", fc_case((1, 37), 7, "RELU", filter_zp=3)),
    # padded input past the stack's copy: the border's clipped taps
    Case("conv_same_big_border", conv_case((1, 18, 20, 3), (4, 3, 3, 3), {"stride": (1, 2)})),
]  # fmt: skip


def cases_model(dtype: str, seed: int = 0) -> Tuple[bytes, List[str]]:
    """The ``.tflite`` of every case in ``dtype`` and the case names in output order."""
    rng = np.random.default_rng(seed)
    w = TfliteWriter()
    inputs, outputs = [], []
    for case in CASES:
        x, y = case.add(w, rng, dtype)
        fed = x if isinstance(x, tuple) else (x,)  # a case may take several inputs
        for number, tensor in enumerate(fed):
            w.tensors[tensor].name = f"{case.name}_in" + (f"{number}" if number else "")
            inputs.append(tensor)
        outputs.append(y)
    return w.finish(inputs, outputs), [case.name for case in CASES]


def tiny_model(dtype: str = "int8", seed: int = 0) -> bytes:
    """A small chain (CONV_2D → DEPTHWISE_CONV_2D → AVERAGE_POOL_2D → RESHAPE →
    FULLY_CONNECTED → ADD → SOFTMAX) to mutate: a few hundred bytes of tables around its
    weights."""
    rng = np.random.default_rng(seed)
    w = TfliteWriter()
    x, y = conv_case((1, 5, 5, 2), (3, 3, 3, 2), {"act": "RELU"})(w, rng, dtype)
    w.tensors[x].name = "input"
    _, z = conv_case((1, 5, 5, 3), (1, 3, 3, 3), {}, depthwise=True)(w, rng, dtype)
    # chain: the depthwise conv reads the conv's output
    w.ops[-1].inputs[0] = y
    q = {"scale": 0.1, "zero_point": 0} if dtype == "int8" else {}
    pooled = w.tensor((1, 1, 1, 3), dtype, **q)
    w.tensors[pooled].scales = w.tensors[z].scales
    w.tensors[pooled].zero_points = w.tensors[z].zero_points
    w.op("AVERAGE_POOL_2D", [z], [pooled],
         options=pool_options(size=(5, 5), stride=(1, 1)), version=2)  # fmt: skip
    shape = w.tensor((2,), "int32", data=np.array([1, 3], dtype=np.int32))
    flat = w.tensor((1, 3), dtype)
    w.tensors[flat].scales = w.tensors[z].scales
    w.tensors[flat].zero_points = w.tensors[z].zero_points
    w.op("RESHAPE", [pooled, shape], [flat], options=reshape_options((1, 3)))
    fx, fy = fc_case((1, 3), 4, "NONE")(w, rng, dtype)
    w.ops[-1].inputs[0] = flat
    _, summed = binary_case("ADD", (1, 4), (4,), const_b=True)(w, rng, dtype)
    w.ops[-1].inputs[0] = fy
    _, out = softmax_case((1, 4), 1.0, 0.1)(w, rng, dtype)
    w.ops[-1].inputs[0] = summed
    return w.finish([x], [out])


def band_chains_model(seed: int = 5) -> bytes:
    """Two chains of int8 convolutions for the tiled stages' band edges, apart by a
    MAX_POOL_2D (which no stage takes): 13x11x3 → CONV 3x3 stride 2 SAME (7x6x8, a row of
    padding at top and bottom) → DEPTHWISE 3x3 → CONV 1x1 (8 → 12) → DEPTHWISE 3x3 stride 2
    SAME (4x3x12) → CONV 3x3 (4x3x8); MAX_POOL 1x1; then DEPTHWISE 3x3 stride 2 SAME over 4
    rows (2x2x8: padding at the bottom only) → CONV 3x3 dilation 2 SAME (2x2x6). Odd and even
    heights; band heights that do not divide them are the tests' to choose."""
    rng = np.random.default_rng(seed)
    w = TfliteWriter()
    layers = [
        conv_case((1, 13, 11, 3), (8, 3, 3, 3), {"stride": (2, 2), "act": "RELU"}),
        conv_case((1, 7, 6, 8), (1, 3, 3, 8), {"act": "RELU6"}, depthwise=True),
        conv_case((1, 7, 6, 8), (12, 1, 1, 8), {"padding": "VALID"}),
        conv_case((1, 7, 6, 12), (1, 3, 3, 12), {"stride": (2, 2)}, depthwise=True),
        conv_case((1, 4, 3, 12), (8, 3, 3, 12), {"act": "RELU"}),
        pool_case("MAX_POOL_2D", (1, 4, 3, 8), {"size": (1, 1), "stride": (1, 1)}),
        conv_case((1, 4, 3, 8), (1, 3, 3, 8), {"stride": (2, 2)}, depthwise=True),
        conv_case((1, 2, 2, 8), (6, 3, 3, 8), {"dilation": (2, 2)}),
    ]
    first, y = layers[0](w, rng, "int8")
    w.tensors[first].name = "input"
    for k, layer in enumerate(layers[1:], 1):
        _, out = layer(w, rng, "int8")
        w.ops[-1].inputs[0] = y
        if k == 5:  # the pool keeps its input's quantization
            w.tensors[out].scales = w.tensors[y].scales
            w.tensors[out].zero_points = w.tensors[y].zero_points
        y = out
    return w.finish([first], [y])


def cmsis_in_place_model(seed: int = 7) -> bytes:
    """What ``--cmsis-nn``'s forms run in place over 7x6x8: CONV 3x3 → DEPTHWISE 3x3 SAME
    (bands of 1 row) → DEPTHWISE 5x5 SAME (bands of 2 rows, the last one row) → CONV 1x1 →
    ADD of the two last (into the one that dies there) → DEPTHWISE 3x3 stride 2, depth
    multiplier 2 (4x3x16: bands of 1 row)."""
    rng = np.random.default_rng(seed)
    w = TfliteWriter()
    x, y = conv_case((1, 7, 6, 3), (8, 3, 3, 3), {"act": "RELU"})(w, rng, "int8")
    w.tensors[x].name = "input"
    for shape, act in (((1, 3, 3, 8), "RELU6"), ((1, 5, 5, 8), "NONE")):
        _, out = conv_case((1, 7, 6, 8), shape, {"act": act}, depthwise=True)(w, rng, "int8")
        w.ops[-1].inputs[0], y = y, out
    _, u = conv_case((1, 7, 6, 8), (8, 1, 1, 8), {"padding": "VALID"})(w, rng, "int8")
    w.ops[-1].inputs[0] = y
    _, z = binary_case("ADD", (1, 7, 6, 8), (1, 7, 6, 8))(w, rng, "int8")
    w.ops[-1].inputs[:2] = [u, y]
    _, out = conv_case((1, 7, 6, 8), (1, 3, 3, 16), {"stride": (2, 2)}, depthwise=True)(
        w, rng, "int8"
    )
    w.ops[-1].inputs[0] = z
    return w.finish([x], [out])
