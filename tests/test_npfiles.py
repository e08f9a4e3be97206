"""One reader for the .npz/.npy files users give (project_api/npfiles.py): run's inputs,
standalone samples and MLPerf datasets refuse pickles, missing and unreadable files in one line
worded by the caller."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict

import numpy as np
import pytest

from project_api.cli.inputs import load_inputs
from project_api.errors import GenerateError, InputError, MlfProjectError
from project_api.generate.samples import load_npz
from project_api.report.mlperf import load_dataset

MODEL: Dict[str, Any] = {
    "name": "m",
    "inputs": [{"name": "x", "shape": [2], "dtype": "int8"}],
    "outputs": [{"name": "output0", "shape": [2], "dtype": "int8"}],
}

READERS: Dict[str, Callable[[Path], Any]] = {
    "run": lambda p: load_inputs(str(p), MODEL),
    "standalone": lambda p: load_npz(p),
    "mlperf": lambda p: load_dataset(str(p), MODEL),
}
WORDING = {
    "run": (InputError, "input file"),
    "standalone": (GenerateError, "sample inputs"),
    "mlperf": (InputError, "dataset"),
}


def bad_files(tmp_path: Path) -> Dict[str, Path]:
    pickled = tmp_path / "pickled.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"\x93NUMPY garbage")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    return {"pickled": pickled, "garbage": garbage, "empty": empty}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_unreadable_files_are_refused_in_the_callers_words(tmp_path: Path, reader: str) -> None:
    error, what = WORDING[reader]
    for name, path in bad_files(tmp_path).items():
        with pytest.raises(MlfProjectError) as info:
            READERS[reader](path)
        assert isinstance(info.value, error), (name, info.value)
        assert info.value.message.startswith(f"{what} {path}: not a readable"), info.value
    with pytest.raises(error, match=f"^{what} .*missing.npz: no such file$"):
        READERS[reader](tmp_path / "missing.npz")


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_npy_is_the_only_input(tmp_path: Path, reader: str) -> None:
    np.save(tmp_path / "x.npy", np.array([1, 2], dtype=np.int8))
    if reader == "standalone":  # without the model's input name it is refused
        with pytest.raises(GenerateError, match="a .npy holds one array"):
            READERS[reader](tmp_path / "x.npy")
        assert list(load_npz(tmp_path / "x.npy", "x")) == ["x"]
        return
    assert READERS[reader](tmp_path / "x.npy") is not None
