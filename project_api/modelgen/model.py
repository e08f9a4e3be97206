"""GeneratedModel: a lowered network that writes MLF archives and computes expected outputs."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..read.model import TensorSpec
from . import emit, emit_aot, emit_aot_packed
from .lower import Lowered, lower
from .network import Network
from .ops import OperatorFailure

Inputs = Dict[str, np.ndarray]
SampleFn = Callable[[int], Inputs]
Dependencies = Optional[Sequence[Mapping[str, str]]]
PathLike = Union[str, "os.PathLike[str]"]


class GeneratedModel:
    """One model of the factory.

    ``inputs``/``outputs`` are TensorSpecs (outputs are named ``output0..N-1``, like the
    keys of :meth:`reference`). ``companions`` are further models written into the same
    version-7 archive (a multi-model archive); reference and samples are this model's.
    """

    def __init__(
        self,
        network: Network,
        *,
        default_version: int = 7,
        sample_fn: Optional[SampleFn] = None,
        export_datetime: str = emit.DEFAULT_EXPORT_DATETIME,
        description: str = "",
    ) -> None:
        if default_version not in emit.SUPPORTED_VERSIONS:
            raise ValueError(f"version {default_version} unsupported ({emit.SUPPORTED_VERSIONS})")
        self.network = network
        self.name = network.name
        self.inputs: List[TensorSpec] = network.input_specs
        self.outputs: List[TensorSpec] = network.output_specs
        self.default_version = default_version
        self.export_datetime = export_datetime
        self.description = description
        self.companions: Tuple[GeneratedModel, ...] = ()
        self._sample_fn = sample_fn
        self.lowered: Lowered = lower(network)

    def __repr__(self) -> str:
        return f"GeneratedModel({self.name!r}, {len(self.lowered.op_nodes)} ops)"

    # --- what the archive holds -------------------------------------------------------------

    @property
    def params(self) -> Dict[str, np.ndarray]:
        return dict(self.lowered.params)

    @property
    def function_names(self) -> List[str]:
        return sorted(self.lowered.functions)

    @property
    def workspace_size_bytes(self) -> int:
        """Peak operator workspace (TVMBackendAllocWorkspace, 64-byte blocks), as metadata says."""
        return self.lowered.workspace_size_bytes

    @property
    def storage_bytes(self) -> List[int]:
        return list(self.lowered.storage_bytes)

    @property
    def graph_json(self) -> str:
        return emit.graph_json(self.lowered)

    def op_node(self, op_index: int) -> int:
        """Graph node id of the ``op_index``-th operator of the network."""
        return self.lowered.op_nodes[op_index]

    def with_companions(self, *models: GeneratedModel) -> GeneratedModel:
        """This model, written together with ``models`` into one v7 archive."""
        combined = copy.copy(self)
        combined.companions = tuple(models)
        return combined

    def members(
        self,
        *,
        version: Optional[int] = None,
        external_dependencies: Dependencies = None,
        executor: str = "graph",
        interface: str = "c",
    ) -> Dict[str, bytes]:
        """Archive members by path (without ``./``); ``executor="aot"`` writes the model for
        TVM's AOT executor (version 7, one model) with ``interface`` ``c``
        (modelgen/emit_aot.py) or ``packed`` (modelgen/emit_aot_packed.py)."""
        if executor == "aot":
            return aot_archive_members(self, external_dependencies, interface)
        models = [self, *self.companions]
        return archive_members(models, version or self.default_version, external_dependencies)

    def write(
        self,
        path: PathLike,
        *,
        version: Optional[int] = None,
        gzip: bool = False,
        external_dependencies: Dependencies = None,
    ) -> Path:
        """Writes the MLF archive (tar, or gzip'd tar) to ``path``; returns the path."""
        members = self.members(version=version, external_dependencies=external_dependencies)
        return _write_tar(members, Path(path), gzip)

    # --- expected behaviour ---------------------------------------------------------------------

    def reference(self, inputs: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Expected ``output0..N-1``. OperatorFailure (with ``node``/``function``) where the
        C code returns -1."""
        try:
            return self.network.reference(inputs)
        except OperatorFailure as failure:
            if failure.op_index is not None:
                failure.node = self.lowered.op_nodes[failure.op_index]
                failure.function = self.lowered.op_functions[failure.op_index]
            raise

    def sample_inputs(self, seed: int = 0) -> Inputs:
        """Deterministic inputs: floats uniform in [-1, 1), int8 over its range, int32 small."""
        if self._sample_fn is not None:
            return self._sample_fn(seed)
        return random_inputs(self.inputs, seed)


def random_inputs(specs: Sequence[TensorSpec], seed: int) -> Inputs:
    rng = np.random.default_rng(seed)
    inputs: Inputs = {}
    for spec in specs:
        if spec.dtype == "float32":
            data = rng.uniform(-1.0, 1.0, spec.shape).astype(np.float32)
        elif spec.dtype in ("int8", "uint8"):
            info = np.iinfo(spec.dtype)
            data = rng.integers(info.min, info.max, spec.shape, endpoint=True).astype(spec.dtype)
        else:
            data = rng.integers(-1000, 1000, spec.shape, endpoint=True).astype(spec.dtype)
        inputs[spec.name] = np.asarray(data, dtype=spec.dtype)
    return inputs


def archive_members(
    models: Sequence[GeneratedModel], version: int, external_dependencies: Dependencies = None
) -> Dict[str, bytes]:
    """Members of an archive holding ``models`` (several only in version 7)."""
    if version not in emit.SUPPORTED_VERSIONS:
        raise ValueError(
            f"MLF version {version} unsupported (choose from {emit.SUPPORTED_VERSIONS})"
        )
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"model names in one archive must differ: {names}")
    if version < 7 and len(models) != 1:
        raise ValueError(f"version {version} holds exactly one model; use version 7")
    members: Dict[str, bytes] = {}
    modules = {}
    for model in models:
        members.update(emit.module_members(model.lowered, version))
        modules[model.name] = emit.module_metadata(
            model.lowered,
            version,
            export_datetime=model.export_datetime,
            external_dependencies=external_dependencies
            if external_dependencies is not None
            else model.network.external_dependencies,
        )
    if version >= 7:
        document: Dict[str, object] = {"modules": modules, "version": version}
    else:
        document = {**modules[models[0].name], "version": version}
    members["metadata.json"] = emit.metadata_json(document).encode()
    return members


def aot_archive_members(
    model: GeneratedModel, external_dependencies: Dependencies = None, interface: str = "c"
) -> Dict[str, bytes]:
    """The members of a version-7 archive holding ``model`` for the AOT executor."""
    if model.companions:
        raise ValueError("an AOT archive holds one model here")
    if interface == "c":
        members = emit_aot.aot_module_members(model.lowered)
    elif interface == "packed":
        members = emit_aot_packed.aot_packed_members(model.lowered)
    else:
        raise ValueError(f"AOT interface {interface!r}: c or packed")
    deps = (
        external_dependencies
        if external_dependencies is not None
        else model.network.external_dependencies
    )
    meta = emit_aot.aot_module_metadata(
        model.lowered,
        export_datetime=model.export_datetime,
        external_dependencies=[dict(d) for d in deps] if deps else None,
    )
    document = {"modules": {model.name: meta}, "version": 7}
    members["metadata.json"] = emit.metadata_json(document).encode()
    return members


def write_multi_model_archive(
    models: Sequence[GeneratedModel],
    path: PathLike,
    *,
    gzip: bool = False,
    external_dependencies: Dependencies = None,
) -> Path:
    """One version-7 archive holding every model (each with its own lib0 registry)."""
    return _write_tar(archive_members(models, 7, external_dependencies), Path(path), gzip)


def _write_tar(members: Mapping[str, bytes], path: Path, gzip: bool) -> Path:
    data = emit.tar_bytes(members)
    path.write_bytes(emit.gzip_bytes(data) if gzip else data)
    return path


def compare_outputs(
    actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], rtol: float = 1e-5
) -> List[str]:
    """Problems found comparing outputs (empty when they match).

    Integers must match exactly. Floats within ``rtol`` relative to each element, with an
    absolute floor of ``rtol`` times the tensor's largest magnitude, so values that cancel
    to near zero (where a fused multiply-add legitimately differs) do not fail. A flat
    ``actual`` with as many elements as ``expected`` is compared in its shape: an AOT model
    whose archive records only byte sizes hands its outputs back flat.
    """
    problems = []
    for name, want in expected.items():
        if name not in actual:
            problems.append(f"{name}: missing")
            continue
        got = np.asarray(actual[name])
        if got.ndim == 1 and got.size == want.size and got.shape != want.shape:
            got = got.reshape(want.shape)
        if got.shape != want.shape or got.dtype != want.dtype:
            problems.append(
                f"{name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
            )
        elif want.dtype.kind == "f":
            floor = rtol * float(np.max(np.abs(want))) if want.size else 0.0
            bad = np.abs(got - want) > rtol * np.abs(want) + floor
            if np.any(bad):
                worst = float(np.max(np.abs(got - want)))
                problems.append(f"{name}: {int(bad.sum())} elements differ (max |diff| {worst:g})")
        elif not np.array_equal(got, want):
            problems.append(f"{name}: {int((got != want).sum())} elements differ")
    return problems
