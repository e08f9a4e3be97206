"""``library``: no firmware at all: the model as a C library for the user's own firmware
(``mlf-project export``; :mod:`project_api.generate.export` writes it). Generating a project
of this type (e.g. through TVM's Project API client) writes that export folder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Sequence

from ...errors import UnsupportedModelError
from ...read import Model
from ..registry import defined_functions
from .base import ProjectType

if TYPE_CHECKING:  # pragma: no cover
    from ..plan import ModelPlan


class Library(ProjectType):
    name = "library"
    driven_by = "the user's own firmware (the C API in <model>.h)"
    cli_command = "mlf-project export"
    exports_library = True
    # Each model's arena is the one its user hands <model>_init(): never one shared.
    shares_arena = False

    def check(self, models: Sequence[Model], opts: Mapping[str, Any]) -> None:
        for model in models:
            if model.executor == "operator":
                raise UnsupportedModelError(
                    f"model {model.name!r} is an operator-style archive (functions, no graph): "
                    "there is no model to export as a library",
                    hint="export an archive of a whole model (graph or AOT executor)",
                )

    def symbol_renames(self, plans: Sequence[ModelPlan]) -> List[Dict[str, str]]:
        """Every function a model's C defines, and its system library's entry point, under the
        model's C prefix (``tvmgen_default_run`` → ``<name>_tvmgen_default_run``): two
        exports of models TVM named alike link into one firmware."""
        renames = []
        for plan in plans:
            names = {
                function: f"{plan.c_name}_{function.lstrip('_')}"
                for function in sorted(defined_functions(plan.model.sources))
            }
            names["TVMSystemLibEntryPoint"] = plan.entry_point
            renames.append(names)
        return renames
