"""Graph executor archives: the runtime executes graph.json as TVM wrote it."""

from __future__ import annotations

from typing import List, Mapping, Optional

from ...read import Graph, Model
from ..operator_workspace import operator_windows
from ..registry import function_pointers_c, render_registry, unregistered_functions
from ..sizes import WorkspaceEstimate, estimate_workspace
from ..tables import GraphTables
from .base import ExecutorKind, LibraryCode, LibraryRequest


class GraphExecutor(ExecutorKind):
    name = "graph"

    def graph(self, model: Model) -> Graph:
        return model.require_graph()

    def workspace(
        self, model: Model, override: Optional[int], adapter: Optional[Mapping[str, int]] = None
    ) -> WorkspaceEstimate:
        return estimate_workspace(model, override, adapter)

    def library(self, request: LibraryRequest) -> LibraryCode:
        return system_library(request)

    def windows(
        self,
        model: Model,
        tables: GraphTables,
        workspace: WorkspaceEstimate,
        override: Optional[int],
    ) -> List[int]:
        """Each call's window: what its function asks (:mod:`..operator_workspace`), with the
        CMSIS-NN adapter's scratch for the kernels it calls."""
        return operator_windows(model, tables, workspace.bytes, override, dict(workspace.adapter))


def system_library(request: LibraryRequest) -> LibraryCode:
    """For const tables, the functions' addresses when the sources define them all;
    otherwise TVM's system library, unless the graph calls functions TVM left out of its
    registry: then a registry of our own linking every one of them by name."""
    sources = request.model.sources
    direct = unregistered_functions(request.funcs, sources)
    if request.bound:
        array = f"mlf_{request.c_name}_func_ptrs"
        text = function_pointers_c(array, request.funcs, sources, request.renames)
        if text is not None:
            return LibraryCode(text, "NULL", tuple(direct), func_ptrs=array)
    if not direct:
        return LibraryCode("", f"{request.entry_point}()", ())
    symbol = f"mlf_{request.c_name}_functions"
    text = render_registry(symbol, request.funcs, sources, request.renames)
    return LibraryCode(text, f"&{symbol}", tuple(direct))
