"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Dict, List

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_ENV = "MLF_PROJECT_CORPUS"


def corpus_dir() -> Path:
    """The real-TVM archive corpus: $MLF_PROJECT_CORPUS, else ../shared/mlf beside the repo."""
    configured = os.environ.get(CORPUS_ENV)
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "mlf"


def corpus_archives() -> List[Path]:
    directory = corpus_dir()
    if not directory.is_dir():
        return []
    return sorted(directory.glob("*.tar"))


@pytest.fixture(scope="session")
def mlf_corpus() -> Path:
    directory = corpus_dir()
    if not directory.is_dir():
        pytest.skip(
            f"no real TVM archive corpus at {directory} "
            f"(set {CORPUS_ENV} to a folder of NAME.tar + NAME.json + NAME.*.npz)"
        )
    return directory


def corpus_case(archive: Path) -> Dict[str, object]:
    """The NAME.json that describes a corpus archive, with paths to its npz files added."""
    stem = archive.with_suffix("")
    info = json.loads(stem.with_suffix(".json").read_text())
    info["archive"] = archive
    info["inputs_npz"] = Path(f"{stem}.inputs.npz")
    info["outputs_npz"] = Path(f"{stem}.outputs.npz")
    return info


def have_tool(name: str) -> bool:
    return shutil.which(name) is not None


requires_arm = pytest.mark.skipif(
    not (have_tool("arm-none-eabi-gcc") and have_tool("qemu-system-arm")),
    reason="needs arm-none-eabi-gcc and qemu-system-arm (apt-get install gcc-arm-none-eabi "
    "libnewlib-arm-none-eabi qemu-system-arm)",
)
