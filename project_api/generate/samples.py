"""Sample inputs (and expected outputs) embedded in a ``standalone`` firmware.

Where they come from, first match wins:

1. option ``sample_inputs``: an ``.npz`` whose keys are input names (and, optionally,
   ``output0..N-1`` expected outputs);
2. files beside the archive, ``<stem>.samples.npz`` / ``<stem>.inputs.npz`` with
   ``<stem>.reference.npz`` / ``<stem>.outputs.npz`` (the bundled example, the corpus), when
   their names and shapes fit the model;
3. deterministic random inputs (seed 0), without expected outputs.

An array of the tensor's shape is one sample; an array with one more leading dimension holds
one sample per row. In the blob every tensor starts on a 64-byte boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..errors import GenerateError, InputError
from ..npfiles import load_arrays
from ..read.dtypes import UnknownDTypeError, parse_dtype

ALIGN = 64
MAX_BUNDLED_SAMPLES = 16


@dataclass
class SampleSet:
    """``inputs[k]`` are the input arrays (in model input order) of sample k; ``expected[k]``
    its expected outputs (in output order) or None."""

    source: str
    inputs: List[List[np.ndarray]] = field(default_factory=list)
    expected: List[Optional[List[np.ndarray]]] = field(default_factory=list)
    offsets_in: List[List[int]] = field(default_factory=list)
    offsets_out: List[Optional[List[int]]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.inputs)

    def describe(self) -> Dict[str, Any]:
        return {
            "source": self.source,
            "count": self.count,
            "expected_outputs": any(e is not None for e in self.expected),
        }

    def to_blob(self) -> bytes:
        """The tensors back to back, each 64-byte aligned; records every offset."""
        out = bytearray()
        self.offsets_in = []
        self.offsets_out = []

        def put(array: np.ndarray) -> int:
            out.extend(b"\0" * ((-len(out)) % ALIGN))
            offset = len(out)
            out.extend(le_bytes(array))
            return offset

        for inputs, expected in zip(self.inputs, self.expected):
            self.offsets_in.append([put(a) for a in inputs])
            self.offsets_out.append(None if expected is None else [put(a) for a in expected])
        return bytes(out)


def le_bytes(array: np.ndarray) -> bytes:
    """The array's data as little-endian bytes (what the device holds)."""
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and np.little_endian is False):
        array = array.astype(array.dtype.newbyteorder("<"))
    return array.tobytes()


def load_npz(path: Any, npy_name: Optional[str] = None) -> Dict[str, np.ndarray]:
    """The arrays of an .npz by key; a .npy's one array keyed ``npy_name`` (the model's only
    input), refused when there is none."""
    loaded = load_arrays(path, what="sample inputs", error=GenerateError, kinds=".npz file")
    if isinstance(loaded, dict):
        return loaded
    if npy_name is None:
        raise GenerateError(
            f"sample inputs {path}: a .npy holds one array; give an .npz keyed by input "
            "name (and output0..N-1 for expected outputs)"
        )
    return {npy_name: loaded}


def input_numpy_dtype(name: str, dtype: str) -> np.dtype:
    """The numpy dtype of input `name`; InputError for dtypes numpy has no match for (int4,
    handle, vector lanes): the host makes and hands over inputs as numpy arrays."""
    try:
        return parse_dtype(dtype).to_numpy()
    except UnknownDTypeError as err:
        raise InputError(
            f"input {name!r}: {err}, and the host passes inputs as numpy arrays: it can "
            "neither make nor send this one"
        ) from None


def _spec_shape_dtype(spec: Any) -> Tuple[Tuple[int, ...], np.dtype]:
    return tuple(spec.shape), input_numpy_dtype(spec.name, spec.dtype)


def _split_samples(
    name: str, array: np.ndarray, shape: Tuple[int, ...], dtype: np.dtype, where: str
) -> List[np.ndarray]:
    if array.dtype != dtype:
        raise InputError(f"{where}: {name} has dtype {array.dtype}, the model wants {dtype}")
    if tuple(array.shape) == shape:
        return [array]
    if array.ndim == len(shape) + 1 and tuple(array.shape[1:]) == shape:
        return [array[i] for i in range(array.shape[0])]
    raise InputError(
        f"{where}: {name} has shape {list(array.shape)}, the model wants {list(shape)} "
        f"(or [N, {', '.join(str(d) for d in shape)}] for N samples)"
    )


def from_arrays(
    model: Any,
    inputs: Mapping[str, np.ndarray],
    outputs: Optional[Mapping[str, np.ndarray]],
    source: str,
    limit: Optional[int] = None,
) -> SampleSet:
    """Samples from arrays keyed by input name (and ``output<i>``); InputError when they do
    not fit the model."""
    missing = [spec.name for spec in model.inputs if spec.name not in inputs]
    if missing:
        expected = ", ".join(f"{s.name} {list(s.shape)} {s.dtype}" for s in model.inputs)
        raise InputError(
            f"{source}: no sample for input {', '.join(repr(m) for m in missing)} "
            f"(the model's inputs: {expected})"
        )
    per_input: List[List[np.ndarray]] = []
    for spec in model.inputs:
        shape, dtype = _spec_shape_dtype(spec)
        per_input.append(_split_samples(spec.name, inputs[spec.name], shape, dtype, source))
    counts = {len(x) for x in per_input}
    if len(counts) > 1:
        raise InputError(f"{source}: the inputs hold different numbers of samples {sorted(counts)}")
    count = counts.pop() if counts else 1
    per_output: Optional[List[List[np.ndarray]]] = None
    if outputs:
        keys = [f"output{i}" for i in range(len(model.outputs))]
        if all(k in outputs for k in keys):
            per_output = []
            for key, spec in zip(keys, model.outputs):
                shape, dtype = _spec_shape_dtype(spec)
                per_output.append(_split_samples(key, outputs[key], shape, dtype, source))
            if {len(x) for x in per_output} != {count}:
                raise InputError(
                    f"{source}: expected outputs hold a different number of samples than inputs"
                )
    if limit is not None:
        count = min(count, limit)
    result = SampleSet(source)
    for k in range(count):
        result.inputs.append([x[k] for x in per_input])
        result.expected.append(None if per_output is None else [y[k] for y in per_output])
    return result


def random_samples(model: Any, seed: int = 0) -> SampleSet:
    """Deterministic inputs: floats uniform in [-1, 1), integers over a small range."""
    rng = np.random.default_rng(seed)
    inputs = []
    for spec in model.inputs:
        shape, dtype = _spec_shape_dtype(spec)
        if dtype.kind == "f":
            data = rng.uniform(-1.0, 1.0, shape).astype(dtype)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            low, high = max(info.min, -100), min(info.max, 100)
            data = rng.integers(low, high, shape, endpoint=True).astype(dtype)
        else:
            data = np.zeros(shape, dtype=dtype)
        inputs.append(np.asarray(data, dtype=dtype))
    result = SampleSet("random (seed 0)")
    result.inputs.append(inputs)
    result.expected.append(None)
    return result


def random_inputs(specs: Sequence[Any], seed: int = 0) -> Dict[str, np.ndarray]:
    """The same deterministic inputs as :func:`random_samples`, keyed by input name."""

    class _M:
        inputs = list(specs)

    sample = random_samples(_M(), seed)
    return {spec.name: array for spec, array in zip(specs, sample.inputs[0])}


def archive_stem(archive_path: Path) -> str:
    """The archive's name without .tar, .tar.gz or .tgz: what the files beside it start with."""
    stem = archive_path.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if stem.endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def _beside_archive(archive_path: Path) -> Tuple[Optional[Path], Optional[Path]]:
    stem = archive_stem(archive_path)
    folder = archive_path.parent
    inputs = next(
        (
            folder / f"{stem}{s}"
            for s in (".samples.npz", ".inputs.npz")
            if (folder / f"{stem}{s}").is_file()
        ),
        None,
    )
    outputs = next(
        (
            folder / f"{stem}{s}"
            for s in (".reference.npz", ".outputs.npz")
            if (folder / f"{stem}{s}").is_file()
        ),
        None,
    )
    return inputs, outputs


def choose_samples(model: Any, sample_inputs: Optional[str], archive: Any) -> SampleSet:
    """The samples a standalone firmware embeds for ``model`` (see the module docstring)."""
    if sample_inputs:
        path = Path(sample_inputs)
        arrays = load_npz(path, model.inputs[0].name if len(model.inputs) == 1 else None)
        given = {k: v for k, v in arrays.items() if k.startswith("output")}
        return from_arrays(model, arrays, given, str(path))
    archive_path = Path(getattr(archive, "path", ""))
    inputs_path, outputs_path = _beside_archive(archive_path)
    if inputs_path is not None:
        try:
            inputs = load_npz(inputs_path)
            outputs = load_npz(outputs_path) if outputs_path is not None else None
            return from_arrays(model, inputs, outputs, inputs_path.name, MAX_BUNDLED_SAMPLES)
        except (InputError, GenerateError):
            pass  # samples of another model of the archive: fall back to random inputs
    return random_samples(model)
