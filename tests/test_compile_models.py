"""Whole models from ``../shared/models`` through ``mlf-project compile``, run on the host and
compared with LiteRT's reference kernels: int8 outputs exactly."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import List

import numpy as np
import pytest
from conftest import CMSIS_NN_SKIP, REPO_ROOT, cmsis_nn_given

from project_api.compile import CmsisNnSource, compile_tflite
from project_api.driver import Project
from project_api.modelgen import compare_outputs

litert = pytest.importorskip(
    "ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert, the test extra) is the oracle"
)

MODELS = REPO_ROOT.parent / "shared" / "models"
RUNS = 4


def shared_model(stem: str) -> Path:
    path = MODELS / f"{stem}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is absent (the shared models live in ../shared/models)")
    return path


def litert_run(path: Path, x: np.ndarray) -> np.ndarray:
    interpreter = litert.Interpreter(
        model_path=str(path), experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


@pytest.mark.parametrize("stem", ["kws_ref_model", "ad01_int8"])  # IC and VWW: by hand
def test_shared_int8_model_equals_litert(stem: str, tmp_path: Path) -> None:
    model = shared_model(stem)
    archive = tmp_path / f"{stem}.tar"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "project_api", "compile", str(model), str(archive)],
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    # CPU time (the wall clock of a loaded machine says nothing): the interpreter's start-up
    # and the compile, well within the 2 s for the compile itself
    seconds = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert seconds < 5, f"compile took {seconds:.1f} s of CPU"
    interpreter = litert.Interpreter(model_path=str(model))
    detail = interpreter.get_input_details()[0]
    project = Project.generate(archive, tmp_path / "project")
    project.build()
    rng = np.random.default_rng(1)
    seen: List[np.ndarray] = []
    with project.session(timeout=60) as session:
        for _ in range(RUNS):
            x = rng.integers(-128, 128, tuple(detail["shape"])).astype(np.int8)
            want = litert_run(model, x)
            got = session.run({detail["name"]: x})["output0"]
            assert got.dtype == np.int8
            np.testing.assert_array_equal(got.reshape(want.shape), want)
            seen.append(want)
    assert len(np.unique(np.concatenate([s.ravel() for s in seen]))) > 2, "degenerate outputs"


def test_float_kws_equals_litert(tmp_path: Path) -> None:
    """Its CONV_2D layers are hybrid (int8 filters on float32 data); rtol 1e-5 (measured: 0)."""
    model = shared_model("kws_ref_model_float32")
    archive = compile_tflite(model, tmp_path / "kws_f32.tar")
    interpreter = litert.Interpreter(model_path=str(model))
    detail = interpreter.get_input_details()[0]
    project = Project.generate(archive, tmp_path / "project")
    project.build()
    rng = np.random.default_rng(2)
    with project.session(timeout=60) as session:
        for _ in range(RUNS):
            x = rng.uniform(-30, 30, tuple(detail["shape"])).astype(np.float32)
            want = litert_run(model, x)
            got = session.run({detail["name"]: x})["output0"].reshape(want.shape)
            assert compare_outputs({"output0": got}, {"output0": want}, rtol=1e-5) == []


@pytest.mark.parametrize(
    "stem, interface",
    [("kws_ref_model", "c"), ("ad01_int8", "c"), ("kws_ref_model_float32", "packed")],
)
def test_shared_model_as_aot_equals_litert(stem: str, interface: str, tmp_path: Path) -> None:
    """The same models compiled for TVM's AOT executor (the float KWS with the packed
    interface, the others with interface c), one build each, on the host: int8 outputs
    equal, float32 within rtol 1e-5 (measured: bit-identical)."""
    model = shared_model(stem)
    archive = compile_tflite(model, tmp_path / f"{stem}.tar", executor="aot", interface=interface)
    interpreter = litert.Interpreter(model_path=str(model))
    detail = interpreter.get_input_details()[0]
    project = Project.generate(archive, tmp_path / "project")
    project.build()
    rng = np.random.default_rng(4)
    with project.session(timeout=60) as session:
        for _ in range(RUNS):
            if detail["dtype"] == np.int8:
                x = rng.integers(-128, 128, tuple(detail["shape"])).astype(np.int8)
            else:
                x = rng.uniform(-30, 30, tuple(detail["shape"])).astype(np.float32)
            want = litert_run(model, x)
            got = session.run({detail["name"]: x})["output0"].reshape(want.shape)
            assert compare_outputs({"output0": got}, {"output0": want}, rtol=1e-5) == []
            if want.dtype == np.int8:
                np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(not cmsis_nn_given(), reason=CMSIS_NN_SKIP)
@pytest.mark.parametrize("stem, executor", [("kws_ref_model", "aot"), ("ad01_int8", "graph")])
def test_shared_model_with_cmsis_nn_equals_litert(
    stem: str, executor: str, tmp_path: Path, cmsis_v7_checkout: Path
) -> None:
    """``compile --cmsis-nn`` on the host (CMSIS-NN's portable C, our forms' portable C): KWS
    as AOT and ad01 as a graph, int8 outputs equal. (On the Cortex-M machines:
    test_compile_cmsis.py.)"""
    model = shared_model(stem)
    source = CmsisNnSource(cmsis_path=str(cmsis_v7_checkout))
    archive = compile_tflite(model, tmp_path / f"{stem}.tar", executor=executor,
                             cmsis_nn=True, source=source)  # fmt: skip
    interpreter = litert.Interpreter(model_path=str(model))
    detail = interpreter.get_input_details()[0]
    project = Project.generate(
        archive, tmp_path / "project", options={"cmsis_path": str(cmsis_v7_checkout)}
    )
    project.build()
    rng = np.random.default_rng(5)
    with project.session(timeout=60) as session:
        for _ in range(RUNS):
            x = rng.integers(-128, 128, tuple(detail["shape"])).astype(np.int8)
            want = litert_run(model, x)
            got = session.run({detail["name"]: x})["output0"]
            np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_archive_states_the_io_quantization(tmp_path: Path) -> None:
    """The Relay text states the int8 input's and output's scale and zero point as TVM's
    does, so read/quant.py (and export's header) find them."""
    from compile_cases import tiny_model

    from project_api.compile import read_tflite
    from project_api.read import open_archive
    from project_api.read.quant import Quantization, tensor_quantization

    path = tmp_path / "tiny.tflite"
    path.write_bytes(tiny_model("int8"))
    model = read_tflite(path)
    want_in = model.tensors[model.inputs[0]].quantization
    want_out = model.tensors[model.outputs[0]].quantization
    assert want_in is not None and want_out is not None
    with open_archive(compile_tflite(path, tmp_path / "tiny.tar")) as archive:
        found = tensor_quantization(archive.models[0])
    assert found.inputs == [Quantization(want_in.scales[0], want_in.zero_points[0])]
    assert found.outputs == [Quantization(want_out.scales[0], want_out.zero_points[0])]


def test_run_takes_a_tflite_and_compiles_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`run model.tflite` compiles into the cache (keyed by the file's hash), generates, builds
    and runs; the output equals LiteRT's; a second run finds the cached archive."""
    import json

    from compile_cases import tiny_model

    from project_api.cli import main

    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "tiny.tflite"
    model.write_bytes(tiny_model("int8"))
    x = np.random.default_rng(3).integers(-128, 128, (1, 5, 5, 2)).astype(np.int8)
    np.savez(tmp_path / "in.npz", input=x)
    argv = ["run", str(model), "--input", str(tmp_path / "in.npz"),
            "--output", str(tmp_path / "out.npz")]  # fmt: skip
    first = main(argv)
    assert first == 0, capsys.readouterr().err
    capsys.readouterr()
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["output0"], litert_run(model, x))
    cached = list((tmp_path / "cache" / "compiled").glob("*.tar"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]
    assert list((tmp_path / "cache" / "compiled").glob("*.tar")) == cached
    assert cached[0].stat().st_mtime_ns >= stamp


def test_project_api_generate_project_takes_a_tflite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TVM's Project API door: generate_project given a .tflite generates from the archive
    compiled into the cache, and the project carries that archive."""
    from compile_cases import tiny_model

    from project_api.read import open_archive
    from project_api.resources import template_dir
    from project_api.serve.handler import ProjectApiHandler

    monkeypatch.setenv("MLF_PROJECT_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "tiny.tflite"
    model.write_bytes(tiny_model("int8"))
    handler = ProjectApiHandler(template_dir())
    options = {"board": "host", "project_type": "host_driven"}
    handler.generate_project(str(model), None, str(tmp_path / "p"), options)
    with open_archive(tmp_path / "p" / "model.tar") as archive:
        assert [spec.name for spec in archive.models[0].inputs] == ["input"]
    assert len(list((tmp_path / "cache" / "compiled").glob("*.tar"))) == 1
