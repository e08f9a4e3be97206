"""What every executor kind provides to the generator (:class:`ExecutorKind`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ...read import Graph, Model
from ..sizes import WorkspaceEstimate
from ..tables import GraphTables


@dataclass(frozen=True)
class LibraryCode:
    """C placed in ``model_<mod>.c`` before the executor is set up, and the expression that
    gives the executor its function library (a ``const TVMModule*``, ``NULL`` when the
    functions are bound by address instead: ``func_ptrs`` names their array)."""

    c_text: str
    library: str
    linked_by_name: Sequence[str] = ()  # functions reached by name, outside TVM's registry
    func_ptrs: str = ""  # C array of the graph's functions in the tables' order, or ""


@dataclass(frozen=True)
class LibraryRequest:
    """What the generator knows when it asks a kind for a model's function library."""

    model: Model
    c_name: str  # the model's C identifier in the firmware
    funcs: Sequence[str]  # the functions the graph calls, by name
    entry_point: str  # TVMSystemLibEntryPoint as renamed for this model
    renames: Mapping[str, str]  # functions given another C symbol at compile time
    bound: bool = False  # the tables may take the functions' addresses (const tables)


class ExecutorKind:
    """One way of driving a model's generated C. Subclasses override every method."""

    name = ""

    def graph(self, model: Model) -> Graph:
        """The operator calls the runtime executes for ``model``."""
        raise NotImplementedError

    def graph_format(self, requested: str) -> str:
        """How the graph reaches the device (``tables`` or ``json``) given the option."""
        return requested

    def workspace(
        self, model: Model, override: Optional[int], adapter: Optional[Mapping[str, int]] = None
    ) -> WorkspaceEstimate:
        """The ``TVMBackendAllocWorkspace`` pool the model's C needs, with ``adapter``'s bytes
        ({function: bytes} the CMSIS-NN adapter takes during that function's calls)."""
        raise NotImplementedError

    def library(self, request: LibraryRequest) -> LibraryCode:
        """The function library the executor resolves ``request.funcs`` in."""
        raise NotImplementedError

    def windows(
        self,
        model: Model,
        tables: GraphTables,
        workspace: WorkspaceEstimate,
        override: Optional[int],
    ) -> List[int]:
        """Each operator call's workspace window (bytes), in ``tables``' operator order: by
        default the model's whole workspace for every call (an AOT model's one call)."""
        return [workspace.bytes for _ in tables.ops]

    def ram_items(self, model: Model) -> Dict[str, int]:
        """RAM the model's own C reserves (beyond arena, workspace, state), by name."""
        return {}

    def flash_items(self, model: Model) -> Dict[str, int]:
        """Flash the generator adds for the model beyond params and graph, by name."""
        return {}

    def describe(self, model: Model) -> Dict[str, Any]:
        """What project.json records about the kind."""
        return {"executor": self.name}
