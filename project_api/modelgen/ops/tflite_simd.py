"""The ``simd`` kernel form: an int8 1x1 CONV_2D computed by the ``direct`` form's code on
cores with SIMD (``SMLAD`` on DSP cores, ``VMLADAV`` on Helium: :mod:`.tflite_direct`, the
window being one pixel's channels) and by CMSIS-NN's ``arm_convolve_wrapper_s8`` on cores
without (where CMSIS-NN's portable C is the faster).

The CMSIS-NN call is the ``cmsis-nn`` form's own (:class:`.tflite_cmsis.CmsisConv`): its
scratch is asked of the library as there, and recorded as 0 for the DSP and Helium levels,
where our code runs and takes none. Both paths requantize with CMSIS-NN's double rounding, so
the output is the same on every core, and LiteRT's.

**In place.** A stride-1 1x1 convolution whose output pixel is no wider than its input pixel
(``oc <= c``) may overwrite its input (``inplace_input``, modelgen/plan.py): every path reads
a group of pixels before it writes any output of that group, and output pixel ``p`` lies at
or before input pixel ``p``'s bytes, so no pixel is overwritten before it is read. Ours
gathers a block of pixels (4 on DSP, 2 on Helium) before it writes them; CMSIS-NN's call,
whose loops write a pixel's first channels before reading its last ones, is called on
:func:`group` pixels at a time into a buffer on the stack that is then copied out. The
arithmetic is the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from ..cgen import Body, Buffer
from .base import TensorType
from .tflite_cmsis import CmsisConv
from .tflite_direct import DirectConv

# The largest buffer (bytes) of CMSIS-NN's grouped output on the stack, in place.
GROUP_BYTES = 512


def group(pixels: int, oc: int) -> int:
    """Pixels a CMSIS-NN call computes in place: the largest divisor of ``pixels`` whose
    output fits :data:`GROUP_BYTES` (at least 1), so every call has the same dims."""
    most = max(1, GROUP_BYTES // oc)
    return max(g for g in range(1, min(pixels, most) + 1) if pixels % g == 0)


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
        return 0 if pointwise and w.shape[0] <= x.shape[3] else None

    def _group(self, x: TensorType, w: TensorType) -> Optional[int]:
        """Pixels a CMSIS-NN call takes when the output may overwrite the input, else None."""
        if self.inplace_input([x, w]) is None:
            return None
        return group(x.size // x.shape[3], w.shape[0])

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        pixels = self._group(ins[0], ins[1])
        if pixels is None:
            return super().setup(ins, out)
        x = TensorType((1, 1, pixels, ins[0].shape[3]), ins[0].dtype)
        y = TensorType((1, 1, pixels, out.shape[3]), out.dtype)
        return super().setup([x, *ins[1:]], y)

    def size_call(self, suffix: str = "") -> str:
        return "0" if suffix in ("_dsp", "_mve") else super().size_call(suffix)

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        DirectConv(self.base).emit(body, ins, outs, portable=lambda: self._cmsis(body, ins, outs))

    def _cmsis(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        CmsisConv.emit(self, body, ins, outs)

    def invoke(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w = (TensorType(b.shape, b.dtype) for b in ins[:2])
        pixels = self._group(x, w)
        if pixels is None:
            super().invoke(body, ins, outs)
            return
        c, oc = x.shape[3], w.shape[0]
        bias = f"(const int32_t*){ins[2].var}" if self.base.bias else "NULL"
        total = x.size // c
        body.line("arm_cmsis_nn_status st_ = ARM_CMSIS_NN_SUCCESS;")
        body.line(f"int8_t grp_[{pixels * oc}];")
        step = f"for (int32_t p = 0; p < {total} && st_ == ARM_CMSIS_NN_SUCCESS; p += {pixels})"
        with body.block(step):
            body.line(
                f"st_ = arm_{self.kernel}(&ctx_, &conv_, &quant_, &in_dims_, "
                f"(const int8_t*){ins[0].var} + p * {c}, &filter_dims_, "
                f"(const int8_t*){ins[1].var}, &bias_dims_, {bias}, "
                "&out_dims_, grp_);"
            )
            body.line(f"__builtin_memcpy((int8_t*){outs[0].var} + p * {oc}, grp_, {pixels * oc});")
