"""The executor seam: how a model's generated C is driven by the firmware.

A model's executor kind comes from its metadata (``Model.executor``) and is chosen here, once;
the generator, the fit check and ``footprint`` ask the kind, never the model's executor name.
Each kind hands the runtime the same thing, a graph of operator calls over tensors
(:class:`~project_api.read.Graph`), so the C runtime, the device loop and the standalone
runner serve every kind alike:

- :mod:`.graph`: TVM's graph executor archives; the graph is graph.json.
- :mod:`.aot`: AOT archives; the graph is one call of the model's entry point
  (``tvmgen_<mod>_run`` through a generated adapter, or ``__tvm_main__`` packed).
- :mod:`.operator`: operator-style archives; no graph, the functions only (served where the
  host calls them by name: project types whose ``serves_operators`` is set).
"""

from __future__ import annotations

from ...errors import UnsupportedModelError
from ...read import Model
from .aot import AotExecutor
from .base import ExecutorKind, LibraryCode, LibraryRequest
from .graph import GraphExecutor
from .operator import OperatorExecutor

KINDS = {"graph": GraphExecutor(), "aot": AotExecutor(), "operator": OperatorExecutor()}


def executor_for(model: Model) -> ExecutorKind:
    """The executor kind that drives ``model``."""
    kind = KINDS.get(model.executor)
    if kind is None:
        model.require_graph()  # raises the explanation for operator-style archives
        raise UnsupportedModelError(f"model {model.name!r}: no executor {model.executor!r}")
    return kind


__all__ = ["KINDS", "ExecutorKind", "LibraryCode", "LibraryRequest", "executor_for"]
