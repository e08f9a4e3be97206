"""What a session learns about a firmware and its models (tensor specs, model and device
info, run statistics), and numpy arrays to and from a tensor's little-endian bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

import numpy as np

from ..errors import InputError
from ..read.dtypes import BFLOAT16, UnknownDTypeError, dtype_from_code
from . import messages as msg

ModelRef = Union[int, str]


@dataclass(frozen=True)
class TensorSpec:
    """An input or output as the device describes it."""

    name: str
    shape: Tuple[int, ...]
    dtype: str  # TVM spelling: "float32", "int8", "float32x4", ...
    nbytes: int
    dtype_code: int = 0
    dtype_bits: int = 8
    dtype_lanes: int = 1
    raw_name: bytes = b""

    @property
    def numpy_dtype(self) -> Optional[np.dtype]:
        """The numpy dtype of one element, or None (then data travels as raw uint8)."""
        try:
            return dtype_from_code(self.dtype_code, self.dtype_bits, self.dtype_lanes).to_numpy()
        except UnknownDTypeError:
            return None


@dataclass(frozen=True)
class ModelInfo:
    """A model of the firmware. ``error`` is set (and ``error_code`` is its mlf_status)
    when the model failed to initialise on the device; it then has no inputs or outputs."""

    index: int
    name: str
    inputs: Tuple[TensorSpec, ...]
    outputs: Tuple[TensorSpec, ...]
    error: str = ""
    error_code: int = 0

    def input_index(self, which: ModelRef) -> int:
        if isinstance(which, int):
            if not 0 <= which < len(self.inputs):
                raise InputError(
                    f"model {self.name!r} has {len(self.inputs)} inputs, no input {which}"
                )
            return which
        for i, spec in enumerate(self.inputs):
            if spec.name == which:
                return i
        names = ", ".join(repr(s.name) for s in self.inputs) or "none"
        raise InputError(f"model {self.name!r} has no input {which!r} (inputs: {names})")


@dataclass(frozen=True)
class DeviceInfo:
    protocol_version: int
    board: str
    project_type: str
    max_payload: int
    tick_hz: int
    models: Tuple[ModelInfo, ...]


@dataclass(frozen=True)
class RunStats:
    """Timing of one RUN: ``ticks`` counted by the device around mlf_executor_run at
    ``tick_hz``; ``host_seconds`` is the request's round trip seen from Python.
    ``instructions`` is ``ticks * ticks_to_instructions`` when that factor is known (QEMU
    with -icount), else None."""

    ticks: int
    tick_hz: int
    workspace_bytes: int
    host_seconds: float
    ticks_to_instructions: Optional[float] = None
    stack_bytes_used: Optional[int] = None  # deepest stack since boot (Cortex-M), else None
    # Each operator call's workspace, in bytes (the least window it runs in), in the order of
    # the tables' operators: the host's firmware measures them; None elsewhere.
    workspace_marks: Optional[Tuple[int, ...]] = None

    @property
    def device_seconds(self) -> float:
        return self.ticks / self.tick_hz if self.tick_hz else float("nan")

    @property
    def instructions(self) -> Optional[int]:
        if self.ticks_to_instructions is None:
            return None
        return int(round(self.ticks * self.ticks_to_instructions))


def spec_of(name: str, entry: msg.TensorEntry) -> TensorSpec:
    try:
        dtype = str(dtype_from_code(entry.code, entry.bits, entry.lanes))
    except UnknownDTypeError:
        dtype = f"code{entry.code}_bits{entry.bits}x{entry.lanes}"
    return TensorSpec(
        name=name,
        shape=tuple(int(d) for d in entry.shape),
        dtype=dtype,
        nbytes=entry.nbytes,
        dtype_code=entry.code,
        dtype_bits=entry.bits,
        dtype_lanes=entry.lanes,
        raw_name=entry.raw_name,
    )


def tensor_bytes(spec: TensorSpec, value: Any, model: str) -> bytes:
    """The little-endian bytes of value, after checking it against spec."""
    where = f"model {model!r} input {spec.name!r}"
    expected = spec.numpy_dtype
    if expected is None:
        array = np.asarray(value)
        if array.dtype != np.uint8 or array.nbytes != spec.nbytes:
            raise InputError(
                f"{where} has dtype {spec.dtype}, which numpy lacks: give its {spec.nbytes} "
                f"raw bytes as a uint8 array (got {array.dtype} with {array.nbytes} bytes)"
            )
        return array.tobytes()
    if isinstance(value, np.ndarray):
        array = value
        if not _same_dtype(array.dtype, expected):
            raise InputError(
                f"{where} expects dtype {spec.dtype}, got {array.dtype}",
                hint=f"convert with .astype(numpy.{expected.name})"
                if expected is not BFLOAT16
                else "give bfloat16 as raw uint16 words",
            )
    else:
        try:
            array = np.asarray(value, dtype=expected)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{where}: cannot make a {spec.dtype} array of {value!r}") from exc
    if tuple(array.shape) != spec.shape:
        raise InputError(
            f"{where} expects shape {list(spec.shape)}, got {list(array.shape)}",
            hint="reshape it; the firmware was built for this shape",
        )
    data = np.ascontiguousarray(array, dtype=np.dtype(expected).newbyteorder("<")).tobytes()
    if len(data) != spec.nbytes:
        raise InputError(f"{where} is {len(data)} bytes, the device expects {spec.nbytes}")
    return data


def _same_dtype(given: np.dtype, expected: np.dtype) -> bool:
    if expected is BFLOAT16:
        return given.kind == "u" and given.itemsize == 2
    return given.newbyteorder("=") == expected


def tensor_from_bytes(spec: TensorSpec, data: bytearray) -> np.ndarray:
    dtype = spec.numpy_dtype
    if dtype is None:
        return np.frombuffer(data, dtype=np.uint8)
    if dtype is BFLOAT16:
        return np.frombuffer(data, dtype="<u2").astype(BFLOAT16).reshape(spec.shape)
    array = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<"))
    if not array.dtype.isnative:
        array = array.astype(dtype)
    return array.reshape(spec.shape)
