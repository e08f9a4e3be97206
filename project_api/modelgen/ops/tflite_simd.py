"""The ``simd`` kernel form: an int8 1x1 CONV_2D computed by the ``direct`` form's code on
cores with SIMD (``SMLAD`` on DSP cores, ``VMLADAV`` on Helium: :mod:`.tflite_direct`, the
window being one pixel's channels) and by CMSIS-NN's ``arm_convolve_wrapper_s8`` on cores
without (where CMSIS-NN's portable C is the faster).

The CMSIS-NN call is the ``cmsis-nn`` form's own (:class:`.tflite_cmsis.CmsisConv`): its
scratch is asked of the library as there, and recorded as 0 for the DSP and Helium levels,
where our code runs and takes none. Both paths requantize with CMSIS-NN's double rounding, so
the output is the same on every core, and LiteRT's.

**In place.** A stride-1 1x1 convolution may overwrite its input (``inplace_input``,
modelgen/plan.py): every path reads a group of pixels before it writes any output of that
group. Where the output pixel is no wider than the input pixel (``oc <= c``), output pixel
``p`` lies at or before input pixel ``p``'s bytes and the groups run from the first; where it
is wider (the storage grows), output pixel ``p`` lies at or after input pixel ``p``'s bytes
and the groups run from the last (:func:`widens`): either way no pixel is overwritten before
it is read. Ours gathers a block of pixels (4 on DSP, 2 on Helium) before it writes them;
CMSIS-NN's call, whose loops write a pixel's first channels before reading its last ones, is
made :data:`GROUP_CALLS` times, each on :func:`group` pixels, into a buffer that is then
copied out (in the operator's workspace window, before CMSIS-NN's own scratch: asked on
those cores only). The arithmetic is the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from ..cgen import Body, Buffer
from .base import TensorType
from .tflite_cmsis import CmsisConv
from .tflite_direct import DirectConv

# Calls of CMSIS-NN a 1x1 convolution takes in place: each call sums the whole filter again
# (the input offset's contribution), so few calls, each on a group of pixels.
GROUP_CALLS = 4
# The workspace's alignment of the group buffer (CMSIS-NN's own scratch follows it).
GROUP_ALIGN = 8


def widens(x: TensorType, w: TensorType) -> bool:
    """Whether a 1x1 convolution's output pixel is wider than its input pixel: its pixels
    then run from the last to the first (module docstring)."""
    return w.shape[0] > x.shape[3]


def group(pixels: int) -> int:
    """Pixels a CMSIS-NN call computes in place (the last call takes what is left)."""
    return -(-pixels // GROUP_CALLS)


@dataclass(frozen=True)
class SimdPointwise(CmsisConv):
    """A 1x1 CONV_2D: ours on DSP and Helium, CMSIS-NN's call elsewhere (module docstring)."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        return DirectConv(self.base).infer(types)

    def name_parts(self) -> List[str]:
        return self.base.name_parts() + ["simd"]

    def inplace_input(self, types: Sequence[TensorType]) -> Optional[int]:
        x, w = types[0], types[1]
        op = self.base
        pointwise = (
            x.dtype == "int8"
            and tuple(w.shape[1:3]) == (1, 1)
            and op.strides == (1, 1)
            and op.pads == (0, 0)
            and tuple(op.out_hw) == tuple(x.shape[1:3])
        )
        return 0 if pointwise else None

    def _group(self, x: TensorType, w: TensorType) -> Optional[int]:
        """Pixels a CMSIS-NN call takes when the output may overwrite the input, else None."""
        if self.inplace_input([x, w]) is None:
            return None
        return group(x.size // x.shape[3])

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        pixels = self._group(ins[0], ins[1])
        if pixels is None:
            return [*super().setup(ins, out), "const int32_t grp_bytes_ = 0;"]
        x = TensorType((1, 1, pixels, ins[0].shape[3]), ins[0].dtype)
        y = TensorType((1, 1, pixels, out.shape[3]), out.dtype)
        bytes_ = -(-pixels * out.shape[3] // GROUP_ALIGN) * GROUP_ALIGN
        return [*super().setup([x, *ins[1:]], y), f"const int32_t grp_bytes_ = {bytes_};"]

    def size_call(self, suffix: str = "") -> str:
        """0 on DSP and Helium (ours runs); else CMSIS-NN's answer, plus the group buffer in
        place (CMSIS-NN's scratch follows it in the operator's window)."""
        if suffix in ("_dsp", "_mve"):
            return "0"
        return f"{super().size_call(suffix)} + grp_bytes_"

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w = (TensorType(b.shape, b.dtype) for b in ins[:2])
        direct = DirectConv(self.base, backward=widens(x, w))
        direct.emit(body, ins, outs, portable=lambda: self._cmsis(body, ins, outs))

    def _cmsis(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        CmsisConv.emit(self, body, ins, outs)

    def invoke(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w = (TensorType(b.shape, b.dtype) for b in ins[:2])
        pixels = self._group(x, w)
        if pixels is None:
            super().invoke(body, ins, outs)
            return
        c, oc = x.shape[3], w.shape[0]
        total = x.size // c
        bias = f"(const int32_t*){ins[2].var}" if self.base.bias else "NULL"
        body.line("arm_cmsis_nn_status st_ = ARM_CMSIS_NN_SUCCESS;")
        # the group's output first in the window (need_ >= grp_bytes_ > 0: it was taken)
        body.line("int8_t* grp_ = (int8_t*)ctx_.buf;")
        body.line("ctx_.buf = grp_ + grp_bytes_;")
        body.line("ctx_.size = need_ - grp_bytes_;")
        body.line("cmsis_nn_dims gin_ = in_dims_;")
        body.line("cmsis_nn_dims gout_ = out_dims_;")
        if widens(x, w):  # the last group first (a short one last)
            last = (total - 1) // pixels * pixels
            step = f"for (int32_t p = {last}; p >= 0 && st_ == ARM_CMSIS_NN_SUCCESS; p -= {pixels})"
        else:
            step = f"for (int32_t p = 0; p < {total} && st_ == ARM_CMSIS_NN_SUCCESS; p += {pixels})"
        with body.block(step):
            body.line(f"const int32_t n_ = {total} - p < {pixels} ? {total} - p : {pixels};")
            body.line("gin_.w = n_;")
            body.line("gout_.w = n_;")
            body.line(
                f"st_ = arm_{self.kernel}(&ctx_, &conv_, &quant_, &gin_, "
                f"(const int8_t*){ins[0].var} + p * {c}, &filter_dims_, "
                f"(const int8_t*){ins[1].var}, &bias_dims_, {bias}, &gout_, grp_);"
            )
            body.line(f"__builtin_memcpy((int8_t*){outs[0].var} + p * {oc}, grp_, n_ * {oc});")
        body.line("ctx_.buf = grp_;")
