"""The bundled example (examples/digits.*): valid, meaningful, small, reproducible."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from project_api.modelgen import catalog, compare_outputs
from project_api.read import open_archive
from project_api.resources import examples_dir

FILES = ("digits.tar", "digits.samples.npz", "digits.reference.npz")


@pytest.fixture(scope="module")
def examples() -> Path:
    directory = examples_dir()
    missing = [name for name in FILES if not (directory / name).is_file()]
    if missing:
        pytest.fail(f"missing {missing} in {directory}: run python examples/make_examples.py")
    return directory


def test_example_files_are_small(examples: Path) -> None:
    assert sum((examples / name).stat().st_size for name in FILES) < 200 * 1024


def test_example_archive_is_valid(examples: Path) -> None:
    with open_archive(examples / "digits.tar") as archive:
        model = archive.model()
        assert (model.name, archive.version) == ("digits", 7)
        assert [(s.name, s.shape, s.dtype) for s in model.inputs] == [
            ("image", (1, 1, 8, 8), "float32")
        ]
        assert [(s.shape, s.dtype) for s in model.outputs] == [((1, 10), "float32")]


def test_example_classifies_its_samples(examples: Path) -> None:
    """Float64 forward pass written here from the archive's params: every label right."""
    samples = np.load(examples / "digits.samples.npz")
    reference = np.load(examples / "digits.reference.npz")
    with open_archive(examples / "digits.tar") as archive:
        w1, b1, w2, b2 = (archive.model().params[f"p{i}"].astype(np.float64) for i in range(4))
    images = samples["image"].reshape(len(samples["labels"]), 64).astype(np.float64)
    logits = np.maximum(images @ w1.T + b1, 0) @ w2.T + b2
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    assert probs.argmax(axis=1).tolist() == samples["labels"].tolist() == list(range(10))
    np.testing.assert_allclose(reference["output0"][:, 0, :], probs, rtol=1e-5, atol=1e-7)


def test_catalog_digits_uses_the_shipped_weights(examples: Path) -> None:
    model = catalog()["digits"]()
    samples = np.load(examples / "digits.samples.npz")
    reference = np.load(examples / "digits.reference.npz")
    for i in range(10):
        got = model.reference({"image": samples["image"][i]})
        assert compare_outputs(got, {"output0": reference["output0"][i]}) == []
    assert model.sample_inputs(3)["image"].shape == (1, 1, 8, 8)


def test_make_examples_reproduces_the_files(examples: Path, tmp_path: Path) -> None:
    script = examples / "make_examples.py"
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (examples / name).read_bytes(), name
