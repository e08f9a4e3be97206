"""Helpers of the MLPerf Tiny tests (tests/test_mlperf_*.py): the KWS archives of the corpus,
their reference inputs and outputs, and mlperftiny projects built from them (once per session
and board)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from conftest import corpus_archive

from project_api.driver import Project

KWS_FORMS = {"graph": "kws_int8", "aot": "kws_int8_aot"}
CLIENT = Path(__file__).resolve().parent / "mlperf" / "eembc_client.py"
_built: Dict[Tuple[str, str, Tuple[Tuple[str, str], ...]], Project] = {}
_root: List[Path] = []


def kws_archive(form: str) -> Path:
    """The corpus archive of ``form`` (graph or aot); skips the test when it is absent."""
    archive = corpus_archive(KWS_FORMS[form])
    if archive is None:
        pytest.skip(f"no {KWS_FORMS[form]}.tar in the corpus (MLF_PROJECT_CORPUS)")
    return archive


def reference(form: str) -> Tuple[bytes, np.ndarray]:
    """(input bytes for db, reference output0) of the corpus archive of ``form``."""
    stem = kws_archive(form).with_suffix("")
    inputs = np.load(f"{stem}.inputs.npz")
    outputs = np.load(f"{stem}.outputs.npz")
    return inputs["input_1"].tobytes(), outputs["output0"]


def reference_values(form: str) -> List[int]:
    return [int(v) for v in reference(form)[1].reshape(-1)]


def dataset(
    path: Path, form: str, *, labels: Optional[List[int]] = None, wrong: bool = False
) -> Path:
    """An .npz dataset of the reference sample (``wrong``: with an altered reference)."""
    stem = kws_archive(form).with_suffix("")
    arrays: Dict[str, Any] = dict(np.load(f"{stem}.inputs.npz"))
    output = np.load(f"{stem}.outputs.npz")["output0"].copy()
    if wrong:
        output[0, 0] += 1
    arrays["output0"] = output
    if labels is not None:
        arrays["labels"] = np.asarray(labels)
    np.savez(path, **arrays)
    return path


def mlperftiny_project(form: str, board: str = "host", **options: str) -> Project:
    """A built mlperftiny project of the corpus archive of ``form`` (built once per session
    for the same board and options, in a directory deleted at exit)."""
    key = (form, board, tuple(sorted(options.items())))
    if key not in _built:
        if not _root:
            _root.append(Path(tempfile.mkdtemp(prefix="mlf-mlperf-tests-")))
            atexit.register(shutil.rmtree, _root[0], True)
        directory = _root[0] / f"{form}-{board}-{len(_built)}"
        project = Project.generate(
            kws_archive(form),
            directory,
            board=board,
            project_type="mlperftiny",
            options=dict(options),
        )
        project.build()
        _built[key] = project
    return _built[key]
