"""The one entry point of generation: a firmware project (:mod:`.project`) for every project
type but ``library``, whose "project" is an export (:mod:`.export`). It sits above both, so
neither imports the other."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from .export import export_library
from .plan import PathLike, Progress
from .project import generate_firmware
from .project_types import project_type_for


def generate_project(
    archive: PathLike,
    project_dir: PathLike,
    *,
    board: str = "host",
    project_type: str = "host_driven",
    model: Optional[str] = None,
    options: Optional[Mapping[str, Any]] = None,
    progress: Optional[Progress] = None,
    force: bool = False,
) -> Dict[str, Any]:
    """Generates the project (for type ``library``, the export folder); returns what it
    wrote to ``project.json`` (``export.json``)."""
    if project_type_for(project_type).exports_library:
        return export_library(
            archive, project_dir, board=board, model=model, options=options,
            progress=progress, force=force,
        )  # fmt: skip
    return generate_firmware(
        archive, project_dir, board=board, project_type=project_type, model=model,
        options=options, progress=progress, force=force,
    )  # fmt: skip
