"""The Python face of the pipeline: generate, build, flash, and talk to a firmware.

    project = Project.generate("model.tar", "out/proj", board="host")
    project.build()
    project.flash()
    with project.session() as session:
        outputs = session.run({"input_1": array})

The CLI and the Project API server use this same class.

(Interface fixed first so every part of the pipeline can be written against it; the
implementation lands with the generate/build/run work.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Union

PathLike = Union[str, "Path"]
Progress = Callable[[str], None]


class Project:
    """A generated firmware project directory (it contains ``model.tar``)."""

    dir: Path
    options: Dict[str, Any]

    @classmethod
    def generate(
        cls,
        archive: PathLike,
        project_dir: PathLike,
        *,
        board: str = "host",
        project_type: str = "host_driven",
        model: Optional[str] = None,
        options: Optional[Mapping[str, Any]] = None,
        progress: Optional[Progress] = None,
    ) -> Project:
        """Renders the template for one model (or, with ``model="*"``, all models) of
        ``archive`` on ``board`` into ``project_dir``. Options use the Project API option
        names (``compile_definitions``, ``cmsis_path``, ``workspace_size_bytes``, ...)."""
        raise NotImplementedError

    @classmethod
    def open(cls, project_dir: PathLike) -> Project:
        """An existing generated project."""
        raise NotImplementedError

    def build(self, *, progress: Optional[Progress] = None) -> Path:
        """Configures and builds with CMake; returns the firmware file."""
        raise NotImplementedError

    def flash(self) -> None:
        """Loads the firmware onto its target (a no-op for host and QEMU boards)."""
        raise NotImplementedError

    def runner(self) -> Any:
        """A :class:`project_api.run.base.Runner` for the built firmware on this project's
        board (host process, QEMU machine or real board); not started yet."""
        raise NotImplementedError

    def session(self, *, timeout: float = 10.0) -> Any:
        """Starts the firmware and returns a connected transport session (context manager)."""
        raise NotImplementedError
