"""Operator-style archives (``tvm.build`` + ``export_model_library_format``, what AutoTVM's
``autotvm_build_func`` writes for every trial): functions and no model graph. Only a firmware
whose host calls the functions by name serves them (``device_protocol=microtvm``); the
runtime's graph is empty and the functions are TVM's system library."""

from __future__ import annotations

from typing import Mapping, Optional

from ...read import Graph, Model
from ..sizes import WorkspaceEstimate, estimate_workspace
from .base import ExecutorKind, LibraryCode, LibraryRequest

_EMPTY = {
    "nodes": [],
    "arg_nodes": [],
    "heads": [],
    "node_row_ptr": [0],
    "attrs": {
        "shape": ["list_shape", []],
        "dltype": ["list_str", []],
        "storage_id": ["list_int", []],
    },
}


class OperatorExecutor(ExecutorKind):
    name = "operator"

    def graph(self, model: Model) -> Graph:
        return Graph.from_dict(_EMPTY, "(operator-style archive: no graph)")

    def workspace(
        self, model: Model, override: Optional[int], adapter: Optional[Mapping[str, int]] = None
    ) -> WorkspaceEstimate:
        return estimate_workspace(model, override, adapter)

    def library(self, request: LibraryRequest) -> LibraryCode:
        return LibraryCode("", f"{request.entry_point}()", ())
