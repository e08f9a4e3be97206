"""The ``simd`` kernel form: an int8 1x1 CONV_2D computed by the ``direct`` form's code on
cores with SIMD (``SMLAD`` on DSP cores, ``VMLADAV`` on Helium: :mod:`.tflite_direct`, the
window being one pixel's channels) and by CMSIS-NN's ``arm_convolve_wrapper_s8`` on cores
without (where CMSIS-NN's portable C is the faster).

The CMSIS-NN call is the ``cmsis-nn`` form's own (:class:`.tflite_cmsis.CmsisConv`): its
scratch is asked of the library as there, and recorded as 0 for the DSP and Helium levels,
where our code runs and takes none. Both paths requantize with CMSIS-NN's double rounding, so
the output is the same on every core, and LiteRT's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

from ..cgen import Body, Buffer
from .base import TensorType
from .tflite_cmsis import CmsisConv
from .tflite_direct import DirectConv


@dataclass(frozen=True)
class SimdPointwise(CmsisConv):
    """A 1x1 CONV_2D: ours on DSP and Helium, CMSIS-NN's call elsewhere (module docstring)."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        return DirectConv(self.base).infer(types)

    def name_parts(self) -> List[str]:
        return self.base.name_parts() + ["simd"]

    def size_call(self, suffix: str = "") -> str:
        return "0" if suffix in ("_dsp", "_mve") else super().size_call(suffix)

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        DirectConv(self.base).emit(body, ins, outs, portable=lambda: self._cmsis(body, ins, outs))

    def _cmsis(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        CmsisConv.emit(self, body, ins, outs)
