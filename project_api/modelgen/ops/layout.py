"""Operators that only move data: split, reshape (a view), device copy."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence

import numpy as np

from ..cgen import Body, Buffer, index
from .base import (
    Op,
    Shape,
    TensorType,
    nest,
    require,
)


@dataclass(frozen=True)
class Split(Op):
    """Split into ``sections`` equal parts along ``axis``: one function, several outputs."""

    sections: int = 2
    axis: int = 0

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        require(0 <= self.axis < len(x.shape), f"split axis {self.axis} out of range for {x.shape}")
        require(
            self.sections >= 2 and x.shape[self.axis] % self.sections == 0,
            f"cannot split extent {x.shape[self.axis]} into {self.sections} equal parts",
        )
        shape = list(x.shape)
        shape[self.axis] //= self.sections
        return [TensorType(tuple(shape), x.dtype)] * self.sections

    def name_parts(self) -> List[str]:
        return ["split"]

    def output_names(self) -> List[str]:
        return [f"T_split_{i}" for i in range(self.sections)]

    def emit(self, body: Body, ins: Sequence[Buffer], outs: Sequence[Buffer]) -> None:
        x = ins[0]
        outer = math.prod(x.shape[: self.axis])
        extent, inner = x.shape[self.axis], math.prod(x.shape[self.axis + 1 :])
        part = extent // self.sections
        for number, out in enumerate(outs):
            suffix = "" if number == 0 else f"_{number}"
            dims = [(f"ax0{suffix}", outer), (f"ax1{suffix}", part), (f"ax2{suffix}", inner)]
            with nest(body, dims) as (i0, i1, i2):
                src = index(
                    (i0, extent * inner), (i1, inner), (i2, 1), offset=number * part * inner
                )
                body.line(f"{out[index((i0, part * inner), (i1, inner), (i2, 1))]} = {x[src]};")

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return [np.ascontiguousarray(a) for a in np.split(arrays[0], self.sections, axis=self.axis)]


@dataclass(frozen=True)
class Reshape(Op):
    """A reshape: graph op ``__nop`` (the output is a view of the input's storage)."""

    shape: Shape = ()
    kind = "nop"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        x = types[0]
        shape = list(self.shape)
        if shape.count(-1) == 1:
            known = math.prod(d for d in shape if d != -1)
            shape[shape.index(-1)] = x.size // max(known, 1)
        require(math.prod(shape) == x.size, f"cannot reshape {x.shape} to {self.shape}")
        return [TensorType(tuple(shape), x.dtype)]

    def name_parts(self) -> List[str]:
        return ["reshape"]

    def output_names(self) -> List[str]:
        return ["T_reshape"]

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return [arrays[0].reshape(self.infer([TensorType(arrays[0].shape, "")])[0].shape)]


@dataclass(frozen=True)
class Copy(Op):
    """A device copy: graph op ``__copy`` (the executor copies input to output)."""

    kind = "copy"

    def infer(self, types: Sequence[TensorType]) -> List[TensorType]:
        return [types[0]]

    def name_parts(self) -> List[str]:
        return ["device_copy"]

    def output_names(self) -> List[str]:
        return ["T_copy"]

    def reference(self, arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
        return [arrays[0].copy()]
