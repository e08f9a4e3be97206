"""The ecosystems' own tools the export tests check packages with (platformio,
idf-component-manager, pykwalify, kconfiglib), in a venv of their own outside the repository
(their pins would fight the project's): ``python tests/export_tools.py`` makes it (.ci/setup
runs it); $MLF_EXPORT_TOOLS names another. Tests skip, saying how, when it is absent."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

PACKAGES = ["platformio==6.2.0", "idf-component-manager==3.1.2", "pykwalify==1.8.0",
            "kconfiglib==14.1.0"]  # fmt: skip
ENV = "MLF_EXPORT_TOOLS"


def tools_dir() -> Path:
    given = os.environ.get(ENV)
    if given:
        return Path(given)
    return Path.home() / ".cache" / "mlf-project-api" / "export-tools" / "venv"


def tool(name: str) -> Path:
    path = tools_dir() / "bin" / name
    if not path.is_file():
        pytest.skip(
            f"{name} is not in {tools_dir()} (run `python tests/export_tools.py`, as "
            f".ci/setup does, or set {ENV} to a venv holding {' '.join(PACKAGES)})"
        )
    return path


def tools_python(needs: str) -> Path:
    tool(needs)  # skips when the tool is absent
    return tools_dir() / "bin" / "python"


def prepare() -> Path:
    directory = tools_dir()
    marker = directory / ".mlf-packages"
    if marker.is_file() and marker.read_text() == "\n".join(PACKAGES):
        return directory
    venv.create(directory, with_pip=True, clear=True)
    pip = [str(directory / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run(pip + PACKAGES, check=True)
    marker.write_text("\n".join(PACKAGES))
    return directory


if __name__ == "__main__":
    print(f"export_tools: {prepare()}", file=sys.stderr)
