"""The ``cmsis-nn`` kernel form: a lowered TFLite operator computed by a call of CMSIS-NN's
current API (v7.0.0) instead of our plain C.

Each class wraps the operator it replaces (``base``: its shapes, quantization and name) and
emits one call with constant arguments: the dims, strides, paddings, offsets and activation
bounds as literal structs, the per-channel multipliers and shifts as ``static const`` arrays
(in flash). Scratch memory is the linked library's own answer: the function asks
``arm_<kernel>_get_buffer_size`` (compiled for the CPU the firmware runs on) and takes that
many bytes from ``TVMBackendAllocWorkspace``, i.e. from the operator's workspace window, and
gives them back before it returns. The sizes the library answers for each CPU level are asked
once at compile time (``compile/cmsis_scratch.py``) and recorded in the archive, so that the
memory planner sizes each window for the board's CPU.

:attr:`CmsisCall.setup` / :attr:`CmsisCall.size_call` give the same declarations and size
query to that probe, so the probe asks exactly what the firmware asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer
from .base import Op, TensorType
from .tflite import TflConv, TflFullyConnected, TflPool
from .tflite_elementwise import LEFT_SHIFT, TflBinary

HEADER = "arm_nnfunctions.h"
# The suffixes of a size query that answer for one CPU level (``""``: the level the library
# is compiled for: the portable C on a host).
LEVEL_SUFFIXES = (("portable", ""), ("dsp", "_dsp"), ("mve", "_mve"))


def _ints(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


def _dims(name: str, dims: Sequence[int]) -> str:
    return f"const cmsis_nn_dims {name} = {_ints(dims)};"


class CmsisCall(Op):
    """A lowered operator computed by one CMSIS-NN call (see the module docstring)."""

    base: Op
    kernel = ""  # arm_<kernel>, e.g. convolve_wrapper_s8
    sized = True  # whether the kernel has a *_get_buffer_size query

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        return self.base.infer(types)

    def name_parts(self) -> List[str]:
        return self.base.name_parts() + ["cmsis_nn"]

    def output_names(self) -> List[str]:
        return self.base.output_names()

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return self.base.reference(arrays)

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        """Declarations of the call's constant arguments (and of what its size query reads)."""
        raise NotImplementedError

    def size_call(self, suffix: str = "") -> str:
        """The size query (``suffix``: ``""``, ``_dsp`` or ``_mve``), over :meth:`setup`'s
        names; ``0`` for a kernel that takes no scratch."""
        return "0"

    def call(self, ins: Sequence[Buffer], out: Buffer) -> str:
        """The kernel call (an ``arm_cmsis_nn_status`` expression)."""
        raise NotImplementedError

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        body.include(HEADER)
        types = [TensorType(b.shape, b.dtype) for b in ins]
        for line in self.setup(types, TensorType(outs[0].shape, outs[0].dtype)):
            body.line(line)
        body.line("cmsis_nn_context ctx_ = {NULL, 0};")
        if self.sized:
            body.line(f"int32_t need_ = {self.size_call()};")
            with body.block("if (need_ > 0)"):
                body.line("ctx_.buf = TVMBackendAllocWorkspace(1, 0, (uint64_t)need_, 0, 8);")
                body.line("if (ctx_.buf == NULL) return -1;")
                body.line("ctx_.size = need_;")
                self.prepare(body, ins)
        self.invoke(body, ins, outs)
        if self.sized:
            body.line(
                "if (ctx_.buf != NULL && TVMBackendFreeWorkspace(1, 0, ctx_.buf) != 0) return -1;"
            )
        body.line("if (st_ != ARM_CMSIS_NN_SUCCESS) return -1;")

    def invoke(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        """Statements that call the kernel, leaving its status in ``st_`` (one call here)."""
        body.line(f"arm_cmsis_nn_status st_ = {self.call(ins, outs[0])};")

    def prepare(self, body: Body, ins: Sequence[Buffer]) -> None:
        """Statements filling the scratch before the call (the kernel sums of MVE's FC)."""


def _requant_arrays(op: TflConv, channels: int) -> List[str]:
    requant = op.quant.requant
    mults = list(requant.multipliers) * (channels if len(requant.multipliers) == 1 else 1)
    shifts = list(requant.shifts) * (channels if len(requant.shifts) == 1 else 1)
    return [
        f"static const int32_t mult_[{channels}] = {_ints(mults)};",
        f"static const int32_t shift_[{channels}] = {_ints(shifts)};",
        "cmsis_nn_per_channel_quant_params quant_ = {(int32_t*)mult_, (int32_t*)shift_};",
    ]


def _bias(ins: Sequence[Buffer], has_bias: bool) -> str:
    return f"(const int32_t*){ins[2].var}" if has_bias else "NULL"


@dataclass(frozen=True)
class CmsisConv(CmsisCall):
    """CONV_2D → ``arm_convolve_wrapper_s8``; DEPTHWISE_CONV_2D →
    ``arm_depthwise_conv_wrapper_s8`` (any depth multiplier), per-channel requantization."""

    base: TflConv

    @property
    def kernel(self) -> str:  # type: ignore[override]
        return "depthwise_conv_wrapper_s8" if self.base.depthwise else "convolve_wrapper_s8"

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        op = self.base
        x, w = ins[0], ins[1]
        n, h, wd, c = x.shape
        oc = out.shape[3]
        (sh, sw), (dh, dw), (pt, pl) = op.strides, op.dilations, op.pads
        act = (int(op.activation.low), int(op.activation.high))
        offsets = (op.quant.input_offset, op.quant.output_offset)
        if op.depthwise:
            params = (
                f"const cmsis_nn_dw_conv_params conv_ = {{{offsets[0]}, {offsets[1]}, "
                f"{op.depth_multiplier}, {{{sw}, {sh}}}, {{{pl}, {pt}}}, {{{dw}, {dh}}}, "
                f"{{{act[0]}, {act[1]}}}}};"
            )
            filter_dims = (1, w.shape[1], w.shape[2], oc)
        else:
            params = (
                f"const cmsis_nn_conv_params conv_ = {{{offsets[0]}, {offsets[1]}, "
                f"{{{sw}, {sh}}}, {{{pl}, {pt}}}, {{{dw}, {dh}}}, {{{act[0]}, {act[1]}}}}};"
            )
            filter_dims = (oc, w.shape[1], w.shape[2], c)
        return [
            params,
            *_requant_arrays(op, oc),
            _dims("in_dims_", (n, h, wd, c)),
            _dims("filter_dims_", filter_dims),
            _dims("bias_dims_", (1, 1, 1, oc)),
            _dims("out_dims_", out.shape),
        ]

    def size_call(self, suffix: str = "") -> str:
        return (
            f"arm_{self.kernel}_get_buffer_size{suffix}(&conv_, &in_dims_, &filter_dims_, "
            "&out_dims_)"
        )

    def call(self, ins: Sequence[Buffer], out: Buffer) -> str:
        return (
            f"arm_{self.kernel}(&ctx_, &conv_, &quant_, &in_dims_, (const int8_t*){ins[0].var}, "
            f"&filter_dims_, (const int8_t*){ins[1].var}, &bias_dims_, "
            f"{_bias(ins, self.base.bias)}, &out_dims_, (int8_t*){out.var})"
        )


@dataclass(frozen=True)
class CmsisFullyConnected(CmsisCall):
    """FULLY_CONNECTED (per-tensor, filter zero point 0) → ``arm_fully_connected_s8``; on MVE
    its scratch holds the kernel sums, filled by ``arm_vector_sum_s8`` before the call."""

    base: TflFullyConnected
    kernel = "fully_connected_s8"

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        op = self.base
        o, d = ins[1].shape
        batches = ins[0].size // d
        q = op.quant
        act = (int(op.activation.low), int(op.activation.high))
        return [
            f"const cmsis_nn_fc_params fc_ = {{{q.input_offset}, {q.filter_offset}, "
            f"{q.output_offset}, {{{act[0]}, {act[1]}}}}};",
            f"const cmsis_nn_per_tensor_quant_params quant_ = {{{q.requant.multipliers[0]}, "
            f"{q.requant.shifts[0]}}};",
            _dims("in_dims_", (batches, 1, 1, d)),
            _dims("filter_dims_", (d, 1, 1, o)),
            _dims("bias_dims_", (1, 1, 1, o)),
            _dims("out_dims_", (batches, 1, 1, o)),
        ]

    def size_call(self, suffix: str = "") -> str:
        return f"arm_fully_connected_s8_get_buffer_size{suffix}(&filter_dims_)"

    def prepare(self, body: Body, ins: Sequence[Buffer]) -> None:
        o, d = ins[1].shape
        q = self.base.quant
        body.line(
            f"if (arm_vector_sum_s8((int32_t*)ctx_.buf, {d}, {o}, (const int8_t*){ins[1].var}, "
            f"{q.input_offset}, {q.filter_offset}, {_bias(ins, self.base.bias)}) "
            "!= ARM_CMSIS_NN_SUCCESS) return -1;"
        )

    def call(self, ins: Sequence[Buffer], out: Buffer) -> str:
        return (
            f"arm_fully_connected_s8(&ctx_, &fc_, &quant_, &in_dims_, "
            f"(const int8_t*){ins[0].var}, &filter_dims_, (const int8_t*){ins[1].var}, "
            f"&bias_dims_, {_bias(ins, self.base.bias)}, &out_dims_, (int8_t*){out.var})"
        )


@dataclass(frozen=True)
class CmsisPool(CmsisCall):
    """AVERAGE_POOL_2D → ``arm_avgpool_s8``, MAX_POOL_2D → ``arm_max_pool_s8``."""

    base: TflPool

    @property
    def kernel(self) -> str:  # type: ignore[override]
        return "avgpool_s8" if self.base.mode == "avg" else "max_pool_s8"

    @property
    def sized(self) -> bool:  # type: ignore[override]
        return self.base.mode == "avg"

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        op = self.base
        (sh, sw), (pt, pl), (fh, fw) = op.strides, op.pads, op.filter_hw
        act = (int(op.activation.low), int(op.activation.high))
        return [
            f"const cmsis_nn_pool_params pool_ = {{{{{sw}, {sh}}}, {{{pl}, {pt}}}, "
            f"{{{act[0]}, {act[1]}}}}};",
            _dims("in_dims_", ins[0].shape),
            _dims("filter_dims_", (1, fh, fw, 1)),
            _dims("out_dims_", out.shape),
        ]

    def size_call(self, suffix: str = "") -> str:
        if not self.sized:
            return "0"
        return f"arm_avgpool_s8_get_buffer_size{suffix}(out_dims_.w, in_dims_.c)"

    def call(self, ins: Sequence[Buffer], out: Buffer) -> str:
        return (
            f"arm_{self.kernel}(&ctx_, &pool_, &in_dims_, (const int8_t*){ins[0].var}, "
            f"&filter_dims_, &out_dims_, (int8_t*){out.var})"
        )


@dataclass(frozen=True)
class CmsisBinary(CmsisCall):
    """ADD → ``arm_elementwise_add_s8``, MUL → ``arm_elementwise_mul_s8``: two inputs of one
    shape (no broadcast), TFLite's offsets, multipliers and shifts."""

    base: TflBinary
    sized = False

    @property
    def kernel(self) -> str:  # type: ignore[override]
        return f"elementwise_{self.base.operation}_s8"

    def inplace_input(self, types: Sequence[TensorType]) -> Optional[int]:
        """ADD into an input that dies there: ``arm_elementwise_add_s8`` reads each group of
        elements (1, 4 or 16) of both inputs before it writes the output's, at the same place
        (v7.0.0's portable, DSP and Helium loops alike)."""
        return self.base.inplace_input(types) if self.base.operation == "add" else None

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        return []

    def call(self, ins: Sequence[Buffer], out: Buffer) -> str:
        op = self.base
        (o1, o2, oo), act = op.offsets, (int(op.activation.low), int(op.activation.high))
        a, b = f"(const int8_t*){ins[0].var}", f"(const int8_t*){ins[1].var}"
        size = out.size
        if op.operation == "add":
            (m1, s1), (m2, s2), (mo, so) = _pairs(op)
            return (
                f"arm_elementwise_add_s8({a}, {b}, {o1}, {m1}, {s1}, {o2}, {m2}, {s2}, "
                f"{LEFT_SHIFT}, (int8_t*){out.var}, {oo}, {mo}, {so}, {act[0]}, {act[1]}, {size})"
            )
        ((mo, so),) = _pairs(op)
        return (
            f"arm_elementwise_mul_s8({a}, {b}, {o1}, {o2}, (int8_t*){out.var}, {oo}, {mo}, "
            f"{so}, {act[0]}, {act[1]}, {size})"
        )


def _pairs(op: TflBinary) -> Tuple[Tuple[int, int], ...]:
    return tuple((r.multipliers[0], r.shifts[0]) for r in op.requants)
