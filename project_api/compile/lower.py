"""A read ``.tflite`` as a modelgen Network of operators with TFLite's arithmetic.

Every check that can refuse the model runs here, before anything is written: one subgraph,
static shapes, known operators at versions whose semantics are implemented, the data types
and quantization each kernel handles. A refusal is one line naming the operator, its index
and what is supported.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from ..errors import CompileError
from ..modelgen import Network, Value
from ..modelgen.ops import Reshape
from ..modelgen.ops.tflite import TflConv, TflFullyConnected, TflPool, TflSoftmax
from ..modelgen.ops.tflite_arith import ROUNDINGS, Activation, Quant, Requant
from ..modelgen.ops.tflite_data import (
    TflConcat,
    TflDequantize,
    TflMean,
    TflPad,
    TflQuantize,
    TflUnary,
)
from ..modelgen.ops.tflite_elementwise import LEFT_SHIFT, TflBinary, broadcast_shape
from ..modelgen.ops.tflite_hybrid import TflHybridDepthwise
from .forms import FormPlan
from .quantize import (
    activation_range,
    add_multipliers,
    conv_multipliers,
    float_activation_range,
    lookup_table,
    mean_multiplier,
    mul_multiplier,
    quantize_multiplier,
    softmax_table,
)
from .schema import ACTIVATIONS
from .support import (
    CONVERSIONS,
    DTYPES,
    HYBRID_DEPTHWISE,
    LITERT_ROUNDING,
    MODULE_NAME,
    SUPPORTED,
    Rounding,
    Unsupported,
    check_model,
    conv_window,
    good_scales,
    scale_zp,
    supported_text,
)
from .tflite import Operator, Tensor, TfliteModel

__all__ = ["SUPPORTED", "Rounding", "check_model", "lower_model", "supported_text"]


class _Lowering:
    def __init__(
        self, model: TfliteModel, name: str, rounding: Rounding, forms: Optional[FormPlan]
    ) -> None:
        self.model = model
        self.rounding = rounding
        self.forms = forms
        self.net = Network(name)
        self.values: Dict[int, Value] = {}

    def tensor(self, index: int) -> Tensor:
        return self.model.tensors[index]

    def run(self) -> Network:
        for index in self.model.inputs:
            t = self.tensor(index)
            if t.dtype not in DTYPES:
                raise CompileError(f"input {t.name!r} is {t.dtype}: compile takes int8 or float32")
            if not t.name:
                raise CompileError(f"input tensor {index} has no name")
            try:
                self.values[index] = self.net.input(t.name, t.shape, t.dtype)
            except ValueError as err:
                raise CompileError(f"input tensor {index}: {err}") from None
            if t.dtype == "int8" and t.quantization and not t.quantization.per_channel:
                scale, zero_point = t.quantization.scales[0], t.quantization.zero_points[0]
                self.net.input_quantization[t.name] = (scale, zero_point)
        for op in self.model.operators:
            self.lower(op)
        outputs = []
        for number, index in enumerate(self.model.outputs):
            if index not in self.values or index in self.model.inputs:
                raise CompileError(f"output tensor {index} is not computed by an operator")
            outputs.append(self.values[index])
            quant = self.tensor(index).quantization
            if self.tensor(index).dtype == "int8" and quant and not quant.per_channel:
                self.net.output_quantization[number] = (quant.scales[0], quant.zero_points[0])
        try:
            self.net.output(*outputs)
        except ValueError as err:
            raise CompileError(str(err)) from None
        return self.net

    def operand(self, op: Operator, position: int) -> Value:
        index = op.inputs[position] if position < len(op.inputs) else -1
        if index < 0:
            raise Unsupported(op, f"input {position} is missing")
        if index in self.values:
            return self.values[index]
        t = self.tensor(index)
        if t.data is None:
            raise Unsupported(
                op, f"input {position} (tensor {index}) is neither computed nor constant"
            )
        value = self.net.const(t.array())
        self.values[index] = value
        return value

    def lower(self, op: Operator) -> None:
        if len(op.outputs) != 1:
            raise Unsupported(op, f"{len(op.outputs)} outputs")
        out = self.tensor(op.outputs[0])
        if op.outputs[0] in self.values:
            raise Unsupported(op, f"tensor {op.outputs[0]} is written twice")
        x = self.tensor(op.inputs[0]) if op.inputs and op.inputs[0] >= 0 else None
        converts = CONVERSIONS.get(op.name, ((t, t) for t in DTYPES))
        if x is None or (x.dtype, out.dtype) not in set(converts):
            raise Unsupported(
                op, f"data types {x.dtype if x else None} → {out.dtype} are not supported"
            )
        method = getattr(self, "lower_" + op.name.lower())
        start = len(self.net.ops)
        try:
            value: Value = method(op, x, out)
        except ValueError as err:  # a modelgen operator's own shape rule
            raise Unsupported(op, str(err)) from None
        self._check_shape(op, value, out)
        if self.forms is not None:
            self.forms.apply(op, self.net.ops[start:], start)
        self.values[op.outputs[0]] = value

    def _check_shape(self, op: Operator, value: Value, out: Tensor) -> None:
        if value.shape != out.shape:
            raise Unsupported(
                op, f"computes shape {list(value.shape)}, the model says {list(out.shape)}"
            )

    # --- operators ----------------------------------------------------------------------------

    def lower_conv_2d(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self._conv(op, x, out, depthwise=False)

    def lower_depthwise_conv_2d(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self._conv(op, x, out, depthwise=True)

    def _conv(self, op: Operator, x: Tensor, out: Tensor, *, depthwise: bool) -> Value:
        o = op.options
        w = self.tensor(op.inputs[1]) if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
        if w is None or w.data is None or len(w.shape) != 4 or len(x.shape) != 4:
            raise Unsupported(op, "needs a constant 4-D filter and a 4-D input")
        hybrid_scale = 0.0
        hybrid_depthwise = depthwise and w.dtype != x.dtype
        if w.dtype != x.dtype and not depthwise:
            hybrid_scale = self._hybrid(op, x, w)
        channels = w.shape[3] if depthwise else w.shape[0]
        if not depthwise and w.shape[3] != x.shape[3]:
            raise Unsupported(op, "grouped convolution is not supported")
        multiplier = int(o.get("depth_multiplier", 1) or 1) if depthwise else 1  # type: ignore[call-overload]
        if depthwise and channels != x.shape[3] * multiplier:
            multiplier = channels // max(x.shape[3], 1)  # TFLite derives it from the shapes
            if channels != x.shape[3] * multiplier:
                raise Unsupported(op, "filter channels are not input channels × depth multiplier")
        strides = self._positive(op, ("stride_h", "stride_w"))
        dilations = self._positive(op, ("dilation_h", "dilation_w"))
        kernel = (w.shape[1], w.shape[2])
        out_hw, pads = conv_window(op, x.shape[1:3], kernel, strides, dilations)
        bias = self._bias(op, channels, x.dtype)
        activation = self._activation(op, out)
        operands = [self.operand(op, 0), self.operand(op, 1)] + ([bias] if bias else [])
        if hybrid_depthwise:
            scales = self._channel_scales(op, x, w, channels)
            hybrid = TflHybridDepthwise(out_hw, strides, dilations, pads, multiplier,
                                        bias is not None, activation, scales)  # fmt: skip
            return self.net.apply(hybrid, *operands)[0]
        quant = self._quant(op, x, w, out, channels, axis=3 if depthwise else 0)
        conv = TflConv(depthwise, out_hw, strides, dilations, pads, multiplier, bias is not None,
                       activation, quant, hybrid_scale)  # fmt: skip
        return self.net.apply(conv, *operands)[0]

    def _hybrid(self, op: Operator, x: Tensor, w: Tensor) -> float:
        """The filter scale of a hybrid CONV_2D or FULLY_CONNECTED (int8 filter, float32 data,
        one scale)."""
        q = w.quantization
        if x.dtype != "float32" or w.dtype != "int8" or q is None:
            raise Unsupported(op, f"{w.dtype} filter on {x.dtype} data is not supported")
        if len(set(q.scales)) != 1 or any(q.zero_points) or not good_scales(q.scales):
            raise Unsupported(op, "hybrid with per-channel filter scales is not supported")
        return q.scales[0]

    def _channel_scales(self, op: Operator, x: Tensor, w: Tensor, n: int) -> Tuple[float, ...]:
        """The per-channel filter scales of a hybrid DEPTHWISE_CONV_2D."""
        q = w.quantization
        if x.dtype != "float32" or w.dtype != "int8":
            raise Unsupported(op, f"{w.dtype} filter on {x.dtype} data is not supported")
        if q is None or len(q.scales) != n or (n > 1 and q.axis != 3) or any(q.zero_points):
            raise Unsupported(op, HYBRID_DEPTHWISE)
        if not good_scales(q.scales):
            raise Unsupported(op, HYBRID_DEPTHWISE)
        return tuple(float(s) for s in q.scales)

    def lower_fully_connected(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        o = op.options
        w = self.tensor(op.inputs[1]) if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
        if w is None or w.data is None or len(w.shape) != 2:
            raise Unsupported(op, "needs a constant 2-D filter")
        hybrid_scale = 0.0
        if w.dtype != x.dtype:
            if o.get("asymmetric_quantize_inputs"):
                raise Unsupported(op, "hybrid with asymmetric input quantization is not supported")
            hybrid_scale = self._hybrid(op, x, w)
        if o.get("weights_format", 0) != 0:
            raise Unsupported(op, "shuffled weights are not supported")
        if x.elements % max(w.shape[1], 1) or out.elements != x.elements // w.shape[1] * w.shape[0]:
            raise Unsupported(op, "input, filter and output shapes do not agree")
        bias = self._bias(op, w.shape[0], x.dtype)
        activation = self._activation(op, out)
        quant = self._quant(op, x, w, out, w.shape[0], axis=0)
        dense = TflFullyConnected(out.shape, bias is not None, activation, quant, hybrid_scale)
        operands = [self.operand(op, 0), self.operand(op, 1)] + ([bias] if bias else [])
        return self.net.apply(dense, *operands)[0]

    def lower_average_pool_2d(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self._pool(op, x, out, "avg")

    def lower_max_pool_2d(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self._pool(op, x, out, "max")

    def _pool(self, op: Operator, x: Tensor, out: Tensor, kind: str) -> Value:
        if len(x.shape) != 4:
            raise Unsupported(op, "needs a 4-D input")
        if x.dtype == "int8" and scale_zp(x) != scale_zp(out):
            raise Unsupported(op, "input and output quantization differ")
        strides = self._positive(op, ("stride_h", "stride_w"))
        kernel = self._positive(op, ("filter_h", "filter_w"))
        out_hw, pads = conv_window(op, x.shape[1:3], kernel, strides, (1, 1))
        pool = TflPool(kind, out_hw, kernel, strides, pads, self._activation(op, out))
        return self.net.apply(pool, self.operand(op, 0))[0]

    def lower_add(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self._binary(op, x, out, "add")

    def lower_mul(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self._binary(op, x, out, "mul")

    def _binary(self, op: Operator, x: Tensor, out: Tensor, operation: str) -> Value:
        if len(op.inputs) != 2 or op.inputs[1] < 0:
            raise Unsupported(op, "needs two inputs")
        y = self.tensor(op.inputs[1])
        if y.dtype != x.dtype:
            raise Unsupported(op, f"inputs of {x.dtype} and {y.dtype}")
        try:
            shape = broadcast_shape(x.shape, y.shape)
        except ValueError as err:
            raise Unsupported(op, str(err)) from None
        if shape != out.shape:
            raise Unsupported(op, f"broadcasts to {list(shape)}, the model says {list(out.shape)}")
        activation = self._activation(op, out)
        if x.dtype == "float32":
            binary = TflBinary(operation, activation)
        else:
            (s1, z1), (s2, z2), (so, zo) = (scale_zp(t, op) for t in (x, y, out))
            rounding = self._rounding(op)
            single = rounding != "double"
            if operation == "add":
                pairs = add_multipliers(s1, s2, so, LEFT_SHIFT, single_rounding=single)
            else:
                pairs = [mul_multiplier(s1, s2, so, single_rounding=single)]
            requants = tuple(Requant((m,), (s,), rounding) for m, s in pairs)
            binary = TflBinary(operation, activation, (-z1, -z2, zo), requants)
        return self.net.apply(binary, self.operand(op, 0), self.operand(op, 1))[0]

    def lower_squeeze(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self.lower_reshape(op, x, out)

    def lower_pad(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        if len(op.inputs) != 2 or op.inputs[1] < 0:
            raise Unsupported(op, "needs the input and a constant paddings tensor")
        paddings = self.tensor(op.inputs[1])
        rank = len(x.shape)
        if paddings.data is None or paddings.dtype != "int32" or paddings.shape != (rank, 2):
            raise Unsupported(op, f"paddings must be a constant int32[{rank}, 2]")
        pads = tuple((int(b), int(a)) for b, a in paddings.array().tolist())
        if any(b < 0 or a < 0 or b > 1 << 16 or a > 1 << 16 for b, a in pads):
            raise Unsupported(op, f"paddings {list(pads)} out of range")
        value = 0.0
        if x.dtype == "int8":
            if scale_zp(x, op) != scale_zp(out, op):
                raise Unsupported(op, "input and output quantization differ")
            value = float(scale_zp(out, op)[1])
        return self.net.apply(TflPad(pads, value), self.operand(op, 0))[0]

    def lower_concatenation(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        if not op.inputs or any(i < 0 for i in op.inputs):
            raise Unsupported(op, "an input is missing")
        parts = [self.tensor(i) for i in op.inputs]
        rank = len(out.shape)
        axis = int(op.options.get("axis", 0))  # type: ignore[call-overload]
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise Unsupported(op, f"axis {axis} of a rank-{rank} output")
        if ACTIVATIONS.get(int(op.options.get("activation", 0))) != "NONE":  # type: ignore[call-overload]
            raise Unsupported(op, "a fused activation is not supported")
        for t in parts:
            if t.dtype != out.dtype:
                raise Unsupported(op, "inputs of different types")
            if out.dtype == "int8" and scale_zp(t, op) != scale_zp(out, op):
                raise Unsupported(op, "int8 inputs must share the output's quantization")
        operands = [self.operand(op, k) for k in range(len(parts))]
        return self.net.apply(TflConcat(axis), *operands)[0]

    def lower_quantize(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        scale, zero_point = scale_zp(out, op)
        if x.dtype == "float32":
            quantize = TflQuantize(scale, zero_point)
        else:
            in_scale, in_zp = scale_zp(x, op)
            rounding = self._rounding(op)
            real = float(in_scale) / float(scale)
            m, s = quantize_multiplier(real, single_rounding=rounding != "double")
            quantize = TflQuantize(scale, zero_point, in_zp, Requant((m,), (s,), rounding))
        return self.net.apply(quantize, self.operand(op, 0))[0]

    def lower_dequantize(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        scale, zero_point = scale_zp(x, op)
        return self.net.apply(TflDequantize(scale, zero_point), self.operand(op, 0))[0]

    def lower_logistic(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self._unary(op, x, out, "logistic", (1 / 256, -128))

    def lower_tanh(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        return self._unary(op, x, out, "tanh", (1 / 128, 0))

    def _unary(
        self, op: Operator, x: Tensor, out: Tensor, function: str, output: Tuple[float, int]
    ) -> Value:
        if x.dtype == "float32":
            return self.net.apply(TflUnary(function), self.operand(op, 0))[0]
        scale, zero_point = scale_zp(out, op)
        if zero_point != output[1] or abs(scale - output[0]) > 1e-6 * output[0]:
            raise Unsupported(
                op, f"int8 output must have scale {output[0]} and zero point {output[1]}"
            )
        table = lookup_table(function, *scale_zp(x, op), scale, zero_point)
        return self.net.apply(TflUnary(function, table), self.operand(op, 0))[0]

    def lower_mean(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        axes_tensor = (
            self.tensor(op.inputs[1]) if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
        )
        if axes_tensor is None or axes_tensor.data is None or axes_tensor.dtype != "int32":
            raise Unsupported(op, "needs constant int32 axes")
        rank = len(x.shape)
        axes = sorted({a + rank if a < 0 else a for a in axes_tensor.array().reshape(-1).tolist()})
        if not axes or any(not 0 <= a < rank for a in axes):
            raise Unsupported(op, f"axes {axes} of a rank-{rank} input")
        if x.dtype == "float32":
            return self.net.apply(TflMean(tuple(axes), out.shape), self.operand(op, 0))[0]
        (in_scale, in_zp), (out_scale, out_zp) = scale_zp(x, op), scale_zp(out, op)
        count = math.prod(x.shape[a] for a in axes)
        multiplier, shift = mean_multiplier(in_scale, out_scale, count)
        requant = Requant((multiplier,), (shift,), self._rounding(op))
        mean = TflMean(tuple(axes), out.shape, in_zp, out_zp, requant)
        return self.net.apply(mean, self.operand(op, 0))[0]

    def lower_reshape(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        if x.elements != out.elements:
            raise Unsupported(op, f"reshapes {x.elements} elements into {out.elements}")
        if x.dtype == "int8" and scale_zp(x) != scale_zp(out):
            raise Unsupported(op, "input and output quantization differ")
        return self.net.apply(Reshape(out.shape), self.operand(op, 0))[0]

    def lower_softmax(self, op: Operator, x: Tensor, out: Tensor) -> Value:
        beta = float(op.options.get("beta", 1.0))  # type: ignore[arg-type]
        if not np.isfinite(beta) or beta <= 0:
            raise Unsupported(op, f"beta {beta}")
        if x.dtype == "float32":
            return self.net.apply(TflSoftmax(beta), self.operand(op, 0))[0]
        in_scale, _ = scale_zp(x, op)
        out_scale, out_zp = scale_zp(out, op)
        if out_zp != -128 or abs(out_scale - 1 / 256) > 0.001 / 256:
            raise Unsupported(op, "int8 output must have zero point -128 and scale 1/256")
        softmax = TflSoftmax(beta, softmax_table(in_scale, beta), out_zp, out_scale)
        return self.net.apply(softmax, self.operand(op, 0))[0]

    # --- shared -------------------------------------------------------------------------------

    def _positive(self, op: Operator, keys: Sequence[str]) -> Tuple[int, int]:
        values = tuple(int(op.options.get(k, 0)) for k in keys)  # type: ignore[call-overload]
        if any(v < 1 or v > 4096 for v in values):
            raise Unsupported(op, f"{'/'.join(keys)} {list(values)} must be in 1..4096")
        return values[0], values[1]

    def _bias(self, op: Operator, channels: int, dtype: str) -> Optional[Value]:
        if len(op.inputs) < 3 or op.inputs[2] < 0:
            return None
        b = self.tensor(op.inputs[2])
        want = "int32" if dtype == "int8" else "float32"
        if b.data is None or b.dtype != want or b.shape != (channels,):
            raise Unsupported(op, f"bias must be a constant {want}[{channels}]")
        return self.operand(op, 2)

    def _activation(self, op: Operator, out: Tensor) -> Activation:
        name = ACTIVATIONS.get(int(op.options.get("activation", 0)), "?")  # type: ignore[call-overload]
        if name not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
            raise Unsupported(op, f"fused activation {name} is not supported")
        if out.dtype == "int8":
            scale, zp = scale_zp(out, op)
            low, high = activation_range(name, scale, zp)
            return Activation(low, high)
        return Activation(*float_activation_range(name))

    def _rounding(self, op: Operator) -> str:
        computed = self.forms.rounding(op) if self.forms is not None else None
        if computed:  # the rounding the operator's kernel form computes
            return computed
        if isinstance(self.rounding, str):
            return self.rounding
        return (self.rounding or {}).get(op.index) or LITERT_ROUNDING[op.name]

    def _quant(
        self, op: Operator, x: Tensor, w: Tensor, out: Tensor, channels: int, axis: int
    ) -> Quant:
        if x.dtype != "int8":
            return Quant()
        in_scale, in_zp = scale_zp(x, op)
        out_scale, out_zp = scale_zp(out, op)
        wq = w.quantization
        if wq is None or not good_scales(wq.scales):
            raise Unsupported(op, "the filter needs quantization scales, finite and positive")
        if wq.per_channel and (len(wq.scales) != channels or wq.axis != axis):
            raise Unsupported(op, f"per-channel filter quantization must be on axis {axis}")
        filter_zp = wq.zero_points[0]
        if any(z != filter_zp for z in wq.zero_points) or (
            filter_zp and op.name != "FULLY_CONNECTED"
        ):
            raise Unsupported(op, "filter zero points must be 0")
        rounding = self._rounding(op)
        multipliers, shifts = conv_multipliers(
            in_scale, wq.scales, out_scale, channels, single_rounding=rounding != "double"
        )
        return Quant(-in_zp, -filter_zp, out_zp, Requant(multipliers, shifts, rounding))


def lower_model(
    model: TfliteModel,
    name: str = "default",
    rounding: Rounding = None,
    forms: Optional[FormPlan] = None,
) -> Network:
    """The checked model as a Network named ``name`` (a C identifier). ``rounding`` is the
    requantization's for every operator: ``single``, ``away`` or ``double`` (TFLite's
    classic rounding, TFLM's and CMSIS-NN's default build; see modelgen/ops/tflite.py); by
    default each operator rounds as LiteRT's reference kernel does (:data:`LITERT_ROUNDING`);
    a mapping {operator index: rounding} swaps the rounding of those operators only.
    ``forms`` (compile/forms.py) puts each operator's kernel form onto its nodes and records it;
    a form other than ``ref`` fixes the rounding its kernel computes."""
    if not MODULE_NAME.match(name):
        raise CompileError(f"--name {name!r} must be a C identifier")
    chosen = [rounding] if isinstance(rounding, str) else list((rounding or {}).values())
    for value in chosen:
        if value not in ROUNDINGS:
            raise CompileError(f"rounding {value!r}: one of {', '.join(ROUNDINGS)}")
    check_model(model)
    return _Lowering(model, name, rounding, forms).run()
