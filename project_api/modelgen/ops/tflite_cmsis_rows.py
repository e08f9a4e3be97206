"""The ``cmsis-nn`` form's DEPTHWISE_CONV_2D in place: CMSIS-NN's call made band by band of
output rows, each band held back until the next one is made, so the output may overwrite the
input (``inplace_input``: the memory planner gives them one storage).

CMSIS-NN's depthwise kernels write an output row while the rows after it still read the
input rows around it, so one call cannot run in place. A stride-1 depthwise of depth
multiplier 1 whose output has its input's height and width has output rows as wide as its
input rows, and output row ``r`` reads input rows ``r - pt`` to ``r - pt + (kh - 1)·d``
(``pt`` rows of padding above). So: the output rows are made in bands of :func:`band_rows`
(at least ``pt``) rows, each band by one call on the input rows it reads (the top band's
padding, the bottom band's shorter input: the tiled stages' sub-problem,
modelgen/ops/tflite_tiled.py), into one of two band buffers; once band ``k`` is made, band
``k - 1`` is copied over its own input rows, which no later band reads (band ``k + 1`` reads
from row ``(k + 1)·B - pt`` on, at or after band ``k``'s first row). The arithmetic is the
call's; only where the rows are kept changes.

The two band buffers come first in the operator's workspace window, CMSIS-NN's own scratch
after them (the size query adds them, on every CPU level).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from ..cgen import Body, Buffer
from .base import TensorType
from .tflite_cmsis import CmsisConv

# The alignment of the band buffers in the window (CMSIS-NN's own scratch follows them).
ROWS_ALIGN = 8


def band_rows(pad_top: int) -> int:
    """Output rows a call makes in place: the fewest the held-back band allows."""
    return max(1, pad_top)


@dataclass(frozen=True)
class CmsisDepthwiseRows(CmsisConv):
    """DEPTHWISE_CONV_2D → ``arm_depthwise_conv_wrapper_s8``, band by band in place where it
    can be (module docstring); else the one call of :class:`CmsisConv`."""

    def inplace_input(self, types: Sequence[TensorType]) -> Optional[int]:
        x = types[0]
        op = self.base
        fits = (
            op.depthwise
            and x.dtype == "int8"
            and len(x.shape) == 4
            and x.shape[0] == 1
            and op.depth_multiplier == 1
            and op.strides == (1, 1)
            and tuple(op.out_hw) == tuple(x.shape[1:3])
        )
        return 0 if fits else None

    def _band_bytes(self, x: TensorType) -> int:
        """Bytes of one band buffer (0: not in place)."""
        if self.inplace_input([x]) is None:
            return 0
        row = x.shape[2] * x.shape[3]
        return -(-band_rows(self.base.pads[0]) * row // ROWS_ALIGN) * ROWS_ALIGN

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        rows_bytes = self._band_bytes(ins[0])
        return [*super().setup(ins, out), f"const int32_t rows_bytes_ = {rows_bytes};"]

    def size_call(self, suffix: str = "") -> str:
        """CMSIS-NN's answer, plus the two band buffers in place."""
        return f"{super().size_call(suffix)} + 2 * rows_bytes_"

    def invoke(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x = TensorType(ins[0].shape, ins[0].dtype)
        if self.inplace_input([x]) is None:
            super().invoke(body, ins, outs)
            return
        op = self.base
        _, height, width, channels = x.shape
        row = width * channels
        rows = band_rows(op.pads[0])
        reach = (op.pads[0], (ins[1].shape[1] - 1) * op.dilations[0] + 1)
        bias = f"(const int32_t*){ins[2].var}" if op.bias else "NULL"
        src, dst = f"(const int8_t*){ins[0].var}", f"(int8_t*){outs[0].var}"
        body.line("arm_cmsis_nn_status st_ = ARM_CMSIS_NN_SUCCESS;")
        # the band buffers first in the window (need_ >= 2 * rows_bytes_ > 0: it was taken)
        body.line("int8_t* rows_ = (int8_t*)ctx_.buf;")
        body.line("ctx_.buf = rows_ + 2 * rows_bytes_;")
        body.line("ctx_.size = need_ - 2 * rows_bytes_;")
        body.line("cmsis_nn_dw_conv_params band_ = conv_;")
        body.line("cmsis_nn_dims bin_ = in_dims_;")
        body.line("cmsis_nn_dims bout_ = out_dims_;")
        body.line("int32_t k_ = 0;")
        more = "st_ == ARM_CMSIS_NN_SUCCESS"
        with body.block(f"for (int32_t a = 0; a < {height} && {more}; a += {rows}, ++k_)"):
            body.line(f"const int32_t b = a + {rows} < {height} ? a + {rows} : {height};")
            body.line(f"const int32_t first = a - {reach[0]};")
            body.line(f"const int32_t last = b - 1 - {reach[0]} + {reach[1]};")
            body.line("const int32_t i0 = first < 0 ? 0 : first;")
            body.line(f"const int32_t i1 = last > {height} ? {height} : last;")
            body.line("band_.padding.h = i0 - first;")
            body.line("bin_.h = i1 - i0;")
            body.line("bout_.h = b - a;")
            body.line(
                f"st_ = arm_{self.kernel}(&ctx_, &band_, &quant_, &bin_, {src} + i0 * {row}, "
                f"&filter_dims_, (const int8_t*){ins[1].var}, &bias_dims_, {bias}, &bout_, "
                "rows_ + (k_ & 1) * rows_bytes_);"
            )
            with body.block("if (k_ > 0)"):  # the band before: its input rows are read
                body.line(
                    f"__builtin_memcpy({dst} + (a - {rows}) * {row}, "
                    f"rows_ + ((k_ - 1) & 1) * rows_bytes_, {rows * row});"
                )
        last = (height - 1) // rows * rows
        body.line(
            f"__builtin_memcpy({dst} + {last * row}, rows_ + ((k_ - 1) & 1) * rows_bytes_, "
            f"{(height - last) * row});"
        )
        body.line("ctx_.buf = rows_;")
