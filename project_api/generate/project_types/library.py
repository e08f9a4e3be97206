"""``library``: no firmware at all: the model as a C library for the user's own firmware
(``mlf-project export``; :mod:`project_api.generate.export` writes it). Generating a project
of this type (e.g. through TVM's Project API client) writes that export folder."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...errors import UnsupportedModelError
from ...read import Model
from .base import ProjectType


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
