"""Graph executor archives: the runtime executes graph.json as TVM wrote it."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from ...read import Graph, Model
from ..registry import render_registry, unregistered_functions
from ..sizes import WorkspaceEstimate, estimate_workspace
from .base import ExecutorKind, LibraryCode


class GraphExecutor(ExecutorKind):
    name = "graph"

    def graph(self, model: Model) -> Graph:
        return model.require_graph()

    def workspace(self, model: Model, override: Optional[int]) -> WorkspaceEstimate:
        return estimate_workspace(model, override)

    def library(
        self,
        model: Model,
        c_name: str,
        funcs: Sequence[str],
        entry_point: str,
        renames: Mapping[str, str],
    ) -> LibraryCode:
        return system_library(model, c_name, funcs, entry_point, renames)


def system_library(
    model: Model,
    c_name: str,
    funcs: Sequence[str],
    entry_point: str,
    renames: Mapping[str, str],
) -> LibraryCode:
    """TVM's system library, unless ``funcs`` include functions TVM left out of its
    registry: then a registry of our own linking every one of them by name."""
    direct = unregistered_functions(funcs, model.sources)
    if not direct:
        return LibraryCode("", f"{entry_point}()", ())
    symbol = f"mlf_{c_name}_functions"
    text = render_registry(symbol, funcs, model.sources, renames)
    return LibraryCode(text, f"&{symbol}", tuple(direct))
