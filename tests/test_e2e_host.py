"""End to end on the ``host`` board through ``mlf-project run``: every factory model, every
real TVM archive of the corpus, multi-model archives both ways, the standalone project type,
the demo; and the failure modes (device killed mid-run, corrupt frames, time-outs) ending in
a clear error with the process and pty cleaned up.

Builds are shared: each model is generated and built once (two at a time) by a module
fixture; ``mlf-project run --project-dir`` then finds the project up to date and reuses it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from conftest import CMSIS_NN_SKIP, cmsis_nn_given, corpus_archives, corpus_case
from workspace_marks import run_json_problems

from project_api.cli import main
from project_api.driver import Project
from project_api.errors import (
    DeviceError,
    ProtocolError,
    TransportClosedError,
    TransportTimeoutError,
)
from project_api.modelgen import GeneratedModel, catalog, compare_outputs
from project_api.run.base import live_children

pytestmark = pytest.mark.slow

CATALOG = sorted(catalog())


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def build_all(jobs: List[Tuple[Path, Path, Dict[str, Any]]]) -> Dict[Path, Any]:
    """Generates and builds each (archive, project_dir, generate kwargs), two at a time;
    returns project_dir -> Project, or the exception it raised."""

    def one(job: Tuple[Path, Path, Dict[str, Any]]) -> Any:
        archive, project_dir, kwargs = job
        try:
            project = Project.generate(archive, project_dir, **kwargs)
            project.build()
            return project
        except Exception as err:  # noqa: BLE001 - reported by the test that needs it
            return err

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([j[1] for j in jobs], pool.map(one, jobs)))


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> Tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# --- the factory models -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def factory(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp("factory")
    models: Dict[str, GeneratedModel] = {name: catalog()[name]() for name in CATALOG}
    jobs = []
    for name, model in models.items():
        archive = model.write(root / f"{name}.tar")
        kwargs = {"model": model.name} if model.companions else {}
        jobs.append((archive, root / name, kwargs))
    built = build_all(jobs)
    return {"root": root, "models": models, "built": built}


@pytest.mark.parametrize("name", CATALOG)
def test_factory_model_runs_on_host(
    name: str, factory: Dict[str, Any], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    root: Path = factory["root"]
    model: GeneratedModel = factory["models"][name]
    built = factory["built"][root / name]
    if isinstance(built, Exception):
        raise built
    inputs = model.sample_inputs()
    np.savez(tmp_path / "in.npz", **inputs)
    argv = ["run", root / f"{name}.tar", "--project-dir", root / name]
    argv += ["--input", tmp_path / "in.npz", "--output", tmp_path / "out.npz", "--json"]
    if model.companions:
        argv += ["--model", model.name]
    status, out, err = run_cli(capsys, *argv)
    assert status == 0, err
    assert "generating" not in err  # the shared build was found up to date
    document = json.loads(out)
    assert document["board"] == "host" and document["seconds"] > 0
    assert document["instructions"] is None
    assert run_json_problems(document) == []  # every call's workspace within its window
    outputs = dict(np.load(tmp_path / "out.npz"))
    assert compare_outputs(outputs, model.reference(inputs)) == []
    assert sorted(document["outputs"]) == sorted(outputs)
    assert live_children() == []


# --- the real TVM archives ----------------------------------------------------------------------


def _corpus_params() -> List[Any]:
    archives = corpus_archives(aot=True)
    if not archives:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no corpus (MLF_PROJECT_CORPUS)"))]
    params = []
    for archive in archives:
        marks = []
        if "_cmsisnn" in archive.name and not cmsis_nn_given():
            marks.append(pytest.mark.skip(reason=CMSIS_NN_SKIP))
        params.append(pytest.param(archive, id=archive.stem, marks=marks))
    return params


@pytest.fixture(scope="module")
def corpus_projects(
    tmp_path_factory: pytest.TempPathFactory, cmsis_nn_checkout: Optional[Path]
) -> Dict[Path, Any]:
    root = tmp_path_factory.mktemp("corpus")
    jobs = []
    for archive in corpus_archives(aot=True):
        if "_cmsisnn" in archive.name and cmsis_nn_checkout is None:
            continue
        case = corpus_case(archive)
        kwargs: Dict[str, Any] = {}
        if "all_models" in case:
            kwargs["model"] = case["model_name"]
        if "_cmsisnn" in archive.name:
            kwargs["options"] = {"cmsis_path": str(cmsis_nn_checkout)}
        jobs.append((archive, root / archive.stem, kwargs))
    return build_all(jobs)


@pytest.mark.parametrize("archive", _corpus_params())
def test_corpus_archive_runs_on_host(
    archive: Optional[Path],
    corpus_projects: Dict[Path, Any],
    capsys: pytest.CaptureFixture,
    tmp_path: Path,
) -> None:
    assert archive is not None
    case = corpus_case(archive)
    project = next((p for d, p in corpus_projects.items() if d.name == archive.stem), None)
    if isinstance(project, Exception):
        raise project
    assert project is not None
    argv = ["run", project.dir, "--input", case["inputs_npz"], "--output", tmp_path / "o.npz"]
    status, out, err = run_cli(capsys, *argv, "--json")
    assert status == 0, err
    assert run_json_problems(json.loads(out)) == []  # every call's workspace within its window
    outputs = dict(np.load(tmp_path / "o.npz"))
    reference = dict(np.load(str(case["outputs_npz"])))
    assert compare_outputs(outputs, reference, rtol=1e-5) == []
    assert live_children() == []


def test_multi_model_archive_both_ways(
    mlf_corpus: Path, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    case = corpus_case(mlf_corpus / "multi_module.tar")
    reference = dict(np.load(str(case["outputs_npz"])))
    inputs = dict(np.load(str(case["inputs_npz"])))
    # Without --model: a clear error naming the models.
    status, _, err = run_cli(capsys, "run", case["archive"])
    assert status == 2 and "2 models: mlp, mnist" in err and "--model" in err
    # Every model in one firmware, names kept apart; mnist answers with its reference.
    project = Project.generate(case["archive"], tmp_path / "all", model="*")
    project.build()
    with project.session() as session:
        assert [m.name for m in session.models] == ["mlp", "mnist"]
        outputs = session.run(inputs, model="mnist")
        assert compare_outputs(outputs, reference) == []
        mlp_inputs = {s.name: np.zeros(s.shape, np.float32) for s in session.model("mlp").inputs}
        assert session.run(mlp_inputs, model="mlp")["output0"].shape == (1, 4)
    # The same through the CLI: the npz feeds mnist, mlp runs on random inputs.
    status, out, err = run_cli(
        capsys, "run", project.dir, "--model", "*", "--input", case["inputs_npz"],
        "--output", tmp_path / "all.npz",
    )  # fmt: skip
    assert status == 0, err
    assert "model mlp runs on deterministic random inputs" in err
    both = dict(np.load(tmp_path / "all.npz"))
    assert compare_outputs({"output0": both["mnist.output0"]}, reference) == []


def test_models_share_one_arena_and_run_alternately(tmp_path: Path) -> None:
    """Both models of a firmware (--model '*') live in one arena, the larger one's: run
    alternately, each gives bit for bit what it gave before the other ran, and a model's
    tensors that the other model overwrote are refused, not served."""
    pair = catalog()["cnn_pair"]()
    models = {"cnn_nchw": pair, "cnn_nhwc": pair.companions[0]}
    project = Project.generate(pair.write(tmp_path / "pair.tar"), tmp_path / "p", model="*")
    arenas = [int(m["sizes"]["arena_bytes"]) for m in project.models]
    assert project.info["shared_arena_bytes"] == max(arenas) < sum(arenas)
    assert all(m["shares_arena"] for m in project.models)
    project.build()
    first: Dict[str, Dict[str, np.ndarray]] = {}
    with project.session() as session:
        for round_ in range(3):
            for name, model in models.items():
                inputs = model.sample_inputs(seed=round_ % 2)
                outputs = session.run(inputs, model=name)
                assert compare_outputs(outputs, model.reference(inputs)) == []
                expected = first.setdefault(f"{name}{round_ % 2}", outputs)
                assert all(np.array_equal(outputs[k], expected[k]) for k in expected)
        inputs = models["cnn_nchw"].sample_inputs()
        session.run(inputs, model="cnn_nchw")
        session.run(models["cnn_nhwc"].sample_inputs(), model="cnn_nhwc")
        with pytest.raises(DeviceError, match="tensors are gone: model 1 has used the arena"):
            session.get_output(0, model="cnn_nchw")
        for index, value in enumerate(inputs.values()):
            session.set_input(index, value, model="cnn_nchw")
        session.invoke(model="cnn_nchw")
        assert np.array_equal(
            session.get_output(0, model="cnn_nchw"), first["cnn_nchw0"]["output0"]
        )


# --- standalone ----------------------------------------------------------------------------------


def test_standalone_matches_expected_outputs(
    factory: Dict[str, Any], capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    model: GeneratedModel = factory["models"]["cnn_int8"]
    archive = factory["root"] / "cnn_int8.tar"
    inputs = model.sample_inputs()
    expected = model.reference(inputs)
    np.savez(tmp_path / "good.npz", **inputs, **expected)
    project = Project.generate(
        archive,
        tmp_path / "p",
        project_type="standalone",
        options={"sample_inputs": str(tmp_path / "good.npz")},
    )
    project.build()
    result = project.run_standalone(timeout=30)
    assert result.exit_status == 0 and result.status == "pass"
    assert compare_outputs(result.outputs_of(0, 0), expected) == []
    # A wrong expected output: the firmware says so and exits 1.
    wrong = {k: v + 1 for k, v in expected.items()}
    np.savez(tmp_path / "bad.npz", **inputs, **wrong)
    status, out, err = run_cli(
        capsys, "run", archive, "--project-type", "standalone", "--input", tmp_path / "bad.npz",
        "--json",
    )  # fmt: skip
    assert status == 1, err
    assert '"standalone": "mismatch"' in out
    assert live_children() == []


def test_standalone_corpus_model_with_its_reference(mlf_corpus: Path, tmp_path: Path) -> None:
    project = Project.generate(
        mlf_corpus / "kws_int8.tar", tmp_path / "p", project_type="standalone"
    )
    assert project.models[0]["samples"]["expected_outputs"] is True  # kws_int8.outputs.npz
    project.build()
    result = project.run_standalone(timeout=30)
    assert result.status == "pass" and result.exit_status == 0


# --- the demo ------------------------------------------------------------------------------------


def test_demo(capsys: pytest.CaptureFixture) -> None:
    status, out, err = run_cli(capsys, "demo")
    assert status == 0, out + err
    assert "sample 9: label 9 predicted 9" in out
    assert "every output matches the numpy reference" in out
    assert "configuring" in err and "linking" in err  # progress while building
    assert live_children() == []


def test_demo_replaces_only_its_own_project(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    other = tmp_path / "other"
    Project.generate(catalog()["mlp"]().write(tmp_path / "mlp.tar"), other, board="host")
    status, out, err = run_cli(capsys, "demo", "--project-dir", other)
    assert status == 2 and "not the demo's" in err and "--force" in err
    assert Project.open(other).info["archive"] == "mlp.tar"  # left as it was
    for extra in (["--force"], []):  # replaced when forced; then its own, replaced freely
        status, out, err = run_cli(capsys, "demo", "--project-dir", other, *extra)
        assert status == 0, out + err
        assert Project.open(other).info["archive"] == "digits.tar"


# --- failures end in clear errors, never hangs, with everything cleaned up -----------------------


@pytest.fixture()
def mlp_project(factory: Dict[str, Any]) -> Project:
    built = factory["built"][factory["root"] / "mlp"]
    if isinstance(built, Exception):
        raise built
    return built


def test_device_killed_mid_run(mlp_project: Project) -> None:
    fds = open_fds()
    inputs = catalog()["mlp"]().sample_inputs()
    session = mlp_project.session(timeout=5)
    pid = session.runner.pid
    killer = threading.Timer(0.05, os.kill, args=(pid, signal.SIGKILL))
    started = time.monotonic()
    killer.start()
    with pytest.raises(TransportClosedError) as caught, session:
        for _ in range(1_000_000):
            session.run(inputs)
    killer.join()
    assert time.monotonic() - started < 5
    assert "killed by SIGKILL" in str(caught.value)
    assert live_children() == []
    assert open_fds() <= fds


def test_corrupt_frames_from_the_device(mlp_project: Project) -> None:
    fds = open_fds()
    inputs = catalog()["mlp"]().sample_inputs()
    with mlp_project.session(timeout=5) as session:
        read_some = session.link.read_some

        def corrupting(deadline: float, *, what: str = "data") -> bytes:
            data = bytearray(read_some(deadline, what=what))
            if len(data) > 8:
                data[-1] ^= 0xFF  # the CRC of the frame no longer matches
            return bytes(data)

        session.link.read_some = corrupting  # type: ignore[method-assign]
        with pytest.raises(ProtocolError, match="corrupt frame"):
            session.run(inputs)
    assert live_children() == []
    assert open_fds() <= fds


def test_silent_device_times_out(mlp_project: Project) -> None:
    fds = open_fds()
    inputs = catalog()["mlp"]().sample_inputs()
    with mlp_project.session(timeout=1.0) as session:
        os.kill(session.runner.pid, signal.SIGSTOP)  # alive, but never answers
        started = time.monotonic()
        with pytest.raises(TransportTimeoutError, match="no reply"):
            session.run(inputs)
        assert time.monotonic() - started < 3
    assert live_children() == []  # a stopped process is killed and reaped too
    assert open_fds() <= fds


def test_missing_firmware_says_build_first(factory: Dict[str, Any], tmp_path: Path) -> None:
    from project_api.errors import FlashError

    project = Project.generate(factory["root"] / "mlp.tar", tmp_path / "p")
    with pytest.raises(FlashError, match="build the project first"):
        project.flash()
    with pytest.raises(FlashError, match="build"):
        project.session()
    assert live_children() == []


@pytest.mark.parametrize("graph_format", ["tables", "json"])
def test_function_missing_from_the_registry_is_linked_directly(
    tmp_path: Path, graph_format: str
) -> None:
    """As with TVM's CMSIS-NN partitions: the graph calls a function the system library does
    not register; the generator links it directly (by address in const tables, by name in a
    registry of its own for graph.json) and the model runs."""
    from mlf_builders import write_tar

    model = catalog()["mlp"]()
    members = model.members()
    lib0 = next(k for k in members if k.endswith("lib0.c"))
    text = members[lib0].decode()
    text = text.replace("    (TVMBackendPackedCFunc)tvmgen_mlp_fused_nn_softmax,\n", "")
    text = text.replace('"\\003\\000', '"\\002\\000').replace(
        "\\000tvmgen_mlp_fused_nn_softmax\\000", "\\000"
    )
    assert "softmax" not in text.split("_tvm_func_array")[1]
    members[lib0] = text.encode()
    archive = write_tar(tmp_path / "unregistered.tar", members)
    project = Project.generate(archive, tmp_path / "p", options={"graph_format": graph_format})
    assert project.models[0]["functions_outside_registry"] == ["tvmgen_mlp_fused_nn_softmax"]
    model_c = (tmp_path / "p/src/model_mlp.c").read_text()
    assert ("mlf_mlp_func_ptrs" in model_c) == (graph_format == "tables")
    project.build()
    inputs = model.sample_inputs()
    with project.session() as session:
        outputs = session.run(inputs)
    assert compare_outputs(outputs, model.reference(inputs)) == []


def test_all_models_with_a_shared_global_function(tmp_path: Path) -> None:
    """Two models defining the same global function (TVM's __tvm_main__ is not prefixed)
    still link into one firmware: each model's copy gets its own name."""
    from mlf_builders import write_tar

    combined = catalog()["multi_model"]()
    members = combined.members()
    for key in [k for k in members if k.endswith("lib1.c")]:
        members[key] += b"\nTVM_DLL int32_t __tvm_main__(void* args) { return 0; }\n"
    archive = write_tar(tmp_path / "shared.tar", members)
    project = Project.generate(archive, tmp_path / "p", model="*")
    renamed = {m["name"]: m["renamed_symbols"] for m in project.models}
    assert renamed == {
        "mlp": {"__tvm_main__": "mlf_mlp_tvm_main__"},
        "cnn_nchw": {"__tvm_main__": "mlf_cnn_nchw_tvm_main__"},
    }
    project.build()
    inputs = combined.sample_inputs()
    with project.session() as session:
        outputs = session.run(inputs, model="mlp")
    assert compare_outputs(outputs, combined.reference(inputs)) == []


def test_json_graph_format_on_host(mlf_corpus: Path, tmp_path: Path) -> None:
    case = corpus_case(mlf_corpus / "mnist8.tar")
    project = Project.generate(case["archive"], tmp_path / "p", options={"graph_format": "json"})
    project.build()
    with project.session() as session:
        outputs = session.run(dict(np.load(str(case["inputs_npz"]))))
    assert compare_outputs(outputs, dict(np.load(str(case["outputs_npz"])))) == []


def test_garbage_sent_to_the_device_is_survived(mlp_project: Project) -> None:
    """Bytes that are no frame, and a frame with a bad CRC, do not derail the device."""
    from project_api.transport.frames import encode_frame

    model = catalog()["mlp"]()
    inputs = model.sample_inputs()
    with mlp_project.session(timeout=5) as session:
        bad = bytearray(encode_frame(0x04, 77, b"\x00\x00"))
        bad[-1] ^= 0xFF
        session.link.write_all(b"\x00garbage\xa5 more" + bytes(bad))
        outputs = session.run(inputs)
    assert compare_outputs(outputs, model.reference(inputs)) == []
    assert live_children() == []
