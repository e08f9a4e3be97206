"""What the reader hands to the rest of the pipeline: one :class:`Model` per model in an archive."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..errors import UnsupportedModelError
from .dtypes import parse_dtype
from .graph import PSEUDO_FUNCTIONS, Graph

GRAPH_EXPORT_HINT = (
    'build with relay.build(mod, target="c", executor=Executor("graph"), '
    'runtime=Runtime("crt", {"system-lib": True})) and export with '
    "tvm.micro.export_model_library_format(module, path)"
)


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output: name, shape (``()`` is a scalar) and TVM dtype string."""

    name: str
    shape: Tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return parse_dtype(self.dtype).itemsize * math.prod(self.shape)

    @property
    def numpy_dtype(self) -> np.dtype:
        return parse_dtype(self.dtype).to_numpy()

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass
class Model:
    """One validated model of an archive. Paths are absolute, inside ``Archive.root``;
    ``*_member`` fields are the same files relative to the root (as named in messages)."""

    name: str
    executor: str  # "graph" | "aot" | "operator"
    style: str  # "full-model" | "operator"
    targets: List[str]
    metadata: Dict[str, Any]
    root: Path
    graph: Optional[Graph] = None
    graph_member: Optional[str] = None
    params: Dict[str, np.ndarray] = field(default_factory=dict)
    params_member: Optional[str] = None
    sources: List[Path] = field(default_factory=list)
    objects: List[Path] = field(default_factory=list)
    include_dirs: List[Path] = field(default_factory=list)
    inputs: List[TensorSpec] = field(default_factory=list)
    outputs: List[TensorSpec] = field(default_factory=list)
    workspace_bytes: int = 0
    external_dependencies: List[dict] = field(default_factory=list)
    metadata_functions: List[str] = field(default_factory=list)
    aot: Optional[Any] = None  # read.aot.AotEntry for AOT models: how the firmware calls them
    arm_dsp: bool = False  # its C calls Arm DSP intrinsics (arm_acle.h): DSP cores only

    @property
    def params_path(self) -> Optional[Path]:
        return self.root / self.params_member if self.params_member else None

    @property
    def param_count(self) -> int:
        return len(self.params)

    @property
    def params_bytes(self) -> int:
        return sum(int(array.nbytes) for array in self.params.values())

    @property
    def storage_bytes(self) -> int:
        """Graph storage plan: sum over storage ids of the largest entry (0 without a graph)."""
        return self.graph.storage_bytes() if self.graph else 0

    @property
    def op_count(self) -> int:
        if self.graph is None:
            return len(self.metadata_functions)
        return sum(1 for _ in self.graph.op_nodes())

    @property
    def operator_functions(self) -> List[str]:
        """Distinct generated functions called, in first-use order (no __nop/__copy)."""
        if self.graph is None:
            return list(self.metadata_functions)
        names: Dict[str, None] = {}
        for _, node in self.graph.op_nodes():
            if node.func_name not in PSEUDO_FUNCTIONS:
                names.setdefault(node.func_name, None)
        return list(names)

    def require_graph(self) -> Graph:
        """The graph, or UnsupportedModelError explaining why AOT/operator models have none."""
        if self.graph is not None:
            return self.graph
        if self.executor == "aot":
            what = "an AOT model (TVM generated a tvmgen_<mod>_run() entry point, no graph.json)"
        else:
            what = "an operator-style archive (functions from tvm.build, no model graph)"
        raise UnsupportedModelError(
            f"model {self.name!r} is {what}; this operation needs a graph executor archive",
            hint=GRAPH_EXPORT_HINT,
        )

    def summary(self) -> Dict[str, Any]:
        """The JSON-friendly description ``mlf-project info --json`` prints."""
        return {
            "name": self.name,
            "executor": self.executor,
            "style": self.style,
            "targets": list(self.targets),
            "inputs": [spec.to_dict() for spec in self.inputs],
            "outputs": [spec.to_dict() for spec in self.outputs],
            "param_count": self.param_count,
            "params_bytes": self.params_bytes,
            "storage_bytes": self.storage_bytes,
            "workspace_bytes": self.workspace_bytes,
            "op_count": self.op_count,
            "operator_functions": self.operator_functions,
            "external_dependencies": list(self.external_dependencies),
            "aot": self.aot.describe() if self.aot is not None else None,
            "arm_dsp": self.arm_dsp,
            "graph": self.graph_member,
            "params": self.params_member,
            "sources": [str(path.relative_to(self.root)) for path in self.sources],
            "objects": [str(path.relative_to(self.root)) for path in self.objects],
        }
