"""Where the data directories that travel with the package are.

Installed (wheel or ``pip install .``): ``crt/``, ``template_project/`` and ``boards/`` sit
inside the package directory. In a source checkout they sit beside it, at the top of the
repository. Nothing else in the package should guess these paths.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"mlf-project-api is incomplete: no {name}/ directory beside {_PACKAGE_DIR}"
    )


def crt_dir() -> Path:
    """Our standalone C runtime (headers under ``include/``, sources under ``src/``)."""
    return _data_dir("crt")


def template_dir() -> Path:
    """The Project API template directory (contains ``microtvm_api_server.py``)."""
    return _data_dir("template_project")


def boards_dir() -> Path:
    """Board descriptions (``*.toml``) and the C seam of each board family."""
    return _data_dir("boards")


def examples_dir() -> Path:
    """The bundled example archive(s); shipped inside the package as ``examples/`` data."""
    return _data_dir("examples")
