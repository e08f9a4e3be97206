"""The ``cmsis-nn`` form's DEPTHWISE_CONV_2D in place: CMSIS-NN's call made band by band of
output rows, each band held back until the next one is made, so the output may overwrite the
input (``inplace_input``: the memory planner gives them one storage).

CMSIS-NN's depthwise kernels write an output row while the rows after it still read the
input rows around it, so one call cannot run in place. Output row ``r`` reads input rows
``r·s − pt`` to ``r·s − pt + (kh − 1)·d`` (``pt`` rows of padding above). So the output rows
are made in bands of ``B`` rows, each band by one call on the input rows it reads (the top
band's padding, the bottom band's shorter input: the tiled stages' sub-problem,
modelgen/ops/tflite_tiled.py), into one of two band buffers; once band ``k`` is made, band
``k − 1`` is copied to its place in the output. ``B`` (:func:`band_rows`) is the fewest rows
with which that copy never reaches input rows a later band reads: output bytes up to row
``k·B`` against input rows from ``(k + 1)·B·s − pt`` on. A stride-1 depthwise keeping its
shape takes ``B = max(1, pt)``; a stride-2 one (its output rows half as wide) ``B = 1``; an
output larger than its input is never in place. The arithmetic is the call's; only where
the rows are kept changes.

The two band buffers come first in the operator's workspace window, CMSIS-NN's own scratch
after them (the size query adds them, on every CPU level).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from ..cgen import Body, Buffer
from .base import TensorType
from .tflite import TflConv
from .tflite_cmsis import CmsisConv

# The alignment of the band buffers in the window (CMSIS-NN's own scratch follows them).
ROWS_ALIGN = 8


def band_rows(op: TflConv, x: TensorType, out_channels: int) -> Optional[int]:
    """Output rows a call makes in place: the fewest with which no band, copied out once the
    next band is made, overwrites input rows a later band reads; None if the output does
    not fit the input's storage or no band height allows it."""
    _, height, width, channels = x.shape
    oh, ow = op.out_hw
    in_row, out_row = width * channels, ow * out_channels
    if oh * out_row > height * in_row:
        return None
    s, pt = op.strides[0], op.pads[0]
    for rows in range(1, oh + 1):
        # band k's rows [a - rows, a) are copied out after band k + 1 (from row a + rows) is
        # made; bands from k + 2 on read input rows from (a + rows)·s − pt
        if all(a * out_row <= max(0, (a + rows) * s - pt) * in_row for a in range(rows, oh, rows)):
            return rows
    return None  # pragma: no cover - rows = oh copies out after the one band


@dataclass(frozen=True)
class CmsisDepthwiseRows(CmsisConv):
    """DEPTHWISE_CONV_2D → ``arm_depthwise_conv_wrapper_s8``, band by band in place where it
    can be (module docstring); else the one call of :class:`CmsisConv`."""

    def inplace_input(self, types: Sequence[TensorType]) -> Optional[int]:
        return 0 if self._rows(types) is not None else None

    def _rows(self, types: Sequence[TensorType]) -> Optional[int]:
        """Output rows a band makes in place (None: one call, beside the input)."""
        x, w = types[0], types[1]
        if not self.base.depthwise or x.dtype != "int8" or len(x.shape) != 4 or x.shape[0] != 1:
            return None
        return band_rows(self.base, x, w.shape[3])

    def _band_bytes(self, x: TensorType, w: TensorType) -> int:
        """Bytes of one band buffer (0: not in place)."""
        rows = self._rows([x, w])
        if rows is None:
            return 0
        return -(-rows * self.base.out_hw[1] * w.shape[3] // ROWS_ALIGN) * ROWS_ALIGN

    def setup(self, ins: Sequence[TensorType], out: TensorType) -> List[str]:
        rows_bytes = self._band_bytes(ins[0], ins[1])
        return [*super().setup(ins, out), f"const int32_t rows_bytes_ = {rows_bytes};"]

    def size_call(self, suffix: str = "") -> str:
        """CMSIS-NN's answer, plus the two band buffers in place."""
        return f"{super().size_call(suffix)} + 2 * rows_bytes_"

    def invoke(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, w = (TensorType(b.shape, b.dtype) for b in ins[:2])
        rows = self._rows([x, w])
        if rows is None:
            super().invoke(body, ins, outs)
            return
        op = self.base
        height, (oh, ow) = x.shape[1], op.out_hw
        row, out_row = x.shape[2] * x.shape[3], ow * w.shape[3]
        reach = (op.strides[0], op.pads[0], (w.shape[1] - 1) * op.dilations[0] + 1)
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
        with body.block(f"for (int32_t a = 0; a < {oh} && {more}; a += {rows}, ++k_)"):
            body.line(f"const int32_t b = a + {rows} < {oh} ? a + {rows} : {oh};")
            body.line(f"const int32_t first = a * {reach[0]} - {reach[1]};")
            body.line(f"const int32_t last = (b - 1) * {reach[0]} - {reach[1]} + {reach[2]};")
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
            with body.block("if (k_ > 0)"):  # the band before: no later band reads there
                body.line(
                    f"__builtin_memcpy({dst} + (a - {rows}) * {out_row}, "
                    f"rows_ + ((k_ - 1) & 1) * rows_bytes_, {rows * out_row});"
                )
        last = (oh - 1) // rows * rows
        body.line(
            f"__builtin_memcpy({dst} + {last * out_row}, rows_ + ((k_ - 1) & 1) * rows_bytes_, "
            f"{(oh - last) * out_row});"
        )
        body.line("ctx_.buf = rows_;")
