"""Operators that reduce: pooling, softmax, sum."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..cgen import Body, Buffer, float_literal, index
from .base import (
    F32,
    FLOAT_LOWEST,
    Op,
    TensorType,
    nest,
    require,
    require_dtype,
    row_major_strides,
    window_out,
)


@dataclass(frozen=True)
class Pool2D(Op):
    """Max or average pooling without padding, NCHW or NHWC (max also for int8)."""

    mode: str = "max"
    pool: Tuple[int, int] = (2, 2)
    strides: Tuple[int, int] = (2, 2)
    layout: str = "NCHW"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(self.mode in ("max", "avg"), f"pool mode {self.mode!r} unsupported")
        require(
            self.layout in ("NCHW", "NHWC") and len(x.shape) == 4, "pool2d needs 4-d NCHW/NHWC data"
        )
        require_dtype(
            x,
            ["float32"] if self.mode == "avg" else ["float32", "int8"],
            f"{self.mode}_pool2d data",
        )
        h_axis = 2 if self.layout == "NCHW" else 1
        shape = list(x.shape)
        for axis, (k, s) in enumerate(zip(self.pool, self.strides)):
            shape[h_axis + axis] = window_out(x.shape[h_axis + axis], k, s, 0)
        return [TensorType(tuple(shape), x.dtype)]

    def name_parts(self) -> List[str]:
        return [f"nn_{self.mode}_pool2d"]

    def output_names(self) -> List[str]:
        return [f"pool_{self.mode}"]

    def graph_attrs(self) -> Dict[str, str]:
        return {"out_layout": "", "layout": self.layout}

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        h_axis = 2 if self.layout == "NCHW" else 1
        xs, out_strides = row_major_strides(x.shape), row_major_strides(out.shape)
        ctype = "float" if x.dtype == "float32" else "int8_t"
        init = {
            "max": float_literal(FLOAT_LOWEST) if x.dtype == "float32" else "(int8_t)(-128)",
            "avg": "0.000000e+00f",
        }[self.mode]
        dims = [(f"ax{axis}", extent) for axis, extent in enumerate(out.shape)]
        with nest(body, dims) as idx:
            body.line(f"{ctype} acc = {init};")
            with nest(body, [("rv0", self.pool[0]), ("rv1", self.pool[1])]) as (r0, r1):
                terms = [
                    (
                        var,
                        xs[axis]
                        * (self.strides[axis - h_axis] if axis in (h_axis, h_axis + 1) else 1),
                    )
                    for axis, var in enumerate(idx)
                ]
                src = index(*terms, (r0, xs[h_axis]), (r1, xs[h_axis + 1]))
                if self.mode == "max":
                    body.line(f"{ctype} v_ = {x[src]};")
                    body.line("acc = ((acc) > (v_) ? (acc) : (v_));")
                else:
                    body.line(f"acc = (acc + {x[src]});")
            value = (
                "acc"
                if self.mode == "max"
                else f"(acc / {float_literal(self.pool[0] * self.pool[1])})"
            )
            body.line(f"{out[index(*zip(idx, out_strides))]} = {value};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x = arrays[0]
        if self.layout == "NHWC":
            x = x.transpose(0, 3, 1, 2)
        (kh, kw), (sh, sw) = self.pool, self.strides
        oh, ow = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
        windows = [
            x[:, :, r0 : r0 + sh * (oh - 1) + 1 : sh, r1 : r1 + sw * (ow - 1) + 1 : sw]
            for r0 in range(kh)
            for r1 in range(kw)
        ]
        if self.mode == "max":
            result = windows[0]
            for window in windows[1:]:
                result = np.maximum(result, window)
        else:
            total = np.zeros_like(windows[0], dtype=F32)
            for window in windows:
                total = (total + window).astype(F32)
            result = (total / F32(kh * kw)).astype(F32)
        if self.layout == "NHWC":
            result = result.transpose(0, 2, 3, 1)
        return [np.ascontiguousarray(result)]


@dataclass(frozen=True)
class Softmax(Op):
    """Softmax over the last axis, float32 (expf, like TVM's kernel)."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require(len(types[0].shape) >= 1, "softmax needs at least one dimension")
        require_dtype(types[0], ["float32"], "softmax data")
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["nn_softmax"]

    def output_names(self) -> List[str]:
        return ["T_softmax_norm"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x, out = ins[0], outs[0]
        classes = x.shape[-1]
        rows = x.size // classes
        exp = body.scratch("T_softmax_exp", "float32", classes)
        with nest(body, [("i0", rows)]) as (row,):
            body.line(f"float T_softmax_maxelem = {float_literal(FLOAT_LOWEST)};")
            with body.loop("k", classes):
                body.line(f"float v_ = {x[index((row, classes), ('k', 1))]};")
                body.line(
                    "T_softmax_maxelem = ((T_softmax_maxelem) > (v_) ? (T_softmax_maxelem) : (v_));"
                )
            with body.loop("i1", classes):
                at = index((row, classes), ("i1", 1))
                body.line(f"{exp['i1']} = expf(({x[at]} - T_softmax_maxelem));")
            body.line("float T_softmax_expsum = 0.000000e+00f;")
            with body.loop("k_1", classes):
                body.line(f"T_softmax_expsum = (T_softmax_expsum + {exp['k_1']});")
            with body.loop("i1_1", classes):
                at = index((row, classes), ("i1_1", 1))
                body.line(f"{out[at]} = ({exp['i1_1']} / T_softmax_expsum);")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        x = arrays[0]
        peak = x.max(axis=-1, keepdims=True)
        exp = np.exp((x - peak).astype(F32)).astype(F32)
        total = np.zeros(x.shape[:-1] + (1,), F32)
        for k in range(x.shape[-1]):
            total = (total + exp[..., k : k + 1]).astype(F32)
        return [(exp / total).astype(F32)]


@dataclass(frozen=True)
class Sum(Op):
    """Sum of every element into a scalar (shape ``[]``), float32, in index order."""

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        require_dtype(types[0], ["float32"], "sum data")
        return [TensorType((), "float32")]

    def name_parts(self) -> List[str]:
        return ["sum"]

    def output_names(self) -> List[str]:
        return ["x_red"]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        body.line("float x_red_rf = 0.000000e+00f;")
        with nest(body, [("k0", ins[0].size)]) as (k,):
            body.line(f"x_red_rf = (x_red_rf + {ins[0][k]});")
        body.line(f"{outs[0]['0']} = x_red_rf;")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        total = F32(0)
        for value in arrays[0].reshape(-1):
            total = F32(total + value)
        return [np.array(total, dtype=F32)]
