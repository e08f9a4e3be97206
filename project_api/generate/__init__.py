"""Generate: a firmware project for a model on a board, rendered from template_project/.

Entry point: :func:`generate_project` (the driver's ``Project.generate`` calls it). The graph
tables (:mod:`.tables`), the aligned params blob (:mod:`.params_blob`), memory sizes and the
fit check (:mod:`.sizes`) and standalone samples (:mod:`.samples`) are usable on their own.
Its options (:func:`normalize_options`, ...) are :mod:`project_api.options`, re-exported here.
"""

from __future__ import annotations

from ..options import (
    GRAPH_FORMATS,
    OPTIONS,
    PROJECT_TYPES,
    normalize_options,
    parse_option_assignments,
)
from .entry import generate_project
from .plan import (
    ALL_MODELS,
    MODEL_TAR,
    PROJECT_FILE,
    ModelPlan,
    choose_models,
    generator_version,
    memory_fit,
)
from .project import is_generated_project, read_project_info

__all__ = [
    "ALL_MODELS",
    "GRAPH_FORMATS",
    "MODEL_TAR",
    "OPTIONS",
    "PROJECT_FILE",
    "PROJECT_TYPES",
    "ModelPlan",
    "choose_models",
    "generate_project",
    "generator_version",
    "is_generated_project",
    "memory_fit",
    "normalize_options",
    "parse_option_assignments",
    "read_project_info",
]
