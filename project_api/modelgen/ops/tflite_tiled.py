"""A tiled stage: consecutive int8 convolutions run band by band of output rows
(patch-based inference, as MCUNetV2 describes it), so their large intermediate tensors exist
only as small band buffers.

A stage is one operator (one C function) over the stage's input, every layer's filter and
bias, and the last layer's output. The last layer's output rows are cut into bands of
``band`` rows (the last band maybe shorter). For each band, the rows every earlier layer must
produce follow backward from the window (:func:`bands`): output rows [a, b) of a layer need
its input rows [a·s − pt, (b − 1)·s − pt + (kh − 1)·d + 1), clipped to the tensor; the rows
an earlier band has made already are made again (the halo: the cost of the saving). Each
layer of the band is the layer's own ``fast`` C (tflite_fast.py, tflite_fast_depthwise.py)
emitted for the band's sub-problem: its input rows, its output rows, and the rows of
padding above it (the top band's; a band cut by the bottom edge simply has fewer input
rows, as the layer's own bottom padding). The arithmetic of every output is the layer's, so
the stage's output equals the layers' run one after the other, bit for bit.

The band buffers are the stage's workspace (``TVMBackendAllocWorkspace``: the arena plan
counts them during the stage's call only): two buffers, the layers' outputs alternating
between them, each as large as the largest band it holds. The first layer reads the stage's
input tensor, the last writes the stage's output tensor. A stage of two or more bands is
one loop (:func:`emit_shared`) in which every layer after the first is a single copy of its
C, run on the band's full rows (:meth:`TiledStage.spans`): rows outside a tensor hold its
zero point, which adds (zp + io)·w = 0 to a sum as padding does; the first layer, reading
the stage's input, keeps a copy per clipping of its rows. A stage of one band is the layers'
C for its rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ..cgen import Body, Buffer
from .base import Op, TensorType, require
from .tflite import TflConv
from .tflite_cmsis import CmsisCall, CmsisConv

Layer = Union[TflConv, CmsisConv]  # a stage's layer: our fast C, or a CMSIS-NN call


def conv_of(layer: Op) -> TflConv:
    """The convolution a stage's layer computes (a CMSIS-NN call's ``base``)."""
    conv = getattr(layer, "base", layer)
    assert isinstance(conv, TflConv)
    return conv


def band_layer(layer: Layer, out_rows: int, pad: int) -> Layer:
    """``layer`` for a band: ``out_rows`` output rows under ``pad`` rows of top padding."""
    conv = conv_of(layer)
    sub = dataclasses.replace(conv, out_hw=(out_rows, conv.out_hw[1]), pads=(pad, conv.pads[1]))
    return sub if isinstance(layer, TflConv) else dataclasses.replace(layer, base=sub)


class Span(NamedTuple):
    """One layer's rows of a band whose last layer starts at output row ``a``: output rows
    from ``a·out_mul − out_off``, ``out_rows`` of them; input rows from ``a·in_mul −
    in_off``, ``in_rows`` of them; rows outside the tensor are virtual."""

    out_mul: int
    out_off: int
    out_rows: int
    in_mul: int
    in_off: int
    in_rows: int


class Rows(NamedTuple):
    """One layer's part of a band: output rows [out0, out1) from input rows [in0, in1), with
    ``pad`` rows of padding above input row ``in0``."""

    in0: int
    in1: int
    out0: int
    out1: int
    pad: int


def layer_rows(op: Op, kh: int, height: int, out0: int, out1: int) -> Rows:
    """The input rows ``op`` (filter rows ``kh``, input ``height`` rows) reads for its output
    rows [out0, out1)."""
    op = conv_of(op)
    first = out0 * op.strides[0] - op.pads[0]
    last = (out1 - 1) * op.strides[0] - op.pads[0] + (kh - 1) * op.dilations[0] + 1
    in0, in1 = max(0, first), min(height, last)
    return Rows(in0, in1, out0, out1, in0 - first)


def bands(
    layers: Sequence[Op], kernels: Sequence[int], heights: Sequence[int], band: int
) -> List[Tuple[Rows, ...]]:
    """Every band's rows, layer by layer (first to last); ``kernels``: each layer's filter
    rows; ``heights``: each layer's input rows, then the last layer's output rows."""
    out_rows = heights[-1]
    found: List[Tuple[Rows, ...]] = []
    for start in range(0, out_rows, band):
        a, b = start, min(out_rows, start + band)
        rows: List[Rows] = []
        for k in reversed(range(len(layers))):
            r = layer_rows(layers[k], kernels[k], heights[k], a, b)
            rows.append(r)
            a, b = r.in0, r.in1
        found.append(tuple(reversed(rows)))
    return found


@dataclass(frozen=True)
class TiledStage(Op):
    """Consecutive int8 CONV_2D / DEPTHWISE_CONV_2D layers (``fast`` C) run band by band of
    ``band`` output rows of the last (module docstring). Inputs: the stage's input, then
    each layer's filter and (if it has one) bias."""

    layers: Tuple[Layer, ...]
    kernels: Tuple[int, ...]  # each layer's filter rows
    band: int

    def operand_types(self, types: Sequence[TensorType]) -> List[List[TensorType]]:
        """Each layer's operand types (its input from the layer before)."""
        at = 1
        parts: List[List[TensorType]] = []
        x = types[0]
        for op in self.layers:
            count = 3 if conv_of(op).bias else 2
            operands = [x, *types[at : at + count - 1]]
            at += count - 1
            parts.append(operands)
            x = op.infer(operands)[0]
        require(at == len(types), "tiled stage: operand count")
        return parts

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(len(self.layers) >= 1 and self.band >= 1, "tiled stage: layers and band")
        require(types[0].dtype == "int8" and types[0].shape[0] == 1, "tiled stage: one int8 batch")
        for op in self.layers:
            conv = conv_of(op)
            require(conv.form == "fast" and not conv.hybrid_scale, "tiled stage: int8 layers")
        require(len(self.kernels) == len(self.layers), "tiled stage: a filter height a layer")
        x = types[0]
        for op, kh, operands in zip(self.layers, self.kernels, self.operand_types(types)):
            require(operands[1].shape[1] == kh, "tiled stage: filter heights")
            x = op.infer(operands)[0]
        return [x]

    def name_parts(self) -> List[str]:
        return ["tfl_tiled", *("dw" if conv_of(op).depthwise else "conv" for op in self.layers)]

    def output_names(self) -> List[str]:
        return ["T_tiled"]

    def heights(self, x: TensorType) -> List[int]:
        """Each layer's input rows, then the last layer's output rows."""
        return [x.shape[1], *(conv_of(op).out_hw[0] for op in self.layers)]

    def plan(self, x: TensorType) -> List[Tuple[Rows, ...]]:
        return bands(self.layers, self.kernels, self.heights(x), self.band)

    def starts(self, x: TensorType) -> List[int]:
        """The last layer's first output row of each band (the last band ends on the last
        row, overlapping the one before where the rows do not divide into bands)."""
        rows = self.heights(x)[-1]
        band = min(self.band, rows)
        return [min(t * band, rows - band) for t in range(-(-rows // band))]

    def spans(self, x: TensorType) -> Optional[List[Span]]:
        """Each layer's rows of a band, unclipped (:class:`Span`), when the layers after the
        first run one copy of their C for every band; None for a stage of one band."""
        if len(self.starts(x)) < 2:
            return None
        found: List[Span] = []
        mul, off, rows = 1, 0, min(self.band, self.heights(x)[-1])
        for op, kh in zip(reversed(self.layers), reversed(self.kernels)):
            conv = conv_of(op)
            s, pt, d = conv.strides[0], conv.pads[0], conv.dilations[0]
            span = Span(mul, off, rows, mul * s, off * s + pt, (rows - 1) * s + (kh - 1) * d + 1)
            found.append(span)
            mul, off, rows = span.in_mul, span.in_off, span.in_rows
        return found[::-1]

    def buffer_bytes(self, types: Sequence[TensorType]) -> Tuple[int, int]:
        """Bytes of the two band buffers (layers 0, 2, ... write the first; 1, 3, ... the
        second; the last layer writes the output)."""
        sizes = [0, 0]
        outs = [op.infer(p)[0] for op, p in zip(self.layers, self.operand_types(types))]
        spans = self.spans(types[0])
        if spans is not None:  # every band of the full rows (virtual ones zero points)
            for k, (span, out) in enumerate(zip(spans[:-1], outs[:-1])):
                sizes[k % 2] = max(sizes[k % 2], span.out_rows * out.shape[2] * out.shape[3])
            return sizes[0], sizes[1]
        for rows in self.plan(types[0]):
            for k, (r, out) in enumerate(zip(rows[:-1], outs[:-1])):
                row_bytes = out.shape[2] * out.shape[3]
                sizes[k % 2] = max(sizes[k % 2], (r.out1 - r.out0) * row_bytes)
        return sizes[0], sizes[1]

    def cmsis_calls(
        self, types: Sequence[TensorType]
    ) -> List[Tuple[int, CmsisCall, List[TensorType], TensorType]]:
        """(layer, call, its input types, its output type) of every CMSIS-NN call the stage
        makes, one per band geometry: what compile asks the library's scratch for (the calls
        run one after another, so the stage's window holds the largest answer)."""
        parts = self.operand_types(types)
        found: List[Tuple[int, CmsisCall, List[TensorType], TensorType]] = []
        seen = set()
        for rows in self.plan(types[0]):
            for k, (op, r, operands) in enumerate(zip(self.layers, rows, parts)):
                key = (k, r.in1 - r.in0, r.out1 - r.out0, r.pad)
                if not isinstance(op, CmsisCall) or key in seen:
                    continue
                seen.add(key)
                sub = band_layer(op, r.out1 - r.out0, r.pad)
                x = operands[0]
                x_band = TensorType((1, r.in1 - r.in0, *x.shape[2:]), x.dtype)
                out = sub.infer([x_band, *operands[1:]])[0]
                assert isinstance(sub, CmsisCall)
                found.append((k, sub, [x_band, *operands[1:]], out))
        return found

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        types = [TensorType(b.shape, b.dtype) for b in ins]
        parts = self.operand_types(types)
        shapes = [op.infer(p)[0].shape for op, p in zip(self.layers, parts)]
        sizes = self.buffer_bytes(types)
        bufs = [body.scratch(f"band{k}_", "int8", n) if n else None for k, n in enumerate(sizes)]
        at = 1
        weights: List[Tuple[Buffer, Optional[Buffer]]] = []
        for op in self.layers:
            bias = conv_of(op).bias
            weights.append((ins[at], ins[at + 1] if bias else None))
            at += 2 if bias else 1
        if self.spans(types[0]) is not None:
            emit_shared(self, body, ins, outs, bufs, weights)
            return
        x, y = ins[0], outs[0]
        in_row = x.shape[2] * x.shape[3]
        out_row = y.shape[2] * y.shape[3]
        for group in _groups(self.plan(types[0])):
            rows, count = group.rows, group.times
            loop = count > 1
            header = f"for (int32_t t_ = 0; t_ < {count}; ++t_)" if loop else ""
            with body.block(header):
                step_in = f" + t_ * {group.step_in * in_row}" if loop else ""
                step_out = f" + t_ * {group.step_out * out_row}" if loop else ""
                first_in, first_out = rows[0].in0 * in_row, rows[-1].out0 * out_row
                body.line(f"const int8_t* tin_ = (const int8_t*){x.var} + {first_in}{step_in};")
                body.line(f"int8_t* tout_ = (int8_t*){y.var} + {first_out}{step_out};")
                source, source_shape = "tin_", (1, rows[0].in1 - rows[0].in0, *x.shape[2:])
                for k, (op, r) in enumerate(zip(self.layers, rows)):
                    last = k == len(self.layers) - 1
                    held = bufs[k % 2]
                    dest = "tout_" if last or held is None else held.var
                    dest_shape = (1, r.out1 - r.out0, *shapes[k][2:])
                    sub = band_layer(op, r.out1 - r.out0, r.pad)
                    w, b = weights[k]
                    operands = [Buffer(source, "int8", source_shape), w] + ([b] if b else [])
                    with body.block(""):
                        sub.emit(body, operands, [Buffer(dest, "int8", dest_shape)])
                    source, source_shape = dest, dest_shape

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError("LiteRT's reference kernels are this operator's reference")


def first_rows(stage: TiledStage, x: TensorType, span: Span, a: int) -> Tuple[int, Rows]:
    """(virtual rows above, the real rows) the first layer makes for the band from ``a``."""
    heights = stage.heights(x)
    o0 = a * span.out_mul - span.out_off
    r0, r1 = max(0, o0), min(heights[1], o0 + span.out_rows)
    return r0 - o0, layer_rows(stage.layers[0], stage.kernels[0], heights[0], r0, r1)


def _zero_rows(body: Body, buf: str, start: str, rows: int, height: int, row: int, zp: int) -> None:
    """Fills the rows of band buffer ``buf`` outside the tensor (rows ``start`` on, ``rows``
    of them, the tensor's ``height``) with the zero point: the next layer's padding."""
    with body.block(f"if ({start} < 0)"):
        body.line(
            f"__builtin_memset({buf}, {zp}, (-{start} < {rows} ? -{start} : {rows}) * {row});"
        )
    with body.block(f"if ({start} + {rows} > {height})"):
        body.line(f"const int32_t z_ = {height} - {start} > 0 ? {height} - {start} : 0;")
        body.line(f"__builtin_memset({buf} + z_ * {row}, {zp}, ({rows} - z_) * {row});")


def emit_shared(
    stage: TiledStage,
    body: Body,
    ins: Sequence[Buffer],
    outs: Sequence[Buffer],
    bufs: Sequence[Optional[Buffer]],
    weights: Sequence[Tuple[Buffer, Optional[Buffer]]],
) -> None:
    """The stage as one loop over its bands in which each layer after the first is one copy
    of its C, for the band's full rows: the rows of its input outside the tensor hold the
    tensor's zero point, which adds (zp + io)·w = 0 to a sum as padding does, and its own
    rows outside its tensor are set to the zero point after it. The first layer reads the
    stage's input: one copy of its C per clipping of its rows (top, middle, bottom)."""
    x, y = ins[0], outs[0]
    types = [TensorType(b.shape, b.dtype) for b in ins]
    spans = stage.spans(types[0])
    assert spans is not None
    starts = stage.starts(types[0])
    parts = stage.operand_types(types)
    shapes = [op.infer(p)[0].shape for op, p in zip(stage.layers, parts)]
    heights = stage.heights(types[0])
    rows_of = [shape[2] * shape[3] for shape in shapes]
    in_row = x.shape[2] * x.shape[3]
    zps = [-conv_of(op).quant.input_offset for op in stage.layers[1:]]
    # the first layer's copies: bands of one clipping in a run
    keys = []
    for a in starts:
        top, r = first_rows(stage, types[0], spans[0], a)
        keys.append((top, r.in1 - r.in0, r.out1 - r.out0, r.pad))
    runs: List[Tuple[int, Tuple[int, int, int, int]]] = []  # (last band + 1, key)
    for t, key in enumerate(keys):
        if runs and runs[-1][1] == key:
            runs[-1] = (t + 1, key)
        else:
            runs.append((t + 1, key))
    rows = min(stage.band, heights[-1])
    with body.block(f"for (int32_t t_ = 0; t_ < {len(starts)}; ++t_)"):
        body.line(f"const int32_t a_ = t_ * {rows} < {heights[-1] - rows} ? t_ * {rows} : "
                  f"{heights[-1] - rows};")  # fmt: skip
        first = bufs[0]
        assert first is not None
        span = spans[0]
        for number, (end, (top, in_rows, out_rows, pad)) in enumerate(runs):
            opener = "if" if number == 0 else "else if"
            header = f"{opener} (t_ < {end})" if number < len(runs) - 1 else (
                "else" if number else "")  # fmt: skip
            with body.block(header):
                o0 = f"(a_ * {span.out_mul} - {span.out_off} + {top})"
                conv = conv_of(stage.layers[0])
                at = f"({o0} * {conv.strides[0]} - {conv.pads[0]} + {pad})"
                body.line(f"const int8_t* tin_ = (const int8_t*){x.var} + {at} * {in_row};")
                body.line(f"int8_t* d0_ = {first.var} + {top * rows_of[0]};")
                sub = band_layer(stage.layers[0], out_rows, pad)
                w, b = weights[0]
                source = Buffer("tin_", "int8", (1, in_rows, *x.shape[2:]))
                dest = Buffer("d0_", "int8", (1, out_rows, *shapes[0][2:]))
                with body.block(""):
                    sub.emit(body, [source, w] + ([b] if b else []), [dest])
        _zero_rows(body, first.var, f"(a_ * {span.out_mul} - {span.out_off})", span.out_rows,
                   heights[1], rows_of[0], zps[0])  # fmt: skip
        for k in range(1, len(stage.layers)):
            span, last = spans[k], k == len(stage.layers) - 1
            held = bufs[(k - 1) % 2]
            assert held is not None
            source = Buffer(held.var, "int8", (1, span.in_rows, *shapes[k - 1][2:]))
            if last:
                body.line(f"int8_t* tout_ = (int8_t*){y.var} + a_ * {rows_of[k]};")
                dest = Buffer("tout_", "int8", (1, span.out_rows, *shapes[k][2:]))
            else:
                out_buf = bufs[k % 2]
                assert out_buf is not None
                dest = Buffer(out_buf.var, "int8", (1, span.out_rows, *shapes[k][2:]))
            sub = band_layer(stage.layers[k], span.out_rows, 0)
            w, b = weights[k]
            with body.block(""):
                sub.emit(body, [source, w] + ([b] if b else []), [dest])
            if not last:
                _zero_rows(body, dest.var, f"(a_ * {span.out_mul} - {span.out_off})",
                           span.out_rows, heights[k + 1], rows_of[k], zps[k])  # fmt: skip


class _Group(NamedTuple):
    rows: Tuple[Rows, ...]  # the first band's
    times: int
    step_in: int  # rows of the stage's input between bands
    step_out: int  # rows of the stage's output between bands


def _shape_of(rows: Tuple[Rows, ...]) -> Tuple[Tuple[int, int, int], ...]:
    return tuple((r.in1 - r.in0, r.out1 - r.out0, r.pad) for r in rows)


def _groups(plan: Sequence[Tuple[Rows, ...]]) -> List[_Group]:
    """Consecutive bands of one geometry whose offsets step evenly, as loops."""
    groups: List[_Group] = []
    for rows in plan:
        if groups:
            g = groups[-1]
            step_in = rows[0].in0 - g.rows[0].in0
            step_out = rows[-1].out0 - g.rows[-1].out0
            same = _shape_of(rows) == _shape_of(g.rows)
            if same and g.times == 1 and step_in > 0:
                groups[-1] = _Group(g.rows, 2, step_in, step_out)
                continue
            if same and step_in == g.step_in * g.times and step_out == g.step_out * g.times:
                groups[-1] = _Group(g.rows, g.times + 1, g.step_in, g.step_out)
                continue
        groups.append(_Group(rows, 1, 0, 0))
    return groups


def stage_macs(stage: TiledStage, types: Sequence[TensorType], tiled: bool = True) -> int:
    """Multiply-accumulates of the stage's layers, band by band or (``tiled`` False) whole."""
    made = [conv_of(op).out_hw[0] for op in stage.layers]
    spans = stage.spans(types[0]) if tiled else None
    if spans is not None:  # the first layer its real rows, the others every band's span
        starts = stage.starts(types[0])
        made = [len(starts) * span.out_rows for span in spans]
        made[0] = sum(
            first_rows(stage, types[0], spans[0], a)[1].out1
            - first_rows(stage, types[0], spans[0], a)[1].out0
            for a in starts
        )
    elif tiled:
        made = [0] * len(stage.layers)
        for rows in stage.plan(types[0]):
            for k, r in enumerate(rows):
                made[k] += r.out1 - r.out0
    total = 0
    for op, operands, count in zip(stage.layers, stage.operand_types(types), made):
        w = operands[1].shape
        conv = conv_of(op)
        per_pixel = w[1] * w[2] * (w[3] if conv.depthwise else w[0] * w[3])
        total += count * conv.out_hw[1] * per_pixel
    return total
